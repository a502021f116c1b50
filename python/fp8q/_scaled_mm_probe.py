"""The path each scaling mode of fp8q.scaled_mm takes on a CUDA device, as
fp8q.info() reports it: one small product of each mode (M, N, K = PROBE_M,
PROBE_N, PROBE_K; FP8 operands in the fast layout and scales of ones, all
on the device; a bfloat16 result, no bias) runs there, and the path it took
is read back from fp8q._C._scaled_mm_paths(). So cuBLASLt answers at run
time: a mode it refuses shows the path fp8q fell back to, and the switches
of docs/scaled_mm.md ("Switches") show in the paths. Other shapes, biases
and result types may take other paths (docs/scaled_mm.md, "GPUs").
"""
import numpy as np

import fp8q
from fp8q import _C

PROBE_M, PROBE_N, PROBE_K = 16, 256, 256
BLOCK = 128  # scaled_mm's blockwise scales: 1 x 128 of a, 128 x 128 of b
SCALE_SHAPES = {
    "tensorwise": ((), ()),
    "rowwise": ((PROBE_M, 1), (1, PROBE_N)),
    "blockwise": ((PROBE_M, PROBE_K // BLOCK),
                  (PROBE_K // BLOCK, PROBE_N // BLOCK)),
}


def scaled_mm_paths(index):
    """{scaling mode: "cuda: PATH"} for CUDA device `index` (PATH as
    FP8Q_LOG names it), or "unavailable: WHY" for a mode whose product
    raised fp8q.CudaError (no cuBLASLt, say)."""
    device = f"cuda:{index}"
    paths = {}
    for mode, shapes in SCALE_SHAPES.items():
        try:
            a = fp8q.zeros((PROBE_M, PROBE_K), "float8_e4m3fn", device=device)
            w = fp8q.zeros((PROBE_N, PROBE_K), "float8_e4m3fn", device=device)
            scale_a, scale_b = (fp8q.asarray(np.ones(shape, np.float32),
                                             device=device)
                                for shape in shapes)
            fp8q.scaled_mm(a, w.T, scale_a, scale_b)
        except fp8q.CudaError as error:
            paths[mode] = f"unavailable: {error}"
        else:
            paths[mode] = "cuda: " + _C._scaled_mm_paths()[str(index)][mode]
    return paths
