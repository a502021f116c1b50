"""fp8q.CalibrationCache: exact save/load round trips, the file's checksum and
format checks, the `expected` checks (missing and extra names, fingerprints),
TensorRT's text cache in both directions, atomic saves, entry validation and
scales. Everything runs on the CPU.
"""
import collections.abc
import copy
import hashlib
import json
import os
import pickle
import warnings

import numpy as np
import pytest

import fp8q
from fp8q import calib
from fp8q.calib import CalibrationCache, CalibrationCacheWarning

# ---------------------------------------------------------------------------
# Helpers


def bits(amax):
    """The float32 bits of an amax (float or array) as a uint32 array."""
    return np.asarray(amax, dtype=np.float32).view(np.uint32)


def random_float32(rng, size):
    """Finite float32 values >= 0 over every binade, subnormals included."""
    return rng.integers(0, 0x7F800000, size=size, dtype=np.uint32).view(
        np.float32)


def sample_cache(rng):
    cache = CalibrationCache({"encoder.weight": (64, 32),
                              "encoder.bias": (64,), "scalar": ()})
    cache.add("third", 1 / 3)
    cache.add("smallest_subnormal", 2.0 ** -149, dtype="e5m2")
    cache.add("zero", 0.0, method="entropy")
    cache.add("largest", float(np.finfo(np.float32).max),
              dtype="float8_e4m3fnuz")
    cache.add("random", float(random_float32(rng, 1)[0]), method="mse")
    cache.add("per_channel", random_float32(rng, 17), method="percentile")
    cache.add("per_channel_edges",
              [0.0, 2.0 ** -149, 2.0 ** -126, 1 / 3, 448.0],
              dtype=fp8q.float8_e5m2fnuz)
    cache.add("ünïcode ✓", 1.5)
    return cache


def checksum(content):
    """The documented checksum, computed here independently of fp8q."""
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"),
                           ensure_ascii=True)
    return "sha256:" + hashlib.sha256(canonical.encode("ascii")).hexdigest()


def reseal(path, change):
    """Edits a saved cache file with change(document) and writes it back with
    a correct checksum."""
    document = json.loads(path.read_text("utf-8"))
    change(document)
    document.pop("checksum", None)
    document["checksum"] = checksum(document)
    path.write_text(json.dumps(document, indent=1), "utf-8")


def saved(tmp_path, cache, name="cache.json"):
    path = tmp_path / name
    cache.save(path)
    return path


# ---------------------------------------------------------------------------
# Round trips


def test_round_trip_is_exact_and_bit_identical(tmp_path, rng, seed):
    cache = sample_cache(rng)
    path = saved(tmp_path, cache)
    loaded = CalibrationCache.load(path)
    assert loaded == cache, f"seed={seed}"
    assert list(loaded) == list(cache), f"seed={seed}"
    assert loaded.fingerprint == cache.fingerprint
    for name, entry in cache.items():
        other = loaded[name]
        assert type(other.amax) is type(entry.amax), name
        assert np.array_equal(bits(other.amax), bits(entry.amax)), \
            f"{name} seed={seed}"
        assert (other.dtype, other.method) == (entry.dtype, entry.method)
    again = saved(tmp_path, loaded, "again.json")
    assert again.read_bytes() == path.read_bytes(), f"seed={seed}"


def test_round_trip_of_random_per_channel_values(tmp_path, rng, seed):
    values = random_float32(rng, 4096)
    values[rng.integers(0, 4096, size=8)] = 0.0
    cache = CalibrationCache()
    cache.add("weight", values)
    loaded = CalibrationCache.load(saved(tmp_path, cache))
    assert np.array_equal(bits(loaded["weight"].amax), bits(values)), \
        f"seed={seed}"


def test_amax_is_written_as_hex_floats(tmp_path):
    cache = CalibrationCache()
    cache.add("a", 1.5)
    cache.add("b", [0.0, 2.0 ** -149])
    document = json.loads(saved(tmp_path, cache).read_text("utf-8"))
    assert document["entries"] == {
        "a": {"amax": "0x1.8000000000000p+0", "dtype": "float8_e4m3fn",
              "method": "max"},
        "b": {"amax": ["0x0.0p+0", "0x1.0000000000000p-149"],
              "dtype": "float8_e4m3fn", "method": "max"},
    }


def test_file_layout_checksum_and_no_device_information(tmp_path, rng):
    path = saved(tmp_path, sample_cache(rng))
    text = path.read_text("utf-8")
    document = json.loads(text)
    assert list(document) == ["format", "version", "fp8q_version",
                              "fingerprint", "entries", "checksum"]
    assert document["format"] == "fp8q-calibration-cache"
    assert document["version"] == 1
    assert document["fp8q_version"] == fp8q.__version__
    assert document["fingerprint"] == {
        "encoder.weight": [64, 32], "encoder.bias": [64], "scalar": []}
    assert document["checksum"] == checksum(
        {key: value for key, value in document.items() if key != "checksum"})
    for word in ("cuda", "device", "gpu", "compute_capability"):
        assert word not in text.lower(), word
    assert b"\r" not in path.read_bytes()


