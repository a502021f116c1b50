"""`python -m fp8q convert IN.safetensors OUT.safetensors`: FP8 weights with
float32 scales for the Linear weights of a checkpoint (what
fp8q.torch.quantize quantizes; with --all-2d, every 2-D float tensor),
streaming tensor by tensor; everything else is copied unchanged.

Output names: NAME keeps the FP8 codes (F8_E4M3); its scale is NAME +
"_scale" (X.weight -> X.weight_scale) or, for --format vllm with block
scales, NAME + "_scale_inv", the name vLLM reads for 128x128 block scales;
both are dequantization scales, x ~= q * scale (the new scales of an FP8
input take its own names instead, INPUT_SCALE_NAMES: one layout per
file). Tensors that are scales already (names ending in "_scale" or
"_scale_inv") and FP8 tensors are copied unchanged, so converting a
converted checkpoint changes nothing.
FP8 checkpoints in layouts vLLM does not read (ComfyUI scaled fp8 and
comfy_quant, plain FP8, optimum-quanto) are re-laid into its layout instead,
codes untouched (fp8q._checkpoint._relay), and then read as an FP8 input;
docs/checkpoints.md. The float tensors of an FP8 input (compressed-tensors'
ignored lm_head, say) were left in float by its writer: they are copied as
they are unless --quantize-float asks, and the input's config files
(config.json, hf_quant_config.json) are written beside the output while
they still describe it.
The file is written to a temporary name beside OUT and renamed at the end;
a failure, SIGINT or SIGTERM removes it. docs/torch.md describes the layout.
"""
import contextlib
import fnmatch
import os
import re
import shlex
import shutil
import signal
import sys
import uuid

import numpy as np

import fp8q
from fp8q._atomic_file import atomic_file
from fp8q._checkpoint import CheckpointError, open_checkpoint
from fp8q._checkpoint._detect import detect
from fp8q._checkpoint._layout_compressed import FP8Q_METADATA_KEY
from fp8q._checkpoint._plan import FP8_CODES, granularity_of
from fp8q._checkpoint._relay import RelaidCheckpoint, relaid_layout
from fp8q._safetensors import SafetensorsReader, write_safetensors

GRANULARITIES = {"row": "row", "tensor": "tensor", "block": (128, 128)}
FLOAT_CODES = ("F32", "F16", "BF16")
# The config files of an FP8 input that describe its quantization (the
# ignore list of compressed-tensors, ModelOpt's exclude_modules): carried
# beside the output when it is written elsewhere (_stage_configs).
CARRIED_CONFIGS = ("config.json", "hf_quant_config.json")
# The metadata key naming the granularity of the output's weight scales
# (_file_granularity); left out when they differ or there are none.
GRANULARITY_KEY = "fp8q_granularity"


SCALE_SUFFIXES = ("_scale", "_scale_inv")
# An FP8 input's layout -> the --format whose scale names (scale_name) the
# scales of its quantized float tensors take, so that the output keeps
# the input's one layout: compressed-tensors' NAME_scale (block scales
# too), FineGrainedFP8's NAME_scale_inv (128x128 block scales only).
INPUT_SCALE_NAMES = {"compressed-tensors": "fp8q", "finegrained-fp8": "vllm"}
# Module names (the last part before ".weight") of embedding tables in the
# usual model families: 2-D weights that are no nn.Linear's.
EMBEDDING_MODULES = ("embed", "embed_*", "*embedding", "*embeddings", "wte",
                     "wpe", "shared")


