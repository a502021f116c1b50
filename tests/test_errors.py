"""Bad input gets a clear exception, never a crash.

TypeError for unsupported objects and dtypes, ValueError for shapes, scales
and values, BufferError for memory-layout problems; every message names the
argument (checked by substrings). Ends with randomized garbage arguments to
every public function, run in a subprocess that must exit normally.
"""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fp8q
import fp8q.gemm_tuning


def raises(exception, *substrings):
    """pytest.raises that also checks the message holds every substring."""
    class Checker:
        def __enter__(self):
            self.context = pytest.raises(exception)
            self.info = self.context.__enter__()
            return self.info

        def __exit__(self, *exc_info):
            suppressed = self.context.__exit__(*exc_info)
            message = str(self.info.value)
            for substring in substrings:
                assert substring in message, \
                    f"{substring!r} not in message {message!r}"
            return suppressed

    return Checker()


X = np.arange(12, dtype=np.float32).reshape(3, 4) - 5


def fp8_tensor(shape, name="float8_e4m3fn"):
    """A writable FP8 tensor over fresh memory."""
    return fp8q.from_dlpack(np.zeros(shape, dtype=np.uint8), dtype=name)


# --------------------------------------------------------------------------
# cast


def test_cast_unknown_dtype():
    with raises(TypeError, "dtype"):
        fp8q.cast(X, "float7")
    with raises(TypeError, "dtype"):
        fp8q.cast(X, 3.5)
    with raises(TypeError, "dtype"):
        fp8q.cast(X, np.complex64)


def test_cast_unsupported_input_objects():
    with raises(TypeError, "x: ", "object"):
        fp8q.cast(object(), "e4m3")
    with raises(TypeError, "x: ", "dict"):
        fp8q.cast({"a": 1}, "e4m3")
    with raises(TypeError, "x: ", "complex64"):
        fp8q.cast(np.ones(3, dtype=np.complex64), "e4m3")
    with raises(ValueError, "x: ", "list"):
        fp8q.cast([[1.0, 2.0], [3.0]], "e4m3")  # ragged
    with pytest.raises(TypeError):
        fp8q.cast(X)  # dtype is required


def test_cast_scale_needs_an_fp8_target():
    for target in ("float32", "float16", "bfloat16", "uint8"):
        with raises(ValueError, "scale", "FP8", "fp8q.dequantize"):
            fp8q.cast(X, target, scale=2.0)


@pytest.mark.parametrize("bad", [0.0, -1.0, np.nan, np.inf, -np.inf, -0.0])
def test_cast_scale_values_must_be_finite_and_positive(bad):
    with raises(ValueError, "scale", "finite"):
        fp8q.cast(X, "e4m3", scale=bad)
    array = np.ones((3, 1), np.float32)
    array[2, 0] = bad
    with raises(ValueError, "scale"):
        fp8q.cast(X, "e4m3", scale=array)


def test_cast_scale_shape_must_broadcast():
    for shape in [(4, 1), (3,), (2, 3, 4), (3, 4, 1)]:
        with raises(ValueError, "scale"):
            fp8q.cast(X, "e4m3", scale=np.ones(shape, np.float32))


def test_cast_scale_of_wrong_type():
    with raises(TypeError, "scale"):
        fp8q.cast(X, "e4m3", scale="2")
    with raises(TypeError, "scale"):
        fp8q.cast(X, "e4m3", scale=object())


def test_cast_out_must_be_an_array_written_in_place():
    with raises(TypeError, "out=", "fp8q.Tensor", "list"):
        fp8q.cast(X, "float32", out=[0.0] * 12)
    with raises(TypeError, "out=", "float32", "float"):
        fp8q.cast(X, "float32", out=1.5)
    with raises(ValueError, "out=", "float32", "NumPy array of dtype float64"):
        fp8q.cast(X, "float32", out=np.empty((3, 4), np.float64))


