/*
 * calibration_device.c - a calibrator's state kept on a device, shared by
 * the max and histogram calibrators (binding.h, fp8q_py_device_state).
 *
 * A CUDA batch is reduced and folded into the device state by kernels on
 * its stream (cuda/calibration_ops.h); nothing comes back per batch. A batch
 * holding NaN or infinity without skip_nonfinite cannot raise at its
 * update() (that would need a host wait), so the fold kernel refuses it on
 * the device and records it; the next settle, at the first read of the
 * state, raises the deferred ValueError.
 *
 * A state starts, at its first fold after its creation or a settle, either
 * empty (all zero bytes: what the device adds to the host state, e.g. a
 * running maximum or histogram counts, merged exactly at the settle) or as
 * an image of the whole host state (an amax window or moving average, where
 * each batch's entry depends on every earlier one: the device continues the
 * host's history and the settle takes the device's as the host's). Such an
 * uploaded state is uploaded and copied back with the GIL held: no other
 * thread can change the host state between the upload and the settle, nor
 * start a second state from a host state that a settle is about to replace.
 */

#include "python/calibrator_binding.h"

#include "cuda/calibration_ops.h"

/* Puts `memory` back as the state, unless a concurrent update has made a
 * new one meanwhile (then `memory` is released). */
static void reattach(fp8q_py_device_state *state, fp8q_TensorObject *memory)
{
    if (state->memory == NULL) {
        state->memory = memory;
    }
    else {
        Py_DECREF(memory);
    }
}

int fp8q_py_device_state_settle(fp8q_py_device_state *state,
                                PyObject *calibrator, fp8q_py_device_fold fold,
                                int64_t *nonfinite_count)
{
    /* Detached while the GIL is released, so a concurrent update starts a
     * state of its own rather than folding into one being read. */
    fp8q_TensorObject *memory = state->memory;
    fp8q_cu_stream stream;
    fp8q_error error;
    fp8q_status status;
    size_t bytes;
    void *copy;
    int device_index;

    if (memory == NULL || !state->pending) {
        return 0;
    }
    stream = fp8q_py_last_stream(memory);
    device_index = memory->device_index;
    bytes = (size_t)memory->view.shape[0];
    copy = PyMem_Malloc(bytes);
    if (copy == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    state->memory = NULL;
    state->pending = 0;
    fp8q_error_clear(&error);
    if (state->uploaded) {
        status = fp8q_cuda_calib_state_read(memory->cuda_device,
                                            memory->view.data, bytes, copy,
                                            stream, &error);
    }
    else {
        Py_BEGIN_ALLOW_THREADS
        status = fp8q_cuda_calib_state_read(memory->cuda_device,
                                            memory->view.data, bytes, copy,
                                            stream, &error);
        Py_END_ALLOW_THREADS
    }
    if (fp8q_py_raise_on_failure(status, &error) < 0 ||
        fold(calibrator, copy, bytes) < 0) {
        state->pending = state->memory == NULL;
        reattach(state, memory); /* unchanged: nothing is lost */
        PyMem_Free(copy);
        return -1;
    }
    status = fp8q_cuda_calib_state_record(copy, device_index,
                                          nonfinite_count, &error);
    PyMem_Free(copy);
    reattach(state, memory); /* kept for reuse: the next fold restarts it */
    return fp8q_py_raise_on_failure(status, &error);
}

/* Starts the state's memory for its first fold: all zero bytes, or the
 * host state's image (`image`, when not NULL) after a zero record. With the
 * GIL held, so that no concurrent update folds into the memory before it
 * is started (an enqueued fill does not wait; an upload waits so that its
 * host buffer can be released). */
static int start(fp8q_py_device_state *state, fp8q_TensorObject *memory,
                 size_t bytes, fp8q_cu_stream stream, PyObject *calibrator,
                 fp8q_py_device_image image)
{
    fp8q_error error;
    fp8q_status status;
    void *initial;

    fp8q_error_clear(&error);
    state->uploaded = image != NULL;
    if (image == NULL) {
        status = fp8q_cuda_calib_state_start(memory->cuda_device,
                                             memory->view.data, bytes, NULL,
                                             stream, &error);
        return fp8q_py_raise_on_failure(status, &error);
    }
    initial = PyMem_Calloc(1, bytes);
    if (initial == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    image(calibrator, initial, bytes);
    status = fp8q_cuda_calib_state_start(memory->cuda_device,
                                         memory->view.data, bytes, initial,
                                         stream, &error);
    PyMem_Free(initial);
    return fp8q_py_raise_on_failure(status, &error);
}

void *fp8q_py_device_state_prepare(fp8q_py_device_state *state,
                                   fp8q_TensorObject *x, size_t bytes,
                                   fp8q_cu_stream stream, PyObject *calibrator,
                                   fp8q_py_device_fold fold,
                                   fp8q_py_device_image image,
                                   int64_t *nonfinite_count)
{
    const fp8q_py_device device = {FP8Q_DEVICE_CUDA, x->device_index};
    const int64_t size = (int64_t)bytes;

    if (state->memory != NULL &&
        (state->memory->device_index != x->device_index ||
         state->memory->view.shape[0] != size)) {
        if (fp8q_py_device_state_settle(state, calibrator, fold,
                                        nonfinite_count) < 0) {
            return NULL;
        }
        Py_CLEAR(state->memory);
    }
    if (state->memory == NULL) {
        state->memory = fp8q_tensor_new_empty_on(FP8Q_UINT8, 1, &size,
                                                 &device, stream);
        if (state->memory == NULL) {
            return NULL;
        }
        state->pending = 0;
    }
    if (fp8q_py_use_on_stream(state->memory, stream) < 0 ||
        (!state->pending && start(state, state->memory, bytes, stream,
                                  calibrator, image) < 0)) {
        return NULL;
    }
    state->pending = 1;
    return state->memory->view.data;
}

void fp8q_py_device_state_clear(fp8q_py_device_state *state)
{
    Py_CLEAR(state->memory);
    state->pending = 0;
    state->uploaded = 0;
    state->n_updates = 0;
}