class ConvertError(Exception):
    """A problem with the user's input or output: one line, exit code 2."""


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived: the conversion stops, its temporary file
    is removed, and the process exits with 128 + the signal number."""

    def __init__(self, signal_number):
        super().__init__(signal_number)
        self.signal_number = signal_number


def scale_name(name, output_format, granularity):
    """The name of the scale tensor that goes with weight `name`: name +
    "_scale" (X.weight -> X.weight_scale), or name + "_scale_inv" for vLLM's
    block-scale name."""
    if output_format == "vllm" and granularity == "block":
        return name + "_scale_inv"
    return name + "_scale"


def is_linear_weight(name):
    """Whether a 2-D tensor's name says it is an nn.Linear's weight, as far
    as a checkpoint without its model can tell: it ends in ".weight" and
    its module's name is not an embedding table's (EMBEDDING_MODULES)."""
    module, _, last = name.rpartition(".")
    if last != "weight":
        return False
    module_name = module.rpartition(".")[2]
    return not any(fnmatch.fnmatchcase(module_name, pattern)
                   for pattern in EMBEDDING_MODULES)


def tensor_class(name):
    """The name with its numeric parts (layer indices) replaced by '*'."""
    return re.sub(r"\.\d+(?=\.|$)", ".*", name)


def _check_excludes(reader, excludes):
    unused = [pattern for pattern in excludes
              if not any(fnmatch.fnmatchcase(name, pattern)
                         for name in reader.entries)]
    if unused:
        examples = ", ".join(list(reader.entries)[:3])
        raise ConvertError(
            f"--exclude {shlex.quote(unused[0])}: matches no tensor of "
            f"{reader.path} (its names look like: {examples}); patterns are "
            "shell-style and match whole tensor names, e.g. '*embed*'")


def is_fp8_input(entries):
    """Whether a checkpoint ({name: (dtype code, shape)}) holds FP8
    tensors: its float tensors are then float on purpose."""
    return any(code in FP8_CODES for code, _ in entries.values())


def _plan(reader, granularity, excludes, output_format, all_2d,
          quantize_float=True):
    """The output tensors: (name, code, shape, produce) in input order, the
    list of names to quantize: 2-D float tensors that are not scales
    already, are Linear weights by name unless all_2d, and match no
    exclude pattern, and the list of those an FP8 input (is_fp8_input)
    keeps in float (all of them, unless quantize_float)."""
    _check_excludes(reader, excludes)
    outputs = []
    converted = []
    kept = []
    allowed = quantize_float or not is_fp8_input(reader.entries)
    for name, (code, shape) in reader.entries.items():
        convert = (code in FLOAT_CODES and len(shape) == 2
                   and not name.endswith(SCALE_SUFFIXES)
                   and (all_2d or is_linear_weight(name))
                   and not any(fnmatch.fnmatchcase(name, pattern)
                               for pattern in excludes))
        if convert and not allowed:
            kept.append(name)
            convert = False
        if not convert:
            outputs.append((name, code, shape, lambda n=name: reader.tensor(n)))
            continue
        converted.append(name)
        scale_shape = {"row": (shape[0], 1), "tensor": (),
                       "block": (-(-shape[0] // 128), -(-shape[1] // 128))
                       }[granularity]
        outputs.append((name, "F8_E4M3", shape, None))
        outputs.append((scale_name(name, output_format, granularity), "F32",
                        scale_shape, None))
    seen = set()
    for name, _, _, _ in outputs:
        if name in seen:
            raise ConvertError(
                f"{reader.path}: the output would hold two tensors named "
                f"{name!r} (a scale name collides with another tensor); "
                "--exclude one of them")
        seen.add(name)
    return outputs, converted, kept


def convert(input_path, output_path, granularity="row", excludes=(),
            output_format="fp8q", progress=None, all_2d=False,
            quantize_float=False):
    """Converts one checkpoint: its Linear weights (is_linear_weight), or
    with all_2d every 2-D float tensor, that no exclude pattern matches;
    an FP8 input's float tensors (is_fp8_input) only with quantize_float
    (else they are copied as they are, and the input's config files are
    carried beside the output: _stage_configs, before the output is
    written). The input's metadata is kept, less its fp8q
    quantization_config once a tensor is quantized (it then no longer
    describes the output), and GRANULARITY_KEY says the granularity of
    the output's scales (_file_granularity). Returns the summary rows
    (name, bytes before, bytes after, relative error) of the converted
    tensors, the total bytes before and after, and notes (lines for the
    summary). Raises ConvertError for bad input or an unwritable output
    (the output file is then not created); Interrupted (the temporary file
    removed) when SIGINT or SIGTERM arrives while main() runs it."""
    if os.path.isdir(input_path):
        raise ConvertError(f"{input_path}: is a directory; give the "
                           ".safetensors file to convert (one file per call)")
    if not os.path.isfile(input_path):
        raise ConvertError(f"{input_path}: no such file")
    if os.path.isdir(output_path):
        raise ConvertError(
            f"{output_path}: is a directory; give the output file's name, "
            f"e.g. {os.path.join(output_path, 'model-fp8.safetensors')}")
    if (os.path.exists(output_path)
            and os.path.samefile(input_path, output_path)):
        raise ConvertError(f"{output_path}: the output must not be the "
                           "input file")
    try:
        reader = _open(input_path, output_format)
    except (OSError, ValueError) as error:
        raise ConvertError(str(error)) from None
    relaid = isinstance(reader, RelaidCheckpoint)
    notes, staged, carried = [], [], []
    try:
        fp8_input = is_fp8_input(reader.entries)
        scheme_metadata = FP8Q_METADATA_KEY in reader.metadata
        layout = _layout(reader, input_path) if fp8_input else None
        names = _scale_names(layout, output_format)
        outputs, converted, kept = _plan(reader, granularity, excludes,
                                         names, all_2d, quantize_float)
        _check_granularity(input_path, layout, granularity, converted)
        if fp8_input and not relaid and not converted:
            staged, carried = _stage_configs(input_path, output_path)
        rows, before, after = _convert(
            reader, input_path, output_path, granularity, output_format,
            progress, layout, outputs, converted)
        _place_configs(staged)
        if relaid:
            notes.extend(_relay_notes(reader))
            rows, quantized = reader.rows + rows, len(rows)
        else:
            quantized = len(rows)
    finally:
        _discard_staged(staged)
        reader.close()
    if quantized and (scale_name("", names, granularity)
                      != scale_name("", output_format, granularity)):
        notes.append(f"--format {output_format}: the new scales are named "
                     f"NAME{scale_name('', names, granularity)} as this "
                     f"{layout} checkpoint's are (one layout per file)")
    if kept:
        notes.append(f"FP8 input: {len(kept)} float tensors its writer kept "
                     f"in float are copied as they are ({_shown(kept)}); "
                     "--quantize-float quantizes them")
    if fp8_input and quantized and not relaid:
        notes.append(f"--quantize-float quantized {quantized} float tensors "
                     "of this FP8 checkpoint: its config files no longer "
                     "describe the output and were not carried beside it")
    notes.extend(carried)
    if quantized and scheme_metadata:
        notes.append(f"the input's {FP8Q_METADATA_KEY} metadata no longer "
                     "describes the output and was dropped: its layers read "
                     "by their scales (static activations where input_scale "
                     "is present, weight-only elsewhere)")
    return rows, before, after, notes


def _shown(names):
    """The first three names, for a note."""
    return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")


def _layout(reader, input_path):
    """detect's layout of an FP8 input, re-laid or not; ConvertError naming
    the input when it holds two layouts' keys."""
    try:
        return detect(reader)
    except CheckpointError as error:
        raise ConvertError(f"{input_path}: {error}") from None