def test_cache_without_fingerprint_or_entries(tmp_path):
    path = saved(tmp_path, CalibrationCache())
    loaded = CalibrationCache.load(path)
    assert len(loaded) == 0 and loaded.fingerprint is None
    assert json.loads(path.read_text("utf-8"))["fingerprint"] is None


# ---------------------------------------------------------------------------
# Damaged and foreign files


def test_changed_content_fails_the_checksum(tmp_path):
    cache = CalibrationCache()
    cache.add("x", 1.5)
    path = saved(tmp_path, cache)
    text = path.read_text("utf-8")
    path.write_text(
        text.replace("0x1.8000000000000p+0", "0x1.c000000000000p+0"), "utf-8")
    with pytest.raises(ValueError, match="checksum mismatch") as raised:
        CalibrationCache.load(path)
    assert str(path) in str(raised.value)


def test_changed_checksum_fails(tmp_path):
    cache = CalibrationCache()
    cache.add("x", 1.5)
    path = saved(tmp_path, cache)
    document = json.loads(path.read_text("utf-8"))
    document["checksum"] = "sha256:" + "0" * 64
    path.write_text(json.dumps(document), "utf-8")
    with pytest.raises(ValueError, match="checksum mismatch"):
        CalibrationCache.load(path)


def test_every_truncation_is_a_value_error_naming_the_file(tmp_path, rng):
    path = saved(tmp_path, sample_cache(rng))
    data = path.read_bytes()
    cut = tmp_path / "cut.json"
    for length in range(len(data) - 1):  # the last byte is the final newline
        cut.write_bytes(data[:length])
        with pytest.raises(ValueError) as raised:
            CalibrationCache.load(cut)
        assert str(cut) in str(raised.value), length


@pytest.mark.parametrize("data, problem", [
    (b"", "empty"),
    (b"{not json", "not valid JSON"),
    (b"\xff\xfe{}", "not UTF-8"),
    (b"[1, 2]", "not an fp8q calibration cache"),
    (b'{"format": "something-else", "version": 1}',
     "not an fp8q calibration cache"),
    (b'{"format": "fp8q-calibration-cache", "version": NaN}',
     "NaN is not allowed"),
    (b'{"format": "fp8q-calibration-cache", "format": "x"}',
     "repeated JSON key"),
])
def test_malformed_files(tmp_path, data, problem):
    path = tmp_path / "bad.json"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=problem) as raised:
        CalibrationCache.load(path)
    assert str(path) in str(raised.value)


@pytest.mark.parametrize("version", [2, 0, "1", 1.0, True, None])
def test_other_versions_are_refused(tmp_path, version):
    path = saved(tmp_path, CalibrationCache())
    reseal(path, lambda document: document.update(version=version))
    with pytest.raises(ValueError,
                       match="version .* is not supported") as raised:
        CalibrationCache.load(path)
    assert str(path) in str(raised.value)


def set_field(field, value):
    """A change that sets a field of entry "x"."""
    return lambda document: document["entries"]["x"].update({field: value})


def set_key(**members):
    """A change that sets top-level keys."""
    return lambda document: document.update(members)


def drop(*keys):
    """A change that removes a key at the end of a path of keys."""
    def change(document):
        for key in keys[:-1]:
            document = document[key]
        del document[keys[-1]]
    return change


def rename_entry(document):
    document["entries"][""] = document["entries"].pop("x")


@pytest.mark.parametrize("change, problem", [
    (set_field("amax", "1.5"), "not a hexadecimal float"),
    (set_field("amax", 1.5), "not a hexadecimal float"),
    (set_field("amax", "-0x1.8p+0"), "not a hexadecimal float"),
    (set_field("amax", "inf"), "not a hexadecimal float"),
    (set_field("amax", "0x1.0000001p+0"), "not a float32 value"),
    (set_field("amax", "0x1p+200"), "not a float32 value"),
    (set_field("amax", []), "non-empty 1-D"),
    (set_field("amax", [["0x1p+0"]]), "not a hexadecimal float"),
    (set_field("dtype", "float32"), "dtype: expected an FP8 dtype"),
    (set_field("dtype", 7), "dtype: expected an FP8 dtype"),
    (set_field("method", 7), "method: expected a str"),
    (set_field("method", ""), "method: must not be empty"),
    (set_field("device", "cuda:0"), "exactly the keys"),
    (drop("entries", "x", "method"), "exactly the keys"),
    (set_key(entries={"x": [1]}), "exactly the keys"),
    (rename_entry, "name: must not be empty"),
    (set_key(entries=[]), "entries must be an object"),
    (set_key(fingerprint={"w": [2, -1]}), "integers >= 0"),
    (set_key(fingerprint={"w": [2.0]}), "integers >= 0"),
    (set_key(fingerprint={"w": [True]}), "integers >= 0"),
    (set_key(fingerprint={"w": 3}), "fingerprint must be null"),
    (set_key(fingerprint=[]), "fingerprint must be null"),
    (set_key(fp8q_version=1), "fp8q_version must be a str"),
    (set_key(device="cuda:0"), "unknown keys: \\['device'\\]"),
    (drop("entries"), "keys missing: \\['entries'\\]"),
])
def test_wrong_values_inside_a_sealed_file(tmp_path, change, problem):
    cache = CalibrationCache()
    cache.add("x", 1.5)
    path = saved(tmp_path, cache)
    reseal(path, change)
    with pytest.raises(ValueError, match=problem) as raised:
        CalibrationCache.load(path)
    assert str(raised.value).startswith(f"{path}: "), raised.value


