/*
 * cublaslt_info.c - cuBLASLt as the binding loads it (this interpreter's
 * install folders handed to cuda/cublaslt.h's search of the NVIDIA
 * wheels) and the private functions that report on it:
 * fp8q._C._cublaslt_info() (fp8q.info()) and the GEMM tuner's choices
 * exported and imported (fp8q.gemm_tuning).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "python/binding.h"

#include "cuda/cublaslt.h"
#include "cuda/gemm_tuning.h"
#include "cuda/matmul.h"

/* At most this many install folders are searched. */
#define MAX_INSTALL_FOLDERS 64

/* ------------------------------------------------------------------------- */
/* cuBLASLt                                                                  */

const fp8q_cublaslt *fp8q_py_load_cublaslt(void)
{
    const fp8q_cublaslt *library = fp8q_cublaslt_loaded();
    const char *paths[MAX_INSTALL_FOLDERS];
    PyObject *folders = NULL;
    Py_ssize_t entry;
    int count = 0;

    if (library == NULL) {
        /* fp8q._install_folders: never the working directory, a script's
         * folder or another sys.path entry. A tuple: its items, and so
         * their UTF-8 texts, live until the search is over. */
        PyObject *helper = PyImport_ImportModule("fp8q._install_folders");
        PyObject *list = helper == NULL ? NULL
                                        : PyObject_CallMethod(
                                              helper, "package_folders", NULL);
        Py_XDECREF(helper);
        if (list != NULL && !PyList_Check(list)) {
            PyErr_SetString(PyExc_TypeError,
                            "fp8q._install_folders.package_folders() must "
                            "return a list");
            Py_CLEAR(list);
        }
        folders = list == NULL ? NULL : PyList_AsTuple(list);
        Py_XDECREF(list);
        if (folders == NULL) {
            return NULL;
        }
        for (entry = 0; entry < PyTuple_GET_SIZE(folders) &&
                        count < MAX_INSTALL_FOLDERS;
             entry++) {
            PyObject *folder = PyTuple_GET_ITEM(folders, entry);
            paths[count] = PyUnicode_Check(folder) ? PyUnicode_AsUTF8(folder)
                                                   : NULL;
            if (paths[count] == NULL) {
                /* Not UTF-8 (a lone surrogate): not a path fp8q can open. */
                PyErr_Clear();
                continue;
            }
            count++;
        }
        Py_BEGIN_ALLOW_THREADS
        library = fp8q_cublaslt_load(paths, count);
        Py_END_ALLOW_THREADS
        Py_DECREF(folders);
    }
    if (library->error.status != FP8Q_OK) {
        fp8q_py_raise(&library->error);
        return NULL;
    }
    return library;
}

/* ------------------------------------------------------------------------- */
/* fp8q._C._cublaslt_info()                                                  */

/* A list of the names of the scaling modes whose bits are set. */
static PyObject *mode_names(unsigned bits)
{
    static const char *const names[] = {"unscaled", "tensorwise", "rowwise",
                                        "blockwise"};
    PyObject *list = PyList_New(0);
    size_t index;
    for (index = 0; list != NULL && index < sizeof names / sizeof names[0];
         index++) {
        PyObject *name;
        if (!(bits & (1u << index))) {
            continue;
        }
        name = PyUnicode_FromString(names[index]);
        if (name == NULL || PyList_Append(list, name) < 0) {
            Py_XDECREF(name);
            Py_CLEAR(list);
            break;
        }
        Py_DECREF(name);
    }
    return list;
}

/* {"DEVICE": {"accepted": [...], "refused": [...]}} for the devices where
 * cuBLASLt ran or refused products so far, by scaling mode. */
static PyObject *scale_modes_seen(void)
{
    PyObject *seen = PyDict_New();
    int index;
    for (index = 0; seen != NULL && index < FP8Q_CUBLASLT_MAX_DEVICES;
         index++) {
        unsigned accepted, refused;
        PyObject *entry;
        char key[16];
        fp8q_matmul_modes_seen(index, &accepted, &refused);
        if (accepted == 0 && refused == 0) {
            continue;
        }
        entry = Py_BuildValue("{s:N,s:N}", "accepted", mode_names(accepted),
                              "refused", mode_names(refused));
        (void)snprintf(key, sizeof key, "%d", index);
        if (entry == NULL || PyDict_SetItemString(seen, key, entry) < 0) {
            Py_XDECREF(entry);
            Py_CLEAR(seen);
            break;
        }
        Py_DECREF(entry);
    }
    return seen;
}

/* The lines of the UTF-8 `text` as a list of str (undecodable bytes
 * replaced); NULL with an exception. */
static PyObject *lines_of(const char *text)
{
    PyObject *decoded =
        PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace");
    PyObject *lines =
        decoded == NULL ? NULL : PyUnicode_Splitlines(decoded, 0);

    Py_XDECREF(decoded);
    return lines;
}

static PyObject *cublaslt_info(PyObject *module, PyObject *unused)
{
    const fp8q_cublaslt *library;
    char version[32];

    (void)module;
    (void)unused;
    library = fp8q_py_load_cublaslt();
    if (library == NULL) {
        PyErr_Clear();
        library = fp8q_cublaslt_loaded();
    }
    if (library->error.status != FP8Q_OK) {
        return Py_BuildValue("{s:O,s:O,s:O,s:s,s:N}", "found", Py_False,
                             "version", Py_None, "path", Py_None, "error",
                             library->error.message, "search",
                             lines_of(library->search));
    }
    fp8q_cublaslt_format_version(library->version, version, sizeof version);
    return Py_BuildValue(
        "{s:O,s:s,s:s,s:O,s:N,s:N,s:L}", "found", Py_True, "version",
        version, "path", library->path, "error", Py_None,
        "search", lines_of(library->search), "scale_modes", scale_modes_seen(),
        "candidates_timed", (long long)fp8q_matmul_candidates_timed());
}

