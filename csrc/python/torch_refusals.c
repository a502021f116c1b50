/*
 * torch_refusals.c - the torch tensors whose DLPack export would give wrong
 * values or an unreadable error, refused with a message that names the fix:
 * views with the negative bit (checked before the export, which would hand
 * over the stored -x), and, after a failed export, tensors on the meta
 * device, of a sparse layout, or of a tensor subclass without storage of its
 * own; and the uint8 view through which a float8 tensor is imported when
 * its own export fails. Only attributes and methods of the tensor are used
 * (is_neg, is_meta, layout, data_ptr, dtype, view); torch is never imported.
 */
#include <string.h>

#include "python/binding.h"

/* "is_neg" and "requires_grad", interned at module execution
 * (fp8q_py_torch_init), before any thread can call in, never freed: a
 * first-use initialization would race between threads on free-threaded
 * CPython. Both are read for every torch argument, so by interned name. */
static PyObject *is_neg_name;
static PyObject *requires_grad_name;

/* object.<name> as a truth value: 1, 0, or -1 when the attribute is missing
 * or fails (the exception is cleared: the checks here only ever add a
 * better message). */
static int attribute_truth(PyObject *object, const char *name)
{
    PyObject *value = PyObject_GetAttrString(object, name);
    const int truth = value == NULL ? -1 : PyObject_IsTrue(value);

    Py_XDECREF(value);
    if (truth < 0) {
        PyErr_Clear();
    }
    return truth;
}

int fp8q_py_refuse_negative_view(PyObject *object, const char *argument_name)
{
    /* Only objects with torch's is_neg(): a bool from the method (any
     * failure, such as no such method, is not a refusal). */
    PyObject *result = PyObject_CallMethodNoArgs(object, is_neg_name);
    const int negative = result != NULL && PyObject_IsTrue(result) == 1;

    Py_XDECREF(result);
    if (!negative) {
        PyErr_Clear();
        return 0;
    }
    PyErr_Format(PyExc_BufferError,
                 "%s: the torch tensor has the negative bit set (a lazily "
                 "negated view, e.g. c.conj().imag): its memory holds the "
                 "negated values, which DLPack cannot express; pass "
                 "%s.resolve_neg() (a copy with the values) instead",
                 argument_name, argument_name);
    return -1;
}

/* str(object.<attribute>) (e.g. "torch.sparse_coo" for "layout") in
 * `text`, truncated to size - 1 bytes, and 1 when it starts with `prefix`;
 * else "" and 0, also when the attribute is missing or fails (the exception
 * is cleared). */
static int attribute_text(PyObject *object, const char *attribute,
                          const char *prefix, char *text, size_t size)
{
    PyObject *value = PyObject_GetAttrString(object, attribute);
    PyObject *string = value == NULL ? NULL : PyObject_Str(value);
    const char *utf8 = string == NULL ? NULL : PyUnicode_AsUTF8(string);
    const int found =
        utf8 != NULL && strncmp(utf8, prefix, strlen(prefix)) == 0;

    text[0] = '\0';
    if (found) {
        strncpy(text, utf8, size - 1);
        text[size - 1] = '\0';
    }
    Py_XDECREF(value);
    Py_XDECREF(string);
    PyErr_Clear();
    return found;
}

/* 1 when object.data_ptr() is 0 while object.numel() > 0: elements without
 * memory (a wrapper subclass such as a quantized tensor type). */
static int has_no_storage(PyObject *object)
{
    PyObject *pointer = PyObject_CallMethod(object, "data_ptr", NULL);
    PyObject *count = pointer == NULL
                          ? NULL
                          : PyObject_CallMethod(object, "numel", NULL);
    int result = 0;

    if (pointer != NULL && count != NULL && PyLong_Check(pointer) &&
        PyLong_Check(count)) {
        const int pointer_is_zero = PyObject_Not(pointer) == 1;
        const int count_is_positive = PyObject_IsTrue(count) == 1;

        result = pointer_is_zero && count_is_positive;
    }
    Py_XDECREF(pointer);
    Py_XDECREF(count);
    PyErr_Clear();
    return result;
}