def test_missing_file():
    with pytest.raises(FileNotFoundError):
        CalibrationCache.load("/nonexistent/fp8q/cache.json")


# ---------------------------------------------------------------------------
# What the caller expects


def three_entries(tmp_path, fingerprint=None):
    cache = CalibrationCache(fingerprint)
    for name in ("a", "b", "c"):
        cache.add(name, 1.0)
    return saved(tmp_path, cache)


def test_expected_names_present(tmp_path):
    path = three_entries(tmp_path)
    loaded = CalibrationCache.load(path, expected=["c", "a", "b"])
    assert list(loaded) == ["a", "b", "c"]
    assert len(CalibrationCache.load(path, expected=iter("abc"))) == 3


def test_every_missing_name_is_listed(tmp_path):
    path = three_entries(tmp_path)
    with pytest.raises(KeyError) as raised:
        CalibrationCache.load(path, expected=["a", "b", "c", "d", "e", "f"])
    # args[0], not str(): KeyError's str() is the repr, which doubles a
    # Windows path's backslashes.
    message = raised.value.args[0]
    assert "3 expected name(s)" in message and str(path) in message
    for name in ("'d'", "'e'", "'f'"):
        assert name in message
    assert "'a'" not in message


def test_unexpected_names_are_an_error_when_strict(tmp_path):
    path = three_entries(tmp_path)
    with pytest.raises(ValueError,
                       match="2 entry name\\(s\\) .* not expected: 'b', 'c'"):
        CalibrationCache.load(path, expected=["a"])


def test_unexpected_names_warn_when_not_strict(tmp_path):
    path = three_entries(tmp_path)
    with pytest.warns(CalibrationCacheWarning,
                      match="not expected: 'b', 'c'") as record:
        loaded = CalibrationCache.load(path, expected=["a"], strict=False)
    assert issubclass(CalibrationCacheWarning, UserWarning)
    assert record[0].filename == __file__
    assert list(loaded) == ["a", "b", "c"]


