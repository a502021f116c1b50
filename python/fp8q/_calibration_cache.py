"""fp8q.CalibrationCache: named calibration results (amax, FP8 dtype, method)
kept in a portable, versioned, checksummed JSON file, and TensorRT's text
calibration cache read and written.

The file holds no device information, so a cache made on one machine loads
on any other. Amax values are stored as exact hexadecimal floats, so a load
gives back bit for bit what was saved. Scales come from
fp8q.calib.scale_from_amax (in C); nothing numeric happens here beyond
rounding each amax to float32 once. docs/calibration_cache.md describes the
file format.
"""
import collections
import collections.abc
import fractions
import hashlib
import json
import math
import numbers
import operator
import os
import re
import struct
import warnings

import numpy as np

from fp8q import _C
from fp8q._atomic_file import atomic_file
from fp8q._qtensor import read_only

FORMAT = "fp8q-calibration-cache"
VERSION = 1
TENSORRT_VERSION = 8601  # what TensorRT 8.6.1 writes in its header line

_DOCUMENT_KEYS = ("format", "version", "fp8q_version", "fingerprint",
                  "entries", "checksum")
_ENTRY_KEYS = ("amax", "dtype", "method")
# What float.hex() writes for a finite value >= 0 (case-insensitive).
_HEX_FLOAT = re.compile(r"0x[0-9a-f]+(\.[0-9a-f]*)?p[+-]?[0-9]+", re.I)
_TENSORRT_HEADER = re.compile(r"TRT-([0-9]+)-([A-Za-z0-9_]+)")


class CalibrationCacheWarning(UserWarning):
    """Warned by CalibrationCache.load(strict=False) for cache entries the
    caller did not expect."""


# ---------------------------------------------------------------------------
# Validation shared by entries, the cache and the file readers

def _check_name(name, argument="name"):
    if not isinstance(name, str):
        raise TypeError(f"{argument}: expected a str, got "
                        f"{type(name).__name__}")
    if not name:
        raise ValueError(f"{argument}: must not be empty")
    return name


def _fp8_dtype_name(dtype):
    """The canonical name of an FP8 dtype given as anything fp8q.dtype
    accepts; ValueError for any other value."""
    try:
        resolved = _C.dtype(dtype)
    except TypeError:
        resolved = None
    if resolved is None or not resolved.is_fp8:
        raise ValueError(
            "dtype: expected an FP8 dtype (float8_e4m3fn, float8_e5m2, "
            "float8_e4m3fnuz or float8_e5m2fnuz, an alias such as 'e4m3', "
            f"or an equivalent dtype object), got {dtype!r}")
    return resolved.name


def _is_real(value):
    """Whether `value` is an int or a float, Python's or NumPy's (not a
    bool): what an object array of amax values may hold."""
    return (isinstance(value, (int, float, np.integer, np.floating))
            and not isinstance(value, bool))


def _as_float(value):
    """`value` (an int or a float) as a float for the float32 cast: an
    int rounded here to float32's 24 significant bits, once (to nearest,
    ties to even, as NumPy casts smaller ints; float() first would round
    twice, to 53 bits then 24), past float64's range an infinity of its
    sign."""
    if isinstance(value, (float, np.floating)):
        return float(value)
    value = int(value)
    shift = max(abs(value).bit_length() - 24, 0)
    try:
        return float(round(fractions.Fraction(value, 1 << shift)) << shift)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _amax_array(amax):
    """amax as a NumPy array (np.asarray); an fp8q.Tensor (whose NumPy view
    of a float16, bfloat16 or FP8 tensor holds the codes), or one that NumPy
    holds in a dtype of its own or cannot convert (ml_dtypes' bfloat16 or
    float8 values, a torch bfloat16 tensor), converted to float32 by fp8q,
    which is exact for those dtypes. Anything else as np.asarray gives it,
    for _float32_amax to refuse."""
    try:
        given = None if isinstance(amax, _C.Tensor) else np.asarray(amax)
    except TypeError:  # torch's bfloat16, float8 and CUDA tensors
        given = None
    if given is None or given.dtype.kind == "V":
        try:
            return np.asarray(_C.cast(amax, "float32"))
        except (TypeError, ValueError, BufferError, RuntimeError):
            if given is None:
                raise TypeError(
                    "amax: expected a real number or a 1-D array of them, "
                    f"got {type(amax).__name__}") from None
    return given


