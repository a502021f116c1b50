/*
 * dtype_object.c - the fp8q.dtype type, its eight singletons (fp8q.float32,
 * ..., fp8q.float8_e5m2fnuz), the parsing of every `dtype=` argument, the
 * mapping to and from NumPy / ml_dtypes dtypes, and fp8q._C._finfo.
 */
#include <string.h>

#include "python/binding.h"

#include "core/view_layout.h"
#include "platform.h"

/* ------------------------------------------------------------------------- */
/* Singletons                                                                */

/* One object per dtype, created at module init and never freed. */
static PyObject *dtype_singletons[FP8Q_DTYPE_COUNT];

PyObject *fp8q_py_dtype_object(fp8q_dtype dtype)
{
    if ((int)dtype < 0 || dtype >= FP8Q_DTYPE_COUNT ||
        dtype_singletons[dtype] == NULL) {
        PyErr_Format(PyExc_RuntimeError, "fp8q: no dtype object for code %d",
                     (int)dtype);
        return NULL;
    }
    Py_INCREF(dtype_singletons[dtype]);
    return dtype_singletons[dtype];
}

/* ------------------------------------------------------------------------- */
/* NumPy and ml_dtypes                                                       */

/* ml_dtypes is imported on first need: 0 not tried yet, 1 imported,
 * -1 not installed. ml_dtypes_descrs holds its dtypes (NULL where ml_dtypes
 * lacks one), written before the state is published (atomics, so a thread
 * of a free-threaded CPython that sees 1 sees the descriptors too; two
 * threads that both import store the same descriptors). */
static volatile int64_t ml_dtypes_state;
static PyArray_Descr *ml_dtypes_descrs[FP8Q_DTYPE_COUNT];

/* Imports ml_dtypes once; 0 on success or when it is not installed, -1 with
 * an exception when importing it fails for another reason. */
static int load_ml_dtypes(void)
{
    PyObject *module;
    PyArray_Descr *descrs[FP8Q_DTYPE_COUNT] = {NULL};
    int index;
    int result = 0;

    if (fp8q_atomic_load_i64(&ml_dtypes_state) != 0) {
        return 0;
    }
    module = PyImport_ImportModule("ml_dtypes");
    if (module == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_ImportError)) {
            return -1;
        }
        PyErr_Clear();
        fp8q_atomic_store_i64(&ml_dtypes_state, -1);
        return 0;
    }
    for (index = 0; index < FP8Q_DTYPE_COUNT && result == 0; index++) {
        PyObject *scalar_type;

        if (!fp8q_dtype_is_numpy_extension((fp8q_dtype)index)) {
            continue;
        }
        scalar_type =
            PyObject_GetAttrString(module, fp8q_dtype_name((fp8q_dtype)index));
        if (scalar_type == NULL) {
            /* An ml_dtypes too old to have this type: raw codes instead. */
            PyErr_Clear();
            continue;
        }
        if (!PyArray_DescrConverter(scalar_type, &descrs[index])) {
            result = -1;
        }
        Py_DECREF(scalar_type);
    }
    Py_DECREF(module);
    /* On failure, or when another thread won (the import may have released
     * the GIL): nothing is published. */
    if (result < 0 || fp8q_atomic_load_i64(&ml_dtypes_state) != 0) {
        for (index = 0; index < FP8Q_DTYPE_COUNT; index++) {
            Py_XDECREF(descrs[index]);
        }
        return result;
    }
    memcpy(ml_dtypes_descrs, descrs, sizeof descrs);
    fp8q_atomic_store_i64(&ml_dtypes_state, 1);
    return 0;
}

PyArray_Descr *fp8q_py_numpy_descr(fp8q_dtype dtype)
{
    if ((int)dtype < 0 || dtype >= FP8Q_DTYPE_COUNT) {
        PyErr_Format(PyExc_RuntimeError, "fp8q: no NumPy dtype for code %d",
                     (int)dtype);
        return NULL;
    }
    if (fp8q_dtype_is_numpy_extension(dtype)) {
        if (load_ml_dtypes() < 0) {
            return NULL;
        }
        if (ml_dtypes_descrs[dtype] != NULL) {
            Py_INCREF(ml_dtypes_descrs[dtype]);
            return ml_dtypes_descrs[dtype];
        }
    }
    /* NumPy's own dtype, or the raw codes (uint16 "H" for bfloat16, uint8
     * "B" for the FP8 dtypes): the PEP 3118 character is NumPy's too. */
    return PyArray_DescrFromType(fp8q_dtype_buffer_format(dtype)[0]);
}

