"""The report fp8q.torch.load_checkpoint returns: the layout, the layers
loaded as FP8 (by format, granularity and activation scheme), the tensors
kept in float, and bytes."""
from dataclasses import dataclass, field

from fp8q._checkpoint._detect import DESCRIPTIONS
from fp8q._checkpoint._plan import layer_counts


@dataclass
class CheckpointReport:
    """layout: the detected layout's name (docs/checkpoints.md).
    fp8_layers: {module name: LayerPlan} of the layers now fp8q.torch.Linear
    (LayerPlan.format, .granularity, .scheme say how).
    float_linear_layers: the model's linear layers the checkpoint keeps in
    float (e.g. lm_head), by name.
    float_keys: the checkpoint keys loaded into float tensors as they are.
    dequantized_keys: FP8 tensors of modules that are not nn.Linear, loaded
    into their float tensors as codes x scale (exact for a scale of 1).
    unexpected_keys / missing_keys: what strict=False let through.
    fp8_bytes / float_bytes: the checkpoint's bytes of FP8 layers (codes and
    scales) and of everything else loaded.
    notes: what the layout reader assumed.
    rebuilt_keys: non-persistent buffers of a meta-device model (not in any
    checkpoint) rebuilt on the CPU by the model's own initialisation.
    meta_keys: the model's tensors left on the meta device (strict=False
    only; strict=True refuses them): set them before the first forward."""
    layout: str
    fp8_layers: dict
    float_linear_layers: list
    float_keys: list
    dequantized_keys: list
    unexpected_keys: list
    missing_keys: list
    fp8_bytes: int
    float_bytes: int
    notes: list = field(default_factory=list)
    rebuilt_keys: list = field(default_factory=list)
    meta_keys: list = field(default_factory=list)

    def counts(self):
        """{(format, granularity, scheme): number of FP8 layers}."""
        return layer_counts(self.fp8_layers.values())

    def __str__(self):
        lines = [f"layout: {self.layout} ({DESCRIPTIONS[self.layout]})"]
        lines += [f"  note: {note}" for note in self.notes]
        lines.append(f"FP8 layers: {len(self.fp8_layers)} "
                     f"({self.fp8_bytes:,} bytes)")
        lines += [f"  {count} x {format_name}, {granularity} scales, "
                  f"{scheme}"
                  for (format_name, granularity, scheme), count
                  in self.counts().items()]
        lines.append(f"float tensors: {len(self.float_keys)} "
                     f"({self.float_bytes:,} bytes)")
        for label, keys in (("linear layers kept in float",
                             self.float_linear_layers),
                            ("dequantized into float", self.dequantized_keys),
                            ("unexpected (not loaded)", self.unexpected_keys),
                            ("missing (left as they were)",
                             self.missing_keys),
                            ("rebuilt (non-persistent buffers)",
                             self.rebuilt_keys),
                            ("LEFT ON THE META DEVICE (set them before a "
                             "forward)", self.meta_keys)):
            if keys:
                lines.append(f"{label}: {len(keys)}: "
                             f"{', '.join(keys[:5])}"
                             f"{', ...' if len(keys) > 5 else ''}")
        return "\n".join(lines)
