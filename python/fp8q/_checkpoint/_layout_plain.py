"""Plain FP8 checkpoints with no scales (e.g. kijai's fp8_e4m3fn /
fp8_e5m2 files): each 2-D FP8 `<layer>.weight` is a layer with a scale of
1; any other FP8 tensor is a float tensor stored in FP8 (cast exactly into
the model's dtype)."""
from fp8q._checkpoint._plan import FP8_CODES, finish, layer


def plan(checkpoint):
    entries = checkpoint.entries
    layers = [layer(entries, key[:-len(".weight")], key, None)
              for key, (code, shape) in entries.items()
              if code in FP8_CODES and len(shape) == 2
              and key.endswith(".weight")]
    return finish("plain-fp8", entries, layers,
                  notes=["no scales: every FP8 weight has a scale of 1"])
