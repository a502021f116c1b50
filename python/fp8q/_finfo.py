"""fp8q.finfo: the exact numeric limits of fp8q's floating-point dtypes.

The values come from fp8q._C (csrc/core/dtype.c) and follow the OCP OFP8
specification for the FP8 formats (the fnuz variants have exponent bias + 1,
no infinity and no negative zero) and IEEE 754 / bfloat16 for the others.
"""
from fp8q import _C


class finfo:  # noqa: N801 - named like numpy.finfo
    """Machine limits of a floating-point fp8q dtype.

    finfo(dtype) accepts everything a dtype= argument accepts ("e4m3",
    fp8q.float8_e5m2, ml_dtypes or torch dtypes, ...). uint8 has no finfo.

    Attributes (all exact): bits, exponent_bits, mantissa_bits (explicit
    fraction bits), exponent_bias, max (largest finite value), min (-max),
    tiny and smallest_normal (smallest positive normal), smallest_subnormal,
    eps (the gap between 1.0 and the next value), has_infinity,
    has_negative_zero, dtype (the fp8q.dtype).
    """

    __slots__ = ("bits", "exponent_bits", "mantissa_bits", "exponent_bias",
                 "max", "min", "tiny", "smallest_normal",
                 "smallest_subnormal", "eps", "has_infinity",
                 "has_negative_zero", "dtype")

    def __init__(self, dtype):
        info = _C._finfo(dtype)
        self.bits = info["bits"]
        self.exponent_bits = info["exponent_bits"]
        self.mantissa_bits = info["mantissa_bits"]
        self.exponent_bias = info["exponent_bias"]
        self.max = info["max"]
        self.min = -info["max"]
        self.tiny = info["tiny"]
        self.smallest_normal = info["tiny"]
        self.smallest_subnormal = info["smallest_subnormal"]
        self.eps = info["eps"]
        self.has_infinity = bool(info["has_infinity"])
        self.has_negative_zero = bool(info["has_negative_zero"])
        self.dtype = _C.dtype(info["dtype"])

    def __repr__(self):
        return (f"fp8q.finfo(dtype={self.dtype}, bits={self.bits}, "
                f"max={self.max!r}, tiny={self.tiny!r}, "
                f"smallest_subnormal={self.smallest_subnormal!r}, "
                f"eps={self.eps!r})")