def _float32_amax(amax):
    """amax as an entry stores it: a float for a scalar (or 0-d array), a
    read-only 1-D float32 array otherwise; each value rounded to float32,
    finite and >= 0, negative zero made +0. Python ints too large for
    NumPy's integer dtypes (an object array) are rounded to float32 as
    smaller ints are (2**70 to float(2**70)); past its range they are
    refused as any number is."""
    given = _amax_array(amax)
    if given.dtype == object and all(_is_real(value) for value in given.flat):
        real = np.array([_as_float(value) for value in given.flat],
                        dtype=np.float64).reshape(given.shape)
    else:
        real = given
    if real.dtype.kind not in "iuf":
        raise TypeError("amax: expected a real number or a 1-D array of "
                        f"them, got {type(amax).__name__} "
                        f"(NumPy dtype {given.dtype})")
    if given.ndim > 1 or (given.ndim == 1 and given.size == 0):
        raise ValueError("amax: expected a number or a non-empty 1-D array "
                         f"(one value per channel), got shape {given.shape}")
    with np.errstate(over="ignore"):
        values = real.astype(np.float32)
    bad = ~np.isfinite(values) | (values < 0)
    if bad.any():
        index = int(np.flatnonzero(bad)[0])
        where = "amax" if given.ndim == 0 else f"amax[{index}]"
        # As given, a Python number (an int too large for NumPy exact).
        value = given.reshape(-1)[index:index + 1].tolist()[0]
        raise ValueError(
            f"{where} is {value!r}; every amax must be finite and >= 0 as a "
            "float32")
    values = values + np.float32(0)  # -0.0 + 0.0 is +0.0
    if values.ndim == 0:
        return float(values)
    # A buffer NumPy cannot make writeable again: the entry stays immutable.
    return np.frombuffer(values.tobytes(), dtype=np.float32)


# ---------------------------------------------------------------------------
# Entries

class CalibrationEntry:
    """One calibration result: the amax, the FP8 dtype its scale is meant
    for and the method that found it. Immutable.

    CalibrationEntry(amax, dtype="float8_e4m3fn", method="max") validates as
    CalibrationCache.add does (which is how entries are normally made).

    Attributes:
        amax: a float (per tensor) or a read-only 1-D float32 NumPy array
            (per channel); every value a finite float32 >= 0.
        dtype: the canonical fp8q name of an FP8 dtype, e.g. "float8_e4m3fn".
        method: a non-empty str naming how amax was found ("max",
            "percentile", "entropy", "mse", "tensorrt:EntropyCalibration2",
            ...).

    Entries are equal when dtype, method and every amax value are equal.
    """

    __slots__ = ("_amax", "_dtype", "_method")

    def __init__(self, amax, dtype="float8_e4m3fn", method="max"):
        self._amax = _float32_amax(amax)
        self._dtype = _fp8_dtype_name(dtype)
        self._method = _check_name(method, "method")

    amax = read_only(
        "_amax",
        "A float, or a read-only 1-D float32 array (one per channel).")
    dtype = read_only(
        "_dtype", 'The canonical name of the FP8 dtype, e.g. "float8_e4m3fn".')
    method = read_only("_method",
                       'How amax was found, e.g. "max" or "entropy".')

    def scale(self, dtype=None, margin=0, power_of_2=False):
        """Returns fp8q.calib.scale_from_amax(self.amax, dtype or
        self.dtype, margin=margin, power_of_2=power_of_2): the float32
        dequantization scale float32(amax) / float32(finfo(dtype).max *
        2**-margin), a float per tensor or a float32 array per channel
        (docs/calibration.md has the exact rules)."""
        return _C._scale_from_amax(
            self._amax, self._dtype if dtype is None else dtype,
            margin=margin, power_of_2=power_of_2)

    def __reduce__(self):
        # Copies and unpickled entries are made by __init__, so their amax
        # is a read-only buffer as a fresh entry's is (the default
        # reduction would restore a writeable array).
        return (type(self), (self._amax, self._dtype, self._method))

    def _key(self):
        amax = self._amax
        return (self._dtype, self._method,
                amax if isinstance(amax, float) else amax.tobytes())

    def __eq__(self, other):
        if not isinstance(other, CalibrationEntry):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return (f"fp8q.calib.CalibrationEntry(amax={self._amax!r}, "
                f"dtype={self._dtype!r}, method={self._method!r})")


