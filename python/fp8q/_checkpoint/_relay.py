"""`python -m fp8q convert` for FP8 layouts that are not vLLM's: ComfyUI
scaled fp8 and comfy_quant, plain FP8 and optimum-quanto checkpoints are
re-laid into the vLLM / compressed-tensors layout without touching the
codes: `<layer>.weight` the FP8 codes as they are, `<layer>.weight_scale`
float32 in fp8q's scale shape (exact from float16/bfloat16; 1 where the
checkpoint has none; `weight_scale_inv` for block scales with --format
vllm), `<layer>.input_scale` float32 () for static activations; the float
tensors byte for byte, except FP8 tensors of no layer (a plain-FP8
checkpoint's norms and biases), written as float16 holding their exact
values (an FP8 tensor without a scale is not of the output's layout);
layout markers and unused scales dropped. RelaidCheckpoint presents the
result as convert reads a file, so its float tensors convert as any FP8
input's do (--quantize-float, --granularity, --all-2d, --exclude)."""
import numpy as np

import fp8q
from fp8q._checkpoint._detect import detect, plan_checkpoint
from fp8q._checkpoint._plan import FP8_CODES, CheckpointError, nbytes
from fp8q._safetensors import DTYPES

# Layouts convert re-lays; compressed-tensors and FineGrainedFP8 are vLLM's
# own and go through convert's usual path (FP8 tensors and scales copied).
RELAID = ("comfyui-scaled-fp8", "comfyui-quant", "plain-fp8",
          "optimum-quanto")
CODES = {"float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2"}
# Metadata describing the input layout, not true of the output.
DROPPED_METADATA = ("_quantization_metadata",)


def relaid_layout(checkpoint):
    """The checkpoint's layout when convert re-lays it, else None."""
    layout = detect(checkpoint)
    return layout if layout in RELAID else None


def _float32_scale(checkpoint, key, shape):
    if key is None:
        return np.ones(shape, np.float32)
    code = checkpoint.entries[key][0]
    raw = checkpoint.array(key)
    if code == "BF16":  # the bits of the float32 with the same value
        values = (raw.astype(np.uint32) << 16).view(np.float32)
    else:
        values = raw.astype(np.float32)
    return values.reshape(shape)


def _exact_float16(checkpoint, key):
    """The FP8 tensor `key` as float16, which holds every float8_e4m3fn
    and float8_e5m2 value exactly (NaN and infinities included)."""
    code, shape = checkpoint.entries[key]
    codes = fp8q.asarray(np.ascontiguousarray(checkpoint.array(key))
                         .reshape(-1)).view(FP8_CODES[code])
    return fp8q.cast(codes, "float16").numpy().reshape(shape)


def relay_tensors(checkpoint, scale_name):
    """(tensors for write_safetensors, summary rows (name, bytes before,
    bytes after, 0.0), the input's Plan, the keys of FP8 tensors of no
    layer written as float16) of the re-laid checkpoint;
    scale_name(weight name, granularity) names the weight's scale.
    CheckpointError naming the key for anything the layout's reader
    refuses, or for two output tensors of one name."""
    plan = plan_checkpoint(checkpoint)
    by_weight = {layer.weight_key: layer for layer in plan.layers.values()}
    consumed = {key for layer in plan.layers.values() for key in layer.keys}
    consumed.update(plan.ignored_keys)
    tensors, rows, upcast = [], [], []
    for key, (code, shape) in checkpoint.entries.items():
        layer = by_weight.get(key)
        if layer is None:
            if key in consumed:
                continue
            if code in FP8_CODES:
                upcast.append(key)
                tensors.append((key, "F16", shape, lambda key=key:
                                _exact_float16(checkpoint, key)))
            else:
                tensors.append((key, code, shape,
                                lambda key=key: checkpoint.array(key)))
            continue
        out, features = layer.shape
        scale_shape = {"tensor": (), "row": (out, 1),
                       "block": (-(-out // 128), -(-features // 128))
                       }[layer.granularity]
        weight = layer.name + ".weight"
        tensors.append((weight, CODES[layer.format], layer.shape,
                        lambda key=key: checkpoint.array(key)))
        tensors.append((scale_name(weight, layer.granularity), "F32",
                        scale_shape,
                        lambda layer=layer, shape=scale_shape:
                        _float32_scale(checkpoint, layer.scale_key, shape)))
        if layer.input_scale_key is not None:
            tensors.append((layer.name + ".input_scale", "F32", (),
                            lambda layer=layer: _float32_scale(
                                checkpoint, layer.input_scale_key, ())))
        before = sum(nbytes(checkpoint.entries, used) for used in layer.keys)
        after = (out * features + 4 * int(np.prod(scale_shape))
                 + (4 if layer.input_scale_key else 0))
        rows.append((weight, before, after, 0.0))
    names = [name for name, *_ in tensors]
    if len(set(names)) != len(names):
        clash = next(name for name in names if names.count(name) > 1)
        raise CheckpointError(f"{clash}: the re-laid checkpoint would hold "
                              "two tensors of this name")
    return tensors, rows, plan, upcast


def output_metadata(checkpoint, layout, output_format):
    """The input's metadata less what described its layout, plus fp8q's."""
    metadata = {key: value for key, value in checkpoint.metadata.items()
                if key not in DROPPED_METADATA}
    metadata.update({"fp8q_version": fp8q.__version__,
                     "fp8q_format": output_format,
                     "fp8q_source_layout": layout})
    return metadata


class RelaidCheckpoint:
    """An open checkpoint re-laid by relay_tensors, read as convert reads a
    SafetensorsReader: path, entries ({name: (dtype code, shape)} of the
    re-laid tensors) and metadata (output_metadata); tensor(name), the
    array written for it (produced from the input when asked);
    fp8q_tensor(name), a float tensor as fp8q's dtype; rows and upcast,
    relay_tensors' summary rows and float16 keys; granularities, {re-laid
    weight name: its scale's granularity}; close() closes the input.
    CheckpointError as relay_tensors."""

    def __init__(self, checkpoint, scale_name, output_format):
        tensors, self.rows, plan, self.upcast = relay_tensors(
            checkpoint, scale_name)
        layout = plan.layout
        self.granularities = {layer.name + ".weight": layer.granularity
                              for layer in plan.layers.values()}
        self._checkpoint = checkpoint
        self.path = checkpoint.path
        self.entries = {name: (code, tuple(shape))
                        for name, code, shape, _ in tensors}
        self._produce = {name: produce for name, _, _, produce in tensors}
        self.metadata = output_metadata(checkpoint, layout, output_format)

    def tensor(self, name):
        return self._produce[name]()

    def fp8q_tensor(self, name):
        code, shape = self.entries[name]
        raw = np.ascontiguousarray(self.tensor(name)).reshape(-1)
        return fp8q.asarray(raw.view(np.uint8)).view(
            DTYPES[code][1]).reshape(shape)

    def close(self):
        self._checkpoint.close()