def test_cast_out_dtype_must_match():
    out = fp8q.from_dlpack(np.empty((3, 4), np.float32))
    with raises(TypeError, "out=", "float8_e4m3fn", "float32"):
        fp8q.cast(X, "e4m3", out=out)


def test_cast_out_shape_must_match():
    with raises(ValueError, "out=", "(3, 4)", "(4, 3)"):
        fp8q.cast(X, "e4m3", out=fp8_tensor((4, 3)))
    with raises(ValueError, "out=", "(3, 4)", "(12,)"):
        fp8q.cast(X, "e4m3", out=fp8_tensor((12,)))


def test_cast_out_must_be_writable():
    memory = np.empty((3, 4), np.float32)
    memory.flags.writeable = False
    out = fp8q.asarray(memory)
    with raises(ValueError, "out=", "read-only"):
        fp8q.cast(X, "float32", out=out)


def test_cast_out_must_not_partially_overlap_x():
    memory = np.zeros(16, np.float32)
    source = fp8q.from_dlpack(memory[:12])
    out = fp8q.from_dlpack(memory[4:])
    with raises(ValueError, "out=", "overlap"):
        fp8q.cast(source, "float32", out=out)
    wide = np.zeros(2, np.float32)
    with raises(ValueError, "overlap"):
        fp8q.cast(fp8q.from_dlpack(wide),
                  "float8_e4m3fn",
                  out=fp8q.from_dlpack(wide.view(np.uint8)[:2],
                                       dtype="float8_e4m3fn"))


def test_cast_accepts_nan_and_inf_inputs():
    values = np.array([np.nan, np.inf, -np.inf], np.float32)
    result = fp8q.cast(values, "e4m3").numpy().astype(np.float32)
    assert np.isnan(result[0]) and result[1:].tolist() == [448.0, -448.0]


def test_cast_big_endian_input_is_converted_or_refused_clearly():
    big = np.arange(6, dtype=">f4")
    try:
        result = fp8q.cast(big, "float32")
    except (TypeError, ValueError, BufferError) as error:
        assert "x" in str(error)
    else:
        assert result.numpy().tolist() == [0, 1, 2, 3, 4, 5]


def test_too_many_dimensions():
    x = np.zeros((1,) * 17, np.float32)
    with raises(ValueError, "x: ", "16 dims", "17"):
        fp8q.cast(x, "e4m3")


# --------------------------------------------------------------------------
# amax


def test_amax_axis_errors():
    with raises(ValueError, "axis", "out of bounds", "dimension 2"):
        fp8q.amax(X, axis=2)
    with raises(ValueError, "axis", "out of bounds"):
        fp8q.amax(X, axis=-3)
    with raises(ValueError, "axis", "out of bounds"):
        fp8q.amax(X, axis=(0, 5))
    with raises(ValueError, "axis", "duplicate"):
        fp8q.amax(X, axis=(1, -1))
    with raises(ValueError, "axis", "out of bounds", "dimension 0"):
        fp8q.amax(np.float32(1.0), axis=0)
    with raises(TypeError, "axis"):
        fp8q.amax(X, axis="0")
    with raises(TypeError, "axis"):
        fp8q.amax(X, axis=[0, 1])
    with raises(TypeError, "axis"):
        fp8q.amax(X, axis=1.0)
    with raises(TypeError, "axis"):
        fp8q.amax(X, axis=(0, None))
    with raises(ValueError, "axis", str(2 ** 80), "out of bounds"):
        fp8q.amax(X, axis=2 ** 80)


def test_amax_input_errors():
    with raises(TypeError, "x: ", "object"):
        fp8q.amax(object())
    with raises(TypeError, "x: ", "complex128"):
        fp8q.amax(np.ones(2, np.complex128))


# --------------------------------------------------------------------------
# quantize / dequantize


def test_quantize_needs_an_fp8_dtype():
    for target in ("float32", "float16", "bfloat16", "uint8"):
        with raises(ValueError, "dtype", "FP8", target):
            fp8q.quantize(X, target)
    with raises(TypeError, "dtype"):
        fp8q.quantize(X, "e3m4")