# ---------------------------------------------------------------------------
# The cache

class CalibrationCache(collections.abc.Mapping):
    """Calibration results by name (a tensor or module name), with an
    optional model fingerprint, saved to and loaded from a portable file.

    A read-only Mapping name -> CalibrationEntry in insertion order
    (cache[name], name in cache, len, iteration, keys/items/values/get),
    changed by add, add_calibrator, remove and `del cache[name]`.

    fingerprint: None, or the shapes of the model's tensors by name, as
    CalibrationCache.fingerprint_of accepts them; it is saved with the
    entries and checked against the `expected` mapping given to load.

    Two caches are equal when their entries and fingerprints are (insertion
    order aside).
    """

    __slots__ = ("_entries", "_fingerprint")

    def __init__(self, fingerprint=None):
        self._entries = {}
        self._fingerprint = None
        self.set_fingerprint(fingerprint)

    # -- the mapping --------------------------------------------------------

    def __getitem__(self, name):
        return self._entries[name]

    def __iter__(self):
        return iter(self._entries)

    def __len__(self):
        return len(self._entries)

    def __contains__(self, name):
        return name in self._entries

    def __eq__(self, other):
        if not isinstance(other, CalibrationCache):
            return NotImplemented
        return (self._fingerprint == other._fingerprint
                and self._entries == other._entries)

    def __repr__(self):
        fingerprint = ("None" if self._fingerprint is None
                       else f"<{len(self._fingerprint)} shapes>")
        return (f"fp8q.CalibrationCache(<{len(self._entries)} entries>, "
                f"fingerprint={fingerprint})")

    def add(self, name, amax, *, dtype="float8_e4m3fn", method="max"):
        """Stores CalibrationEntry(amax, dtype, method) under name and
        returns it; an entry already under that name is replaced (keeping its
        place in the order).

        name: a non-empty str. amax: a number, or a 1-D array-like of them
        (one per channel), each rounded to float32 and required to be finite
        and >= 0. dtype: an FP8 dtype in any spelling fp8q.dtype accepts
        ("e4m3", fp8q.float8_e4m3fn, ...); stored as its canonical name.
        method: a non-empty str. TypeError / ValueError, naming the argument,
        for anything else; the cache is then unchanged.
        """
        name = _check_name(name)
        entry = self._entries[name] = CalibrationEntry(amax, dtype, method)
        return entry

    def add_calibrator(self, name, calibrator, *, dtype="float8_e4m3fn",
                       method="max", **method_kwargs):
        """Adds the amax of a calibrator under name and returns the entry.

        fp8q.calib.MaxCalibrator: its .amax (method must be "max", no
        method_kwargs; ValueError before its first update).
        fp8q.calib.HistogramCalibrator: calibrator.compute_amax(method,
        dtype=dtype, **method_kwargs), e.g. method="percentile",
        percentile=99.9. The entry records dtype and method as given.
        """
        if isinstance(calibrator, _C._MaxCalibrator):
            if method != "max" or method_kwargs:
                raise ValueError(
                    "add_calibrator: a MaxCalibrator gives only "
                    f"method='max' without options, got method={method!r} "
                    f"and options {sorted(method_kwargs)}")
            amax = calibrator.amax
            if amax is None:
                raise ValueError(f"add_calibrator: the MaxCalibrator for "
                                 f"{name!r} has no amax yet (no update)")
        elif isinstance(calibrator, _C._HistogramCalibrator):
            amax = calibrator.compute_amax(method, dtype=dtype,
                                           **method_kwargs)
        else:
            raise TypeError(
                "add_calibrator: expected an fp8q.calib.MaxCalibrator or "
                f"HistogramCalibrator, got {type(calibrator).__name__}")
        return self.add(name, amax, dtype=dtype, method=method)

    def remove(self, name):
        """Removes the entry under name; KeyError if there is none. Same as
        `del cache[name]`."""
        del self._entries[name]

    def __delitem__(self, name):
        self.remove(name)

    # -- the model fingerprint ---------------------------------------------

    @staticmethod
    def fingerprint_of(named_shapes):
        """Returns a model fingerprint: a new dict name -> shape (a tuple of
        ints >= 0), in the order given.

        named_shapes: a mapping name -> shape, or an iterable of (name, shape)
        pairs; a shape is any iterable of integers (a tuple, torch.Size,
        NumPy shape). With PyTorch, for example,
        `{name: p.shape for name, p in model.named_parameters()}` or
        `((name, p.shape) for name, p in model.state_dict().items())`.
        TypeError / ValueError for a name that is not a non-empty str, a
        repeated name, or a dimension that is not an integer >= 0.
        """
        if isinstance(named_shapes, collections.abc.Mapping):
            named_shapes = named_shapes.items()
        fingerprint = {}
        for name, shape in named_shapes:
            _check_name(name, "fingerprint name")
            if name in fingerprint:
                raise ValueError(f"fingerprint: {name!r} is given twice")
            dims = _shape_tuple(shape)
            if dims is None:
                raise ValueError(
                    f"fingerprint: the shape of {name!r} must be a sequence "
                    f"of integers >= 0, got {shape!r}")
            fingerprint[name] = dims
        return fingerprint

    @property
    def fingerprint(self):
        """None, or a new dict name -> shape tuple (the model fingerprint)."""
        return None if self._fingerprint is None else dict(self._fingerprint)

    def set_fingerprint(self, named_shapes):
        """Sets the model fingerprint from anything fingerprint_of accepts;
        None removes it."""
        self._fingerprint = (None if named_shapes is None
                             else self.fingerprint_of(named_shapes))

    # -- the fp8q file ------------------------------------------------------

    def save(self, path):
        """Writes the cache to path as fp8q's calibration cache file: UTF-8
        JSON, format version 1, with a SHA-256 checksum of the content
        (docs/calibration_cache.md). No device information is written.

        The file is written to a temporary file in the same folder and then
        renamed over path, so path holds either its previous content or the
        whole new file, never part of it; no temporary file remains after an
        error.
        """
        _write_atomically(path, _format_document(self._document()))

    @classmethod
    def load(cls, path, expected=None, strict=True, *, fingerprint=None):
        """Reads a file written by save and returns a new CalibrationCache
        holding exactly (bit for bit) what was saved.

        ValueError naming the file and the problem for a file that is not
        UTF-8 JSON (e.g. truncated), not this format, of another format
        version, fails its checksum, or holds a value of the wrong type or
        out of range; FileNotFoundError if there is no file.

        expected: what the caller needs from the cache, checked after
        reading:

        - None: nothing is checked.
        - an iterable of names (not a str): every one must be an entry.
        - a mapping name -> shape (a fingerprint, see fingerprint_of): its
          names must be entries, and if the file has a fingerprint it must
          equal this one; otherwise ValueError listing each difference
          (shapes that differ, names only in one of them).

        Expected names with no entry: KeyError listing every one of them.
        Entries not expected: ValueError listing them with strict=True;
        with strict=False a CalibrationCacheWarning listing them, and the
        entries are kept.

        fingerprint: None, or the model's fingerprint (anything
        fingerprint_of accepts, e.g. {name: p.shape for name, p in
        model.named_parameters()}), compared with the file's whatever the
        entries are named (activations' entries beside parameters'
        shapes): ValueError listing each difference, and ValueError for a
        file saved without a fingerprint (there is nothing to compare).
        It is checked before `expected`.
        """
        path = os.fspath(path)
        with open(path, "rb") as file:
            data = file.read()
        try:
            cache = cls._from_document(_parse_json(data))
        except RecursionError as error:
            # Parsing or hashing JSON nested deeper than the interpreter's
            # stack allows; no cache nests deeper than 4 levels.
            raise ValueError(f"{path}: JSON nested too deeply to be a "
                             "calibration cache") from error
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from error
        if fingerprint is not None:
            if cache._fingerprint is None:
                raise ValueError(
                    f"{path}: the calibration cache was saved without a "
                    "fingerprint, so it cannot be checked against the "
                    "model's (load it without fingerprint= to use it "
                    "unchecked)")
            _compare_fingerprints(path, cache._fingerprint,
                                  cls.fingerprint_of(fingerprint))
        if expected is not None:
            cache._check_expected(path, expected, strict)
        return cache

    def _document(self):
        """The file's content as a dict, checksum last."""
        fingerprint = self._fingerprint
        document = {
            "format": FORMAT,
            "version": VERSION,
            "fp8q_version": _C._build_info()["version"],
            "fingerprint": None if fingerprint is None else {
                name: list(shape) for name, shape in fingerprint.items()},
            "entries": {
                name: {"amax": _amax_to_json(entry.amax),
                       "dtype": entry.dtype, "method": entry.method}
                for name, entry in self._entries.items()},
        }
        document["checksum"] = _checksum(document)
        return document

    @classmethod
    def _from_document(cls, document):
        """The cache a parsed file describes; ValueError (without the path)
        for anything out of format."""
        if not isinstance(document, dict):
            raise ValueError("not an fp8q calibration cache (a JSON "
                             f"{type(document).__name__}, not an object)")
        if document.get("format") != FORMAT:
            raise ValueError(
                "not an fp8q calibration cache (format "
                f"{document.get('format')!r}, expected {FORMAT!r})")
        version = document.get("version")
        if type(version) is not int or version != VERSION:
            raise ValueError(
                f"calibration cache format version {version!r} is not "
                f"supported; this fp8q reads version {VERSION}")
        missing = [key for key in _DOCUMENT_KEYS if key not in document]
        unknown = [key for key in document if key not in _DOCUMENT_KEYS]
        if missing or unknown:
            raise ValueError(f"keys missing: {missing}, unknown keys: "
                             f"{unknown}")
        checksum = _checksum({key: value for key, value in document.items()
                              if key != "checksum"})
        if document["checksum"] != checksum:
            raise ValueError(
                f"checksum mismatch: the file says {document['checksum']!r}, "
                f"its content hashes to {checksum!r}; it was changed or "
                "damaged after it was saved")
        if not isinstance(document["fp8q_version"], str):
            raise ValueError("fp8q_version must be a str")
        fingerprint = document["fingerprint"]
        if fingerprint is not None:
            if not isinstance(fingerprint, dict) or not all(
                    isinstance(shape, list) for shape in fingerprint.values()):
                raise ValueError("fingerprint must be null or an object "
                                 "name -> list of integers")
        entries = document["entries"]
        if not isinstance(entries, dict):
            raise ValueError("entries must be an object name -> entry")
        cache = cls(fingerprint)
        for name, fields in entries.items():
            try:
                if not isinstance(fields, dict) or set(fields) != set(
                        _ENTRY_KEYS):
                    raise ValueError(
                        f"expected an object with exactly the keys "
                        f"{list(_ENTRY_KEYS)}, got {fields!r}")
                cache.add(name, _amax_from_json(fields["amax"]),
                          dtype=fields["dtype"], method=fields["method"])
            except (TypeError, ValueError) as error:
                raise ValueError(f"entry {name!r}: {error}") from error
        return cache

    def _check_expected(self, path, expected, strict):
        if isinstance(expected, (str, bytes)):
            raise TypeError("load: expected must be an iterable of names or "
                            "a mapping name -> shape, not a single str")
        if isinstance(expected, collections.abc.Mapping):
            wanted = self.fingerprint_of(expected)
            if self._fingerprint is not None:
                _compare_fingerprints(path, self._fingerprint, wanted)
        else:
            wanted = dict.fromkeys(_check_name(name, "expected name")
                                   for name in expected)
        missing = [name for name in wanted if name not in self._entries]
        if missing:
            raise KeyError(
                f"{path}: {len(missing)} expected name(s) have no entry in "
                f"the calibration cache: {', '.join(map(repr, missing))}")
        unexpected = [name for name in self._entries if name not in wanted]
        if unexpected:
            message = (f"{path}: {len(unexpected)} entry name(s) in the "
                       "calibration cache were not expected: "
                       f"{', '.join(map(repr, unexpected))}")
            if strict:
                raise ValueError(message + " (load with strict=False to "
                                 "accept them with a warning)")
            warnings.warn(message, CalibrationCacheWarning, stacklevel=3)

    # -- TensorRT's calibration cache --------------------------------------

    def export_tensorrt(self, path, algorithm="EntropyCalibration2", *,
                        tensorrt_version=TENSORRT_VERSION):
        """Writes the entries as TensorRT's INT8 calibration cache (text):
        the line `TRT-<tensorrt_version>-<algorithm>`, then `name: <8 hex
        digits>` per entry in order, the big-endian bits of the float32
        scale float32(amax) / float32(127). dtype and method are not written.
        Written atomically, as save.

        ValueError, before anything is written, for per-channel entries (the
        format has one scale per tensor; all are named), a name holding a
        line break, or an algorithm that is not letters, digits and "_".
        TensorRT uses the file only when tensorrt_version and algorithm match
        its own version and calibrator. TypeError for a tensorrt_version that
        is not an int (a bool included).
        """
        if isinstance(tensorrt_version, bool):
            raise TypeError("export_tensorrt: tensorrt_version must be an "
                            "int, got bool")
        header = f"TRT-{operator.index(tensorrt_version)}-{algorithm}"
        if not isinstance(algorithm, str) or not _TENSORRT_HEADER.fullmatch(
                header):
            raise ValueError(
                "export_tensorrt: tensorrt_version must be an int >= 0 and "
                "algorithm letters, digits and '_', got "
                f"{tensorrt_version!r} and {algorithm!r}")
        per_channel = [name for name, entry in self._entries.items()
                       if not isinstance(entry.amax, float)]
        if per_channel:
            raise ValueError(
                "export_tensorrt: TensorRT's cache holds one scale per "
                "tensor; these entries are per channel: "
                f"{', '.join(map(repr, per_channel))}")
        broken = [name for name in self._entries
                  if name.splitlines() != [name]]
        if broken:
            raise ValueError("export_tensorrt: names with line breaks cannot "
                             f"be written: {', '.join(map(repr, broken))}")
        lines = [header]
        for name, entry in self._entries.items():
            scale = np.float32(entry.amax) / np.float32(127)
            lines.append(f"{name}: {struct.pack('>f', scale).hex()}")
        _write_atomically(path, ("\n".join(lines) + "\n").encode("utf-8"))

    @classmethod
    def import_tensorrt(cls, path, dtype="float8_e4m3fn"):
        """Reads TensorRT's INT8 calibration cache (text) and returns a new
        CalibrationCache, without a fingerprint.

        The first line is `TRT-<version>-<algorithm>`; each further non-empty
        line is `name: <hex>`, the name ending at the last ":", and <hex> 1
        to 8 hex digits, the bits of a float32 scale (finite, >= 0). Each
        entry gets amax = float32(scale) * float32(127) (rounded in
        float32), the given FP8 dtype and method "tensorrt:<algorithm>".
        ValueError naming the file and line for anything else, including a
        name given twice.

        export_tensorrt followed by import_tensorrt gives back amax only to
        within float32 rounding: amax -> amax / 127 -> * 127 rounds twice.
        """
        dtype = _fp8_dtype_name(dtype)
        path = os.fspath(path)
        with open(path, "rb") as file:
            data = file.read()
        try:
            lines = data.decode("utf-8").splitlines()
        except UnicodeDecodeError as error:
            raise ValueError(f"{path}: not UTF-8 text ({error})") from error
        first = lines[0] if lines else ""
        header = _TENSORRT_HEADER.fullmatch(first.strip())
        if header is None:
            raise ValueError(
                f"{path}:1: not a TensorRT calibration cache: the first line "
                f"must be TRT-<version>-<algorithm>, got {first!r}")
        method = f"tensorrt:{header.group(2)}"
        cache = cls()
        for number, line in enumerate(lines[1:], start=2):
            if not line.strip():
                continue
            name, colon, bits = line.rpartition(":")
            bits = bits.strip()
            try:
                if not colon or not re.fullmatch(r"[0-9a-fA-F]{1,8}", bits):
                    raise ValueError(
                        f"expected 'name: <1 to 8 hex digits>', got {line!r}")
                if name in cache:
                    raise ValueError(f"{name!r} is given twice")
                (scale,) = struct.unpack(">f",
                                         int(bits, 16).to_bytes(4, "big"))
                if not (math.isfinite(scale) and scale >= 0):
                    raise ValueError(f"the scale {bits} is {scale!r}, not "
                                     "finite and >= 0")
                with np.errstate(over="ignore"):
                    amax = np.float32(scale) * np.float32(127)
                cache.add(name, amax, dtype=dtype, method=method)
            except ValueError as error:
                raise ValueError(f"{path}:{number}: {error}") from error
        return cache


