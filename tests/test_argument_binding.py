"""How fp8q's C entry points bind their arguments (csrc/python/
parse_arguments.c): for every entry point, each way of passing arguments
that Python's own binding of the signature its docstring states
(inspect.signature(...).bind, the oracle) accepts is accepted, each it
refuses is refused with a TypeError naming the function, and a keyword
reaches the parameter of its name."""
import inspect
import re

import ml_dtypes
import numpy as np
import pytest

import fp8q
from fp8q import _C

# What the binding's own refusals say; any other outcome (a refusal of a
# value, or a result) means the arguments were bound.
BINDING_REFUSAL = re.compile(
    r"takes (no|exactly \d+|at most \d+|at least \d+) positional argument"
    r"|is an invalid keyword argument for"
    r"|given by name \('\w+'\) and position"
    r"|missing required argument"
    r"|got multiple values for argument")


def entry_points():
    tensor = fp8q.asarray(np.ones(4, np.float32))
    return {
        "cast": fp8q.cast,
        "amax": fp8q.amax,
        "asarray": fp8q.asarray,
        "from_dlpack": fp8q.from_dlpack,
        "scaled_mm": fp8q.scaled_mm,
        "_quantize": _C._quantize,
        "_dequantize": _C._dequantize,
        "_scale_from_amax": _C._scale_from_amax,
        "_tensor_argument": _C._tensor_argument,
        "synchronize": fp8q.synchronize,
        "empty_cache": fp8q.empty_cache,
        "empty": fp8q.empty,
        "zeros": fp8q.zeros,
        "Tensor.to": tensor.to,
        "Tensor.cpu": tensor.cpu,
        "Tensor.__array__": tensor.__array__,
        "Tensor.__dlpack__": tensor.__dlpack__,
        "MaxCalibrator.update": _C._MaxCalibrator().update,
        "MaxCalibrator.scale": _C._MaxCalibrator().scale,
        "HistogramCalibrator.update": _C._HistogramCalibrator().update,
        "HistogramCalibrator.compute_amax":
            _C._HistogramCalibrator().compute_amax,
    }


class Junk:
    """An argument no parameter accepts as a value (so a bound call fails
    on its value, never on its binding)."""

    def __repr__(self):
        return "Junk()"


def ways_to_call(signature):
    """(args, kwargs) pairs around the signature's parameters: the usual
    ones, and each mistake a caller makes."""
    parameters = list(signature.parameters.values())
    positional = [p for p in parameters
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in parameters if p.default is p.empty]
    by_position = [Junk() for _ in required]
    ways = [((), {}), (tuple(by_position), {}),
            (tuple(by_position) + (Junk(),) * (len(positional) + 1
                                               - len(by_position)), {}),
            (tuple(by_position), {"no_such_argument": Junk()}),
            (tuple(Junk() for _ in positional), {})]
    for index, parameter in enumerate(parameters):
        # Everything by position up to it, then it by name.
        ways.append((tuple(Junk() for _ in positional[:index]),
                     {parameter.name: Junk()}))
        # Everything required by position, and it by name as well.
        ways.append((tuple(by_position), {parameter.name: Junk()}))
        # Every required parameter by name, except this one.
        ways.append(((), {p.name: Junk() for p in required
                          if p is not parameter}))
    return ways


def binding_refusal(call, args, kwargs):
    """The binding's TypeError message, or None when the arguments were
    bound (a SystemError, the binder's own failure, is raised)."""
    try:
        call(*args, **kwargs)
    except TypeError as error:
        if BINDING_REFUSAL.search(str(error)):
            return str(error)
    except SystemError:
        raise
    except Exception:  # a refusal of a value: the arguments were bound
        pass
    return None


