"""How fp8q._C was built: it links no CUDA library, and its build facts
(_C._build_info()) agree with one another and with the kernels built.

The NEEDED entries are read from the module's ELF dynamic section by a small
parser here (no readelf needed); on a platform whose modules are not ELF
(Windows .pyd) that test skips.
"""
from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

import fp8q
from fp8q import _C

BUILD = _C._build_info()
CUDA_LIBRARY = re.compile(r"^(lib)?(cuda|cudart|cublas|cublasLt|nvrtc|nvJitLink)([._-]|\d|$)",
                          re.IGNORECASE)
ARCH_NAME = re.compile(r"^(sm|compute)_\d+[af]?$")
CPU_ONLY_REASONS = ("nvcc not found", "nvcc detection disabled (FP8Q_DETECT_CUDA=OFF)",
                    "no kernels asked for (FP8Q_CUDA_ARCHS=none)")

DT_NULL, DT_NEEDED = 0, 1
SHT_DYNAMIC = 6


def elf_needed(path: Path) -> list[str]:
    """The DT_NEEDED names of an ELF shared object (32/64-bit, either byte
    order), read from its section headers."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF":
        raise ValueError(f"{path} is not an ELF file")
    is_64 = data[4] == 2
    order = "<" if data[5] == 1 else ">"
    if is_64:
        (section_offset,) = struct.unpack_from(order + "Q", data, 0x28)
        entry_size, count = struct.unpack_from(order + "HH", data, 0x3A)
        section_format, dynamic_format = order + "IIQQQQIIQQ", order + "qQ"
    else:
        (section_offset,) = struct.unpack_from(order + "I", data, 0x20)
        entry_size, count = struct.unpack_from(order + "HH", data, 0x2E)
        section_format, dynamic_format = order + "IIIIIIIIII", order + "iI"
    sections = [struct.unpack_from(section_format, data, section_offset + i * entry_size)
                for i in range(count)]
    for section in sections:
        if section[1] != SHT_DYNAMIC:
            continue
        offset, size, link = section[4], section[5], section[6]
        strings_offset = sections[link][4]  # the .dynstr section
        step = struct.calcsize(dynamic_format)
        names = []
        for position in range(offset, offset + size, step):
            tag, value = struct.unpack_from(dynamic_format, data, position)
            if tag == DT_NULL:
                break
            if tag == DT_NEEDED:
                end = data.index(b"\0", strings_offset + value)
                names.append(data[strings_offset + value:end].decode())
        return names
    return []


def test_module_links_no_cuda_library():
    module = Path(_C.__file__)
    if module.read_bytes()[:4] != b"\x7fELF":
        pytest.skip(f"{module.name} is not an ELF file (checked on Linux)")
    needed = elf_needed(module)
    assert needed, f"no NEEDED entries read from {module} (the parser is broken)"
    cuda = [name for name in needed if CUDA_LIBRARY.match(name)]
    assert cuda == [], f"{module.name} links {cuda} (all NEEDED: {needed})"


def test_cuda_library_pattern():
    assert all(CUDA_LIBRARY.match(name) for name in [
        "libcuda.so.1", "libcudart.so.13", "libcublas.so.13", "libcublasLt.so.12",
        "libnvrtc.so.13", "libnvJitLink.so.13", "cudart64_12.dll", "cublasLt64_13.dll"])
    assert not any(CUDA_LIBRARY.match(name) for name in [
        "libc.so.6", "libm.so.6", "libpthread.so.0", "libstdc++.so.6", "libcurl.so.4"])


def test_build_facts_are_consistent():
    archs = BUILD["kernel_archs"]
    assert isinstance(archs, list)
    assert all(isinstance(arch, str) and ARCH_NAME.match(arch) for arch in archs), archs
    if BUILD["cuda_kernels"]:
        assert BUILD["cuda_kernels_reason"] == "built"
        assert BUILD["nvcc_version"]
        real = [arch for arch in archs if arch.startswith("sm_")]
        ptx = [arch for arch in archs if arch.startswith("compute_")]
        # real code first, oldest to newest, then PTX for the newest
        assert real and real == sorted(real, key=lambda arch: int(arch[3:]))
        assert ptx == ["compute_" + real[-1][3:]], archs
        assert archs == real + ptx
        # The release that wrote the real code: an older ptxas's, else nvcc's.
        code_version = BUILD["ptxas_version"] or BUILD["nvcc_version"]
        major, minor = (int(part) for part in code_version.split(".")[:2])
        assert BUILD["cuda_min_driver_version"] == major * 1000
        assert BUILD["cuda_ptx_min_driver_version"] == major * 1000 + minor * 10
    else:
        assert archs == []
        assert BUILD["cuda_min_driver_version"] is None
        assert BUILD["cuda_ptx_min_driver_version"] is None
        reason = BUILD["cuda_kernels_reason"]
        assert reason in CPU_ONLY_REASONS or reason.startswith("nvcc failed: "), reason
        if reason == "nvcc not found":
            assert BUILD["nvcc_version"] is None
        assert BUILD["ptxas_version"] is None


def test_info_reports_kernel_archs():
    build = fp8q.info()["build"]
    assert build["cuda_kernels"] == BUILD["cuda_kernels"]
    assert build["kernel_archs"] == BUILD["kernel_archs"]
    assert build["cuda_min_driver_version"] == BUILD["cuda_min_driver_version"]
