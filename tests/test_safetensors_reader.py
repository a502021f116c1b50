"""fp8q._safetensors against the safetensors package (the oracle): headers
it refuses fp8q refuses too, naming the tensor and the problem, and files
either one writes the other reads back bit for bit."""
import json
import struct

import numpy as np
import pytest

from fp8q._safetensors import SafetensorsReader, write_safetensors

# torch first: where it is absent (the Windows suite under Wine, whose
# safetensors wheel cannot load its Rust DLL: an ImportError pytest 9's
# importorskip does not skip), the module skips for the reason expected.
torch = pytest.importorskip("torch", reason="PyTorch is not installed")
safetensors = pytest.importorskip("safetensors")
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

DATA = np.arange(8, dtype=np.float32).tobytes()


def f32(shape, begin, end):
    return {"dtype": "F32", "shape": shape, "data_offsets": [begin, end]}


def craft(path, header, data):
    """A file of `header` (a dict, or the JSON's raw bytes) and `data`."""
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return path


def safetensors_refuses(path):
    try:
        with safe_open(str(path), "np") as file:
            file.keys()
    except Exception:  # SafetensorError, its only error for a bad header
        return True
    return False


# name: (header, data bytes, what fp8q's message says)
MALFORMED = {
    "overlapping offsets": (
        {"a": f32([4], 0, 16), "b": f32([4], 8, 24)}, DATA[:24],
        "tensor 'b': offsets 8..24 overlap those of tensor 'a', which end "
        "at 16"),
    "two tensors on the same bytes": (
        {"a": f32([4], 0, 16), "b": f32([4], 0, 16)}, DATA[:16],
        "tensor 'b': offsets 0..16 overlap those of tensor 'a'"),
    "an empty tensor inside another": (
        {"a": f32([2], 0, 8), "e": f32([0], 4, 4)}, DATA[:8],
        "tensor 'e': offsets 4..4 overlap those of tensor 'a'"),
    "a gap between tensors": (
        {"a": f32([2], 0, 8), "b": f32([2], 16, 24)}, DATA[:24],
        "tensor 'b': offsets 16..24 leave data bytes 8..16 in no tensor"),
    "a gap before the first tensor": (
        {"a": f32([2], 8, 16)}, DATA[:16],
        "tensor 'a': offsets 8..16 leave data bytes 0..8 in no tensor"),
    "unreferenced trailing bytes": (
        {"a": f32([2], 0, 8)}, DATA,
        "data bytes 8..32 (after tensor 'a') are in no tensor"),
    "data bytes and no tensor": (
        {}, DATA[:8], "data bytes 0..8 are in no tensor"),
    "a float extent": (
        {"a": f32([2.7], 0, 8)}, DATA[:8],
        "tensor 'a': shape [2.7] is not a list of integers >= 0"),
    "an integral float extent": (
        {"a": f32([2.0], 0, 8)}, DATA[:8],
        "tensor 'a': shape [2.0] is not"),
    "a bool extent": (
        {"a": f32([True, 2], 0, 8)}, DATA[:8],
        "tensor 'a': shape [true, 2] is not"),
    "a negative extent": (
        {"a": f32([-2], 0, 8)}, DATA[:8], "tensor 'a': shape [-2] is not"),
    "a shape that is a string": (
        {"a": f32("2", 0, 8)}, DATA[:8], "tensor 'a': shape \"2\" is not"),
    "offsets as strings": (
        {"a": f32([2], "0", "8")}, DATA[:8],
        "tensor 'a': data_offsets [\"0\", \"8\"] is not a list of two "
        "integers >= 0"),
    "three offsets": (
        {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8, 8]}},
        DATA[:8], "tensor 'a': data_offsets [0, 8, 8] is not"),
    "a float offset": (
        {"a": f32([2], 0, 8.0)}, DATA[:8],
        "tensor 'a': data_offsets [0, 8.0] is not"),
    "a dtype that is not a string": (
        {"a": {"dtype": ["F32"], "shape": [2], "data_offsets": [0, 8]}},
        DATA[:8], "tensor 'a' has unknown dtype ['F32']"),
    "an entry that is not an object": (
        {"a": [2]}, DATA[:8],
        "tensor 'a': its entry is a JSON array, not an object"),
    "an entry without a shape": (
        {"a": {"dtype": "F32", "data_offsets": [0, 8]}}, DATA[:8],
        "tensor 'a': its entry has no 'shape'"),
    "__metadata__ a list": (
        {"__metadata__": [["k", "v"]], "a": f32([2], 0, 8)}, DATA[:8],
        "__metadata__ is a JSON array, not an object of strings"),
    "__metadata__ value a number": (
        {"__metadata__": {"k": 5}, "a": f32([2], 0, 8)}, DATA[:8],
        "__metadata__ 'k' is a JSON number, not a string"),
    "__metadata__ value null": (
        {"__metadata__": {"k": None}, "a": f32([2], 0, 8)}, DATA[:8],
        "__metadata__ 'k' is a JSON null, not a string"),
    "a repeated tensor name": (
        b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
        b'"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', DATA[:8],
        "the header gives 'a' twice in one object"),
    "a repeated entry field": (
        b'{"a":{"dtype":"F32","dtype":"F32","shape":[2],'
        b'"data_offsets":[0,8]}}', DATA[:8],
        "the header gives 'dtype' twice in one object"),
    "a UTF-8 BOM before the JSON": (
        b'\xef\xbb\xbf{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}',
        DATA[:8], "the header is not JSON (Unexpected UTF-8 BOM"),
    "a UTF-16 header": (
        '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'.encode(
            "utf-16"), DATA[:8], "the header is not JSON ('utf-8' codec"),
    "NaN as an extent": (
        b'{"a":{"dtype":"F32","shape":[NaN],"data_offsets":[0,8]}}',
        DATA[:8], "tensor 'a': shape [NaN] is not"),
}