@pytest.mark.parametrize("name", sorted(entry_points()))
def test_the_binding_agrees_with_the_documented_signature(name):
    call = entry_points()[name]
    signature = inspect.signature(call)
    short_name = name.split(".")[-1]
    if re.fullmatch("_[a-z_]+[a-z]", short_name):
        # fp8q.quantize's C half names fp8q.quantize in its messages.
        short_name = short_name[1:]
    for args, kwargs in ways_to_call(signature):
        try:
            signature.bind(*args, **kwargs)
            oracle_refuses = False
        except TypeError:
            oracle_refuses = True
        refusal = binding_refusal(call, args, kwargs)
        where = f"{name}(*{args!r}, **{kwargs!r}): {refusal}"
        assert (refusal is not None) == oracle_refuses, where
        if refusal is not None:
            assert f"{short_name}()" in refusal, where


def test_each_keyword_reaches_its_parameter():
    x = np.array([0.3, -1000.0, 7.0, np.nan], np.float32)
    by_position = fp8q.cast(x, "float8_e4m3fn", scale=2.0, saturate=False)
    by_name = fp8q.cast(saturate=False, scale=2.0, dtype="float8_e4m3fn", x=x)
    # float32(x) / 2, rounded once; saturate=False: -500 overflows e4m3
    # (max 448) to NaN.
    expected = (x / np.float32(2.0)).astype(ml_dtypes.float8_e4m3fn)
    codes = np.asarray(by_name)  # the FP8 codes, as uint8
    np.testing.assert_array_equal(codes, np.asarray(by_position))
    np.testing.assert_array_equal(codes[[0, 2]],
                                  expected.view(np.uint8)[[0, 2]])
    assert np.isnan(codes[[1, 3]].view(ml_dtypes.float8_e4m3fn)
                    .astype(np.float32)).all()
    kept = fp8q.amax(keepdims=True, axis=0, x=np.ones((2, 3), np.float32))
    assert kept.shape == (1, 3)
    calibrator = _C._MaxCalibrator()
    calibrator.update(np.array([np.inf, 2.0], np.float32),
                      skip_nonfinite=True)
    assert calibrator.amax == 2.0


def test_a_flag_whose_truth_raises_passes_the_error_on():
    class NoTruth:
        def __bool__(self):
            raise ZeroDivisionError("no truth here")

    with pytest.raises(ZeroDivisionError, match="no truth here"):
        fp8q.cast(np.ones(2, np.float32), "float8_e4m3fn",
                  saturate=NoTruth())


def test_string_and_float_parameters_name_themselves():
    calibrator = _C._HistogramCalibrator()
    calibrator.update(np.linspace(-3, 3, 1000).astype(np.float32))
    with pytest.raises(TypeError, match="compute_amax\\(\\) argument "
                       "'method' must be str, not int"):
        calibrator.compute_amax(3)
    with pytest.raises(TypeError, match="compute_amax\\(\\) argument "
                       "'percentile' must be real number, not str"):
        calibrator.compute_amax("percentile", percentile="99")
    with pytest.raises(ValueError, match="embedded null character"):
        calibrator.compute_amax("percentile\0")
    # An int and an object with __index__ are floats here, as in PyArg.
    assert (calibrator.compute_amax("percentile", percentile=100)
            == calibrator.compute_amax("percentile", percentile=100.0))


def calibrated(kind):
    calibrator = kind()
    calibrator.update(np.linspace(-3, 3, 1000).astype(np.float32))
    return calibrator


