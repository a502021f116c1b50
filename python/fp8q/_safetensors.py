"""A minimal reader and streaming writer of the safetensors format, for
`python -m fp8q convert` (no dependency on the safetensors package).

File layout: an 8-byte little-endian header size N, N bytes of JSON
({name: {"dtype", "shape", "data_offsets": [begin, end]}, optional
"__metadata__": {str: str}}), then the tensors' bytes, offsets relative to
the end of the header. Tensors are read as NumPy views of a memory map, so a
reader holds no more than the tensor in use.
"""
import json
import math
import mmap
import os
import struct

import numpy as np

from fp8q import _C

# safetensors dtype code -> (NumPy dtype of the raw bytes, fp8q dtype name
# to view them as, or None for dtypes fp8q does not convert).
DTYPES = {
    "F64": (np.float64, None), "F32": (np.float32, "float32"),
    "F16": (np.float16, "float16"), "BF16": (np.uint16, "bfloat16"),
    "F8_E4M3": (np.uint8, "float8_e4m3fn"),
    "F8_E5M2": (np.uint8, "float8_e5m2"),
    "I64": (np.int64, None), "I32": (np.int32, None),
    "I16": (np.int16, None), "I8": (np.int8, None), "U8": (np.uint8, None),
    "U16": (np.uint16, None), "U32": (np.uint32, None),
    "U64": (np.uint64, None), "BOOL": (np.bool_, None),
}
MAX_HEADER_BYTES = 100 * 1024 * 1024


class SafetensorsReader:
    """The tensors of one safetensors file. `entries` maps names (in file
    order) to (dtype code, shape tuple); tensor(name) returns the raw
    bytes as a read-only NumPy array of that shape, and fp8q_tensor(name)
    the same data as an fp8q.Tensor of its float or FP8 dtype. Raises
    ValueError naming the file for anything that is not a well-formed
    safetensors file."""

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
        try:
            header = json.loads(bytes(self._map[8:8 + header_size]))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            self._fail(f"the header is not JSON ({error})")
        if not isinstance(header, dict):
            self._fail("the header is not a JSON object")
        self.metadata = header.pop("__metadata__", None) or {}
        self._data_start = 8 + header_size
        data_size = size - self._data_start
        self.entries = {}
        self._offsets = {}
        for name, entry in header.items():
            try:
                code = entry["dtype"]
                shape = tuple(int(extent) for extent in entry["shape"])
                begin, end = (int(offset) for offset in entry["data_offsets"])
            except (KeyError, TypeError, ValueError):
                self._fail(f"tensor {name!r} has a malformed entry")
            if code not in DTYPES:
                self._fail(f"tensor {name!r} has unknown dtype {code!r}")
            expected = math.prod(shape) * np.dtype(DTYPES[code][0]).itemsize
            if (min(shape, default=0) < 0 or not 0 <= begin <= end <=
                    data_size or end - begin != expected):
                self._fail(f"tensor {name!r}: offsets {begin}..{end} do not "
                           f"hold shape {shape} of {code} within the "
                           f"{data_size} data bytes (truncated?)")
            self.entries[name] = (code, shape)
            self._offsets[name] = begin

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
    first, from the shapes. ValueError for a repeated name."""
    header = {"__metadata__": dict(metadata)} if metadata else {}
    offset = 0
    for name, code, shape, _ in tensors:
        if name in header:
            raise ValueError(f"tensor name {name!r} appears twice")
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
