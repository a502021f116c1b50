"""fp8q.dtype: the eight singletons, their attributes, equality and hashing,
the parsing matrix of dtype= arguments (names, aliases, NumPy, ml_dtypes and
torch dtypes) with its errors, and fp8q._C._finfo.
"""
import pickle

import ml_dtypes
import numpy as np
import pytest

import fp8q

NAMES = ["float32", "float16", "bfloat16", "uint8", "float8_e4m3fn",
         "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"]
ITEMSIZES = {"float32": 4, "float16": 2, "bfloat16": 2, "uint8": 1}
FP8_NAMES = NAMES[4:]


@pytest.mark.parametrize("name", NAMES)
def test_singleton_attributes(name):
    dt = getattr(fp8q, name)
    assert isinstance(dt, fp8q.dtype)
    assert str(dt) == name
    assert dt.name == name
    assert repr(dt) == f"fp8q.{name}"
    assert dt.itemsize == ITEMSIZES.get(name, 1)
    assert dt.is_fp8 == (name in FP8_NAMES)
    assert dt.is_floating_point == (name != "uint8")
    assert fp8q.dtype(name) is dt
    assert fp8q.dtype(dt) is dt
    assert pickle.loads(pickle.dumps(dt)) is dt


def test_equality_and_hash():
    assert fp8q.float32 == fp8q.float32
    assert fp8q.float32 != fp8q.float16
    assert fp8q.float8_e4m3fn == "float8_e4m3fn"
    assert fp8q.float8_e4m3fn == "e4m3"
    assert "bf16" == fp8q.bfloat16
    assert fp8q.float16 == np.float16
    assert fp8q.float32 == np.dtype("float32")
    assert fp8q.float8_e5m2 == ml_dtypes.float8_e5m2
    assert fp8q.float32 != "float64"
    assert fp8q.float32 != "no such dtype"
    assert fp8q.float32 != None  # noqa: E711 - equality, not identity
    assert fp8q.float32 != 4
    assert len({fp8q.dtype(name) for name in NAMES}) == 8
    for name in NAMES:
        assert hash(fp8q.dtype(name)) == hash(name)
    assert {fp8q.float16: 1}[fp8q.dtype("half")] == 1


def test_not_subclassable_and_no_ordering():
    with pytest.raises(TypeError):
        type("Sub", (fp8q.dtype,), {})
    with pytest.raises(TypeError):
        fp8q.float32 < fp8q.float16  # noqa: B015


ALIASES = [
    ("e4m3", "float8_e4m3fn"), ("e5m2", "float8_e5m2"),
    ("bf16", "bfloat16"), ("fp16", "float16"), ("half", "float16"),
    ("fp32", "float32"), ("e4m3fnuz", "float8_e4m3fnuz"),
    ("e5m2fnuz", "float8_e5m2fnuz"),
]


@pytest.mark.parametrize("alias,name", ALIASES)
def test_aliases(alias, name):
    assert fp8q.dtype(alias) is getattr(fp8q, name)


NUMPY_SPELLINGS = [
    (np.float32, "float32"), (np.dtype("float32"), "float32"),
    ("f4", "float32"), ("<f4" if np.little_endian else ">f4", "float32"),
    ("=f4", "float32"), ("f", "float32"),
    (np.float16, "float16"), (np.dtype("e"), "float16"), ("f2", "float16"),
    (np.uint8, "uint8"), ("u1", "uint8"), ("B", "uint8"),
    (np.dtype(np.uint8), "uint8"),
]


@pytest.mark.parametrize("spelling,name", NUMPY_SPELLINGS,
                         ids=[repr(s) for s, _ in NUMPY_SPELLINGS])
def test_numpy_spellings(spelling, name):
    assert fp8q.dtype(spelling) is getattr(fp8q, name)


@pytest.mark.parametrize("name", ["bfloat16"] + FP8_NAMES)
def test_ml_dtypes(name):
    scalar_type = getattr(ml_dtypes, name)
    assert fp8q.dtype(scalar_type) is getattr(fp8q, name)
    assert fp8q.dtype(np.dtype(scalar_type)) is getattr(fp8q, name)


TORCH_DTYPES = [
    ("float32", "float32"), ("float", "float32"),
    ("float16", "float16"), ("half", "float16"),
    ("bfloat16", "bfloat16"), ("uint8", "uint8"),
    ("float8_e4m3fn", "float8_e4m3fn"), ("float8_e5m2", "float8_e5m2"),
    ("float8_e4m3fnuz", "float8_e4m3fnuz"),
    ("float8_e5m2fnuz", "float8_e5m2fnuz"),
]


@pytest.mark.parametrize("torch_name,name", TORCH_DTYPES,
                         ids=[f"torch.{t}" for t, _ in TORCH_DTYPES])