def valid_calls():
    """Per entry point, arguments (by name) that each differ from the
    parameter's default, so that a value lost or given to another
    parameter changes the result."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 32)).astype(np.float32)
    codes = fp8q.cast(x, "float8_e4m3fn")
    one = np.ones((1, 1), np.float32)
    return [
        (fp8q.cast, dict(x=x, dtype="float8_e5m2", scale=0.5,
                         saturate=False)),
        (fp8q.amax, dict(x=x, axis=0, keepdims=True)),
        (fp8q.asarray, dict(obj=x, dtype="float16", copy=True)),
        (_C._quantize, dict(x=x, dtype="float8_e5m2", granularity="row",
                            saturate=False, power_of_2=True,
                            transpose=True)),
        (_C._dequantize, dict(data=codes, scale=np.float32(0.5),
                              granularity="tensor", dtype="bfloat16")),
        (_C._scale_from_amax, dict(amax=np.float32(3.0), dtype="float8_e5m2",
                                   margin=1, power_of_2=True)),
        (fp8q.scaled_mm, dict(a=codes, b=codes.T, scale_a=one * 2,
                              scale_b=one, out_dtype="float32",
                              bias=np.ones(4, np.float32))),
        (fp8q.zeros, dict(shape=(2, 3), dtype="float16")),
        (fp8q.asarray(x).__array__, dict(dtype=np.float64, copy=True)),
        (calibrated(_C._MaxCalibrator).scale,
         dict(dtype="float8_e5m2", margin=1, power_of_2=True)),
        (calibrated(_C._HistogramCalibrator).compute_amax,
         dict(method="percentile", percentile=99.5, dtype="float8_e5m2")),
    ]


def comparable(result):
    """A result as plain data: dtype, shape and bytes of tensors."""
    if isinstance(result, tuple):
        return tuple(comparable(item) for item in result)
    if isinstance(result, (fp8q.Tensor, np.ndarray)):
        array = np.asarray(result)
        return (str(result.dtype), array.shape, array.tobytes())
    return result


@pytest.mark.parametrize("call, arguments", valid_calls(),
                         ids=lambda value: getattr(value, "__name__", ""))
def test_each_value_reaches_its_parameter_by_position_or_name(call,
                                                              arguments):
    """The first k arguments by position and the rest by name give the
    all-by-name call's result, for every k the signature allows."""
    expected = comparable(call(**arguments))
    parameters = inspect.signature(call).parameters
    names = [name for name in arguments
             if parameters[name].kind is not parameters[name].KEYWORD_ONLY]
    for k in range(1, len(names) + 1):
        by_position = [arguments[name] for name in names[:k]]
        by_name = {name: value for name, value in arguments.items()
                   if name not in names[:k]}
        assert comparable(call(*by_position, **by_name)) == expected, \
            (call.__name__, k)


def test_a_positional_only_parameter_is_not_bound_by_an_empty_name():
    x = np.ones(2, np.float32)
    with pytest.raises(TypeError, match="'' is an invalid keyword argument "
                       "for from_dlpack"):
        fp8q.from_dlpack(**{"": x})
    with pytest.raises(TypeError, match="from_dlpack\\(\\) takes exactly 1 "
                       "positional argument \\(0 given\\)"):
        fp8q.from_dlpack(dtype="float32")


def test_a_float_parameter_keeps_its_fraction():
    calibrator = calibrated(_C._HistogramCalibrator)
    assert (calibrator.compute_amax("percentile", percentile=99.5)
            > calibrator.compute_amax("percentile", percentile=99.0))


class _OwnHash(str):
    """A parameter name that is its own dictionary key beside the plain
    str of the same text (its hash differs), so one call can carry the
    name twice."""

    def __hash__(self):
        return hash(("own", str(self)))


def test_a_keyword_given_twice_is_refused():
    """Python refuses a second value for one parameter; so does the
    binding, rather than keeping the last."""
    x = np.ones(4, np.float32)
    twice = {_OwnHash("dtype"): "float8_e4m3fn", "dtype": "float8_e5m2"}
    assert len(twice) == 2
    with pytest.raises(TypeError, match=re.escape(
            "cast() got multiple values for argument 'dtype'")):
        fp8q.cast(x, **twice)


def test_a_positional_only_parameter_is_named_by_its_position():
    """PyArg's form for a value a positional-only parameter refuses:
    'argument 2', not the empty name."""
    with pytest.raises(TypeError, match=re.escape(
            "_tensor_argument() argument 2 must be str, not int")):
        _C._tensor_argument(1, 2)


def test_a_float_parameter_refuses_a_str_by_name():
    calibrator = calibrated(_C._HistogramCalibrator)
    with pytest.raises(TypeError, match=re.escape(
            "argument 'percentile' must be real number, not str")):
        calibrator.compute_amax("percentile", percentile="99")
