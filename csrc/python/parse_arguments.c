/*
 * parse_arguments.c - the arguments of a METH_FASTCALL | METH_KEYWORDS entry
 * point bound to its parameters, as PyArg_ParseTupleAndKeywords binds those
 * of a METH_VARARGS | METH_KEYWORDS one and in messages of its form, but
 * with Python's own rules throughout: nothing is converted before all
 * arguments are bound (PyArg converts the first ones before it sees there
 * are too many), and an unknown keyword is reported before a missing
 * argument, as a def function reports them. The fast calling convention
 * spares the dictionary CPython builds for keyword arguments, and the
 * keyword names are compared in place (PyArg makes a string for every
 * parameter it looks up): about 0.1 us a call and 0.1-0.3 us a keyword on
 * CPython 3.11.
 */
#include <stdarg.h>
#include <string.h>

#include "python/binding.h"

/* The most parameters an entry point may have. */
#define MAX_PARAMETERS 16

/* The name of value's type in a message: "None" for None, as PyArg's
 * converters write it (where PyArg leaves the message to PyFloat_AsDouble,
 * it reads "NoneType"). */
static const char *type_name(PyObject *value)
{
    return value == Py_None ? "None" : Py_TYPE(value)->tp_name;
}

/* A parameter as a message names it: 'name', or for a positional-only one
 * (name "") its position from 1, as PyArg does. */
static void parameter_label(const char *name, int position, char *label,
                            size_t size)
{
    if (name[0] == '\0') {
        PyOS_snprintf(label, size, "%d", position);
    }
    else {
        PyOS_snprintf(label, size, "'%.28s'", name);
    }
}

/* Stores `value`, when given, through `output` as format `letter` asks:
 * 0, or -1 with the exception PyArg would raise, naming the parameter by
 * `name` or `position` (parameter_label). */
static int store(char letter, PyObject *value, const char *function,
                 const char *name, int position, void *output)
{
    PyNumberMethods *number_methods;
    char label[32];
    const char *text;
    Py_ssize_t size;
    double number;
    int truth;

    if (value == NULL) {
        return 0;
    }
    number_methods = Py_TYPE(value)->tp_as_number;
    switch (letter) {
    case 'O':
        *(PyObject **)output = value;
        return 0;
    case 'p':
        truth = PyObject_IsTrue(value);
        if (truth < 0) {
            return -1;
        }
        *(int *)output = truth;
        return 0;
    case 'd':
        if (!PyFloat_Check(value) &&
            (number_methods == NULL || (number_methods->nb_float == NULL &&
                                        number_methods->nb_index == NULL))) {
            parameter_label(name, position, label, sizeof label);
            PyErr_Format(PyExc_TypeError,
                         "%s() argument %s must be real number, not %.50s",
                         function, label, type_name(value));
            return -1;
        }
        number = PyFloat_AsDouble(value); /* its own errors pass on */
        if (number == -1.0 && PyErr_Occurred()) {
            return -1;
        }
        *(double *)output = number;
        return 0;
    default: /* 's' */
        if (!PyUnicode_Check(value)) {
            parameter_label(name, position, label, sizeof label);
            PyErr_Format(PyExc_TypeError,
                         "%s() argument %s must be str, not %.50s",
                         function, label, type_name(value));
            return -1;
        }
        text = PyUnicode_AsUTF8AndSize(value, &size);
        if (text == NULL) {
            return -1;
        }
        if ((size_t)size != strlen(text)) {
            PyErr_SetString(PyExc_ValueError, "embedded null character");
            return -1;
        }
        *(const char **)output = text;
        return 0;
    }
}