def test_no_warning_when_everything_is_expected(tmp_path):
    path = three_entries(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        CalibrationCache.load(path, expected=["a", "b", "c"], strict=False)


def test_expected_as_a_single_string_is_refused(tmp_path):
    with pytest.raises(TypeError, match="not a single str"):
        CalibrationCache.load(three_entries(tmp_path), expected="abc")


def test_fingerprint_matches(tmp_path):
    fingerprint = {"a": (4, 8), "b": (8,), "c": ()}
    path = three_entries(tmp_path, fingerprint)
    loaded = CalibrationCache.load(
        path, expected={"c": [], "b": np.array([8]), "a": (4, 8)})
    assert loaded.fingerprint == fingerprint


def test_fingerprint_mismatch_says_exactly_what_differs(tmp_path):
    path = three_entries(tmp_path, {"a": (4, 8), "b": (8,), "c": ()})
    with pytest.raises(ValueError) as raised:
        CalibrationCache.load(
            path, expected={"a": (4, 16), "b": (8,), "d": (2,)})
    assert str(raised.value) == (
        f"{path}: the calibration cache was made for another model; its "
        "fingerprint differs from the expected one:\n"
        "  a: (4, 8) in the file, expected (4, 16)\n"
        "  d: not in the file, expected (2,)\n"
        "  c: () in the file, not expected")


def test_expected_mapping_without_a_fingerprint_in_the_file(tmp_path):
    path = three_entries(tmp_path)
    CalibrationCache.load(path, expected={"a": (1,), "b": (2,), "c": (3,)})
    with pytest.raises(KeyError, match="'d'"):
        CalibrationCache.load(
            path, expected={"a": (1,), "b": (2,), "c": (3,), "d": ()})


def test_fingerprint_argument_checks_the_model_whatever_the_entries(
        tmp_path):
    """fingerprint= compares the file's fingerprint with the model's while
    expected names the entries (activations beside parameters' shapes, the
    documented workflow, whose fingerprint load never checked); a file
    without a fingerprint is refused, having nothing to compare."""
    shapes = {"fc1.weight": (3, 64), "fc2.weight": (10, 3)}
    path = three_entries(tmp_path, shapes)
    loaded = CalibrationCache.load(path, fingerprint=shapes,
                                   expected=["a", "b", "c"])
    assert loaded.fingerprint == shapes
    other_model = {"fc1.weight": (3, 128), "fc2.weight": (10, 3)}
    with pytest.raises(ValueError) as raised:
        CalibrationCache.load(path, fingerprint=other_model,
                              expected=["a", "b", "c"])
    assert str(raised.value) == (
        f"{path}: the calibration cache was made for another model; its "
        "fingerprint differs from the expected one:\n"
        "  fc1.weight: (3, 64) in the file, expected (3, 128)")
    plain = CalibrationCache()
    plain.add("a", 1.0)
    unfingerprinted = saved(tmp_path, plain, "plain.json")
    with pytest.raises(ValueError, match=r"saved without a fingerprint"):
        CalibrationCache.load(unfingerprinted, fingerprint=shapes)
    with pytest.raises(TypeError):
        CalibrationCache.load(path, ["a", "b", "c"], True, shapes)


# ---------------------------------------------------------------------------
# TensorRT


def test_export_tensorrt_text(tmp_path):
    cache = CalibrationCache()
    cache.add("input", 127.0)
    cache.add("conv1/Relu:0", 254.0, dtype="e5m2", method="entropy")
    cache.add("(Unnamed Layer* 3) [Scale]_output", 63.5)
    # 1/127 in float32: 2^-7 * (1 + 2^-7 + 2^-14 + 2^-21) = 0x3c010204
    cache.add("one", 1.0)
    cache.add("zero", 0.0)
    path = tmp_path / "calibration.cache"
    cache.export_tensorrt(path)
    assert path.read_bytes() == (
        b"TRT-8601-EntropyCalibration2\n"
        b"input: 3f800000\n"
        b"conv1/Relu:0: 40000000\n"
        b"(Unnamed Layer* 3) [Scale]_output: 3f000000\n"
        b"one: 3c010204\n"
        b"zero: 00000000\n")
    cache.export_tensorrt(path, "MinMaxCalibration", tensorrt_version=100300)
    first = path.read_text("utf-8").splitlines()[0]
    assert first == "TRT-100300-MinMaxCalibration"


def test_export_tensorrt_divides_in_float32(tmp_path, rng, seed):
    amax = random_float32(rng, 64)
    cache = CalibrationCache()
    for index, value in enumerate(amax):
        cache.add(f"t{index}", value)
    path = tmp_path / "calibration.cache"
    cache.export_tensorrt(path)
    scales = (amax / np.float32(127)).astype(np.float32)
    expected = [f"t{index}: {int(word):08x}"
                for index, word in enumerate(scales.view(np.uint32))]
    assert path.read_text("utf-8").splitlines()[1:] == expected, f"seed={seed}"


def test_export_tensorrt_refuses_per_channel_entries(tmp_path):
    cache = CalibrationCache()
    cache.add("a", 1.0)
    cache.add("w1", [1.0, 2.0])
    cache.add("w2", [3.0])
    path = tmp_path / "calibration.cache"
    with pytest.raises(ValueError, match="per channel: 'w1', 'w2'"):
        cache.export_tensorrt(path)
    assert not path.exists()


@pytest.mark.parametrize("name, algorithm, version", [
    ("two\nlines", "EntropyCalibration2", 8601),
    ("trailing line break\n", "EntropyCalibration2", 8601),
    ("form\x0cfeed", "EntropyCalibration2", 8601),
    ("a", "Entropy Calibration", 8601),
    ("a", "", 8601),
    ("a", None, 8601),
    ("a", "EntropyCalibration2", -1),
])
def test_export_tensorrt_refuses_what_the_format_cannot_hold(
        tmp_path, name, algorithm, version):
    cache = CalibrationCache()
    cache.add(name, 1.0)
    with pytest.raises(ValueError, match="export_tensorrt"):
        cache.export_tensorrt(tmp_path / "c.cache", algorithm,
                              tensorrt_version=version)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("version", [True, 8.6, "8601"])
def test_export_tensorrt_version_must_be_an_int(tmp_path, version):
    """tensorrt_version=True wrote "TRT-1-..."; a bool, like a float or a
    str, is no version: TypeError, nothing written."""
    cache = CalibrationCache()
    cache.add("a", 1.0)
    with pytest.raises(TypeError):
        cache.export_tensorrt(tmp_path / "c.cache", tensorrt_version=version)
    assert os.listdir(tmp_path) == []


def test_import_tensorrt_hand_written(tmp_path):
    path = tmp_path / "calibration.cache"
    path.write_bytes(
        b"TRT-8601-EntropyCalibration2\r\n"
        b"input: 3f800000\r\n"
        b"conv1/Relu:0: 40000000\r\n"
        b"(Unnamed Layer* 3) [Scale]_output: 3c010204\r\n"
        b"\r\n"
        b"short: 0\r\n"
        b"unpadded: 1\r\n")
    cache = CalibrationCache.import_tensorrt(path, dtype="e5m2")
    assert list(cache) == ["input", "conv1/Relu:0",
                           "(Unnamed Layer* 3) [Scale]_output", "short",
                           "unpadded"]
    assert cache["input"].amax == 127.0
    assert cache["conv1/Relu:0"].amax == 254.0
    one = np.float32(np.uint32(0x3C010204).view(np.float32)) * np.float32(127)
    assert cache["(Unnamed Layer* 3) [Scale]_output"].amax == float(one)
    assert cache["short"].amax == 0.0
    assert cache["unpadded"].amax == float(np.float32(2.0 ** -149)
                                           * np.float32(127))
    for entry in cache.values():
        assert entry.method == "tensorrt:EntropyCalibration2"
        assert entry.dtype == "float8_e5m2"
    assert cache.fingerprint is None


def test_tensorrt_round_trip_within_float32_rounding(tmp_path, rng, seed):
    # Scaled down so that amax / 127 * 127 stays finite.
    amax = random_float32(rng, 32) * np.float32(2.0 ** -100)
    cache = CalibrationCache()
    for index, value in enumerate(amax):
        cache.add(f"t{index}", value)
    path = tmp_path / "calibration.cache"
    cache.export_tensorrt(path)
    back = CalibrationCache.import_tensorrt(path)
    expected = (amax / np.float32(127)).astype(np.float32) * np.float32(127)
    found = [back[f"t{index}"].amax for index in range(32)]
    assert np.array_equal(bits(found), bits(expected)), f"seed={seed}"


HEADER = "TRT-8601-EntropyCalibration2\n"


@pytest.mark.parametrize("text, line, problem", [
    ("", 1, "first line must be TRT-<version>-<algorithm>"),
    ("input: 3f800000\n", 1, "first line must be"),
    ("TRT-8601\nx: 3f800000\n", 1, "first line must be"),
    (HEADER + "x: 3f800000\nno colon here\n", 3, "expected 'name: "),
    (HEADER + "x: 3f80000g\n", 2, "expected 'name: "),
    (HEADER + "x: 123456789\n", 2, "expected 'name: "),
    (HEADER + "x:\n", 2, "expected 'name: "),
    (HEADER + ": 3f800000\n", 2, "name: must not be empty"),
    (HEADER + "x: 7f800000\n", 2, "not finite and >= 0"),  # inf
    (HEADER + "x: 7fc00000\n", 2, "not finite and >= 0"),  # NaN
    (HEADER + "x: bf800000\n", 2, "not finite and >= 0"),  # -1.0
    (HEADER + "x: 7f000000\n", 2, "finite and >= 0 as a float32"),  # * 127
    (HEADER + "x: 1\n\ny: 2\nx: 3\n", 5, "'x' is given twice"),
])
def test_import_tensorrt_malformed(tmp_path, text, line, problem):
    path = tmp_path / "calibration.cache"
    path.write_text(text, "utf-8")
    with pytest.raises(ValueError, match=problem) as raised:
        CalibrationCache.import_tensorrt(path)
    assert str(raised.value).startswith(f"{path}:{line}: "), raised.value


def test_import_tensorrt_checks_dtype_first(tmp_path):
    path = tmp_path / "calibration.cache"
    path.write_text("TRT-8601-EntropyCalibration2\n", "utf-8")
    assert len(CalibrationCache.import_tensorrt(path)) == 0
    with pytest.raises(ValueError, match="dtype: expected an FP8 dtype"):
        CalibrationCache.import_tensorrt(path, dtype="bfloat16")


# ---------------------------------------------------------------------------
# Atomic writes


def test_failed_save_keeps_the_old_file_and_leaves_no_temporary(
        tmp_path, monkeypatch):
    old = CalibrationCache()
    old.add("old", 1.0)
    path = saved(tmp_path, old)
    before = path.read_bytes()

    def failing_replace(source, destination):
        raise OSError("disk on fire")

    monkeypatch.setattr(os, "replace", failing_replace)
    new = CalibrationCache()
    new.add("new", 2.0)
    with pytest.raises(OSError, match="disk on fire"):
        new.save(path)
    with pytest.raises(OSError, match="disk on fire"):
        new.export_tensorrt(tmp_path / "calibration.cache")
    assert os.listdir(tmp_path) == ["cache.json"]
    assert path.read_bytes() == before


def test_save_onto_a_directory_leaves_no_temporary(tmp_path):
    (tmp_path / "taken").mkdir()
    with pytest.raises(OSError):
        CalibrationCache().save(tmp_path / "taken")
    assert os.listdir(tmp_path) == ["taken"]
    assert os.listdir(tmp_path / "taken") == []


def test_save_replaces_an_existing_file(tmp_path):
    first = CalibrationCache()
    first.add("a", 1.0)
    path = saved(tmp_path, first)
    second = CalibrationCache()
    second.add("b", 2.0)
    second.save(str(path))
    assert list(CalibrationCache.load(str(path))) == ["b"]
    assert os.listdir(tmp_path) == ["cache.json"]


# ---------------------------------------------------------------------------
# Entries and scales


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2",
                                   "float8_e4m3fnuz", "float8_e5m2fnuz"])
