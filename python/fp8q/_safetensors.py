"""A minimal reader and streaming writer of the safetensors format, for
`python -m fp8q convert` (no dependency on the safetensors package).

File layout: an 8-byte little-endian header size N, N bytes of UTF-8
JSON ({name: {"dtype", "shape", "data_offsets": [begin, end]}, optional
"__metadata__": {str: str}}), then the tensors' bytes, offsets relative to
the end of the header; in offset order the tensors cover those bytes
exactly, each byte in one tensor. Tensors are read as NumPy views of a
memory map, so a reader holds no more than the tensor in use.
"""
import json
import math
import mmap
import os
import struct

import numpy as np

from fp8q import _C

# safetensors dtype code -> (NumPy dtype of the raw bytes, fp8q dtype name
# to view them as, or None for dtypes fp8q only copies byte for byte).
DTYPES = {
    "F64": (np.float64, None), "F32": (np.float32, "float32"),
    "F16": (np.float16, "float16"), "BF16": (np.uint16, "bfloat16"),
    "F8_E4M3": (np.uint8, "float8_e4m3fn"),
    "F8_E5M2": (np.uint8, "float8_e5m2"),
    "I64": (np.int64, None), "I32": (np.int32, None),
    "I16": (np.int16, None), "I8": (np.int8, None), "U8": (np.uint8, None),
    "U16": (np.uint16, None), "U32": (np.uint32, None),
    "U64": (np.uint64, None), "BOOL": (np.bool_, None),
    "C64": (np.complex64, None), "F8_E8M0": (np.uint8, None),
}
# The format's other codes, which the reader refuses, and why.
UNREAD_DTYPES = {
    **dict.fromkeys(("F4", "F6_E2M3", "F6_E3M2"), "its elements are "
                    "narrower than a byte, packed"),
    **dict.fromkeys(("F8_E4M3FNUZ", "F8_E5M2FNUZ"), "fp8q's checkpoint "
                    "tools (convert, load_checkpoint) do not read the fnuz "
                    "FP8 variants yet"),
}
MAX_HEADER_BYTES = 100 * 1024 * 1024


class _RepeatedKey(Exception):
    """A JSON object of the header gives its key (args[0]) twice."""


def _object(pairs):
    """json.loads' object_pairs_hook: the object as a dict, _RepeatedKey
    for a key given twice (json.loads alone keeps the last)."""
    result = dict(pairs)
    if len(result) != len(pairs):
        seen = set()
        raise _RepeatedKey(next(key for key, _ in pairs
                                if key in seen or seen.add(key)))
    return result


def _naturals(value):
    """Whether `value` (parsed JSON) is a list of integers >= 0: true,
    false, 2.0 and "2" are not integers."""
    return isinstance(value, list) and all(
        type(item) is int and item >= 0 for item in value)


def _kind(value):
    """The JSON name of a parsed JSON value's type, for messages."""
    return {dict: "object", list: "array", str: "string", bool: "boolean",
            type(None): "null"}.get(type(value), "number")


