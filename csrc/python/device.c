/*
 * device.c - where tensors live: parsing device= and stream= arguments,
 * opening CUDA devices for the binding, allocating tensors on a device, and
 * copying tensors between the CPU and CUDA devices (fp8q.Tensor.to / .cpu).
 *
 * Stream rules (docs/architecture.md, "Devices and streams"): the memory
 * of a CUDA tensor remembers the stream of its last use; each new use, on
 * stream S, is first ordered after that stream (an event, when they
 * differ) and becomes the last use. Memory fp8q allocated returns to the
 * pool on the stream of its last use, so no use can outlive it.
 */
#include "python/binding.h"

#include "core/view_layout.h"

#include "cuda/memory.h"
#include "cuda/scratch.h"
#include "cuda/view_copy.h"

/* ------------------------------------------------------------------------- */
/* Parsing and naming                                                        */

int fp8q_py_device_index(PyObject *object, const char *argument_name)
{
    long long index;

    if (!PyLong_Check(object) || PyBool_Check(object)) {
        PyErr_Format(PyExc_TypeError,
                     "%s: a CUDA device index must be an int, got %.200s",
                     argument_name, Py_TYPE(object)->tp_name);
        return -1;
    }
    index = PyLong_AsLongLong(object);
    if (index < 0 || index > FP8Q_MAX_DEVICE_INDEX) {
        if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError,
                         "%s: a CUDA device index must be >= 0 and at most "
                         "%d, got %R",
                         argument_name, FP8Q_MAX_DEVICE_INDEX, object);
        }
        return -1;
    }
    return (int)index;
}

/* Parses 'cpu', 'cuda' (device 0), 'cuda:N', an int N (CUDA device N) or
 * any object whose str() is one of those (torch.device). 0, or -1 with
 * ValueError naming `argument_name`. Does not check that the device
 * exists. */
static int parse_device(PyObject *object, const char *argument_name,
                        fp8q_py_device *device)
{
    PyObject *text_object;
    const char *text;
    int parsed;

    if (PyLong_Check(object) && !PyBool_Check(object)) {
        device->index = fp8q_py_device_index(object, argument_name);
        device->type = FP8Q_DEVICE_CUDA;
        return device->index < 0 ? -1 : 0;
    }
    /* Strings, and objects that print as one (torch.device). */
    text_object = PyUnicode_Check(object) ? Py_NewRef(object)
                                          : PyObject_Str(object);
    if (text_object == NULL) {
        return -1;
    }
    text = PyUnicode_AsUTF8(text_object);
    parsed = text != NULL
                 ? fp8q_device_parse(text, &device->type, &device->index)
                 : -1;
    Py_DECREF(text_object);
    if (parsed < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError,
                     "%s: expected 'cpu', 'cuda', 'cuda:N', a device index N "
                     "or a torch.device, got %R",
                     argument_name, object);
        return -1;
    }
    return 0;
}

/* A stream handle from a Python int (>= 0, at most pointer-sized). */
static int stream_from_int(PyObject *value, const char *argument_name,
                           const char *source, fp8q_cu_stream *stream)
{
    unsigned long long handle;

    if (!PyLong_Check(value) || PyBool_Check(value)) {
        PyErr_Format(PyExc_TypeError,
                     "%s: %s must be an int stream handle, got %R",
                     argument_name, source, value);
        return -1;
    }
    handle = PyLong_AsUnsignedLongLong(value);
    if (PyErr_Occurred() || handle > (unsigned long long)UINTPTR_MAX) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError,
                     "%s: %s is not a stream handle (a pointer-sized int "
                     ">= 0), got %R",
                     argument_name, source, value);
        return -1;
    }
    *stream = (fp8q_cu_stream)(uintptr_t)handle;
    return 0;
}

int fp8q_py_parse_stream(PyObject *object, const char *argument_name,
                         fp8q_cu_stream *stream)
{
    PyObject *value;
    int result;

    *stream = NULL;
    if (object == NULL || object == Py_None) {
        return 0;
    }
    if (PyLong_Check(object)) {
        return stream_from_int(object, argument_name, "the int", stream);
    }
    /* The CUDA stream protocol: __cuda_stream__() -> (version, handle). */
    if (PyObject_HasAttrString(object, "__cuda_stream__")) {
        value = PyObject_CallMethod(object, "__cuda_stream__", NULL);
        if (value == NULL) {
            return -1;
        }
        if (!PyTuple_Check(value) || PyTuple_GET_SIZE(value) != 2) {
            PyErr_Format(PyExc_TypeError,
                         "%s: __cuda_stream__() must return (version, "
                         "handle), got %R",
                         argument_name, value);
            Py_DECREF(value);
            return -1;
        }
        result = stream_from_int(PyTuple_GET_ITEM(value, 1), argument_name,
                                 "__cuda_stream__()[1]", stream);
        Py_DECREF(value);
        return result;
    }
    /* torch.cuda.Stream and others: the handle as .cuda_stream. */
    if (PyObject_HasAttrString(object, "cuda_stream")) {
        value = PyObject_GetAttrString(object, "cuda_stream");
        if (value == NULL) {
            return -1;
        }
        result = stream_from_int(value, argument_name, ".cuda_stream", stream);
        Py_DECREF(value);
        return result;
    }
    PyErr_Format(PyExc_TypeError,
                 "%s: expected None, an int stream handle, or a stream object "
                 "(with __cuda_stream__ or .cuda_stream, e.g. "
                 "torch.cuda.Stream), got %R",
                 argument_name, object);
    return -1;
}