@pytest.mark.parametrize("case", MALFORMED, ids=list(MALFORMED))
def test_reader_refuses_what_safetensors_refuses(tmp_path, case):
    header, data, message = MALFORMED[case]
    path = craft(tmp_path / "bad.safetensors", header, data)
    assert safetensors_refuses(path), case
    with pytest.raises(ValueError) as error:
        SafetensorsReader(path)
    assert str(error.value).startswith(
        f"{path}: not a valid safetensors file: "), str(error.value)
    assert message in str(error.value), str(error.value)


def test_a_repeated_name_is_refused_even_where_both_entries_agree(tmp_path):
    """The safetensors package keeps the last of two equal entries; fp8q
    refuses the ambiguity outright."""
    entry = b'{"dtype":"F32","shape":[2],"data_offsets":[0,8]}'
    path = craft(tmp_path / "twice.safetensors",
                 b'{"a":' + entry + b',"a":' + entry + b"}", DATA[:8])
    with pytest.raises(ValueError, match="gives 'a' twice"):
        SafetensorsReader(path)


def test_valid_edge_cases_both_accept(tmp_path):
    """Empty tensors sharing an offset with others, in any header order,
    a 0-d tensor, "__metadata__": null, fields it ignores, padding."""
    header = (b'{"__metadata__":null,"z":{"dtype":"F32","shape":[0,3],'
              b'"data_offsets":[12,12]},"b":{"dtype":"F32","shape":[2],'
              b'"data_offsets":[4,12],"extra":1},"e":{"dtype":"F32",'
              b'"shape":[0],"data_offsets":[0,0]},"s":{"dtype":"F32",'
              b'"shape":[],"data_offsets":[0,4]}}   ')
    path = craft(tmp_path / "edge.safetensors", header, DATA[:12])
    assert not safetensors_refuses(path)
    reader = SafetensorsReader(path)
    assert reader.entries == {"z": ("F32", (0, 3)), "b": ("F32", (2,)),
                              "e": ("F32", (0,)), "s": ("F32", ())}
    assert reader.metadata == {}
    assert reader.tensor("s").tolist() == 0.0
    assert reader.tensor("b").tolist() == [1.0, 2.0]
    reader.close()