class SafetensorsReader:
    """The tensors of one safetensors file. `entries` maps names (in file
    order) to (dtype code, shape tuple); tensor(name) returns the raw
    bytes as a read-only NumPy array of that shape, and fp8q_tensor(name)
    the same data as an fp8q.Tensor of its float or FP8 dtype; metadata
    is the "__metadata__" dict of strings ({} without one). Raises
    ValueError naming the file (and the tensor) for anything the
    safetensors package refuses as well: a header that is not UTF-8 JSON
    (a BOM included), a shape or offset that is not an integer >= 0 (true,
    2.0 and "2" are not), an unknown dtype, offsets that do not hold the
    shape, tensors that overlap or leave data bytes in no tensor, metadata
    that is not str -> str; and for a key given twice in one of its
    objects, which the package refuses inside a tensor's entry but takes
    (the last one) for a tensor name or a metadata key: a file whose
    header names a tensor twice is ambiguous, so fp8q refuses it.
    Also ValueError, naming the tensor and saying why, for the dtypes of
    UNREAD_DTYPES, which the format defines but fp8q does not read."""

    def __init__(self, path):
        self.path = str(path)
        with open(path, "rb") as file:
            if os.fstat(file.fileno()).st_size == 0:
                self._fail("the file is empty (0 bytes)")
            self._map = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            self._parse()
        except Exception:
            self.close()
            raise

    def _fail(self, problem):
        """Raises the ValueError for a malformed file, naming it."""
        raise ValueError(f"{self.path}: not a valid safetensors file: "
                         f"{problem}")

    def _parse(self):
        size = len(self._map)
        if size < 8:
            self._fail(f"{size} bytes, too short for the header size")
        (header_size,) = struct.unpack("<Q", self._map[:8])
        if header_size > min(size - 8, MAX_HEADER_BYTES):
            self._fail(f"header of {header_size} bytes in a file of {size}")
        try:  # UTF-8 only: json.loads of bytes would take a BOM or UTF-16
            header = json.loads(bytes(self._map[8:8 + header_size])
                                .decode("utf-8"), object_pairs_hook=_object)
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            self._fail(f"the header is not JSON ({error})")
        except _RepeatedKey as error:
            self._fail(f"the header gives {error.args[0]!r} twice in one "
                       "object (a tensor name, entry field or metadata key)")
        if not isinstance(header, dict):
            self._fail("the header is not a JSON object")
        self.metadata = header.pop("__metadata__", None)
        if self.metadata is None:
            self.metadata = {}
        elif not isinstance(self.metadata, dict):
            self._fail(f"__metadata__ is a JSON {_kind(self.metadata)}, not "
                       "an object of strings")
        for key, value in self.metadata.items():
            if not isinstance(value, str):
                self._fail(f"__metadata__ {key!r} is a JSON {_kind(value)}, "
                           "not a string")
        self._data_start = 8 + header_size
        data_size = size - self._data_start
        self.entries = {}
        self._offsets = {}
        spans = []  # (begin, end, name)
        for name, entry in header.items():
            if not isinstance(entry, dict):
                self._fail(f"tensor {name!r}: its entry is a JSON "
                           f"{_kind(entry)}, not an object")
            try:
                code, shape, offsets = (entry["dtype"], entry["shape"],
                                        entry["data_offsets"])
            except KeyError as error:
                self._fail(f"tensor {name!r}: its entry has no "
                           f"{error.args[0]!r}")
            if isinstance(code, str) and code in UNREAD_DTYPES:
                raise ValueError(f"{self.path}: tensor {name!r} has dtype "
                                 f"{code}, valid in safetensors but not read "
                                 f"by fp8q ({UNREAD_DTYPES[code]})")
            if not isinstance(code, str) or code not in DTYPES:
                self._fail(f"tensor {name!r} has unknown dtype {code!r}")
            if not _naturals(shape):
                self._fail(f"tensor {name!r}: shape {json.dumps(shape)} is "
                           "not a list of integers >= 0")
            if not _naturals(offsets) or len(offsets) != 2:
                self._fail(f"tensor {name!r}: data_offsets "
                           f"{json.dumps(offsets)} is not a list of two "
                           "integers >= 0")
            shape, (begin, end) = tuple(shape), offsets
            expected = math.prod(shape) * np.dtype(DTYPES[code][0]).itemsize
            if not begin <= end <= data_size or end - begin != expected:
                self._fail(f"tensor {name!r}: offsets {begin}..{end} do not "
                           f"hold shape {shape} of {code} within the "
                           f"{data_size} data bytes (truncated?)")
            self.entries[name] = (code, shape)
            self._offsets[name] = begin
            spans.append((begin, end, name))
        # In offset order the tensors tile the data bytes exactly, as the
        # safetensors package requires: no byte in two tensors or in none.
        position, previous = 0, None
        for begin, end, name in sorted(spans):
            if begin < position:
                self._fail(f"tensor {name!r}: offsets {begin}..{end} overlap "
                           f"those of tensor {previous!r}, which end at "
                           f"{position}")
            if begin > position:
                self._fail(f"tensor {name!r}: offsets {begin}..{end} leave "
                           f"data bytes {position}..{begin} in no tensor")
            position, previous = end, name
        if position != data_size:
            after = "" if previous is None else f" (after tensor {previous!r})"
            self._fail(f"data bytes {position}..{data_size}{after} are in "
                       "no tensor")

    def tensor(self, name):
        code, shape = self.entries[name]
        dtype = np.dtype(DTYPES[code][0])
        return np.frombuffer(self._map, dtype=dtype, count=math.prod(shape),
                             offset=self._data_start + self._offsets[name]
                             ).reshape(shape)

    def fp8q_tensor(self, name):
        code, shape = self.entries[name]
        if code in ("F32", "F16"):
            return _C.asarray(self.tensor(name))
        # The raw bytes, read as fp8q's dtype (bfloat16, FP8).
        raw = self.tensor(name).reshape(-1).view(np.uint8)
        return _C.asarray(raw).view(DTYPES[code][1]).reshape(shape)

    def release(self, name):
        """Drops the file's pages under tensor `name` from this process's
        resident memory (madvise MADV_DONTNEED, where the platform has it):
        reading them again pages them back in from the file. For loaders
        that copy each tensor once, so the mapping does not keep the whole
        file resident."""
        if not hasattr(mmap, "MADV_DONTNEED"):
            return
        code, shape = self.entries[name]
        begin = self._data_start + self._offsets[name]
        end = begin + math.prod(shape) * np.dtype(DTYPES[code][0]).itemsize
        begin -= begin % mmap.PAGESIZE
        if end > begin:
            self._map.madvise(mmap.MADV_DONTNEED, begin, end - begin)

    def close(self):
        """Unmaps the file; arrays still viewing it keep the mapping alive
        until they are gone."""
        try:
            self._map.close()
        except BufferError:
            pass