def _stage_configs(input_path, output_path):
    """Prepares the copies of the CARRIED_CONFIGS found beside the input
    into the output's folder, where they describe the output as they did
    the input (the codes, scales and float tensors are the input's),
    before the output is written: each is copied to a temporary file
    there, which _place_configs renames once the output is complete. A
    file of that name already there is kept (identical, or not: then a
    note says so). Returns ([(temporary, copy)], notes for the summary);
    ConvertError, with nothing left behind, when a copy cannot be made:
    a directory or a broken link of that name, an unreadable config or an
    unwritable folder."""
    source = os.path.dirname(os.path.abspath(input_path))
    target = os.path.dirname(os.path.abspath(output_path))
    if not os.path.isdir(target) or os.path.samefile(source, target):
        return [], []  # no folder: the output's write says so
    staged, notes = [], []
    try:
        for name in CARRIED_CONFIGS:
            original = os.path.join(source, name)
            copy = os.path.join(target, name)
            if not os.path.isfile(original):
                continue
            if _kept_config(original, copy, name, notes):
                continue
            temporary = os.path.join(target,
                                     f".{name}.{uuid.uuid4().hex}.tmp")
            staged.append((temporary, copy))
            shutil.copyfile(original, temporary)
            notes.append(f"{copy}: the input's {name}, carried beside the "
                         "output")
    except OSError as error:
        _discard_staged(staged)
        raise ConvertError(f"{error.filename or target}: "
                           f"{error.strerror or error}") from None
    except BaseException:
        _discard_staged(staged)
        raise
    return staged, notes


