"""fp8q: exact FP8 casts, quantization, scaled matmul and calibration.

Everything numeric runs in the C extension fp8q._C; this package re-exports it
and adds thin Python helpers.
"""
from fp8q._C import *  # noqa: F401,F403
