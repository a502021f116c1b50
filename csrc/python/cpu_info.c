/*
 * cpu_info.c - fp8q._C._cpu_features(): which x86 features fp8q's CPU code
 * uses in this process and why not the others, as the dict that fp8q.info()
 * reports under "cpu_features"; and fp8q._C._allow_avx2(), the switch
 * between the AVX2 variants and the baseline code (for tests).
 */
#include "core/convert.h"
#include "core/cpu_paths.h"
#include "python/binding.h"

PyDoc_STRVAR(cpu_features_doc,
             "_cpu_features()\n"
             "--\n"
             "\n"
             "A dict from each x86 feature fp8q has code for (\"AVX2\", \"FMA\",\n"
             "\"F16C\") to {\"used\": bool, \"by\": the code that uses it (e.g.\n"
             "\"conversions, scaled_mm\") or None, \"why_not\": None or why it is\n"
             "not used (e.g. \"not reported by the CPU\", \"the OS has not enabled\n"
             "AVX state\", \"not built (non-x86)\", \"needs F16C: not reported by\n"
             "the CPU\", \"switched off (fp8q_convert_allow_avx2(0))\")}.");

static PyObject *cpu_features(PyObject *module, PyObject *unused)
{
    PyObject *features = PyDict_New();
    int feature;

    (void)module;
    (void)unused;
    for (feature = 0; features != NULL && feature < FP8Q_CPU_FEATURE_COUNT;
         feature++) {
        fp8q_cpu_feature_use use;
        PyObject *entry;

        fp8q_cpu_feature_use_of((fp8q_cpu_feature)feature, &use);
        entry = Py_BuildValue("{s:O,s:z,s:z}", "used",
                              use.used ? Py_True : Py_False, "by",
                              use.used ? use.text : NULL, "why_not",
                              use.used ? NULL : use.text);
        if (entry == NULL ||
            PyDict_SetItemString(
                features, fp8q_cpu_feature_name((fp8q_cpu_feature)feature),
                entry) < 0) {
            Py_CLEAR(features);
        }
        Py_XDECREF(entry);
    }
    return features;
}

PyDoc_STRVAR(allow_avx2_doc,
             "_allow_avx2(allow)\n"
             "--\n"
             "\n"
             "True (the default): the conversions and scaled_mm run their AVX2\n"
             "variants where the processor and the OS support them; False: the\n"
             "baseline code everywhere, e.g. to test both. Conversions give the\n"
             "same bits either way; scaled_mm's float32 sums may differ in\n"
             "rounding (docs/numerics.md). Process-wide: not for use while other\n"
             "threads call fp8q.");

static PyObject *allow_avx2(PyObject *module, PyObject *argument)
{
    const int allow = PyObject_IsTrue(argument);

    (void)module;
    if (allow < 0) {
        return NULL;
    }
    fp8q_convert_allow_avx2(allow);
    Py_RETURN_NONE;
}

PyMethodDef fp8q_py_cpu_info_functions[] = {
    {"_cpu_features", cpu_features, METH_NOARGS, cpu_features_doc},
    {"_allow_avx2", allow_avx2, METH_O, allow_avx2_doc},
    {NULL, NULL, 0, NULL},
};