def _kept_config(original, copy, name, notes):
    """Whether `copy`, the output folder's file of the config's name, is
    there already and kept (with a note in `notes` when it differs from
    the input's `original`). ConvertError when something of that name is
    there that is no file (a directory, a broken link): the config that
    describes the output could not be carried beside it."""
    if os.path.isfile(copy):
        with open(original, "rb") as first, open(copy, "rb") as second:
            if first.read() != second.read():
                notes.append(f"{copy}: kept as it is; it differs from the "
                             f"input's {name}, which describes the output's "
                             "quantization")
        return True
    if os.path.lexists(copy):
        what = ("a directory" if os.path.isdir(copy)
                else "a broken link" if os.path.islink(copy)
                else "not a regular file")
        raise ConvertError(
            f"{copy}: is {what}, so the input's {name}, which describes "
            "the output, cannot be carried beside it; remove it or write "
            "the output to another folder")
    return False


def _place_configs(staged):
    """Renames the temporary copies of _stage_configs to their names, once
    the output is written. ConvertError for a rename that fails."""
    for temporary, copy in staged:
        try:
            os.replace(temporary, copy)
        except OSError as error:
            raise ConvertError(f"{copy}: {error.strerror or error} (the "
                               "output was written)") from None


def _discard_staged(staged):
    """Removes the temporary copies of _stage_configs still there."""
    for temporary, _ in staged:
        with contextlib.suppress(OSError):
            os.remove(temporary)


def _scale_names(layout, output_format):
    """The --format whose scale names the new scales of an input of
    `layout` (detect's, None for a float input) take: INPUT_SCALE_NAMES."""
    return INPUT_SCALE_NAMES.get(layout, output_format)


def _check_granularity(input_path, layout, granularity, converted):
    """ConvertError when new scales of `granularity` would go into a
    FineGrainedFP8 input, whose layout holds 128x128 block scales only."""
    if converted and layout == "finegrained-fp8" and granularity != "block":
        raise ConvertError(
            f"--granularity {granularity}: {input_path} is a FineGrainedFP8 "
            "checkpoint (*.weight_scale_inv), whose layout holds 128x128 "
            "block scales only; --quantize-float its float tensors with "
            "--granularity block")