def test_torch_dtypes(torch_name, name):
    """torch dtypes by object (where torch is installed) and by str()."""
    assert fp8q.dtype(f"torch.{name}") is getattr(fp8q, name)
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    torch_dtype = getattr(torch, torch_name)
    assert fp8q.dtype(torch_dtype) is getattr(fp8q, name)
    assert fp8q.dtype(str(torch_dtype)) is getattr(fp8q, name)
    assert getattr(fp8q, name) == torch_dtype


@pytest.mark.parametrize("torch_name", ["float64", "int8"])
def test_unsupported_torch_dtypes(torch_name):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    with pytest.raises(TypeError, match=f"torch.{torch_name}"):
        fp8q.dtype(getattr(torch, torch_name))


UNSUPPORTED = [
    "float64", "int32", "float8", "E4M3", "", "torch.float64", np.float64,
    np.dtype("int8"), np.dtype(">f4" if np.little_endian else "<f4"),
    np.complex64, ml_dtypes.int4,
    ml_dtypes.float8_e8m0fnu, None, 3, 1.5, float, int, object(), [np.float32],
    fp8q.asarray([1.0]),
]


@pytest.mark.parametrize("value", UNSUPPORTED,
                         ids=["object()" if type(v) is object else repr(v)[:40]
                              for v in UNSUPPORTED])
def test_unsupported_dtypes_raise_type_error(value):
    with pytest.raises(TypeError) as info:
        fp8q.dtype(value)
    message = str(info.value)
    assert message.startswith("dtype: "), message
    assert "float8_e4m3fn" in message  # says what is expected
    assert repr(value)[:20] in message or type(value).__name__ in message


def test_dtype_argument_errors_name_the_argument():
    with pytest.raises(TypeError, match=r"^dtype: .*got 'float64' \(str\)"):
        fp8q.asarray([1.0], dtype="float64")
    with pytest.raises(TypeError, match=r"^dtype: .*'torch\.int32'"):
        fp8q.empty((2,), dtype="torch.int32")
    with pytest.raises(TypeError, match=r"^dtype: "):
        fp8q.from_dlpack(np.zeros(2, np.uint8), dtype="int8")


def test_constructor_arguments():
    with pytest.raises(TypeError):
        fp8q.dtype()
    with pytest.raises(TypeError):
        fp8q.dtype("float32", "float16")
    with pytest.raises(TypeError):
        fp8q.dtype(dtype="float32")


FINFO = {
    # name: bits, exponent bits, mantissa bits, bias, max, tiny,
    #       smallest subnormal, eps, has inf, has -0
    "float8_e4m3fn": (8, 4, 3, 7, 448.0, 2.0**-6, 2.0**-9, 2.0**-3,
                      False, True),
    "float8_e5m2": (8, 5, 2, 15, 57344.0, 2.0**-14, 2.0**-16, 2.0**-2,
                    True, True),
    "float8_e4m3fnuz": (8, 4, 3, 8, 240.0, 2.0**-7, 2.0**-10, 2.0**-3,
                        False, False),
    "float8_e5m2fnuz": (8, 5, 2, 16, 57344.0, 2.0**-15, 2.0**-17, 2.0**-2,
                        False, False),
    "bfloat16": (16, 8, 7, 127, float(ml_dtypes.finfo(ml_dtypes.bfloat16).max),
                 2.0**-126, 2.0**-133, 2.0**-7, True, True),
    "float16": (16, 5, 10, 15, 65504.0, 2.0**-14, 2.0**-24, 2.0**-10,
                True, True),
    "float32": (32, 8, 23, 127, float(np.finfo(np.float32).max), 2.0**-126,
                2.0**-149, 2.0**-23, True, True),
}


@pytest.mark.parametrize("name", sorted(FINFO))
def test_finfo_dict(name):
    info = fp8q._C._finfo(name)
    keys = ["bits", "exponent_bits", "mantissa_bits", "exponent_bias", "max",
            "tiny", "smallest_subnormal", "eps", "has_infinity",
            "has_negative_zero"]
    assert set(info) == set(keys) | {"dtype"}
    assert info["dtype"] is fp8q.dtype(name)
    assert tuple(info[key] for key in keys) == FINFO[name]
    for key in keys[:4]:
        assert type(info[key]) is int
    for key in keys[4:8]:
        assert type(info[key]) is float
    for key in keys[8:]:
        assert type(info[key]) is bool
    if name != "float32" and name != "float16":
        reference = ml_dtypes.finfo(getattr(ml_dtypes, name))
        assert info["max"] == float(reference.max)
        assert info["tiny"] == float(reference.tiny)
        assert info["smallest_subnormal"] == float(
            reference.smallest_subnormal)
        assert info["eps"] == float(reference.eps)


def test_finfo_errors():
    with pytest.raises(TypeError, match="uint8"):
        fp8q._C._finfo("uint8")
    with pytest.raises(TypeError, match="^dtype: "):
        fp8q._C._finfo("float64")