def tensors_of_every_kind():
    generator = torch.Generator().manual_seed(0)
    values = torch.randn(3, 5, generator=generator)
    return {"w.f32": values, "w.f16": values.half(),
            "w.bf16": values.bfloat16(),
            "w.e4m3": values.to(torch.float8_e4m3fn),
            "w.e5m2": values.to(torch.float8_e5m2),
            "empty": torch.zeros(0, 4), "scalar": torch.tensor(2.5),
            "steps": torch.tensor([7, -1]), "flag": torch.tensor([True]),
            "last.empty": torch.zeros(2, 0, dtype=torch.bfloat16)}


CODES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
         torch.float8_e4m3fn: "F8_E4M3", torch.float8_e5m2: "F8_E5M2",
         torch.int64: "I64", torch.bool: "BOOL"}


def raw(tensor):
    return tensor.contiguous().reshape(-1).view(torch.uint8).numpy()


def test_reads_what_safetensors_writes(tmp_path):
    tensors = tensors_of_every_kind()
    path = tmp_path / "theirs.safetensors"
    save_file(tensors, str(path), metadata={"format": "pt", "k": "v"})
    reader = SafetensorsReader(path)
    assert reader.metadata == {"format": "pt", "k": "v"}
    assert set(reader.entries) == set(tensors)
    for name, tensor in tensors.items():
        assert reader.entries[name] == (CODES[tensor.dtype],
                                        tuple(tensor.shape)), name
        ours = np.ascontiguousarray(reader.tensor(name)).reshape(-1)
        np.testing.assert_array_equal(ours.view(np.uint8), raw(tensor))
    reader.close()


def test_safetensors_reads_what_fp8q_writes(tmp_path):
    """Empty tensors (last among them) and a 0-d one included: the writer
    never makes a file the reader, or the safetensors package, refuses."""
    tensors = tensors_of_every_kind()
    path = tmp_path / "ours.safetensors"
    with open(path, "wb") as file:
        write_safetensors(file, [(name, CODES[t.dtype], tuple(t.shape),
                                  lambda t=t: raw(t))
                                 for name, t in tensors.items()],
                          {"fp8q_format": "fp8q", "note": "ü"})
    with safe_open(str(path), "pt") as file:
        assert file.metadata() == {"fp8q_format": "fp8q", "note": "ü"}
        assert list(file.keys()) == sorted(tensors)
        for name, tensor in tensors.items():
            theirs = file.get_tensor(name)
            assert theirs.dtype == tensor.dtype and \
                theirs.shape == tensor.shape, name
            np.testing.assert_array_equal(raw(theirs), raw(tensor))
    reader = SafetensorsReader(path)
    assert list(reader.entries) == list(tensors)
    reader.close()


def test_writer_refuses_what_the_reader_would(tmp_path):
    values = np.ones(2, np.float32)
    with open(tmp_path / "out.safetensors", "wb") as file:
        with pytest.raises(ValueError, match="metadata 'k': int, not a "
                                             "string"):
            write_safetensors(file, [("a", "F32", (2,), lambda: values)],
                              {"k": 5})
        with pytest.raises(ValueError, match="'__metadata__' is the "
                                             "header's metadata key"):
            write_safetensors(file, [("__metadata__", "F32", (2,),
                                      lambda: values)], {})