def _convert(reader, input_path, output_path, granularity, output_format,
             progress, layout, outputs, converted):
    """Writes the output of _plan's `outputs`, quantizing the `converted`
    tensors; returns the summary rows and the file sizes before and
    after."""
    names = _scale_names(layout, output_format)
    pending = {}  # scale name -> float32 scale array, filled with its weight
    rows = []

    def quantized(name, index):
        def produce():
            if progress is not None:
                progress(index, len(converted), name)
            source = reader.fp8q_tensor(name)
            try:
                q = fp8q.quantize(source, "float8_e4m3fn",
                                  granularity=GRANULARITIES[granularity])
            except ValueError:  # NaN or infinity in the weight
                raise ConvertError(
                    f"{input_path}: tensor {name} holds NaN or infinite "
                    "values, which no FP8 scale represents; copy it "
                    f"unchanged with --exclude {shlex.quote(name)}, or "
                    "repair the checkpoint") from None
            original = fp8q.cast(source, "float32").numpy().astype(np.float64)
            restored = q.dequantize().numpy().astype(np.float64)
            norm = np.linalg.norm(original)
            error = (np.linalg.norm(restored - original) / norm
                     if norm > 0 else 0.0)
            rows.append((name, source.nbytes, q.data.nbytes + q.scale.nbytes,
                         float(error)))
            pending[scale_name(name, names, granularity)] = \
                q.scale.numpy()
            return q.data.view("uint8").numpy()
        return produce

    tensors = []
    for name, code, shape, produce in outputs:
        if produce is None and code == "F8_E4M3":
            produce = quantized(name, converted.index(name))
        elif produce is None:
            produce = (lambda scale=name: pending.pop(scale))
        tensors.append((name, code, shape, produce))
    metadata = dict(reader.metadata)
    if converted:  # the input's scheme no longer describes the output
        metadata.pop(FP8Q_METADATA_KEY, None)
    described = _file_granularity(outputs, granularity if converted
                                  else metadata.get(GRANULARITY_KEY))
    metadata.pop(GRANULARITY_KEY, None)
    if described is not None:
        metadata[GRANULARITY_KEY] = described
    metadata.update({"fp8q_version": fp8q.__version__,
                     "fp8q_format": output_format})
    _write(output_path, tensors, metadata)
    return rows, os.path.getsize(input_path), os.path.getsize(output_path)


def _file_granularity(outputs, preferred):
    """The granularity ("row", "tensor" or "block") that the scale of every
    FP8 weight among `outputs` (_plan's) has, new or copied, for the
    GRANULARITY_KEY metadata; `preferred` where a shape fits several (a
    one-row weight's); None when they differ or the file has none."""
    shapes = {name: shape for name, _, shape, _ in outputs}
    common = None
    for name, code, shape, _ in outputs:
        scale = next((name + suffix for suffix in SCALE_SUFFIXES
                      if name + suffix in shapes), None)
        if code not in FP8_CODES or len(shape) != 2 or scale is None:
            continue
        fits = {kind for kind in GRANULARITIES
                if _fits(scale, shapes[scale], shape, kind)}
        common = fits if common is None else common & fits
    if not common:
        return None
    order = [preferred, *GRANULARITIES]
    return next(kind for kind in order if kind in common)


def _fits(key, scale_shape, weight_shape, granularity):
    """Whether a scale of scale_shape is a `granularity` one of the
    weight."""
    try:
        granularity_of(key, scale_shape, weight_shape, granularity)
    except CheckpointError:
        return False
    return True


def _write(output_path, tensors, metadata):
    """Writes the safetensors file whole or not at all (fp8q._atomic_file:
    a temporary file beside it, renamed at the end, removed on any failure;
    ConvertError for an OSError)."""
    try:
        with atomic_file(output_path) as file:
            write_safetensors(file, tensors, metadata)
    except OSError as error:
        raise ConvertError(f"{output_path}: {error.strerror or error}") \
            from None


def _open(input_path, output_format):
    """The input as convert reads it: a RelaidCheckpoint for the FP8
    layouts it re-lays into the vLLM / compressed-tensors one, codes
    untouched (fp8q._checkpoint._relay), else a SafetensorsReader.
    ConvertError naming the input for a checkpoint fp8q refuses."""
    checkpoint = open_checkpoint(input_path)
    try:
        if relaid_layout(checkpoint) is not None:
            relaid = RelaidCheckpoint(
                checkpoint, lambda name, granularity: scale_name(
                    name, output_format, granularity), output_format)
            _check_one_vllm_layout(input_path, relaid, output_format)
            return relaid
    except ConvertError:
        checkpoint.close()
        raise
    except CheckpointError as error:
        checkpoint.close()
        raise ConvertError(f"{input_path}: {error}") from None
    except BaseException:
        checkpoint.close()
        raise
    checkpoint.close()
    return SafetensorsReader(input_path)


