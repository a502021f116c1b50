/*
 * thread_count.c - fp8q._C.set_num_threads / get_num_threads: how many
 * threads fp8q's CPU operations may use (csrc/platform's pool).
 */
#include "python/binding.h"

PyDoc_STRVAR(set_num_threads_doc,
             "set_num_threads(n, /)\n"
             "--\n"
             "\n"
             "Sets how many threads fp8q's CPU operations may use (the\n"
             "calling thread included); n is an int, at most 4096.\n"
             "n < 1 restores the default: the FP8Q_NUM_THREADS environment\n"
             "variable if set, else the logical processors this process may\n"
             "run on. An operation on n_elements uses\n"
             "min(get_num_threads(), n_elements // 2**18) threads, at least\n"
             "one, so inputs below 2**19 elements run on the calling thread.\n"
             "Results never depend on the count.");

static PyObject *ops_set_num_threads(PyObject *module, PyObject *argument)
{
    Py_ssize_t requested;

    (void)module;
    if (PyBool_Check(argument) || !PyLong_Check(argument)) {
        PyErr_Format(PyExc_TypeError,
                     "set_num_threads: n must be an int, got an object of "
                     "type %.200s",
                     Py_TYPE(argument)->tp_name);
        return NULL;
    }
    /* Out-of-range ints clip to PY_SSIZE_T_MIN / PY_SSIZE_T_MAX. */
    requested = PyNumber_AsSsize_t(argument, NULL);
    if (requested == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (requested > FP8Q_MAX_THREADS) {
        PyErr_Format(PyExc_ValueError,
                     "set_num_threads: n must be at most %d, got %R",
                     FP8Q_MAX_THREADS, argument);
        return NULL;
    }
    fp8q_set_num_threads(requested < 1 ? 0 : (int)requested);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(get_num_threads_doc,
             "get_num_threads()\n"
             "--\n"
             "\n"
             "The number of threads fp8q's CPU operations may use.");

static PyObject *ops_get_num_threads(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyLong_FromLong(fp8q_num_threads());
}

/* The methods this file adds to fp8q._C. */
PyMethodDef fp8q_py_thread_count_functions[] = {
    {"set_num_threads", ops_set_num_threads, METH_O, set_num_threads_doc},
    {"get_num_threads", ops_get_num_threads, METH_NOARGS,
     get_num_threads_doc},
    {NULL, NULL, 0, NULL},
};