int fp8q_py_parse_arguments(PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames, const char *format,
                            const char *const *keywords, ...)
{
    PyObject *values[MAX_PARAMETERS] = {NULL};
    const Py_ssize_t n_keywords =
        kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    const char *letter;
    const char *function;
    int count = 0, required = -1, positional = -1, positional_only = 0;
    int index;
    Py_ssize_t keyword;
    va_list outputs;
    void *output;

    for (letter = format; *letter != '\0' && *letter != ':'; letter++) {
        if (*letter == '|') {
            required = count;
        } else if (*letter == '$') {
            positional = count;
        } else if (strchr("Opsd", *letter) != NULL) {
            count++;
        } else {
            PyErr_Format(PyExc_SystemError, "unsupported argument format %s",
                         format);
            return -1;
        }
    }
    function = *letter == ':' ? letter + 1 : "function";
    required = required < 0 ? count : required;
    positional = positional < 0 ? count : positional;
    for (index = 0; index < count && keywords[index] != NULL; index++) {
        positional_only += keywords[index][0] == '\0' && index < required;
    }
    if (count > MAX_PARAMETERS || index < count || keywords[count] != NULL) {
        PyErr_Format(PyExc_SystemError,
                     "%s(): format %s and its keyword list disagree (or name "
                     "more than %d parameters)",
                     function, format, MAX_PARAMETERS);
        return -1;
    }
    if (nargs > positional && positional == 0) {
        PyErr_Format(PyExc_TypeError, "%s() takes no positional arguments",
                     function);
        return -1;
    }
    if (nargs > positional) {
        PyErr_Format(PyExc_TypeError,
                     "%s() takes %s %d positional argument%s (%zd given)",
                     function, required == count ? "exactly" : "at most",
                     positional, positional == 1 ? "" : "s", nargs);
        return -1;
    }
    for (index = 0; index < nargs; index++) {
        values[index] = args[index];
    }
    for (keyword = 0; keyword < n_keywords; keyword++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, keyword);

        for (index = 0; index < count; index++) {
            if (keywords[index][0] != '\0' && /* "": positional-only */
                PyUnicode_CompareWithASCIIString(name, keywords[index]) == 0) {
                break;
            }
        }
        if (index == count) {
            PyErr_Format(PyExc_TypeError,
                         "'%U' is an invalid keyword argument for %s()", name,
                         function);
            return -1;
        }
        if (index < nargs) {
            PyErr_Format(PyExc_TypeError,
                         "argument for %s() given by name ('%s') and "
                         "position (%d)",
                         function, keywords[index], index + 1);
            return -1;
        }
        /* Two keys of one text: a str subclass with its own __hash__ makes
         * them two dictionary keys, a C caller may repeat a name. */
        if (values[index] != NULL) {
            PyErr_Format(PyExc_TypeError,
                         "%s() got multiple values for argument '%s'",
                         function, keywords[index]);
            return -1;
        }
        values[index] = args[nargs + keyword];
    }
    for (index = (int)nargs; index < required; index++) {
        if (values[index] == NULL && keywords[index][0] == '\0') {
            PyErr_Format(PyExc_TypeError,
                         "%s() takes %s %d positional argument%s (%zd given)",
                         function,
                         positional_only == positional ? "exactly"
                                                       : "at least",
                         positional_only, positional_only == 1 ? "" : "s",
                         nargs);
            return -1;
        }
        if (values[index] == NULL) {
            PyErr_Format(PyExc_TypeError,
                         "%s() missing required argument '%s' (pos %d)",
                         function, keywords[index], index + 1);
            return -1;
        }
    }
    va_start(outputs, keywords);
    index = 0;
    for (letter = format; *letter != '\0' && *letter != ':'; letter++) {
        if (*letter == '|' || *letter == '$') {
            continue;
        }
        /* Each output read as the pointer type its letter passes. */
        output = *letter == 'O'   ? (void *)va_arg(outputs, PyObject **)
                 : *letter == 'p' ? (void *)va_arg(outputs, int *)
                 : *letter == 'd' ? (void *)va_arg(outputs, double *)
                                  : (void *)va_arg(outputs, const char **);
        if (store(*letter, values[index], function, keywords[index],
                  index + 1, output) < 0) {
            va_end(outputs);
            return -1;
        }
        index++;
    }
    va_end(outputs);
    return 0;
}
