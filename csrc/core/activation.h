/*
 * activation.h - a layer's activations quantized for an FP8 product, where
 * a row (token) holding NaN or infinity is flagged rather than refused, so
 * the layer can give that row NaN and compute every other row exactly as
 * if it were absent (docs/torch.md, "Non-finite activations").
 */
#ifndef FP8Q_CORE_ACTIVATION_H
#define FP8Q_CORE_ACTIVATION_H

#include <stdint.h>

#include "core/status.h"
#include "core/view.h"

/*
 * Quantizes x (M, K), float32/float16/bfloat16, into the float8_e4m3fn
 * view `codes` (M, K), saturating.
 *
 * Dynamic (block_cols > 0): `scale` is float32 (M, ceil(K / block_cols))
 * and receives one scale per row (block_cols = K) or per 1 x block_cols
 * block, exactly as fp8q_quantize with compute_scale computes them
 * (float32(amax) / 448, 1 where amax is 0). Static (block_cols == 0):
 * `scale` is one given float32 value (finite, > 0: not checked here), and
 * `row_amax` a float32 (M, 1) workspace.
 *
 * A row holding NaN or +-infinity gets nonfinite_rows[row] = 1 (else 0)
 * and, dynamically, scale 1 for its groups; its codes are meaningless.
 * *n_nonfinite receives the number of such rows. FP8Q_ERROR_VALUE /
 * FP8Q_ERROR_TYPE for views of the wrong shape or dtype.
 */
fp8q_status fp8q_quantize_activations(const fp8q_view *x,
                                      const fp8q_view *codes,
                                      const fp8q_view *scale,
                                      int64_t block_cols,
                                      const fp8q_view *row_amax,
                                      uint8_t *nonfinite_rows,
                                      int64_t *n_nonfinite,
                                      fp8q_error *error);

/* Writes NaN into every element of the rows r of the 2-D float view `out`
 * with rows[r] != 0 (the dtype's default quiet NaN, positive). */
fp8q_status fp8q_fill_rows_nan(const fp8q_view *out, const uint8_t *rows,
                               fp8q_error *error);

/* Flags (rows[r] = 1, else 0) the rows r of the 2-D float32 view `values`
 * (scales or amaxes, any strides) holding NaN or +-infinity; returns the
 * number of rows flagged. */
int64_t fp8q_flag_nonfinite_rows(const fp8q_view *values, uint8_t *rows);

#endif /* FP8Q_CORE_ACTIVATION_H */