/* ------------------------------------------------------------------------- */
/* fp8q._C._gemm_tuning_export / _gemm_tuning_import (fp8q.gemm_tuning)     */

/* The index of CUDA device `object` (an int), opened, with cuBLASLt
 * loaded; -1 with an exception. */
static int tuning_device(PyObject *object, const fp8q_cublaslt **library)
{
    const int index = fp8q_py_device_index(object, "device");
    if (index < 0 || fp8q_py_cuda_device(index) == NULL) {
        return -1;
    }
    *library = fp8q_py_load_cublaslt();
    return *library == NULL ? -1 : index;
}

static PyObject *gemm_tuning_export(PyObject *module, PyObject *device)
{
    const fp8q_cublaslt *library;
    fp8q_gemm_tuning_key key;
    fp8q_error error;
    PyObject *lines;
    char *choices;
    const int index = tuning_device(device, &library);

    (void)module;
    if (index < 0) {
        return NULL;
    }
    fp8q_error_clear(&error);
    if (fp8q_py_raise_on_failure(
            fp8q_gemm_tuning_key_get(index, library, &key, &error), &error) <
        0) {
        return NULL;
    }
    choices = fp8q_gemm_tuning_choices(index);
    if (choices == NULL) {
        return PyErr_NoMemory();
    }
    lines = lines_of(choices);
    free(choices);
    if (lines == NULL) {
        return NULL;
    }
    return Py_BuildValue("{s:s,s:s,s:s,s:s,s:N}", "gpu", key.gpu,
                         "compute_capability", key.compute_capability,
                         "driver", key.driver, "cublaslt", key.cublaslt,
                         "choices", lines);
}

static PyObject *gemm_tuning_import(PyObject *module, PyObject *args)
{
    const fp8q_cublaslt *library;
    PyObject *device, *lines, *sequence;
    const char **texts;
    Py_ssize_t position, count;
    fp8q_error error;
    int index, result;

    (void)module;
    if (!PyArg_ParseTuple(args, "OO:_gemm_tuning_import", &device, &lines)) {
        return NULL;
    }
    index = tuning_device(device, &library);
    if (index < 0) {
        return NULL;
    }
    /* A tuple of its own: its items, and so their UTF-8 texts, live until
     * the import is over, whatever another thread does to `lines`. All
     * are added, or none when one is not a choice (cuda/matmul.h). */
    sequence = PySequence_Check(lines) ? PySequence_Tuple(lines) : NULL;
    if (sequence == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError,
                            "the choices must be a list of str");
        }
        return NULL;
    }
    count = PyTuple_GET_SIZE(sequence);
    texts = PyMem_Calloc((size_t)count + 1, sizeof *texts);
    result = texts == NULL ? -1 : 0;
    for (position = 0; result == 0 && position < count; position++) {
        PyObject *item = PyTuple_GET_ITEM(sequence, position);
        texts[position] = PyUnicode_Check(item) ? PyUnicode_AsUTF8(item)
                                                : NULL;
        if (texts[position] == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError,
                                "the choices must be a list of str");
            }
            result = -1;
        }
    }
    if (texts == NULL) {
        PyErr_NoMemory();
    }
    else if (result == 0) {
        fp8q_error_clear(&error);
        result = fp8q_py_raise_on_failure(
            fp8q_matmul_choices_add(index, texts, (size_t)count, &error),
            &error);
    }
    PyMem_Free(texts);
    Py_DECREF(sequence);
    return result < 0 ? NULL : PyLong_FromSsize_t(count);
}

PyMethodDef fp8q_py_cublaslt_info_functions[] = {
    {"_cublaslt_info", cublaslt_info, METH_NOARGS,
     "_cublaslt_info()\n--\n\n"
     "Loads cuBLASLt as the first GPU scaled_mm would (see "
     "csrc/cuda/cublaslt.h for where it is looked for) and returns {found, "
     "version like '13.10.0', path, error, search: the places tried before "
     "it (or all of them), each 'place (reason)', scale_modes: per device "
     "index "
     "{accepted, refused} scaling modes of the products so far, "
     "candidates_timed: cuBLASLt algorithms timed by the GEMM tuner so "
     "far (csrc/cuda/matmul.h)}."},
    {"_gemm_tuning_export", gemm_tuning_export, METH_O,
     "_gemm_tuning_export(device)\n--\n\n"
     "Private, for fp8q.gemm_tuning.save: {gpu, compute_capability, "
     "driver, cublaslt: what the choices are valid for, choices: the GEMM "
     "tuner's choices of CUDA device `device` as lines "
     "(csrc/cuda/matmul.h, fp8q_matmul_choices_format)}."},
    {"_gemm_tuning_import", gemm_tuning_import, METH_VARARGS,
     "_gemm_tuning_import(device, lines)\n--\n\n"
     "Private, for fp8q.gemm_tuning.load: adds choice lines of "
     "_gemm_tuning_export to CUDA device `device`'s (no key check here); "
     "returns their number. ValueError for a line that is not one."},
    {NULL, NULL, 0, NULL},
};