int fp8q_py_parse_placement(PyObject *device_object, PyObject *stream_object,
                            fp8q_py_device *device, fp8q_cu_stream *stream)
{
    if (device_object != NULL && device_object != Py_None &&
        parse_device(device_object, "device", device) < 0) {
        return -1;
    }
    return fp8q_py_parse_stream(stream_object, "stream", stream);
}

/* ------------------------------------------------------------------------- */
/* Devices                                                                   */

const fp8q_cuda_device *fp8q_py_cuda_device(int index)
{
    const fp8q_cuda_device *device = NULL;
    fp8q_error error;
    fp8q_status status;

    /* The first call loads the driver and the kernels: may take seconds. */
    FP8Q_PY_WITHOUT_GIL(status, error,
                        fp8q_cuda_device_open(index, &device, &error));
    if (fp8q_py_raise_on_failure(status, &error) < 0) {
        return NULL;
    }
    return device;
}

/* The tensor that owns the memory `tensor` views (itself when it owns it or
 * borrows it from something that is not a Tensor): where the stream of the
 * memory's last use is kept. */
static fp8q_TensorObject *memory_base(fp8q_TensorObject *tensor)
{
    while (tensor->allocation == NULL && tensor->owner != NULL &&
           fp8q_Tensor_Check(tensor->owner)) {
        tensor = (fp8q_TensorObject *)tensor->owner;
    }
    return tensor;
}

fp8q_cu_stream fp8q_py_last_stream(fp8q_TensorObject *tensor)
{
    return memory_base(tensor)->stream;
}

int fp8q_py_require_host_memory(const fp8q_TensorObject *tensor,
                                const char *what)
{
    if (tensor->device_type == FP8Q_DEVICE_CPU) {
        return 0;
    }
    PyErr_Format(PyExc_TypeError,
                 "the tensor is on cuda:%d, and %s needs its values in host "
                 "memory: copy it with tensor.cpu() first",
                 tensor->device_index, what);
    return -1;
}