def test_quantize_granularity_errors():
    with raises(ValueError, "granularity", "'rows'"):
        fp8q.quantize(X, granularity="rows")
    with raises(ValueError, "granularity", "length 3"):
        fp8q.quantize(X, granularity=(1, 2, 3))
    with raises(ValueError, "granularity", "positive"):
        fp8q.quantize(X, granularity=(0, 128))
    with raises(ValueError, "granularity", "positive"):
        fp8q.quantize(X, granularity=(1, -128))
    with raises(TypeError, "granularity"):
        fp8q.quantize(X, granularity=(1.0, 128))
    with raises(TypeError, "granularity"):
        fp8q.quantize(X, granularity=128)
    with raises(TypeError, "granularity"):
        fp8q.quantize(X, granularity=None)
    with pytest.raises(ValueError):
        fp8q.quantize(np.ones((2, 3, 4), np.float32), granularity=(1, 2))
    with pytest.raises(ValueError):
        fp8q.quantize(np.ones(4, np.float32), granularity=(1, 2))
    with pytest.raises(ValueError):
        fp8q.quantize(np.float32(2.0), granularity="row")
    with pytest.raises(ValueError):
        fp8q.quantize(np.float32(2.0), granularity="col")


@pytest.mark.parametrize("granularity, bad_shape, expected", [
    ("tensor", (2,), "()"),
    ("row", (4,), "(3, 1)"),
    ("row", (1, 4), "(3, 1)"),
    ("col", (3, 1), "(1, 4)"),
    ((2, 2), (3, 2), "(2, 2)"),
])
def test_quantize_scale_shape_errors(granularity, bad_shape, expected):
    with raises(ValueError, "scale", expected, str(bad_shape)):
        fp8q.quantize(X, granularity=granularity,
                      scale=np.ones(bad_shape, np.float32))


@pytest.mark.parametrize("bad", [0.0, -2.0, np.nan, np.inf])
def test_quantize_scale_values(bad):
    scale = np.ones((3, 1), np.float32)
    scale[1, 0] = bad
    with raises(ValueError, "scale"):
        fp8q.quantize(X, granularity="row", scale=scale)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_quantize_non_finite_input(bad):
    x = X.copy()
    x[2, 3] = bad
    with raises(ValueError, "x: ", "group 2", "scale="):
        fp8q.quantize(x, granularity="row")


# A negative quiet NaN, as 0/0 gives on x86 (np.nan is positive).
NEGATIVE_NAN = np.array([0xFFC00000], np.uint32).view(np.float32)[0]


def _histogram_calibrator():
    calibrator = fp8q.calib.HistogramCalibrator()
    calibrator.update(X)
    return calibrator


@pytest.mark.parametrize("value, text", [
    pytest.param(NEGATIVE_NAN, "-nan", id="negative-nan"),
    pytest.param(np.float32(np.nan), "nan", id="nan"),
    pytest.param(np.float32(-np.inf), "-inf", id="negative-inf"),
    pytest.param(np.float32(np.inf), "inf", id="inf")])
@pytest.mark.parametrize("call, message", [
    pytest.param(lambda bad: fp8q.cast(X, "e4m3", scale=bad),
                 "but element 0 (C order) is {}", id="cast-scale"),
    pytest.param(lambda bad: fp8q.quantize(
        X, granularity="row", scale=np.array([[1], [bad], [1]], np.float32)),
        "but element 1 (C order) is {}", id="quantize-scale"),
    pytest.param(lambda bad: fp8q.calib.scale_from_amax(
        np.array([1, bad], np.float32)),
        "group 1 (C-order index into the scale): its amax is {} (the data "
        "contain NaN or infinity)", id="scale-from-amax"),
    pytest.param(lambda bad: _histogram_calibrator().compute_amax(
        "percentile", percentile=float(bad)),
        "percentile: expected a value in (0, 100], got {}", id="percentile")])
