"""fp8q.gemm_tuning: the GEMM tuner's choices kept across processes, opt-in.

The first scaled_mm of each cuBLASLt plan on a GPU times cuBLASLt's best
candidate algorithms and keeps the fastest for the process
(docs/scaled_mm.md, "Algorithm choice"). `save` writes the choices of one
device to a small text file; `load` gives them to a later process, which then
skips the timing wherever the heuristic offers the saved algorithm. A file is
keyed by what its choices are valid for: the GPU's name and compute
capability, the driver, cuBLASLt and fp8q versions. `load` refuses a file
whose key differs from this process's (ValueError naming both): choices are
never taken from another GPU model, driver or library.

    import fp8q.gemm_tuning
    fp8q.gemm_tuning.load("tuning.txt", missing_ok=True)   # at start-up
    ...                                                    # run the model
    fp8q.gemm_tuning.save("tuning.txt")                    # after warm-up

Nothing here runs at `import fp8q`; the functions load the CUDA driver and
cuBLASLt as a first GPU scaled_mm would.
"""

import fp8q
from fp8q import _C
from fp8q._atomic_file import atomic_file

_HEADER = "# fp8q GEMM tuning choices (docs/scaled_mm.md, \"Algorithm choice\")"
_FORMAT = "1"
_KEY_FIELDS = ("gpu", "compute_capability", "driver", "cublaslt", "fp8q")


def _key(device):
    """This process's key for CUDA device `device` and its choices."""
    facts = _C._gemm_tuning_export(device)
    key = {name: facts[name] for name in _KEY_FIELDS if name in facts}
    key["fp8q"] = fp8q.__version__
    return key, facts["choices"]


def _describe(key):
    return (f"GPU {key.get('gpu')!r} (compute capability "
            f"{key.get('compute_capability')}), driver {key.get('driver')}, "
            f"cuBLASLt {key.get('cublaslt')}, fp8q {key.get('fp8q')}")


def save(path, device=0):
    """Writes the GEMM tuner's choices of CUDA device `device` (an index)
    made so far in this process to the text file `path` (replaced), under
    this process's key (GPU name and compute capability, driver, cuBLASLt
    and fp8q versions); returns the number of choices written. The file is
    written to a temporary name beside `path` and renamed, so a reader
    never sees half of it (fp8q._atomic_file)."""
    key, choices = _key(device)
    lines = [_HEADER, f"format {_FORMAT}"]
    lines += [f"{name} {key[name]}" for name in _KEY_FIELDS]
    lines += [f"choice {line}" for line in choices]
    with atomic_file(path) as file:
        file.write(("\n".join(lines) + "\n").encode("utf-8"))
    return len(choices)


def load(path, device=0, missing_ok=False):
    """Adds the choices saved in `path` by `save` to CUDA device `device`'s
    (an index) and returns their number. Raises ValueError, using nothing,
    naming the file, when a choice line is not one `save` writes, or when
    the file's key (GPU name and compute capability, driver, cuBLASLt
    and fp8q versions) is not this process's, naming both, or when the file
    is not one `save` writes; FileNotFoundError when it does not exist,
    unless `missing_ok` (then 0). A loaded choice is used only where
    cuBLASLt's heuristic offers exactly its algorithm for a product of its
    key (M rounded up to a power of two): it never makes a product run an
    algorithm cuBLASLt did not offer for it."""
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except FileNotFoundError:
        if missing_ok:
            return 0
        raise
    saved = {}
    choices = []
    lines = text.splitlines()
    if not lines or lines[0] != _HEADER:
        raise ValueError(f"fp8q.gemm_tuning.load: {path} is not a file "
                         f"fp8q.gemm_tuning.save wrote (its first line is "
                         f"not {_HEADER!r})")
    for line in lines[1:]:
        name, _, value = line.partition(" ")
        if name == "choice":
            choices.append(value)
        elif name in _KEY_FIELDS or name == "format":
            saved[name] = value
        elif line.strip():
            raise ValueError(f"fp8q.gemm_tuning.load: {path}: unexpected "
                             f"line {line!r}")
    if saved.get("format") != _FORMAT:
        raise ValueError(f"fp8q.gemm_tuning.load: {path} has format "
                         f"{saved.get('format')!r}; this fp8q reads format "
                         f"{_FORMAT}")
    key, _ = _key(device)
    if {name: saved.get(name) for name in _KEY_FIELDS} != key:
        raise ValueError(
            f"fp8q.gemm_tuning.load: {path} was saved for "
            f"{_describe(saved)}; CUDA device {device} here is "
            f"{_describe(key)}. Its choices are not used: tune here (run "
            f"the model once) and save a new file")
    try:
        return _C._gemm_tuning_import(device, choices)
    except ValueError as error:
        raise ValueError(f"fp8q.gemm_tuning.load: {path}: {error}; nothing "
                         "was loaded") from None