def test_convert_refuses_metadata_safetensors_could_not_read(tmp_path):
    """Metadata that is not str -> str used to be copied into the output,
    a file the safetensors package then could not open."""
    from fp8q._cli._convert_checkpoint import ConvertError, convert
    path = craft(tmp_path / "in.safetensors",
                 {"__metadata__": {"k": 5}, "a": f32([2], 0, 8)}, DATA[:8])
    with pytest.raises(ConvertError, match="__metadata__ 'k' is a JSON "
                                           "number, not a string"):
        convert(path, tmp_path / "out.safetensors", all_2d=True)
    assert not (tmp_path / "out.safetensors").exists()


def safetensors_codes(tmp_path):
    """The dtype codes the safetensors package knows, from its refusal of
    one it does not ("unknown variant `x`, expected one of `BOOL`, ...")."""
    path = craft(tmp_path / "unknown.safetensors",
                 {"a": {"dtype": "x", "shape": [0], "data_offsets": [0, 0]}},
                 b"")
    with pytest.raises(Exception) as error:
        with safe_open(str(path), "np"):
            pass
    message = str(error.value)
    return message[message.index("expected one of"):].split("`")[1::2]


def test_every_code_of_the_format_is_read_or_refused_by_name(tmp_path):
    """Each code safetensors defines is in DTYPES (read; the ones fp8q does
    not compute with are copied byte for byte) or in UNREAD_DTYPES (refused
    as valid but unread, not as an invalid file)."""
    from fp8q._safetensors import DTYPES, UNREAD_DTYPES
    codes = safetensors_codes(tmp_path)
    assert {"F32", "C64", "F8_E8M0", "F4"} <= set(codes)
    assert set(codes) == set(DTYPES) | set(UNREAD_DTYPES)
    assert not set(DTYPES) & set(UNREAD_DTYPES)
    bits = {"F4": 4, "F6_E2M3": 6, "F6_E3M2": 6}
    for code in UNREAD_DTYPES:
        path = craft(tmp_path / f"{code}.safetensors",
                     {"a": {"dtype": code, "shape": [8],
                            "data_offsets": [0, bits.get(code, 8)]}},
                     bytes(bits.get(code, 8)))
        assert not safetensors_refuses(path), code
        with pytest.raises(ValueError) as error:
            SafetensorsReader(path)
        assert str(error.value).startswith(
            f"{path}: tensor 'a' has dtype {code}, valid in safetensors but "
            "not read by fp8q ("), str(error.value)


def test_an_unknown_code_is_an_invalid_file(tmp_path):
    path = craft(tmp_path / "q4.safetensors",
                 {"a": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 2]}},
                 bytes(2))
    assert safetensors_refuses(path)
    with pytest.raises(ValueError, match="not a valid safetensors file: "
                                         "tensor 'a' has unknown dtype 'Q4'"):
        SafetensorsReader(path)


@pytest.mark.parametrize("code", ["C64", "F8_E8M0"])
def test_convert_copies_dtypes_it_does_not_compute_with(tmp_path, code):
    """A complex64 buffer or an E8M0 scale beside a weight: convert
    quantizes the weight and copies the other tensor byte for byte, into a
    file the safetensors package reads back."""
    from safetensors.torch import load_file
    from fp8q._cli._convert_checkpoint import convert
    source, target = tmp_path / "in.safetensors", tmp_path / "out.safetensors"
    other = (torch.randn(4, dtype=torch.complex64) if code == "C64"
             else torch.tensor([0.5, 1, 2, 4]).to(torch.float8_e8m0fnu))
    save_file({"a.weight": torch.randn(8, 16), "buf": other}, str(source))
    reader = SafetensorsReader(source)
    assert reader.entries["buf"] == (code, (4,))
    reader.close()
    rows = convert(source, target)[0]
    assert [row[0] for row in rows] == ["a.weight"]
    copied = load_file(str(target))
    assert copied["buf"].dtype == other.dtype
    np.testing.assert_array_equal(raw(copied["buf"]), raw(other))
    assert copied["a.weight"].dtype == torch.float8_e4m3fn