def _check_one_vllm_layout(input_path, relaid, output_format):
    """ConvertError when --format vllm would re-lay `relaid`'s 128x128
    block-scaled layers beside layers of other scales: vLLM names block
    scales NAME_scale_inv (FineGrainedFP8, block scales only) and the
    others NAME_scale (compressed-tensors), and a file has one layout."""
    if output_format != "vllm":
        return
    block = [name for name, kind in relaid.granularities.items()
             if kind == "block"]
    other = [(name, kind) for name, kind in relaid.granularities.items()
             if kind != "block"]
    if block and other:
        raise ConvertError(
            f"--format vllm: {input_path} mixes 128x128 block-scaled layers "
            f"({block[0]}) with {other[0][1]}-scaled ones ({other[0][0]}), "
            "and vLLM's layout for block scales (NAME_scale_inv, "
            "FineGrainedFP8) holds block scales only; --format fp8q writes "
            "every scale as NAME_scale (compressed-tensors, block scales "
            "too)")


def _relay_notes(relaid):
    """The notes on a RelaidCheckpoint's tensors."""
    if not relaid.upcast:
        return []
    return [f"{len(relaid.upcast)} FP8 tensors without a scale that no "
            f"layer holds ({_shown(relaid.upcast)}) are written as F16, "
            "which holds their values exactly: the output's layout has no "
            "FP8 tensor without a scale"]


def print_summary(rows, before, after, stream=sys.stdout):
    """Tensors converted, bytes before / after, and the relative Frobenius
    error of the dequantized weights per tensor class (max and mean)."""
    classes = {}
    for name, _, _, error in rows:
        classes.setdefault(tensor_class(name), []).append(error)
    print(f"converted {len(rows)} tensors; file {before:,} -> {after:,} "
          f"bytes ({after / before:.1%})", file=stream)
    print("| tensor class | tensors | max rel. error | mean rel. error |",
          file=stream)
    print("|---|---:|---:|---:|", file=stream)
    for name, errors in sorted(classes.items()):
        print(f"| {name} | {len(errors)} | {max(errors):.2e} | "
              f"{sum(errors) / len(errors):.2e} |", file=stream)


def _end_progress_line(drawn):
    """Ends the progress line on stderr when one was drawn (`drawn` holds
    True), so that what follows starts a line of its own."""
    if drawn:
        print(file=sys.stderr)
        drawn.clear()


def main(arguments):
    """Runs `convert` for the parsed command line; returns the exit code
    (0, or 2 with a one-line message on stderr)."""
    interactive = sys.stderr.isatty()
    drawn = []  # a progress line is on stderr, not yet ended

    def progress(index, total, name):
        if interactive:
            drawn[:] = [True]
            width = 30
            done = width * (index + 1) // max(total, 1)
            print(f"\r[{'#' * done}{'.' * (width - done)}] {index + 1}/"
                  f"{total} {name[:60]:<60}", end="", file=sys.stderr,
                  flush=True)

    def interrupt(signal_number, frame):
        raise Interrupted(signal_number)

    previous = {number: signal.signal(number, interrupt)
                for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        rows, before, after, notes = convert(
            arguments.input, arguments.output, arguments.granularity,
            arguments.exclude or (), arguments.format, progress,
            arguments.all_2d, arguments.quantize_float)
    except ConvertError as error:
        _end_progress_line(drawn)
        print(f"fp8q convert: error: {error}", file=sys.stderr)
        return 2
    except Interrupted as stop:
        _end_progress_line(drawn)
        print(f"fp8q convert: stopped by "
              f"{signal.Signals(stop.signal_number).name}; no output "
              "written", file=sys.stderr)
        return 128 + stop.signal_number
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    _end_progress_line(drawn)
    print_summary(rows, before, after)
    for note in notes:
        print(f"note: {note}")
    return 0