def test_entry_scale_is_scale_from_amax(rng, seed, dtype):
    cache = CalibrationCache()
    amax = float(np.float32(rng.uniform(0, 1000)))
    channels = (rng.uniform(0, 1000, size=9)).astype(np.float32)
    entry = cache.add("t", amax, dtype=dtype)
    per_channel = cache.add("w", channels, dtype=dtype)
    for kwargs in ({}, {"margin": 2}, {"margin": -1, "power_of_2": True}):
        expected = calib.scale_from_amax(amax, dtype, **kwargs)
        assert entry.scale(**kwargs) == expected, f"{kwargs} seed={seed}"
        expected = calib.scale_from_amax(channels, dtype, **kwargs)
        assert np.array_equal(per_channel.scale(**kwargs), expected), \
            f"{kwargs} seed={seed}"
    other = "e5m2" if dtype != "float8_e5m2" else "e4m3"
    assert entry.scale(other) == calib.scale_from_amax(amax, other)


def test_e4m3fn_scale_is_float32_division_by_448(rng, seed):
    amax = random_float32(rng, 200)
    amax = amax[(amax > 2.0 ** -100) & (amax < 2.0 ** 100)]
    cache = CalibrationCache()
    for index, value in enumerate(amax):
        expected = np.float32(value) / np.float32(448)
        assert cache.add(f"t{index}", value).scale() == float(expected), \
            f"amax={value!r} seed={seed}"
    assert cache.add("zero", 0.0).scale() == 1.0
    scales = cache.add("w", amax).scale()
    assert scales.dtype == np.float32
    assert np.array_equal(scales, amax / np.float32(448)), f"seed={seed}"


