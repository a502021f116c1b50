"""Fuzz harness: CalibrationCache.load and CalibrationCache.import_tensorrt
on mutated files. Structure-aware mutations (a JSON value replaced by
another, deep nesting, extreme numbers and hex floats) are resealed with a
correct checksum so they reach the entry checks; byte mutations (flips,
cuts, insertions) test the framing. Every file is either loaded (and then
saves and loads back equal) or refused with ValueError."""
import hashlib
import json
import pathlib
import tempfile

import numpy as np

from fp8q.calib import CalibrationCache

ODD_VALUES = [None, True, 0, -1, 1.5, 2**70, -(2**70), "", "x", [], {}, [[]],
              "0x1p+1024", "0x1p-1080", "0x1.8p+0", "-0x0p+0", "0X1P+3",
              "0x1.fffffep+127", "nan", "inf", "\u00e9\u0000", [1, 2],
              {"a": [1]}, "TRT-1-X", 1e308, -0.0]


def checksum(content):
    """The documented checksum, computed independently of fp8q."""
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"),
                           ensure_ascii=True)
    return "sha256:" + hashlib.sha256(canonical.encode("ascii")).hexdigest()


def pick(rng, options):
    return options[int(rng.integers(len(options)))]


def valid_document(rng, path):
    """A saved cache (in `path`), parsed."""
    cache = CalibrationCache({"w": [4, 8], "x": [2]})
    cache.add("w", float(rng.random() * 100))
    cache.add("x", rng.random(3).astype(np.float32) * 5, dtype="float8_e5m2")
    cache.save(path)
    return json.loads(path.read_text("utf-8"))


def paths_of(value, prefix=()):
    """Every (container path) into a parsed JSON value."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths_of(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from paths_of(item, prefix + (index,))


def mutate_structure(rng, document):
    paths = [path for path in paths_of(document) if path]
    path = pick(rng, paths)
    parent = document
    for key in path[:-1]:
        parent = parent[key]
    nested = rng.random() < 0.1  # spliced in as text, past json's limits
    parent[path[-1]] = "@nested@" if nested else pick(rng, ODD_VALUES)
    document.pop("checksum", None)
    if rng.random() < 0.95:
        document["checksum"] = checksum(document)
    text = json.dumps(document)
    if nested:
        depth = int(rng.integers(10, 100000))
        text = text.replace('"@nested@"', "[" * depth + "]" * depth)
    return text.encode()


def mutate_bytes(rng, data):
    data = bytearray(data)
    for _ in range(int(rng.integers(1, 4))):
        position = int(rng.integers(len(data) + 1))
        choice = rng.random()
        if choice < 0.4 and position < len(data):
            data[position] ^= 1 << int(rng.integers(8))
        elif choice < 0.7:
            del data[position:position + int(rng.integers(1, 20))]
        else:
            data[position:position] = bytes(
                rng.integers(0, 256, size=int(rng.integers(1, 8))).astype(
                    np.uint8))
    return bytes(data)


def tensorrt_text(rng):
    lines = [pick(rng, ["TRT-8601-EntropyCalibration2", "TRT-1-X", "TRT--",
                        "", "trt-1-x", "TRT-99999999999999999999-MinMax"])]
    for index in range(int(rng.integers(0, 6))):
        bits = pick(rng, ["3c010a14", "7f800000", "ffffffff", "0", "7f7fffff",
                          "1", "", "g", "123456789", "80000000", "7fc00000"])
        name = pick(rng, [f"t{index}", "", "a:b", " ", "\u00e9", "t0"])
        lines.append(f"{name}: {bits}" if rng.random() < 0.9 else name)
    return "\n".join(lines).encode("utf-8", "surrogatepass")


def check_file(path, data, loader):
    path.write_bytes(data)
    try:
        cache = loader(path)
    except ValueError:
        return None
    except Exception as error:  # anything else is a finding
        return f"{type(error).__name__}: {error}: {data[:300]!r}"
    copy = path.with_suffix(".again")
    cache.save(copy)
    if CalibrationCache.load(copy) != cache:
        return f"save/load changed the cache: {data[:300]!r}"
    return None


def run(rng, iterations, seconds, clock):
    """Runs up to `iterations` files within `seconds`; returns (files tried,
    failure descriptions)."""
    with tempfile.TemporaryDirectory(prefix="fp8q-fuzz-cache-") as folder:
        return run_in(rng, iterations, seconds, clock, pathlib.Path(folder))


def run_in(rng, iterations, seconds, clock, folder):
    path = folder / "cache.json"
    original = folder / "original.json"
    valid_document(rng, original)
    failures = []
    start = clock()
    done = 0
    while done < iterations and clock() - start < seconds:
        kind = rng.random()
        if kind < 0.5:
            data = mutate_structure(rng, valid_document(rng, original))
            problem = check_file(path, data, CalibrationCache.load)
        elif kind < 0.8:
            data = mutate_bytes(rng, original.read_bytes())
            problem = check_file(path, data, CalibrationCache.load)
        else:
            data = tensorrt_text(rng)
            if rng.random() < 0.3:
                data = mutate_bytes(rng, data)
            problem = check_file(path, data, CalibrationCache.import_tensorrt)
        if problem:
            failures.append(problem)
        done += 1
    return done, failures