def write_safetensors(file, tensors, metadata):
    """Writes a safetensors file to the open binary `file`: `tensors` is a
    list of (name, dtype code, shape, produce) where produce() returns the
    tensor's bytes (an object with the buffer protocol) when its turn
    comes, so only one tensor need be in memory. The header is written
    first, from the shapes; the tensors' bytes follow in list order, so
    they tile the data as SafetensorsReader requires. `metadata` maps str
    to str. ValueError for a repeated name, the name "__metadata__" or a
    metadata value that is not a string."""
    header = {"__metadata__": dict(metadata)} if metadata else {}
    for key, value in header.get("__metadata__", {}).items():
        if not isinstance(value, str):
            raise ValueError(f"metadata {key!r}: {type(value).__name__}, "
                             "not a string")
    offset = 0
    for name, code, shape, _ in tensors:
        if name in header or name == "__metadata__":
            raise ValueError(f"tensor name {name!r} appears twice"
                             if name in header else "tensor name "
                             "'__metadata__' is the header's metadata key")
        size = math.prod(shape) * np.dtype(DTYPES[code][0]).itemsize
        header[name] = {"dtype": code, "shape": list(shape),
                        "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # data starts 8-byte aligned
    file.write(struct.pack("<Q", len(encoded)))
    file.write(encoded)
    for name, code, shape, produce in tensors:
        data = np.ascontiguousarray(produce()).reshape(-1).view(np.uint8)
        expected = header[name]["data_offsets"]
        if data.size != expected[1] - expected[0]:
            raise ValueError(f"{name}: produced {data.size} bytes, expected "
                             f"{expected[1] - expected[0]}")
        if data.size:
            file.write(data)
