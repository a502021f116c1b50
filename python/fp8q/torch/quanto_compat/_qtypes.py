"""quanto_compat's qtype objects: every qtype optimum-quanto 0.2.7 names,
with its fields, and the one place that turns a qtype (or its name) into
fp8q's FP8 format or refuses it, naming what fp8q supports."""
import dataclasses

import torch

from fp8q.torch._linear import FORMATS

# What to say whenever a qtype fp8q's layers cannot use is asked for.
SUPPORTED = ("fp8q supports the FP8 qtypes qfloat8 (= qfloat8_e4m3fn) and "
             "qfloat8_e5m2")


@dataclasses.dataclass(slots=True, eq=False, repr=False)
class qtype:  # noqa: N801 (quanto's spelling)
    """A quantization type as optimum-quanto describes one: `name`,
    `is_floating_point`, `bits`, `dtype` (the torch storage dtype), `qmin`
    and `qmax` (the smallest and largest representable values: finfo
    min/max for FP8, -2**(bits-1) and 2**(bits-1) - 1 for integers).
    Compared by value; str() is "quanto.<name>", as quanto prints it.
    Whether fp8q's layers accept one: see `fp8q_format`."""

    name: str
    is_floating_point: bool
    bits: int
    dtype: torch.dtype
    qmin: float
    qmax: float

    def _fields(self):
        return tuple(getattr(self, field) for field in self.__slots__)

    def __eq__(self, other):
        return isinstance(other, qtype) and self._fields() == other._fields()

    def __hash__(self):
        return hash(str(self))

    def __str__(self):
        return f"quanto.{self.name}"

    def __reduce__(self):
        """This module's qtypes pickle and copy as themselves (a copied
        model's layer holds the same object, as in quanto); another qtype
        as its fields."""
        if qtypes.get(self.name) is self:
            return self.name
        return (qtype, self._fields())

    def __repr__(self):
        return (f"qtype(name={self.name!r}, is_floating_point="
                f"{self.is_floating_point}, bits={self.bits}, dtype="
                f"{self.dtype}, qmin={self.qmin}, qmax={self.qmax})")

    @property
    def fp8q_format(self):
        """fp8q's name of this FP8 format ("float8_e4m3fn" or
        "float8_e5m2"), or None where fp8q's layers do not store it (the
        integer qtypes and qfloat8_e4m3fnuz)."""
        name = str(self.dtype).removeprefix("torch.")
        return name if name in FORMATS else None


def _float_qtype(dtype):
    finfo = torch.finfo(dtype)
    return qtype(f"q{str(dtype).removeprefix('torch.')}", True, 8, dtype,
                 finfo.min, finfo.max)


def _int_qtype(bits):
    return qtype(f"qint{bits}", False, bits, torch.int8, -2 ** (bits - 1),
                 2 ** (bits - 1) - 1)


qint2 = _int_qtype(2)
qint4 = _int_qtype(4)
qint8 = _int_qtype(8)
qfloat8_e4m3fn = _float_qtype(torch.float8_e4m3fn)
qfloat8_e4m3fnuz = _float_qtype(torch.float8_e4m3fnuz)
qfloat8_e5m2 = _float_qtype(torch.float8_e5m2)
qfloat8 = qfloat8_e4m3fn

# Name -> qtype, as optimum.quanto.qtypes (qfloat8 included).
qtypes = {"qint2": qint2, "qint4": qint4, "qint8": qint8,
          "qfloat8_e4m3fn": qfloat8_e4m3fn,
          "qfloat8_e4m3fnuz": qfloat8_e4m3fnuz,
          "qfloat8_e5m2": qfloat8_e5m2, "qfloat8": qfloat8}


def resolve(value, argument):
    """The qtype for a qtype, its name or None (None stays None).
    ValueError naming `argument` for anything else."""
    if value is None or isinstance(value, qtype):
        return value
    if isinstance(value, str) and value in qtypes:
        return qtypes[value]
    raise ValueError(f"{argument}: expected a qtype or one of "
                     f"{sorted(qtypes)}, got {value!r}")


def fp8_format(value, argument):
    """fp8q's FP8 format name for an FP8 qtype fp8q stores (or its name);
    ValueError naming `argument` and what fp8q supports for None, the
    integer qtypes and qfloat8_e4m3fnuz."""
    resolved = resolve(value, argument)
    if resolved is None or resolved.fp8q_format is None:
        why = ("" if resolved is None or resolved.is_floating_point
               else "; integer qtypes need optimum-quanto itself")
        got = resolved.name if resolved is not None else None
        raise ValueError(f"{argument}: {SUPPORTED}, got {got}{why}")
    return resolved.fp8q_format