int fp8q_py_dtype_from_numpy(PyArray_Descr *descr, fp8q_dtype *dtype)
{
    PyObject *name;
    const char *name_utf8;
    int found;

    if (!PyArray_ISNBO(descr->byteorder)) {
        return 0;
    }
    if (descr->type_num < NPY_USERDEF) {
        return fp8q_dtype_from_type_char(descr->type, dtype);
    }
    /* User-defined dtypes (ml_dtypes) are recognised by their name. */
    name = PyObject_Str((PyObject *)descr);
    if (name == NULL) {
        return -1;
    }
    name_utf8 = PyUnicode_AsUTF8(name);
    if (name_utf8 == NULL) {
        Py_DECREF(name);
        return -1;
    }
    found = fp8q_dtype_from_numpy_extension(
        name_utf8, (size_t)PyDataType_ELSIZE(descr), dtype);
    Py_DECREF(name);
    return found;
}

/* ------------------------------------------------------------------------- */
/* Parsing dtype= arguments                                                  */

/* The dtype of what np.dtype() makes of `object` (a type string, a scalar
 * type): 1 found, 0 not (NumPy refused it too, or fp8q does not store it),
 * -1 error. */
static int dtype_through_numpy(PyObject *object, fp8q_dtype *dtype)
{
    PyArray_Descr *descr = NULL;
    int found;

    if (!PyArray_DescrConverter(object, &descr)) {
        PyErr_Clear();
        return 0;
    }
    found = fp8q_py_dtype_from_numpy(descr, dtype);
    Py_DECREF(descr);
    return found;
}

/* Parses a string: a name or alias known to the core, else anything
 * np.dtype() accepts ("f4", "<f2", "B", ...). 1 found, 0 not, -1 error. */
static int parse_dtype_string(PyObject *string, fp8q_dtype *dtype)
{
    const char *text = PyUnicode_AsUTF8(string);

    if (text == NULL) {
        return -1;
    }
    if (fp8q_dtype_from_name(text, dtype)) {
        return 1;
    }
    return dtype_through_numpy(string, dtype);
}

int fp8q_py_dtype_from_object(PyObject *object, fp8q_dtype *dtype)
{
    if (PyObject_TypeCheck(object, &fp8q_Dtype_Type)) {
        *dtype = ((fp8q_DtypeObject *)object)->dtype;
        return 1;
    }
    if (PyUnicode_Check(object)) {
        return parse_dtype_string(object, dtype);
    }
    if (PyArray_DescrCheck(object)) {
        return fp8q_py_dtype_from_numpy((PyArray_Descr *)object, dtype);
    }
    if (strcmp(Py_TYPE(object)->tp_name, "torch.dtype") == 0) {
        /* str(torch.float8_e4m3fn) == "torch.float8_e4m3fn"; torch is never
         * imported here. */
        PyObject *text = PyObject_Str(object);
        int found;

        if (text == NULL) {
            return -1;
        }
        found = parse_dtype_string(text, dtype);
        Py_DECREF(text);
        return found;
    }
    if (PyType_Check(object) &&
        PyType_IsSubtype((PyTypeObject *)object, &PyGenericArrType_Type)) {
        /* NumPy and ml_dtypes scalar types: np.float32, ml_dtypes.bfloat16. */
        return dtype_through_numpy(object, dtype);
    }
    return 0;
}

int fp8q_py_parse_dtype(PyObject *object, const char *argument_name,
                        fp8q_dtype *dtype)
{
    int found = fp8q_py_dtype_from_object(object, dtype);

    if (found < 0) {
        return -1;
    }
    if (found == 0) {
        PyErr_Format(PyExc_TypeError,
                     "%s: expected a dtype fp8q stores (float32, float16, "
                     "bfloat16, uint8, float8_e4m3fn, float8_e5m2, "
                     "float8_e4m3fnuz or float8_e5m2fnuz; an alias such as "
                     "'e4m3', 'e5m2', 'bf16', 'fp16', 'half' or 'fp32'; an "
                     "fp8q.dtype, or the NumPy, ml_dtypes or torch dtype of "
                     "one of those), got %R (%s)",
                     argument_name, object, Py_TYPE(object)->tp_name);
        return -1;
    }
    return 0;
}

