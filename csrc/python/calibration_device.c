/*
 * calibration_device.c - a calibrator's state kept on a device, shared by
 * the calibrators (calibrator_binding.h, fp8q_py_device_state): its memory
 * (a CUDA tensor), the GIL's ordering and the exceptions around
 * cuda/calibration_ops.h's start, read-back and fold.
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

/* Puts `memory` back as the state, unless a concurrent update has made a
 * new one or the state was forgotten (epoch) meanwhile (then `memory` is
 * released). */
static void reattach(fp8q_py_device_state *state, fp8q_TensorObject *memory,
                     int64_t epoch)
{
    if (state->memory == NULL && state->epoch == epoch) {
        state->memory = memory;
    }
    else {
        Py_DECREF(memory);
    }
}

int fp8q_py_device_state_settle(fp8q_py_device_state *state,
                                const fp8q_cuda_calib_kind *kind, void *core)
{
    /* Detached while the GIL is released, so a concurrent update starts a
     * state of its own rather than folding into one being read. */
    fp8q_TensorObject *memory = state->memory;
    const int64_t epoch = state->epoch;
    const int64_t wipes = state->wipes;
    fp8q_cu_stream stream;
    fp8q_error error;
    fp8q_status status;
    size_t bytes;
    void *copy;
    int folded = 0;

    if (memory == NULL || !state->pending) {
        return 0;
    }
    stream = fp8q_py_last_stream(memory);
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
    if (status == FP8Q_OK && state->wipes != wipes) {
        /* A reset / __init__ from another thread while the copy was read:
         * the copy is ordered before it and dropped with the rest (folding
         * it would undo the reset, or read it with other settings). */
        folded = 1;
    }
    else if (status == FP8Q_OK) {
        status = fp8q_cuda_calib_state_fold(kind, core, copy, bytes,
                                            memory->device_index, &folded,
                                            &error);
    }
    PyMem_Free(copy);
    if (!folded) {
        state->pending = state->memory == NULL;
    }
    /* Unchanged when not folded: nothing is lost. Else kept for reuse: the
     * next fold restarts it. */
    reattach(state, memory, epoch);
    return fp8q_py_raise_on_failure(status, &error);
}

void *fp8q_py_device_state_prepare(fp8q_py_device_state *state,
                                   fp8q_TensorObject *x, size_t bytes,
                                   fp8q_cu_stream stream,
                                   const fp8q_cuda_calib_kind *kind,
                                   void *core, int image)
{
    const fp8q_py_device device = {FP8Q_DEVICE_CUDA, x->device_index};
    const int64_t size = (int64_t)bytes;
    fp8q_TensorObject *memory;
    fp8q_error error;
    int64_t epoch;
    int ordered;

    if (state->memory != NULL &&
        (state->memory->device_index != x->device_index ||
         state->memory->view.shape[0] != size)) {
        const int64_t wipes = state->wipes;

        if (fp8q_py_device_state_settle(state, kind, core) < 0) {
            return NULL;
        }
        if (state->pending || state->wipes != wipes) {
            /* While this one settled (the GIL released), another update
             * folded into a new state (kept; the caller starts again), or
             * a reset / __init__ wiped the state (the caller's batch, sized
             * and reduced for the settings before it, is dropped). */
            return NULL;
        }
        Py_CLEAR(state->memory);
        state->epoch++;
    }
    /* Allocating and ordering release the GIL: the state must be the same
     * after each, else the caller starts again. */
    epoch = state->epoch;
    memory = state->memory;
    if (memory == NULL) {
        memory = fp8q_tensor_new_empty_on(FP8Q_UINT8, 1, &size, &device,
                                          stream);
        if (memory == NULL || state->memory != NULL ||
            state->epoch != epoch) {
            Py_XDECREF(memory);
            return NULL;
        }
        state->memory = memory;
        state->pending = 0;
    }
    Py_INCREF(memory);
    ordered = fp8q_py_use_on_stream(memory, stream);
    if (ordered == 0 && (state->memory != memory || state->epoch != epoch)) {
        ordered = 1;
    }
    Py_DECREF(memory);
    if (ordered != 0) {
        return NULL;
    }
    /* The first fold starts the memory, with the GIL held, so that no
     * concurrent update folds into it before (an enqueued fill does not
     * wait; an upload waits so that its host buffer can be released). */
    if (!state->pending) {
        state->uploaded = image;
        fp8q_error_clear(&error);
        if (fp8q_py_raise_on_failure(
                fp8q_cuda_calib_state_begin(
                    kind, core, image, state->memory->cuda_device,
                    state->memory->view.data, bytes, stream, &error),
                &error) < 0) {
            return NULL;
        }
    }
    state->pending = 1;
    return state->memory->view.data;
}

void fp8q_py_device_state_forget(fp8q_py_device_state *state)
{
    state->epoch++;
    state->wipes++;
    Py_CLEAR(state->memory);
    state->pending = 0;
    state->uploaded = 0;
}

void fp8q_py_device_state_clear(fp8q_py_device_state *state)
{
    fp8q_py_device_state_forget(state);
    state->n_updates = 0;
}