def test_amax_is_rounded_to_float32_once():
    cache = CalibrationCache()
    assert cache.add("a", 0.1).amax == float(np.float32(0.1))
    assert type(cache.add("b", np.float64(3)).amax) is float
    assert type(cache.add("c", np.array(3, dtype=np.int64)).amax) is float
    assert bits(cache.add("d", -0.0).amax) == 0
    assert np.array_equal(bits(cache.add("e", [-0.0, 0.1]).amax),
                          bits(np.array([0.0, 0.1], dtype=np.float32)))


def test_per_channel_amax_is_a_read_only_copy():
    source = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    entry = CalibrationCache().add("w", source)
    source[0] = 100.0
    assert entry.amax.tolist() == [1.0, 2.0, 3.0]
    assert entry.amax.dtype == np.float32 and entry.amax.shape == (3,)
    with pytest.raises(ValueError):
        entry.amax[0] = 5.0
    with pytest.raises(ValueError):
        entry.amax.flags.writeable = True
    with pytest.raises(AttributeError):
        entry.amax = 2.0
    with pytest.raises(AttributeError):
        entry.other = 1


@pytest.mark.parametrize("copy_of", [
    copy.copy, copy.deepcopy, lambda cache: pickle.loads(pickle.dumps(cache))],
    ids=["copy", "deepcopy", "pickle"])
def test_copied_and_unpickled_entries_stay_immutable(copy_of):
    """A cache (and its entries) that went through copy.copy, copy.deepcopy
    or a pickle round trip holds entries equal to the originals, with equal
    hashes, and as immutable: a read-only per-channel amax that cannot be
    made writeable, no attribute that can be set."""
    cache = CalibrationCache()
    cache.add("w", [1.0, 2.5, 0.125], dtype="e5m2", method="entropy")
    cache.add("x", 3.0)
    copied = copy_of(cache)
    assert copied == cache
    for name, entry in cache.items():
        assert copied[name] == entry and hash(copied[name]) == hash(entry)
        for duplicate in (copied[name], copy_of(entry)):
            assert duplicate == entry and hash(duplicate) == hash(entry)
            with pytest.raises(AttributeError):
                duplicate.amax = 2.0
    for duplicate in (copied["w"], copy_of(cache["w"])):
        assert not duplicate.amax.flags.writeable
        with pytest.raises(ValueError):
            duplicate.amax[0] = 99.0
        with pytest.raises(ValueError):
            duplicate.amax.flags.writeable = True
        assert duplicate.amax.tolist() == [1.0, 2.5, 0.125]
        assert duplicate.dtype == "float8_e5m2"
        assert duplicate.method == "entropy"
    assert copied["x"].amax == 3.0 and copied["x"].dtype == "float8_e4m3fn"


@pytest.mark.parametrize("amax, error, problem", [
    (-1.0, ValueError, "amax is -1.0; every amax must be finite and >= 0"),
    (float("nan"), ValueError, "amax is nan"),
    (float("inf"), ValueError, "amax is inf"),
    (1e39, ValueError, "amax is 1e\\+39; .* as a float32"),
    ([1.0, -2.0], ValueError, "amax\\[1\\] is -2.0"),
    ([], ValueError, "non-empty 1-D array"),
    ([[1.0]], ValueError, "got shape \\(1, 1\\)"),
    ("1.0", TypeError, "amax: expected a real number"),
    (True, TypeError, "amax: expected a real number"),
    (None, TypeError, "amax: expected a real number"),
    (1 + 2j, TypeError, "amax: expected a real number"),
    # Python ints past NumPy's integers: refused as the numbers they are.
    pytest.param(2**128, ValueError, f"amax is {2**128}; .* as a float32",
                 id="2**128"),
    pytest.param(2**128 - 2**103, ValueError, "amax is 3402.*; .* as a "
                 "float32", id="a tie rounding to 2**128"),
    pytest.param(10**400, ValueError, "amax is 10000.*; .* as a float32",
                 id="10**400"),
    pytest.param(-2**70, ValueError, f"amax is {-2**70}; every amax must",
                 id="-2**70"),
    pytest.param([1, -2**70], ValueError, f"amax\\[1\\] is {-2**70}",
                 id="[1, -2**70]"),
    pytest.param([True, 2**70], TypeError, "amax: expected a real number",
                 id="[True, 2**70]"),
])
def test_add_rejects_bad_amax(amax, error, problem):
    cache = CalibrationCache()
    with pytest.raises(error, match=problem):
        cache.add("x", amax)
    assert len(cache) == 0