int fp8q_py_use_on_stream(fp8q_TensorObject *tensor, fp8q_cu_stream stream)
{
    fp8q_TensorObject *base;
    fp8q_error error;
    fp8q_status status;

    if (tensor->device_type != FP8Q_DEVICE_CUDA) {
        return 0;
    }
    base = memory_base(tensor);
    FP8Q_PY_WITHOUT_GIL(status, error,
                        fp8q_cuda_stream_wait(tensor->cuda_device,
                                              base->stream, stream, &error));
    if (fp8q_py_raise_on_failure(status, &error) < 0) {
        return -1;
    }
    base->stream = fp8q_cuda_last_use_stream(stream);
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Allocation                                                                */

fp8q_TensorObject *fp8q_tensor_new_empty_on(fp8q_dtype dtype, int ndim,
                                            const int64_t *shape,
                                            const fp8q_py_device *device,
                                            fp8q_cu_stream stream)
{
    const fp8q_cuda_device *cuda;
    fp8q_TensorObject *self;
    fp8q_cuda_capture allocated_in;
    fp8q_view view;
    fp8q_error error;
    fp8q_status status;
    void *memory = NULL;
    size_t bytes;

    if (device->type == FP8Q_DEVICE_CPU) {
        return fp8q_tensor_new_empty(dtype, ndim, shape);
    }
    fp8q_error_clear(&error);
    if (fp8q_view_init_contiguous(&view, NULL, dtype, ndim, shape, &error) !=
        FP8Q_OK) {
        fp8q_py_raise(&error);
        return NULL;
    }
    cuda = fp8q_py_cuda_device(device->index);
    if (cuda == NULL) {
        return NULL;
    }
    bytes = (size_t)fp8q_view_nbytes(&view);
    FP8Q_PY_WITHOUT_GIL(status, error,
                        fp8q_cuda_alloc(cuda, bytes, stream, &memory,
                                        &allocated_in, &error));
    if (fp8q_py_raise_on_failure(status, &error) < 0) {
        return NULL;
    }
    view.data = memory;
    self = fp8q_py_new_view_on(&view, NULL, 0, cuda, stream);
    if (self == NULL) {
        fp8q_cuda_free(cuda, memory, &allocated_in, stream);
        return NULL;
    }
    self->allocated_in = allocated_in;
    self->view.data = memory; /* NULL, not new_view's host stand-in, when
                                 empty */
    self->allocation = memory;
    return self;
}

/* ------------------------------------------------------------------------- */
/* Copies between devices                                                    */

static int same_device(const fp8q_TensorObject *tensor,
                       const fp8q_py_device *device)
{
    return tensor->device_type == device->type &&
           (device->type == FP8Q_DEVICE_CPU ||
            tensor->device_index == device->index);
}

/* A new C-contiguous tensor on `device` holding `source`'s elements, one
 * of the two on a GPU: a use of source recorded on `stream`, then
 * cuda/view_copy.h's copy with the GIL released (interruptibly: a strided
 * host source is gathered by core). */
static fp8q_TensorObject *copied(fp8q_TensorObject *source,
                                 const fp8q_py_device *device,
                                 fp8q_cu_stream stream)
{
    fp8q_TensorObject *result;
    fp8q_error error;
    fp8q_status status;

    if (fp8q_py_use_on_stream(source, stream) < 0) {
        return NULL;
    }
    result = fp8q_tensor_new_empty_on(source->view.dtype, source->view.ndim,
                                      source->view.shape, device, stream);
    if (result == NULL) {
        return NULL;
    }
    fp8q_error_clear(&error);
    FP8Q_PY_BEGIN_INTERRUPTIBLE
    status = fp8q_cuda_copy_view(
        source->cuda_device != NULL ? source->cuda_device
                                    : result->cuda_device,
        &source->view, source->device_type == FP8Q_DEVICE_CPU,
        result->view.data, result->device_type == FP8Q_DEVICE_CPU, stream,
        &error);
    FP8Q_PY_END_INTERRUPTIBLE(status)
    if (fp8q_py_raise_on_failure(status, &error) < 0) {
        Py_CLEAR(result);
    }
    return result;
}

fp8q_TensorObject *fp8q_py_cuda_contiguous(fp8q_TensorObject *tensor,
                                           fp8q_cu_stream stream)
{
    const fp8q_py_device device = fp8q_py_place(tensor);

    if (fp8q_view_is_contiguous(&tensor->view)) {
        return (fp8q_TensorObject *)Py_NewRef(tensor);
    }
    return copied(tensor, &device, stream);
}

fp8q_TensorObject *fp8q_tensor_copy_to(fp8q_TensorObject *source,
                                       const fp8q_py_device *device,
                                       fp8q_cu_stream stream)
{
    static const fp8q_py_device cpu = {FP8Q_DEVICE_CPU, 0};
    fp8q_TensorObject *host;
    fp8q_TensorObject *result;

    if (source->device_type == FP8Q_DEVICE_CPU &&
        device->type == FP8Q_DEVICE_CPU) {
        return fp8q_tensor_copy_on_host(source, source->view.dtype);
    }
    if (source->device_type == FP8Q_DEVICE_CPU ||
        device->type == FP8Q_DEVICE_CPU || same_device(source, device)) {
        return copied(source, device, stream);
    }
    /* Another GPU: through the host. A stream belongs to one device, so
     * the source side uses its own (the stream of its last use). */
    host = copied(source, &cpu, fp8q_py_last_stream(source));
    if (host == NULL) {
        return NULL;
    }
    result = copied(host, device, stream);
    Py_DECREF(host);
    return result;
}

/* ------------------------------------------------------------------------- */
/* Tensor.to, Tensor.cpu                                                     */

PyObject *fp8q_tensor_to(PyObject *self, PyObject *const *args,
                         Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const keywords[] = {"device", "stream", "copy", NULL};
    fp8q_TensorObject *tensor = (fp8q_TensorObject *)self;
    PyObject *device_object;
    PyObject *stream_object = Py_None;
    int copy = 0;
    fp8q_py_device device;
    fp8q_cu_stream stream;

    if (fp8q_py_parse_arguments(args, nargs, kwnames, "O|$Op:to", keywords,
                                &device_object, &stream_object, &copy) < 0 ||
        parse_device(device_object, "device", &device) < 0 ||
        fp8q_py_parse_stream(stream_object, "stream", &stream) < 0) {
        return NULL;
    }
    if (!copy && same_device(tensor, &device)) {
        return Py_NewRef(self);
    }
    return (PyObject *)fp8q_tensor_copy_to(tensor, &device, stream);
}

PyObject *fp8q_tensor_cpu(PyObject *self, PyObject *const *args,
                          Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const keywords[] = {"stream", NULL};
    static const fp8q_py_device cpu = {FP8Q_DEVICE_CPU, 0};
    fp8q_TensorObject *tensor = (fp8q_TensorObject *)self;
    PyObject *stream_object = Py_None;
    fp8q_cu_stream stream;

    if (fp8q_py_parse_arguments(args, nargs, kwnames, "|$O:cpu", keywords,
                                &stream_object) < 0 ||
        fp8q_py_parse_stream(stream_object, "stream", &stream) < 0) {
        return NULL;
    }
    if (tensor->device_type == FP8Q_DEVICE_CPU) {
        return Py_NewRef(self);
    }
    return (PyObject *)fp8q_tensor_copy_to(tensor, &cpu, stream);
}

/* ------------------------------------------------------------------------- */
/* fp8q.synchronize                                                          */

static PyObject *synchronize(PyObject *module, PyObject *const *args,
                             Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const keywords[] = {"device", "stream", NULL};
    PyObject *device_object = Py_None;
    PyObject *stream_object = Py_None;
    fp8q_py_device device = {FP8Q_DEVICE_CUDA, 0};
    const fp8q_cuda_device *cuda;
    fp8q_cu_stream stream;
    fp8q_error error;
    fp8q_status status;

    (void)module;
    if (fp8q_py_parse_arguments(args, nargs, kwnames, "|O$O:synchronize",
                                keywords, &device_object,
                                &stream_object) < 0 ||
        fp8q_py_parse_placement(device_object, stream_object, &device,
                                &stream) < 0) {
        return NULL;
    }
    if (device.type == FP8Q_DEVICE_CPU) {
        Py_RETURN_NONE; /* CPU work is done when its call returns */
    }
    cuda = fp8q_py_cuda_device(device.index);
    if (cuda == NULL) {
        return NULL;
    }
    FP8Q_PY_WITHOUT_GIL(status, error,
                        fp8q_cuda_synchronize(cuda, stream, &error));
    if (fp8q_py_raise_on_failure(status, &error) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------- */
/* fp8q.empty_cache                                                          */

static PyObject *empty_cache(PyObject *module, PyObject *const *args,
                             Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const keywords[] = {"device", NULL};
    PyObject *device_object = Py_None;
    fp8q_py_device device = {FP8Q_DEVICE_CUDA, -1};
    fp8q_error error;
    fp8q_status status;

    (void)module;
    if (fp8q_py_parse_arguments(args, nargs, kwnames, "|O:empty_cache",
                                keywords, &device_object) < 0 ||
        (device_object != Py_None &&
         parse_device(device_object, "device", &device) < 0)) {
        return NULL;
    }
    if (device.type == FP8Q_DEVICE_CPU) {
        Py_RETURN_NONE; /* no scratch memory on the CPU */
    }
    FP8Q_PY_WITHOUT_GIL(status, error,
                        fp8q_cuda_scratch_empty(device.index, &error));
    if (fp8q_py_raise_on_failure(status, &error) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

PyMethodDef fp8q_py_device_functions[] = {
    {FP8Q_PY_KEYWORDS_FUNCTION("empty_cache", empty_cache),
     "empty_cache(device=None)\n--\n\n"
     "Frees the scratch memory fp8q keeps on CUDA device `device` (None: "
     "every device; 'cuda:N', an int N or a torch.device) for the "
     "temporaries of its GPU operations (scaled_mm's padded or decoded "
     "operands, float32 products, scales in cuBLASLt's layouts; it grows "
     "to the largest call's need). The memory is freed after the work "
     "already queued that uses it, without waiting; with a memory pool it "
     "returns to the device's default pool; a block a captured CUDA graph "
     "uses is kept (the graph holds its address). The next GPU operation that "
     "needs scratch memory allocates it again. cuBLASLt's workspace (4 or "
     "32 MiB per device) is kept. For device='cpu' it does nothing. Also "
     "called at interpreter exit. fp8q.CudaError when the driver refuses."},
    {FP8Q_PY_KEYWORDS_FUNCTION("synchronize", synchronize),
     "synchronize(device=None, *, stream=None)\n--\n\n"
     "Waits until the work queued on `stream` (None: the legacy default "
     "stream, which also waits for the other blocking streams; an int "
     "handle, or a stream object such as torch.cuda.Stream) of CUDA device "
     "`device` (None: cuda:0; 'cuda:N', an int N or a torch.device) is "
     "done. fp8q's GPU operations return once their work is queued; this "
     "is how to wait for it (e.g. to time it). For device='cpu' it returns "
     "at once. fp8q.CudaError when CUDA cannot be used, or when `stream` "
     "is capturing a CUDA graph."},
    {NULL, NULL, 0, NULL},
};
