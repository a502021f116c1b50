"""Peak resident memory of fp8q.torch.load_checkpoint on a synthesized FP8
checkpoint (docs/benchmarks.md, "Loading FP8 checkpoints").

    python docs/examples/checkpoint_memory.py write DIR [--layers 128]
        [--hidden 4096]
    python docs/examples/checkpoint_memory.py load DIR

write: DIR/model.safetensors in the compressed-tensors layout, written one
tensor at a time: `layers.N.proj.weight` (H x H float8_e4m3fn codes, H =
--hidden) with its per-row float32 `weight_scale`, `layers.N.norm.weight`
(bfloat16) and a bfloat16 `embed.weight` (32000 x H); 128 layers of 4096
make 2.4 GB.
load: builds the matching model on the meta device (no memory), loads the
checkpoint and prints the checkpoint's bytes, the float tensors' bytes,
the resident memory before loading and the process's peak (getrusage),
and the growth's ratio to the checkpoint; exit status 1 when the growth
exceeds 1.25 x the checkpoint + the float tensors.
"""
import argparse
import os
import resource
import sys

import numpy as np

VOCAB = 32000


def write(folder, layers, hidden):
    from fp8q._safetensors import write_safetensors

    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    tensors = [("embed.weight", "BF16", (VOCAB, hidden),
                lambda: rng.integers(0x3c00, 0x3c80, (VOCAB, hidden),
                                     dtype=np.uint16))]
    for index in range(layers):
        prefix = f"layers.{index}."
        tensors += [
            (prefix + "norm.weight", "BF16", (hidden,),
             lambda: np.full(hidden, 0x3f80, np.uint16)),
            # e4m3fn codes of magnitude below 448 (no NaN).
            (prefix + "proj.weight", "F8_E4M3", (hidden, hidden),
             lambda: rng.integers(0, 0x7e, (hidden, hidden), dtype=np.uint8)
             | (rng.integers(0, 2, (hidden, hidden), dtype=np.uint8) << 7)),
            (prefix + "proj.weight_scale", "F32", (hidden, 1),
             lambda: np.full((hidden, 1), 1e-3, np.float32)),
        ]
    with open(os.path.join(folder, "model.safetensors"), "wb") as file:
        write_safetensors(file, tensors, {})


def model_for(layers, hidden):
    import torch

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(hidden, bias=False)
            self.proj = torch.nn.Linear(hidden, hidden, bias=False)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(VOCAB, hidden)
            self.layers = torch.nn.ModuleList(Layer() for _ in range(layers))

    with torch.device("meta"):
        return Model().to(torch.bfloat16)


def resident_bytes():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def load(folder):
    import torch

    import fp8q.torch

    path = os.path.join(folder, "model.safetensors")
    from fp8q._safetensors import SafetensorsReader

    reader = SafetensorsReader(path)
    layers = sum(name.endswith("proj.weight") for name in reader.entries)
    hidden = reader.entries["embed.weight"][1][1]
    reader.close()
    model = model_for(layers, hidden)
    torch.zeros(1) + 1  # torch's first-op allocations, before the baseline
    before = resident_bytes()
    report = fp8q.torch.load_checkpoint(model, path)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    after = resident_bytes()
    size = os.path.getsize(path)
    print(report)
    print(f"checkpoint {size:,} bytes; float tensors {report.float_bytes:,} "
          f"bytes; FP8 layers {report.fp8_bytes:,} bytes")
    print(f"resident before loading {before:,}, after {after:,}, "
          f"peak {peak:,} bytes")
    growth = peak - before
    bound = 1.25 * size + report.float_bytes
    print(f"peak growth while loading {growth:,} bytes = "
          f"{growth / size:.3f} x the checkpoint; bound 1.25 x checkpoint "
          f"+ float tensors = {bound:,.0f} bytes")
    return 0 if growth <= bound else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["write", "load"])
    parser.add_argument("folder")
    parser.add_argument("--layers", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=4096)
    arguments = parser.parse_args()
    if arguments.command == "write":
        write(arguments.folder, arguments.layers, arguments.hidden)
        return 0
    return load(arguments.folder)


if __name__ == "__main__":
    sys.exit(main())
