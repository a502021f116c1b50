"""fp8q.QTensor: FP8 data with the float32 scales that dequantize it.

A QTensor is what fp8q.quantize returns. It holds two fp8q.Tensor objects and
the granularity that relates them; all arithmetic happens in fp8q._C.
"""
import operator

from fp8q import _C


def normalize_granularity(granularity):
    """Returns "tensor" / "row" / "col" as given, or a block pair as a tuple
    of two Python ints."""
    if isinstance(granularity, str):
        return granularity
    return tuple(operator.index(extent) for extent in granularity)


def read_only(attribute, doc):
    """Returns a read-only property whose value is the instance's
    `attribute` (a dotted path reaches further, e.g. "_data.dtype") and
    whose docstring is `doc`."""
    return property(operator.attrgetter(attribute), doc=doc)


class QTensor:
    """Quantized tensor: x ~= decode(data) * scale, per granularity group.

    Attributes:
        data: fp8q.Tensor of an FP8 dtype, the shape of the original x.
        scale: float32 fp8q.Tensor of the granularity's scale shape.
        granularity: "tensor", "row", "col" or a (block_rows, block_cols)
            tuple (see fp8q.quantize for the scale shapes).
        dtype: the FP8 dtype of data.
        shape: the shape of data.
        transposed: None, or a C-contiguous copy of data.T (2-D data; from
            fp8q.quantize(..., transpose=True)), e.g. for the column-major
            operand of an FP8 GEMM.
    """

    __slots__ = ("_data", "_scale", "_granularity", "_transposed")

    def __init__(self, data, scale, granularity, transposed=None):
        if not isinstance(data, _C.Tensor) or not isinstance(scale, _C.Tensor):
            raise TypeError(
                "QTensor: data and scale must be fp8q.Tensor objects, got "
                f"{type(data).__name__} and {type(scale).__name__}")
        if transposed is not None and (
                not isinstance(transposed, _C.Tensor)
                or transposed.shape != tuple(reversed(data.shape))
                or transposed.dtype != data.dtype):
            raise ValueError("QTensor: transposed must be None or an "
                             "fp8q.Tensor of data's dtype and reversed shape")
        self._data = data
        self._scale = scale
        self._granularity = normalize_granularity(granularity)
        self._transposed = transposed

    data = read_only("_data", "The FP8 codes, an fp8q.Tensor of x's shape.")
    scale = read_only(
        "_scale", "The float32 dequantization scales (x ~= data * scale).")
    transposed = read_only(
        "_transposed", "None, or data.T as a C-contiguous fp8q.Tensor.")
    granularity = read_only(
        "_granularity",
        '"tensor", "row", "col" or a (block_rows, block_cols) tuple.')
    dtype = read_only("_data.dtype", "The FP8 dtype of data.")
    shape = read_only("_data.shape",
                      "The shape of data (and of the original x).")
    device = read_only("_data.device",
                       'Where data and scale live: "cpu" or "cuda:N".')

    def dequantize(self, dtype="float32", *, stream=None):
        """Returns float32(data) * scale, rounded once into dtype (float32,
        float16 or bfloat16), as a new fp8q.Tensor of self.shape on
        self.device (on a GPU: computed there, on `stream`, as fp8q.cast
        takes it)."""
        return _C._dequantize(self._data, self._scale, self._granularity,
                              dtype, stream=stream)

    def to(self, device, *, stream=None):
        """This QTensor with data and scale on `device` (itself when they
        are there already); see fp8q.Tensor.to."""
        if self._data.device == str(device):
            return self
        transposed = (None if self._transposed is None
                      else self._transposed.to(device, stream=stream))
        return QTensor(self._data.to(device, stream=stream),
                       self._scale.to(device, stream=stream),
                       self._granularity, transposed)

    def __repr__(self):
        device = "" if self.device == "cpu" else f", device={self.device!r}"
        return (f"fp8q.QTensor(shape={self.shape}, dtype={self.dtype}, "
                f"granularity={self._granularity!r}, "
                f"scale_shape={self._scale.shape}{device})")