# ---------------------------------------------------------------------------
# File helpers

def _shape_tuple(shape):
    """shape as a tuple of ints >= 0, or None if it is not one."""
    try:
        dims = tuple(shape)
    except TypeError:
        return None
    if all(isinstance(dim, numbers.Integral) and not isinstance(dim, bool)
           and dim >= 0 for dim in dims):
        return tuple(int(dim) for dim in dims)
    return None


def _amax_to_json(amax):
    if isinstance(amax, float):
        return amax.hex()
    return [float(value).hex() for value in amax]


def _amax_from_json(value):
    """A float or float32 array from the file's hex float string(s); each
    must be exactly a float32 value."""
    if isinstance(value, list):
        return np.array([_float32_from_hex(item) for item in value],
                        dtype=np.float32)
    return _float32_from_hex(value)


def _float32_from_hex(text):
    if not isinstance(text, str) or not _HEX_FLOAT.fullmatch(text):
        raise ValueError(f"amax value {text!r} is not a hexadecimal float "
                         "as float.hex() writes it (e.g. '0x1.8p+0')")
    try:
        value = float.fromhex(text)
    except OverflowError as error:
        raise ValueError(f"amax value {text!r} is not a float32 value (it "
                         "overflows even a float64)") from error
    with np.errstate(over="ignore"):
        if float(np.float32(value)) != value:
            raise ValueError(f"amax value {text!r} is not a float32 value")
    return value