int fp8q_py_parse_optional_dtype(PyObject *object, int *dtype)
{
    fp8q_dtype parsed;

    *dtype = -1;
    if (object == NULL || object == Py_None) {
        return 0;
    }
    if (fp8q_py_parse_dtype(object, "dtype", &parsed) < 0) {
        return -1;
    }
    *dtype = (int)parsed;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* The fp8q.dtype type                                                       */

PyDoc_STRVAR(
    dtype_doc,
    "dtype(obj, /)\n"
    "--\n"
    "\n"
    "An element type fp8q stores. There is exactly one object per type:\n"
    "fp8q.float32, fp8q.float16, fp8q.bfloat16, fp8q.uint8,\n"
    "fp8q.float8_e4m3fn, fp8q.float8_e5m2 (OCP OFP8), fp8q.float8_e4m3fnuz\n"
    "and fp8q.float8_e5m2fnuz. fp8q.dtype(obj) returns that singleton for\n"
    "obj, which may be an fp8q.dtype, a canonical name, an alias ('e4m3',\n"
    "'e5m2', 'bf16', 'fp16', 'half', 'fp32', optionally 'torch.'-prefixed),\n"
    "a NumPy dtype, type or type string of float32, float16 or uint8 in\n"
    "native byte order (np.float32, np.dtype('f2'), 'u1'), an ml_dtypes\n"
    "bfloat16 or FP8 dtype or type, or a torch dtype (recognised by its\n"
    "str(); torch is not imported). Anything else raises TypeError.\n"
    "Every dtype= argument of fp8q accepts the same objects.\n"
    "\n"
    "str(dt) and dt.name are the canonical name; repr(dt) is\n"
    "'fp8q.<name>'. Equality is NumPy-like: dt == other is True when other\n"
    "is any object fp8q.dtype() maps to dt (so fp8q.float32 == 'float32'\n"
    "and fp8q.bfloat16 == torch.bfloat16), and False for objects that are\n"
    "not dtypes. hash(dt) == hash(dt.name).");

static PyObject *dtype_new(PyTypeObject *type, PyObject *args,
                           PyObject *kwargs)
{
    static char *keywords[] = {"", NULL};
    PyObject *object;
    fp8q_dtype dtype;

    (void)type;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:dtype", keywords,
                                     &object)) {
        return NULL;
    }
    if (fp8q_py_parse_dtype(object, "dtype", &dtype) < 0) {
        return NULL;
    }
    return fp8q_py_dtype_object(dtype);
}

static PyObject *dtype_repr(PyObject *self)
{
    return PyUnicode_FromFormat(
        "fp8q.%s", fp8q_dtype_name(((fp8q_DtypeObject *)self)->dtype));
}

static PyObject *dtype_str(PyObject *self)
{
    return PyUnicode_FromString(
        fp8q_dtype_name(((fp8q_DtypeObject *)self)->dtype));
}

static Py_hash_t dtype_hash(PyObject *self)
{
    PyObject *name = dtype_str(self);
    Py_hash_t hash;

    if (name == NULL) {
        return -1;
    }
    hash = PyObject_Hash(name);
    Py_DECREF(name);
    return hash;
}