@pytest.mark.parametrize("amax, stored", [
    (2**70, float(2**70)),
    (2**64, float(2**64)),
    (2**70 + 1, float(2**70)),
    (2**70 + 2**46 + 1, float(2**70 + 2**47)),  # float() first: 2**70
    (2**128 - 2**104, float(np.finfo(np.float32).max)),
    ([1, 2**70], [1.0, float(2**70)]),
    ([0.5, 2**80], [0.5, float(2**80)]),
    ([np.float32(2), 2**65], [2.0, float(2**65)]),
], ids=["2**70", "2**64", "2**70+1", "past a tie", "float32 max", "[1, 2**70]",
        "[0.5, 2**80]", "[float32(2), 2**65]"])
def test_add_takes_python_ints_too_large_for_numpy(amax, stored):
    """Ints past int64/uint64 (a NumPy object array) that float32 holds
    are stored as their float32 values, as smaller ints are; they were a
    TypeError."""
    entry = CalibrationCache().add("x", amax)
    if isinstance(stored, float):
        assert isinstance(entry.amax, float) and entry.amax == stored
    else:
        assert entry.amax.dtype == np.float32
        assert entry.amax.tolist() == stored


def test_add_reads_half_precision_and_fp8_amax_as_their_values():
    """bfloat16 / float16 / FP8 amax (ml_dtypes, torch, fp8q.Tensor) are
    stored as the values they hold (exact in float32). An fp8q.Tensor of
    such a dtype was read through its NumPy view, the codes: e4m3fn 2.5
    was stored as 66.0; bfloat16 ones were a TypeError."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    values = np.array([2.5, 0.125], np.float32)
    cases = [np.array(values, ml_dtypes.bfloat16),
             np.array(values, ml_dtypes.float8_e4m3fn),
             fp8q.cast(values, "float8_e4m3fn"),
             fp8q.cast(values, "bfloat16"), fp8q.cast(values, "float16")]
    for amax in cases:
        entry = CalibrationCache().add("x", amax)
        assert entry.amax.dtype == np.float32, amax
        assert entry.amax.tolist() == [2.5, 0.125], amax
    assert CalibrationCache().add(
        "x", np.array(values, ml_dtypes.bfloat16).max()).amax == 2.5


@pytest.mark.parametrize("name, error", [
    ("", ValueError), (None, TypeError), (3, TypeError)])
def test_add_rejects_bad_names(name, error):
    with pytest.raises(error, match="name"):
        CalibrationCache().add(name, 1.0)


@pytest.mark.parametrize("dtype", [
    "float32", "bfloat16", "uint8", "int8", "bogus", 3, None, fp8q.float16,
    np.float32])
def test_add_rejects_non_fp8_dtypes(dtype):
    with pytest.raises(ValueError, match="^dtype: expected an FP8 dtype"):
        CalibrationCache().add("x", 1.0, dtype=dtype)


@pytest.mark.parametrize("dtype, name", [
    ("e4m3", "float8_e4m3fn"), ("e5m2", "float8_e5m2"),
    (fp8q.float8_e4m3fnuz, "float8_e4m3fnuz"),
    ("float8_e5m2fnuz", "float8_e5m2fnuz"),
])
def test_dtype_aliases_are_stored_by_canonical_name(dtype, name):
    assert CalibrationCache().add("x", 1.0, dtype=dtype).dtype == name


def test_entries_compare_by_value_and_show_themselves():
    cache = CalibrationCache()
    first = cache.add("a", [1.0, 2.0], method="entropy")
    second = cache.add("b", np.array([1, 2]), method="entropy")
    assert first == second and hash(first) == hash(second)
    assert first != cache.add("c", [1.0, 2.0])
    assert cache.add("d", 1.0) != cache.add("e", 1.0, dtype="e5m2")
    assert repr(cache["d"]) == ("fp8q.calib.CalibrationEntry(amax=1.0, "
                                "dtype='float8_e4m3fn', method='max')")
    assert isinstance(cache["d"], calib.CalibrationEntry)


# ---------------------------------------------------------------------------
# The mapping, fingerprints, calibrators, exports


def test_mapping_protocol():
    cache = CalibrationCache()
    assert isinstance(cache, collections.abc.Mapping)
    for name in ("z", "a", "m"):
        cache.add(name, 1.0)
    cache.add("a", 2.0)  # replaces, keeping its place
    assert list(cache) == ["z", "a", "m"] and len(cache) == 3
    assert cache["a"].amax == 2.0 and "a" in cache and "q" not in cache
    assert list(cache.keys()) == ["z", "a", "m"]
    assert [entry.amax for _, entry in cache.items()] == [1.0, 2.0, 1.0]
    assert cache.get("q") is None
    with pytest.raises(KeyError):
        cache["q"]
    del cache["z"]
    cache.remove("m")
    assert list(cache) == ["a"]
    with pytest.raises(KeyError):
        cache.remove("m")
    with pytest.raises(KeyError):
        del cache["m"]
    assert "1 entries" in repr(cache)


def test_equality_includes_the_fingerprint():
    first, second = CalibrationCache(), CalibrationCache({"w": (2,)})
    first.add("a", 1.0)
    second.add("a", 1.0)
    assert first != second
    first.set_fingerprint([("w", [2])])
    assert first == second
    second.add("a", 1.0, method="mse")
    assert first != second


def test_fingerprint_of_accepts_mappings_and_pairs():
    expected = {"w": (3, 4), "b": (4,), "s": ()}
    assert CalibrationCache.fingerprint_of(expected) == expected
    pairs = ((name, np.zeros(shape).shape) for name, shape in expected.items())
    assert CalibrationCache.fingerprint_of(pairs) == expected
    numpy_dims = {"w": [np.int64(3), np.uint8(4)], "b": np.array([4]), "s": []}
    assert CalibrationCache.fingerprint_of(numpy_dims) == expected
    cache = CalibrationCache(expected)
    fingerprint = cache.fingerprint
    fingerprint["w"] = (1,)
    assert cache.fingerprint == expected
    cache.set_fingerprint(None)
    assert cache.fingerprint is None


@pytest.mark.parametrize("named_shapes, error, problem", [
    ({"w": (3, -1)}, ValueError, "integers >= 0"),
    ({"w": (3.0,)}, ValueError, "integers >= 0"),
    ({"w": (True,)}, ValueError, "integers >= 0"),
    ({"w": 3}, ValueError, "integers >= 0"),
    ({"w": "ab"}, ValueError, "integers >= 0"),
    ({"": (1,)}, ValueError, "fingerprint name: must not be empty"),
    ({1: (1,)}, TypeError, "fingerprint name: expected a str"),
    ([("w", (1,)), ("w", (1,))], ValueError, "'w' is given twice"),
])
def test_fingerprint_of_rejects(named_shapes, error, problem):
    with pytest.raises(error, match=problem):
        CalibrationCache.fingerprint_of(named_shapes)
    with pytest.raises(error, match=problem):
        CalibrationCache(named_shapes)


def test_add_calibrator(rng, seed):
    x = rng.standard_normal((64, 8)).astype(np.float32)
    cache = CalibrationCache()

    tensor = calib.MaxCalibrator()
    with pytest.raises(ValueError, match="no amax yet"):
        cache.add_calibrator("t", tensor)
    tensor.update(x)
    assert cache.add_calibrator("t", tensor).amax == float(np.abs(x).max()), \
        f"seed={seed}"

    channels = calib.MaxCalibrator(channel_axis=1)
    channels.update(x)
    entry = cache.add_calibrator("c", channels, dtype="e5m2")
    assert np.array_equal(entry.amax, np.abs(x).max(axis=0)), f"seed={seed}"
    assert (entry.dtype, entry.method) == ("float8_e5m2", "max")
    with pytest.raises(ValueError, match="only method='max'"):
        cache.add_calibrator("c", channels, method="entropy")

    histogram = calib.HistogramCalibrator()
    histogram.update(x)
    entry = cache.add_calibrator("h", histogram, method="percentile",
                                 percentile=99.0)
    expected = histogram.compute_amax("percentile", percentile=99.0)
    assert entry.amax == expected, f"seed={seed}"
    assert entry.method == "percentile"
    entry = cache.add_calibrator("e", histogram, method="entropy",
                                 dtype="e5m2")
    expected = histogram.compute_amax("entropy", dtype="e5m2")
    assert entry.amax == expected, f"seed={seed}"

    with pytest.raises(TypeError,
                       match="MaxCalibrator or HistogramCalibrator"):
        cache.add_calibrator("x", object())
    assert list(cache) == ["t", "c", "h", "e"]


def test_exported_names():
    assert fp8q.CalibrationCache is calib.CalibrationCache
    assert "CalibrationCache" in fp8q.__all__
    for name in ("CalibrationCache", "CalibrationCacheWarning",
                 "CalibrationEntry"):
        assert name in calib.__all__
        assert getattr(calib, name).__doc__


@pytest.mark.parametrize("amax", ["0x1p+1024", "0x1p+99999999999",
                                  ["0x1p+0", "0x1.fffffffffffffp+1023"]])
def test_amax_beyond_float64_is_a_value_error(tmp_path, amax):
    # Regression: float.fromhex's OverflowError escaped load.
    path = saved(tmp_path, sample_cache(np.random.default_rng(0)))
    name = next(iter(json.loads(path.read_text())["entries"]))
    reseal(path, lambda document: document["entries"][name].update(amax=amax))
    with pytest.raises(ValueError, match=f"entry '{name}': amax value .* is "
                       "not a float32 value"):
        CalibrationCache.load(path)


def test_deeply_nested_json_is_a_value_error(tmp_path):
    # Regression: json's RecursionError escaped load.
    path = tmp_path / "nested.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="nested too deeply"):
        CalibrationCache.load(path)