def test_non_finite_values_read_the_same_everywhere(call, message, value,
                                                    text):
    """fp8q writes non-finite numbers itself: "nan", "-nan", "inf", "-inf"
    whatever the C runtime's printf would (glibc "-nan", the UCRT
    "-nan(ind)", msvcrt "nan" for a negative NaN)."""
    with pytest.raises(ValueError) as info:
        call(value)
    assert str(info.value).endswith(message.format(text)), str(info.value)


def test_dequantize_needs_a_qtensor():
    with raises(TypeError, "QTensor", "ndarray"):
        fp8q.dequantize(X)
    q = fp8q.quantize(X, granularity="row")
    with raises(ValueError, "dtype"):
        q.dequantize("float8_e5m2")
    with raises(TypeError, "dtype"):
        q.dequantize("float64x")


def test_qtensor_with_mismatched_parts():
    data = fp8q.cast(X, "e4m3")
    scale = fp8q.asarray(np.ones((4, 1), np.float32))
    with raises(ValueError, "scale", "(3, 1)", "(4, 1)"):
        fp8q.QTensor(data, scale, "row").dequantize()
    with raises(TypeError, "data"):
        fp8q.QTensor(X, scale, "row")
    with raises(TypeError, "FP8"):
        fp8q.QTensor(fp8q.asarray(X), scale, "row").dequantize()


# --------------------------------------------------------------------------
# finfo and threads


def test_finfo_errors():
    with raises(TypeError, "dtype", "floating-point", "uint8"):
        fp8q.finfo("uint8")
    with raises(TypeError, "dtype", "'nope'"):
        fp8q.finfo("nope")


def test_set_num_threads_errors(restore_threads):
    with raises(TypeError, "n must be an int", "str"):
        fp8q.set_num_threads("4")
    with raises(TypeError, "n must be an int", "float"):
        fp8q.set_num_threads(2.0)
    with raises(ValueError, "n must be at most", str(10 ** 30)):
        fp8q.set_num_threads(10 ** 30)
    # The bound the docstring gives is the one kept (65536 was once
    # accepted and silently held to 4096).
    with raises(ValueError, "n must be at most 4096, got 4097"):
        fp8q.set_num_threads(4097)
    fp8q.set_num_threads(4096)
    assert fp8q.get_num_threads() == 4096


@pytest.mark.parametrize("bad, exception, words", [
    (2 ** 32, ValueError, ("index must be >= 0 and at most 1000000",
                           "4294967296")),
    (-1, ValueError, ("index must be >= 0", "got -1")),
    (10 ** 30, ValueError, ("at most 1000000", str(10 ** 30))),
    (True, TypeError, ("index must be an int", "bool")),
    ("cuda:0", TypeError, ("index must be an int", "str")),
])
def test_device_index_arguments(bad, exception, words, tmp_path):
    """fp8q.gemm_tuning's device and _cuda_open_device's index are checked
    before any device is opened: 2**32 once silently named device 0."""
    with raises(exception, "device: a CUDA device", *words):
        fp8q.gemm_tuning.save(tmp_path / "tuning.txt", device=bad)
    with raises(exception, "_cuda_open_device: a CUDA device", *words):
        fp8q._C._cuda_open_device(bad)
    assert not (tmp_path / "tuning.txt").exists()


# --------------------------------------------------------------------------
# Randomized garbage arguments, in a subprocess