static PyObject *dtype_richcompare(PyObject *self, PyObject *other, int op)
{
    fp8q_dtype other_dtype;
    int found;

    if (op != Py_EQ && op != Py_NE) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    found = fp8q_py_dtype_from_object(other, &other_dtype);
    if (found < 0) {
        return NULL;
    }
    if (found == 0) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    if ((other_dtype == ((fp8q_DtypeObject *)self)->dtype) == (op == Py_EQ)) {
        Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
}

/* The getters of fp8q.dtype: the closure points to one of these property
 * codes. */
enum { NAME, ITEMSIZE, IS_FP8, IS_FLOATING_POINT };
static int dtype_properties[] = {NAME, ITEMSIZE, IS_FP8, IS_FLOATING_POINT};

static PyObject *dtype_get(PyObject *self, void *closure)
{
    const fp8q_dtype dtype = ((fp8q_DtypeObject *)self)->dtype;

    switch (*(const int *)closure) {
    case NAME:
        return dtype_str(self);
    case ITEMSIZE:
        return PyLong_FromSize_t(fp8q_dtype_itemsize(dtype));
    case IS_FP8:
        return PyBool_FromLong(fp8q_dtype_is_fp8(dtype));
    default:
        return PyBool_FromLong(fp8q_dtype_is_float(dtype));
    }
}

static PyObject *dtype_reduce(PyObject *self, PyObject *unused)
{
    (void)unused;
    return Py_BuildValue("(O(s))", (PyObject *)Py_TYPE(self),
                         fp8q_dtype_name(((fp8q_DtypeObject *)self)->dtype));
}

static PyGetSetDef dtype_getset[] = {
    {"name", dtype_get, NULL,
     "The canonical name, e.g. 'float8_e4m3fn' (the same as str(dtype)).",
     &dtype_properties[NAME]},
    {"itemsize", dtype_get, NULL, "Bytes per element.",
     &dtype_properties[ITEMSIZE]},
    {"is_fp8", dtype_get, NULL,
     "True for the four 8-bit floating-point formats.",
     &dtype_properties[IS_FP8]},
    {"is_floating_point", dtype_get, NULL,
     "True for every floating-point dtype (all but uint8).",
     &dtype_properties[IS_FLOATING_POINT]},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef dtype_methods[] = {
    {"__reduce__", dtype_reduce, METH_NOARGS,
     "Pickles as fp8q.dtype(name), which returns the same singleton."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject fp8q_Dtype_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "fp8q.dtype",
    .tp_basicsize = sizeof(fp8q_DtypeObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = dtype_doc,
    .tp_new = dtype_new,
    .tp_repr = dtype_repr,
    .tp_str = dtype_str,
    .tp_hash = dtype_hash,
    .tp_richcompare = dtype_richcompare,
    .tp_getset = dtype_getset,
    .tp_methods = dtype_methods,
};

/* ------------------------------------------------------------------------- */
/* fp8q._C._finfo                                                            */

static PyObject *finfo(PyObject *module, PyObject *object)
{
    fp8q_dtype dtype;
    fp8q_finfo info;

    (void)module;
    if (fp8q_py_parse_dtype(object, "dtype", &dtype) < 0) {
        return NULL;
    }
    if (!fp8q_dtype_finfo(dtype, &info)) {
        PyErr_Format(PyExc_TypeError,
                     "dtype: finfo needs a floating-point dtype, got %s",
                     fp8q_dtype_name(dtype));
        return NULL;
    }
    return Py_BuildValue(
        "{s:N,s:i,s:i,s:i,s:i,s:d,s:d,s:d,s:d,s:O,s:O}", "dtype",
        fp8q_py_dtype_object(dtype), "bits", info.bits, "exponent_bits",
        info.exponent_bits, "mantissa_bits", info.mantissa_bits,
        "exponent_bias", info.exponent_bias, "max", info.max, "tiny",
        info.tiny, "smallest_subnormal", info.smallest_subnormal, "eps",
        info.eps, "has_infinity", info.has_infinity ? Py_True : Py_False,
        "has_negative_zero", info.has_negative_zero ? Py_True : Py_False);
}

static PyMethodDef dtype_functions[] = {
    {"_finfo", finfo, METH_O,
     "_finfo(dtype, /)\n"
     "--\n"
     "\n"
     "The numeric limits of a floating-point dtype as a dict (the data\n"
     "behind fp8q.finfo): 'dtype' (fp8q.dtype), 'bits', 'exponent_bits',\n"
     "'mantissa_bits' (explicit fraction bits), 'exponent_bias' (ints),\n"
     "'max' (largest finite value), 'tiny' (smallest positive normal),\n"
     "'smallest_subnormal', 'eps' (the gap between 1.0 and the next value;\n"
     "Python floats, all exact), 'has_infinity', 'has_negative_zero'\n"
     "(bools). TypeError for uint8 or anything that is not a dtype."},
    {NULL, NULL, 0, NULL},
};

/* ------------------------------------------------------------------------- */
/* Module initialisation                                                     */

int fp8q_py_dtype_init(PyObject *module)
{
    int index;

    /* Added as "dtype", the last part of its tp_name. */
    if (PyModule_AddType(module, &fp8q_Dtype_Type) < 0) {
        return -1;
    }
    for (index = 0; index < FP8Q_DTYPE_COUNT; index++) {
        if (dtype_singletons[index] == NULL) {
            fp8q_DtypeObject *object =
                PyObject_New(fp8q_DtypeObject, &fp8q_Dtype_Type);

            if (object == NULL) {
                return -1;
            }
            object->dtype = (fp8q_dtype)index;
            dtype_singletons[index] = (PyObject *)object;
        }
        Py_INCREF(dtype_singletons[index]);
        if (PyModule_AddObject(module, fp8q_dtype_name((fp8q_dtype)index),
                               dtype_singletons[index]) < 0) {
            Py_DECREF(dtype_singletons[index]);
            return -1;
        }
    }
    return PyModule_AddFunctions(module, dtype_functions);
}
