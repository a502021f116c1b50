"""The exact messages of the operations' argument refusals (quantize,
dequantize, cast, amax, scaled_mm, the layer call, norm_quantize) whose
checks live in csrc/core (core/op_checks.h,
core/layer_checks.h) and are raised by the binding: type and full text, as
users and the C tests (tests/c/test_op_checks.c) see them."""
import re

import ml_dtypes
import numpy as np
import pytest

import fp8q
from fp8q import _C


def refuses(exception, message, call):
    with pytest.raises(exception, match="^" + re.escape(message) + "$"):
        call()


def test_quantize_transpose_needs_a_matrix():
    refuses(ValueError, "quantize: transpose=True needs a 2-D x (M, N), got "
            "3 dimensions",
            lambda: fp8q.quantize(np.ones((2, 3, 4), np.float32),
                                  transpose=True))


def test_dequantize_data_must_be_fp8():
    refuses(TypeError, "dequantize: data must have an FP8 dtype, got float16",
            lambda: fp8q._C._dequantize(np.ones(4, np.float16),
                                        np.float32(1), "tensor"))


def test_cast_scale_needs_an_fp8_dtype():
    refuses(ValueError, "cast: scale= is only allowed when dtype= is an FP8 "
            "format (it divides before rounding to FP8), got dtype=bfloat16; "
            "to multiply FP8 data by its scale use fp8q.dequantize",
            lambda: fp8q.cast(np.ones(4, np.float32), "bfloat16", scale=2.0))


def test_cast_out_overlaps():
    memory = np.zeros(16, np.float32)
    refuses(ValueError, "cast: out= must not overlap x in memory (except as "
            "the very same elements of the same itemsize), got a partially "
            "overlapping tensor",
            lambda: fp8q.cast(memory[:12], "float32", out=memory[4:]))
    # The very same elements are allowed (an in-place cast).
    assert fp8q.cast(memory, "float32", out=memory) is memory
    # out's 4 one-byte codes inside the 4 float32 scale values' memory.
    scale = np.ones(8, np.float32)
    out = scale.view(np.uint8)[16:20].view(ml_dtypes.float8_e4m3fn)
    refuses(ValueError, "cast: out= must not overlap scale= in memory",
            lambda: fp8q.cast(np.ones(4, np.float32), "float8_e4m3fn",
                              scale=scale[4:], out=out))


def test_layer_refusals():
    torch = pytest.importorskip("torch")
    q = fp8q.quantize(np.ones((4, 4), np.float32), granularity="row")
    x = torch.ones(2, 4)
    refuses(ValueError, "fp8q.torch.Linear: weight_scale: scale: expected "
            "shape (4, 1) for \"row\" granularity on input of shape (4, 4), "
            "got (3, 1)",
            lambda: fp8q._C.layer_weight(x, q.data, np.ones((3, 1),
                                                            np.float32),
                                         "row", None))
    refuses(TypeError, "fp8q.torch.Linear: weight_scale: expected dtype "
            "float32, got float16",
            lambda: fp8q._C.layer_weight(x, q.data, np.ones((4, 1),
                                                            np.float16),
                                         "row", None))
    refuses(ValueError, "fp8q.torch.Linear: quantized activations need "
            "dynamic per-token scales (no input_scale, \"row\" or \"tensor\" "
            "weight scales)",
            lambda: fp8q._C.linear_layer(x, q.data, q.scale, None,
                                         np.float32(1), "row", None, None,
                                         (q.data, q.scale)))
    refuses(ValueError, "linear: x's scale: every value must be finite and "
            "> 0 (it is the dequantization scale, x ~= q * scale), but "
            "element 0 (C order) is nan",
            lambda: fp8q._C.linear(q.data, q.data, q.scale, "row", None,
                                   None, False, None, np.float32(np.nan)))
    refuses(ValueError, "scaled_mm: scale_result: every value must be "
            "finite and > 0 (it is the dequantization scale, x ~= q * "
            "scale), but element 0 (C order) is nan",
            lambda: fp8q.scaled_mm(q.data, q.data.T, 1.0, 1.0,
                                   out_dtype="float8_e4m3fn",
                                   scale_result=float("nan")))
    refuses(ValueError, "fp8q.torch.Linear: stream must be None for torch "
            "tensors: the call runs on torch's current stream (choose it "
            "with torch.cuda.stream(...))",
            lambda: fp8q._C.linear_layer(x, q.data, q.scale, None, None,
                                         "row", 5))
    refuses(ValueError, "fp8q.torch.Linear: stream= applies to CUDA "
            "tensors; this call runs on the CPU (pass stream=None)",
            lambda: fp8q._C.linear_layer(
                fp8q.asarray(np.ones((2, 4), np.float32)), q.data, q.scale,
                None, None, "row", 5))
    refuses(TypeError, "linear: x's scales must be float32, got float16",
            lambda: fp8q._C.linear(q.data, q.data, q.scale, "row", None,
                                   None, False, None, np.float16(1)))


CPU_STREAM_REFUSAL = ("{}: stream= applies to CUDA tensors; this call runs "
                      "on the CPU (pass stream=None)")


def _cpu_calls_with_stream(stream):
    x = np.linspace(-3, 3, 64, dtype=np.float32).reshape(4, 16)
    q = fp8q.quantize(x)
    w = fp8q.quantize(np.ones((8, 16), np.float32), granularity="row")
    return {
        "cast": lambda: fp8q.cast(x, "float8_e4m3fn", stream=stream),
        "quantize": lambda: fp8q.quantize(x, stream=stream),
        "dequantize": lambda: q.dequantize(stream=stream),
        "amax": lambda: fp8q.amax(x, axis=0, stream=stream),
        "scaled_mm": lambda: fp8q.scaled_mm(q.data, w.data.T, q.scale,
                                            w.scale.T, stream=stream),
        "linear": lambda: fp8q.linear(x, w, stream=stream),
        # The internal 9-argument form fp8q.torch calls with its outputs.
        "norm_quantize": lambda: _C.norm_quantize(
            x, np.ones(16, np.float32), None, np.empty_like(x),
            np.empty(x.shape, ml_dtypes.float8_e4m3fn),
            np.empty((4, 1), np.float32), 1e-6, False, stream),
    }


@pytest.mark.parametrize("stream", [0, 1, 7], ids=repr)
@pytest.mark.parametrize("function", ["cast", "quantize", "dequantize",
                                      "amax", "scaled_mm", "linear",
                                      "norm_quantize"])
def test_every_cpu_operation_refuses_a_stream(function, stream):
    """One rule (core/op_checks.h, fp8q_check_stream_on_cpu): an operation
    running on the CPU refuses any stream but None, naming itself."""
    refuses(ValueError, CPU_STREAM_REFUSAL.format(function),
            _cpu_calls_with_stream(stream)[function])
    _cpu_calls_with_stream(None)[function]()  # None: runs