GARBAGE_SCRIPT = textwrap.dedent("""
    import random
    import sys

    import numpy as np

    import fp8q

    seed = int(sys.argv[1])
    calls = int(sys.argv[2])
    rng = random.Random(seed)
    nprng = np.random.default_rng(seed)

    DTYPES = ["float32", "float16", "bfloat16", "uint8", "float8_e4m3fn",
              "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "e4m3",
              "torch.float8_e4m3fn", "fp16", "bogus", "", None]

    def small_shape():
        return tuple(rng.choice([0, 1, 2, 3, 5]) for _ in
                     range(rng.choice([0, 1, 2, 3, 4, 9])))

    def array():
        kind = rng.choice(["f4", "f8", "f2", "u1", "i8", "c8", "?", ">f4",
                           "O", "U3", "V4"])
        shape = small_shape()
        values = np.asarray(nprng.standard_normal(shape)
                            * 10 ** rng.randint(-3, 6))
        try:
            made = values.astype(kind)
        except (TypeError, ValueError):
            made = values
        if made.ndim and rng.random() < 0.3:
            made = made[..., ::-1]
        if made.ndim >= 2 and rng.random() < 0.3:
            made = made.swapaxes(0, -1)
        if rng.random() < 0.2:
            made.flags.writeable = False
        return made

    def tensor():
        try:
            name = rng.choice(DTYPES[:8])
            return fp8q.cast(array().astype("f4", copy=False), name)
        except Exception:
            return fp8q.asarray(1.5)

    def qtensor():
        try:
            return fp8q.quantize(nprng.standard_normal(small_shape()),
                                 granularity=rng.choice(["tensor", "row",
                                                         "col"]))
        except Exception:
            return fp8q.quantize(1.0)

    def junk(depth=0):
        choice = rng.randrange(19)
        if choice == 0:
            return None
        if choice == 1:
            return rng.choice([0, 1, -1, 2 ** 31, -2 ** 63, 2 ** 64, 2 ** 200,
                               True, False, 7])
        if choice == 2:
            return rng.choice([0.0, -0.0, 1.5, float("nan"), float("inf"),
                               -float("inf"), 1e-320, 1e308])
        if choice == 3:
            return rng.choice(DTYPES)
        if choice == 4:
            return rng.choice([b"", b"abc", bytearray(5),
                               memoryview(b"xyzw").cast("B", (2, 2))])
        if choice == 5 and depth < 3:
            return [junk(depth + 1) for _ in range(rng.randrange(4))]
        if choice == 6 and depth < 3:
            return tuple(junk(depth + 1) for _ in range(rng.randrange(4)))
        if choice == 7:
            return {"shape": (2,), 1: junk(depth + 1) if depth < 3 else 0}
        if choice in (8, 9, 10):
            return array()
        if choice in (11, 12):
            return tensor()
        if choice == 13:
            return qtensor()
        if choice == 14:
            return object()
        if choice == 15:
            return rng.choice([np.float32, np.dtype("f2"), fp8q.float32,
                               fp8q.float8_e5m2, complex(1, 2), slice(1)])
        if choice == 16:
            return (rng.randrange(-2, 300), rng.randrange(-2, 300))
        if choice == 17:
            return rng.choice(["tensor", "row", "col", "block", (1, 128),
                               (128, 128), (0, 1)])
        return np.float32(rng.uniform(-5, 5))

    FUNCTIONS = {
        "cast": (fp8q.cast, ["dtype", "scale", "saturate", "out"]),
        "amax": (fp8q.amax, ["axis", "keepdims"]),
        "quantize": (fp8q.quantize, ["dtype", "granularity", "scale",
                                      "saturate", "power_of_2"]),
        "dequantize": (fp8q.dequantize, ["dtype"]),
        "asarray": (fp8q.asarray, ["dtype", "copy"]),
        "from_dlpack": (fp8q.from_dlpack, ["dtype"]),
        "empty": (fp8q.empty, ["dtype"]),
        "finfo": (fp8q.finfo, []),
        "dtype": (fp8q.dtype, []),
        "get_num_threads": (fp8q.get_num_threads, []),
        "QTensor": (fp8q.QTensor, []),
        "_dequantize": (fp8q._C._dequantize, ["dtype"]),
        "_quantize": (fp8q._C._quantize, ["dtype", "granularity", "scale"]),
        "qtensor.dequantize": (lambda *a, **k: qtensor().dequantize(*a, **k),
                               ["dtype"]),
    }

    def data():
        return array() if rng.random() < 0.5 else tensor()

    def dtype_name():
        return rng.choice(DTYPES[:9])

    # Plausible leading arguments, so that calls also get past the checks.
    PLAUSIBLE = {
        "cast": [data, dtype_name],
        "amax": [data],
        "quantize": [data, dtype_name],
        "dequantize": [qtensor],
        "asarray": [data],
        "from_dlpack": [array],
        "empty": [small_shape],
        "finfo": [dtype_name],
        "dtype": [dtype_name],
        "QTensor": [tensor, tensor, lambda: rng.choice(["row", "tensor"])],
        "_dequantize": [tensor, tensor, lambda: rng.choice(["row", "col"])],
        "_quantize": [data],
        "qtensor.dequantize": [dtype_name],
    }

    outcomes = {"ok": 0, "raised": 0}
    names = sorted(FUNCTIONS)
    for call in range(calls):
        name = rng.choice(names)
        function, keywords = FUNCTIONS[name]
        plausible = PLAUSIBLE.get(name, [])
        count = rng.randrange(4)
        if rng.random() < 0.5:
            count = max(count, len(plausible))
        positional = [junk() for _ in range(count)]
        for index, make in enumerate(plausible):
            if index < len(positional) and rng.random() < 0.6:
                positional[index] = make()
        named = {key: junk() for key in keywords if rng.random() < 0.4}
        if name == "empty" and positional:
            shape = positional[0]
            if isinstance(shape, int) and abs(shape) > 1 << 20:
                positional[0] = 3
        print(call, name, file=sys.stderr, flush=True)
        try:
            result = function(*positional, **named)
            repr(result)
            outcomes["ok"] += 1
        except SystemError:
            raise  # a C function returned NULL without an exception, or worse
        except Exception:
            outcomes["raised"] += 1
    fp8q.set_num_threads(0)
    print("garbage done", outcomes)
""")


