"""`python -m fp8q inspect PATH`: a checkpoint's layout, its tensors by
dtype and role with their bytes, and what fp8q.torch.load_checkpoint would
do with each layer. Needs no torch."""
import sys

from fp8q._checkpoint._detect import DESCRIPTIONS, plan_checkpoint
from fp8q._checkpoint._plan import CheckpointError, layer_counts, nbytes
from fp8q._checkpoint._source import open_checkpoint


def _roles(plan, entries):
    """{key: role} for every tensor of the checkpoint."""
    roles = dict.fromkeys(plan.float_keys, "float")
    roles.update(dict.fromkeys(plan.ignored_keys, "marker / unused"))
    for layer in plan.layers.values():
        roles.update(dict.fromkeys(layer.keys, "marker / unused"))
        roles[layer.weight_key] = "FP8 weight"
        if layer.scale_key is not None:
            roles[layer.scale_key] = "weight scale"
        if layer.input_scale_key is not None:
            roles[layer.input_scale_key] = "input scale"
    return roles


def print_inspection(path, stream=sys.stdout):
    """Prints the report of `path` (file or folder); CheckpointError or
    ValueError (a malformed file) for what cannot be read."""
    with open_checkpoint(path) as checkpoint:
        entries = checkpoint.entries
        plan = plan_checkpoint(checkpoint)
    print(f"{path}: layout {plan.layout} ({DESCRIPTIONS[plan.layout]})",
          file=stream)
    for note in plan.notes:
        print(f"  note: {note}", file=stream)
    groups = {}
    for key, role in _roles(plan, entries).items():
        group = groups.setdefault((role, entries[key][0]), [0, 0])
        group[0] += 1
        group[1] += nbytes(entries, key)
    print("\n| role | dtype | tensors | bytes |\n|---|---|---:|---:|",
          file=stream)
    for (role, code), (count, size) in sorted(groups.items()):
        print(f"| {role} | {code} | {count} | {size:,} |", file=stream)
    total = sum(size for _, size in groups.values())
    print(f"| all | | {len(entries)} | {total:,} |", file=stream)
    print("\nload_checkpoint would make these fp8q.torch.Linear layers "
          "(the other tensors load as float):", file=stream)
    for (format_name, granularity, scheme), count in layer_counts(
            plan.layers.values()).items():
        print(f"  {count} x {format_name}, {granularity} scales, {scheme}",
              file=stream)
    print("\n| layer | shape | format | scales | activations |\n"
          "|---|---|---|---|---|", file=stream)
    for name, layer in plan.layers.items():
        print(f"| {name} | {layer.shape[0]}x{layer.shape[1]} | "
              f"{layer.format} | {layer.granularity} | {layer.scheme} |",
              file=stream)


def main(arguments):
    """Runs inspect; returns the exit status (2 with one line on stderr for
    a checkpoint it cannot read)."""
    try:
        print_inspection(arguments.path)
    except BrokenPipeError:  # the reader went away: not the checkpoint's
        raise
    except (CheckpointError, ValueError, OSError) as error:
        print(f"fp8q inspect: error: {error}", file=sys.stderr)
        return 2
    return 0