def _checksum(content):
    """"sha256:<hex>" over the canonical JSON of content (sorted keys, no
    spaces, ASCII only)."""
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"),
                           ensure_ascii=True)
    return "sha256:" + hashlib.sha256(canonical.encode("ascii")).hexdigest()


def _format_document(document):
    """The file's bytes: the top-level keys in their order, one line per
    fingerprint shape and per entry, "\\n" line ends."""
    def compact(value):
        return json.dumps(value, ensure_ascii=False, sort_keys=True,
                          separators=(", ", ": "))

    members = []
    for key, value in document.items():
        if isinstance(value, dict) and value:
            rows = ",\n".join(f"    {compact(name)}: {compact(item)}"
                              for name, item in value.items())
            members.append(f"  {compact(key)}: {{\n{rows}\n  }}")
        else:
            members.append(f"  {compact(key)}: {compact(value)}")
    return ("{\n" + ",\n".join(members) + "\n}\n").encode("utf-8")


def _parse_json(data):
    def reject_constant(constant):
        raise ValueError(f"{constant} is not allowed")

    def unique_keys(pairs):
        members = dict(pairs)
        if len(members) != len(pairs):
            counts = collections.Counter(key for key, _ in pairs)
            repeated = sorted(key for key in counts if counts[key] > 1)
            raise ValueError(f"repeated JSON key(s) {repeated}")
        return members

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"not UTF-8 text ({error})") from error
    if not text.strip():
        raise ValueError("the file is empty")
    try:
        return json.loads(text, object_pairs_hook=unique_keys,
                          parse_constant=reject_constant)
    except json.JSONDecodeError as error:
        raise ValueError(f"not valid JSON, truncated or corrupted ({error})"
                         ) from error


def _compare_fingerprints(path, found, wanted):
    """ValueError listing every difference between the file's fingerprint
    and the expected one."""
    differences = []
    for name, shape in wanted.items():
        if name not in found:
            differences.append(f"{name}: not in the file, expected {shape}")
        elif found[name] != shape:
            differences.append(
                f"{name}: {found[name]} in the file, expected {shape}")
    differences += [f"{name}: {shape} in the file, not expected"
                    for name, shape in found.items() if name not in wanted]
    if differences:
        raise ValueError(
            f"{path}: the calibration cache was made for another model; its "
            "fingerprint differs from the expected one:\n  "
            + "\n  ".join(differences))


def _write_atomically(path, data):
    """Replaces path's content with data (bytes), whole or not at all."""
    with atomic_file(path) as file:
        file.write(data)