def test_garbage_arguments_never_crash(seed):
    environment = dict(os.environ, FP8Q_NUM_THREADS="2")
    completed = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", GARBAGE_SCRIPT,
         str(seed), "4000"],
        capture_output=True, text=True, timeout=600, env=environment)
    assert completed.returncode == 0, (
        f"garbage-arguments subprocess died with exit {completed.returncode} "
        f"(seed={seed}); last lines of stderr:\n"
        + "\n".join(completed.stderr.splitlines()[-25:]))
    assert "garbage done" in completed.stdout, f"seed={seed}"
    assert "'ok': 0," not in completed.stdout, \
        f"no call got past the argument checks (seed={seed})"


@pytest.mark.parametrize("bad, tail", [
    (-2.0, "its amax is -2, but an amax must be >= 0"),
    (float("nan"), "its amax is nan (the data contain NaN or infinity)")])
def test_scale_from_amax_says_what_is_wrong_with_the_amax(bad, tail):
    """A negative amax and a non-finite one get their own reason, after the
    group's C-order index (core/quantize.c's one message for both)."""
    with pytest.raises(ValueError) as info:
        fp8q.calib.scale_from_amax(np.array([1, bad], np.float32))
    assert str(info.value) == ("amax: cannot compute a scale for group 1 "
                               "(C-order index into the scale): " + tail)


def test_a_scale_for_a_non_fp8_dtype_names_dtype():
    """scale_from_amax and a calibrator's scale() refuse a non-FP8 dtype
    with a TypeError naming dtype (it once read "amax: dtype: ...")."""
    calibrator = fp8q.calib.MaxCalibrator()
    calibrator.update(np.ones(3, np.float32))
    for call in (lambda: fp8q.calib.scale_from_amax(1.0, "float16"),
                 lambda: calibrator.scale("float16")):
        with pytest.raises(TypeError) as info:
            call()
        assert str(info.value) == "dtype: expected an FP8 dtype, got float16"
