"""fp8q.torch.quanto_compat.nn: the quantized modules, where
optimum.quanto.nn has them (from optimum.quanto.nn import QLinear)."""
from fp8q.torch.quanto_compat._qlinear import QLinear, QModuleMixin

__all__ = ["QLinear", "QModuleMixin"]
