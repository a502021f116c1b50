/*
 * ops.h - the GPU operations cast, amax, quantize and dequantize on strided
 * views of one device's memory, queued on the caller's stream: what
 * csrc/python/ops_cuda.c did below the binding, so that it only turns
 * Python objects into views and statuses into exceptions.
 *
 * The kernels read contiguous runs: strided inputs are gathered into
 * contiguous temporaries first (an fp8q_cuda_buffer, allocated and freed in
 * the stream's order); outputs must be C-contiguous; scales must reduce to
 * the kernels' (row, column) addressing. Everything else is refused with
 * FP8Q_ERROR_VALUE and a message that says what is accepted.
 *
 * Every view's memory is device memory of `device` (the caller has ordered
 * `stream` after the memory's earlier uses). Functions return FP8Q_OK or
 * write the failure into `error`. Call without holding Python's GIL.
 */
#ifndef FP8Q_CUDA_OPS_H
#define FP8Q_CUDA_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "core/quantize.h"
#include "core/status.h"
#include "core/view.h"
#include "cuda/capture.h"
#include "cuda/driver.h"

/* A temporary block of device memory of one call (a gathered copy, a scale
 * buffer): zero it with memset before use; release it once, after the work
 * that uses it has been queued. */
typedef struct fp8q_cuda_buffer {
    const fp8q_cuda_device *device; /* NULL: nothing held */
    void *data;
    fp8q_cuda_capture allocated_in;
} fp8q_cuda_buffer;

/* At least `bytes` of device memory in buffer->data (NULL for 0 bytes),
 * allocated ordered on `stream` (fp8q_cuda_alloc). On failure the buffer
 * holds nothing. */
fp8q_status fp8q_cuda_buffer_alloc(const fp8q_cuda_device *device,
                                   size_t bytes, fp8q_cu_stream stream,
                                   fp8q_cuda_buffer *buffer,
                                   fp8q_error *error);

/* Frees the buffer's memory ordered on `stream` (the stream of its last
 * use) and leaves it holding nothing; nothing to do when it holds nothing. */
void fp8q_cuda_buffer_release(fp8q_cuda_buffer *buffer,
                              fp8q_cu_stream stream);

/* Copies the elements of the strided `source` into `destination`, a
 * C-contiguous run of as many elements of its dtype, on `stream`
 * (kernels/gather.cuh; kernels/transpose.cuh for the transpose of a
 * C-contiguous matrix, a 2-D view with strides (1, rows)). */
fp8q_status fp8q_cuda_gather(const fp8q_cuda_device *device,
                             const fp8q_view *source, void *destination,
                             fp8q_cu_stream stream, fp8q_error *error);

/* *contiguous = `source` itself when it is C-contiguous (buffer left
 * empty), else a C-contiguous view of the same elements gathered into
 * `buffer` (allocated here; the caller releases it). */
fp8q_status fp8q_cuda_contiguous(const fp8q_cuda_device *device,
                                 const fp8q_view *source,
                                 fp8q_cu_stream stream,
                                 fp8q_cuda_buffer *buffer,
                                 fp8q_view *contiguous, fp8q_error *error);

/*
 * out = cast(x / scale) (saturating or not, kernels/cast.cuh): x any
 * strides (gathered first), out of x's shape and required C-contiguous
 * (FP8Q_ERROR_VALUE "cast: out= on CUDA must be C-contiguous, got strides
 * ..."); scale NULL or a C-contiguous float32 view broadcastable to x that
 * reduces to one value, one per row or group of rows, one per column or
 * one per element (FP8Q_ERROR_VALUE naming scale's shape otherwise; unread
 * for an empty x). amax_bits NULL or a float32 in device memory set to x's
 * amax (as bits) from the same pass. Between equal dtypes with neither
 * scale nor amax_bits, the bits are copied in one pass: fp8q_cuda_copy
 * for a C-contiguous x, else fp8q_cuda_gather (a transposed matrix by
 * kernels/transpose.cuh).
 */
fp8q_status fp8q_cuda_cast(const fp8q_cuda_device *device,
                           const fp8q_view *x, const fp8q_view *scale,
                           const fp8q_view *out, uint32_t *amax_bits,
                           int saturate, fp8q_cu_stream stream,
                           fp8q_error *error);

/* amax_bits = the amax (float32 bits) of x over the axes with
 * reduce[axis] != 0, one per index of the kept axes in C order: read in
 * place when x's reduced axes then kept ones are C-contiguous, else with
 * the kept axes first and the reduced ones last, gathered when that
 * arrangement is not contiguous. */
fp8q_status fp8q_cuda_amax(const fp8q_cuda_device *device,
                           const fp8q_view *x, const int *reduce,
                           uint32_t *amax_bits, fp8q_cu_stream stream,
                           fp8q_error *error);

/* Calibration's amax of x (kernels/amax.cuh, the finite rows): the largest
 * finite |x| per index of `channel_axis` (0 <= axis < ndim), or of all of
 * x when channel_axis < 0, into amax_bits[channel] (float32 bits), and the
 * number of NaN and infinite values added to *nonfinite_count (device
 * memory, 8-byte aligned). */
fp8q_status fp8q_cuda_amax_finite(const fp8q_cuda_device *device,
                                  const fp8q_view *x, int channel_axis,
                                  uint32_t *amax_bits,
                                  uint64_t *nonfinite_count,
                                  fp8q_cu_stream stream, fp8q_error *error);

/* quantize: with options->compute_scale, each group's amax into `scale` and
 * scales from it (in one pass for short float rows,
 * kernels/quantize_rows.cuh); then data = cast(x / scale). x, data (FP8,
 * x's shape) and scale (float32, the granularity's scale shape, holding the
 * given scale unless computed) C-contiguous. A NaN or infinite amax gives a
 * NaN or infinite scale. */
fp8q_status fp8q_cuda_quantize(const fp8q_cuda_device *device,
                               const fp8q_view *x,
                               const fp8q_quantize_options *options,
                               const fp8q_view *data, const fp8q_view *scale,
                               fp8q_cu_stream stream, fp8q_error *error);

/* result = data * scale (saturating) with the granularity's scale of each
 * element; data, scale (the granularity's scale shape) and result (data's
 * shape) C-contiguous. */
fp8q_status fp8q_cuda_dequantize(const fp8q_cuda_device *device,
                                 const fp8q_view *data,
                                 const fp8q_view *scale,
                                 const fp8q_granularity *granularity,
                                 const fp8q_view *result,
                                 fp8q_cu_stream stream, fp8q_error *error);

#endif /* FP8Q_CUDA_OPS_H */