void fp8q_py_explain_refused_torch_tensor(PyObject *object,
                                          const char *argument_name,
                                          int *unsupported_dtype)
{
    fp8q_py_saved_error saved;
    char layout[64];

    if (PyCapsule_CheckExact(object)) {
        return;
    }
    fp8q_py_error_save(&saved);
    attribute_text(object, "layout", "torch.", layout, sizeof layout);
    if (layout[0] != '\0' && strcmp(layout, "torch.strided") != 0) {
        fp8q_py_error_discard(&saved);
        PyErr_Format(PyExc_TypeError,
                     "%s: the torch tensor has the sparse layout %s; fp8q "
                     "reads dense (strided) tensors: pass %s.to_dense()",
                     argument_name, layout, argument_name);
    }
    else if (layout[0] != '\0' && attribute_truth(object, "is_meta") == 1) {
        fp8q_py_error_discard(&saved);
        PyErr_Format(PyExc_BufferError,
                     "%s: the torch tensor is on the meta device and has no "
                     "data to read; give it values first (load them, or "
                     "move its module with module.to_empty(device='cpu'))",
                     argument_name);
    }
    else if (layout[0] != '\0' && has_no_storage(object)) {
        fp8q_py_error_discard(&saved);
        PyErr_Format(PyExc_TypeError,
                     "%s: %s is a torch tensor subclass without storage of "
                     "its own (data_ptr() is 0), so its elements cannot be "
                     "read in place; convert it to a plain torch tensor first "
                     "(e.g. its dequantize() method)",
                     argument_name, Py_TYPE(object)->tp_name);
    }
    else {
        fp8q_py_error_restore(&saved);
        return;
    }
    if (unsupported_dtype != NULL) {
        *unsupported_dtype = 0;
    }
}

/* torch.uint8, torch taken from sys.modules (never imported); NULL when
 * torch is not imported (an exception may be set). */
static PyObject *torch_uint8(void)
{
    PyObject *name = PyUnicode_FromString("torch");
    PyObject *torch = name == NULL ? NULL : PyImport_GetModule(name);
    PyObject *uint8 =
        torch == NULL ? NULL : PyObject_GetAttrString(torch, "uint8");

    Py_XDECREF(name);
    Py_XDECREF(torch);
    return uint8;
}

PyObject *fp8q_py_torch_float8_bytes(PyObject *object, fp8q_dtype *dtype)
{
    fp8q_py_saved_error saved;
    PyObject *uint8 = NULL;
    PyObject *bytes = NULL;
    char name[64];

    fp8q_py_error_save(&saved);
    /* A torch float8 dtype fp8q stores. */
    if (attribute_text(object, "dtype", "torch.float8", name, sizeof name) &&
        fp8q_dtype_from_name(name, dtype) && fp8q_dtype_is_fp8(*dtype)) {
        uint8 = torch_uint8();
    }
    if (uint8 != NULL) {
        bytes = PyObject_CallMethod(object, "view", "O", uint8);
        Py_DECREF(uint8);
    }
    if (bytes == NULL) {
        PyErr_Clear();
        fp8q_py_error_restore(&saved);
    }
    else {
        fp8q_py_error_discard(&saved);
    }
    return bytes;
}

int fp8q_py_torch_init(void)
{
    if (is_neg_name == NULL) {
        is_neg_name = PyUnicode_InternFromString("is_neg");
    }
    if (requires_grad_name == NULL) {
        requires_grad_name = PyUnicode_InternFromString("requires_grad");
    }
    return is_neg_name == NULL || requires_grad_name == NULL ? -1 : 0;
}

int fp8q_py_torch_requires_grad(PyObject *object)
{
    PyObject *value;
    int result;

    value = PyObject_GetAttr(object, requires_grad_name);
    result = value != NULL && PyObject_IsTrue(value) != 0;
    Py_XDECREF(value);
    PyErr_Clear();
    return result;
}
