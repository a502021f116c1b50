"""kernels/fatbin_images.py reads how a fatbin stores its images and, with
--require-lz4, refuses one a CUDA 12.0 driver could not decompress (any
image uncompressed or zstd-compressed). On fatbins written here byte by byte
from the layout, and on ones nvcc's own fatbinary packs where it is found.
"""
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "kernels" / "fatbin_images.py"

pytestmark = pytest.mark.skipif(not TOOL.is_file(),
                                reason="needs the source tree (kernels/)")


def entry(kind, arch, payload, flags, decompressed):
    """One image: its 64-byte header (kind, version 0x101, header size 64,
    stored size, compressed size, PTX version, arch, name offset/length,
    flags, padding, decompressed size) and its bytes."""
    return struct.pack("<HHIQQHHIIIQQQ", kind, 0x101, 64, len(payload), len(payload),
                       0, 1, arch, 0, 0, flags, 0, decompressed) + payload


def fatbin(*entries):
    body = b"".join(entries)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def run_tool(path, *options):
    return subprocess.run([sys.executable, str(TOOL), str(path), *options],
                          capture_output=True, text=True, timeout=60)


def test_lists_every_image_and_accepts_an_all_lz4_fatbin(tmp_path):
    path = tmp_path / "lz4.fatbin"
    path.write_bytes(fatbin(entry(2, 75, b"\x11" * 40, 0x2011, 4000),
                            entry(2, 90, b"\x22" * 24, 0x2011, 3000),
                            entry(1, 90, b"\x33" * 8, 0x2011, 9000)))
    completed = run_tool(path, "--require-lz4")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    lines = completed.stdout.splitlines()
    assert lines[0].split() == ["elf", "sm_75", "40", "bytes", "stored", "4,000",
                                "decompressed", "lz4"]
    assert lines[2].split()[:2] == ["ptx", "sm_90"]
    assert lines[3] == f"3 images, {path.stat().st_size:,} bytes in the file, 16,000 decompressed"


@pytest.mark.parametrize("flags, verdict", [(0x11, "none"), (0x8011, "zstd")])
def test_refuses_an_image_that_is_not_lz4(tmp_path, flags, verdict):
    path = tmp_path / "mixed.fatbin"
    path.write_bytes(fatbin(entry(2, 75, b"\x11" * 40, 0x2011, 4000),
                            entry(1, 120, b"\x33" * 16, flags, 16 if flags == 0x11 else 900)))
    assert run_tool(path).returncode == 0
    completed = run_tool(path, "--require-lz4")
    assert completed.returncode == 1
    assert f"ptx sm_120 ({verdict})" in completed.stderr
    assert "sm_75" not in completed.stderr


@pytest.mark.parametrize("flags, verdict", [(0x8011, None), (0x2011, "lz4"), (0x11, "none")])
def test_require_zstd_accepts_only_zstd_images(tmp_path, flags, verdict):
    """The PTX file's check (.ci/run step 2b): every image zstd."""
    path = tmp_path / "ptx.fatbin"
    path.write_bytes(fatbin(entry(1, 120, b"\x33" * 16, flags, 16 if flags == 0x11 else 900)))
    completed = run_tool(path, "--require-zstd")
    if verdict is None:
        assert completed.returncode == 0, completed.stderr
    else:
        assert completed.returncode == 1
        assert completed.stderr == ("fatbin_images.py: not every image is ZSTD-compressed: "
                                    f"ptx sm_120 ({verdict})\n")


def test_a_damaged_fatbin_is_an_error(tmp_path):
    path = tmp_path / "short.fatbin"
    path.write_bytes(fatbin(entry(2, 75, b"\x11" * 40, 0x2011, 4000))[:-8])
    completed = run_tool(path)
    assert completed.returncode != 0
    assert "shorter than its header says" in completed.stderr


def fatbinary():
    """nvcc's fatbinary for this system (fatbinary.exe on Windows, where a
    Linux toolkit seen through Wine's drive mapping cannot run), or None."""
    name = "fatbinary.exe" if os.name == "nt" else "fatbinary"
    for folder in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if folder and (Path(folder) / "bin" / name).is_file():
            return str(Path(folder) / "bin" / name)
    return shutil.which(name)


@pytest.mark.skipif(fatbinary() is None, reason="needs fatbinary (from nvcc)")
@pytest.mark.parametrize("mode, verdict", [("speed", "lz4"), ("balance", "zstd"),
                                           ("size", "zstd")])
def test_reads_what_fatbinary_writes(tmp_path, mode, verdict):
    """CMakeLists.txt's CUDA 12 route packs with `--compress-all
    --compress-mode=speed`: LZ4; the other modes write zstd."""
    ptx = tmp_path / "k.ptx"
    ptx.write_text(".version 8.8\n.target sm_90\n.address_size 64\n"
                   + "// padding that compresses\n" * 400)
    path = tmp_path / f"{mode}.fatbin"
    subprocess.run([fatbinary(), f"--create={path}", "-64", "--compress-all",
                    f"--compress-mode={mode}", f"--image3=kind=ptx,sm=90,file={ptx}"],
                   check=True, capture_output=True, timeout=120)
    completed = run_tool(path, "--require-lz4")
    assert completed.stdout.splitlines()[0].split()[:2] == ["ptx", "sm_90"]
    assert completed.stdout.splitlines()[0].split()[-1] == verdict
    assert completed.returncode == (0 if verdict == "lz4" else 1)


@pytest.mark.skipif(shutil.which("zstd") is None, reason="needs the zstd program")
@pytest.mark.skipif(fatbinary() is None, reason="needs fatbinary (from nvcc)")
def test_extracts_the_images_fatbinary_packed(tmp_path):
    """--extract DIR writes each zstd image back decompressed, its listed
    size, as compute_ARCH.ptx / sm_ARCH.cubin (fatbinary keeps the PTX's
    code, not its comments); an LZ4 one is refused."""
    ptx = tmp_path / "k.ptx"
    ptx.write_text(".version 8.8\n.target sm_90\n.address_size 64\n"
                   + "// padding that compresses\n" * 400)
    packed = tmp_path / "size.fatbin"
    subprocess.run([fatbinary(), f"--create={packed}", "-64", "--compress-all",
                    "--compress-mode=size", f"--image3=kind=ptx,sm=90,file={ptx}"],
                   check=True, capture_output=True, timeout=120)
    completed = run_tool(packed, "--extract", str(tmp_path / "out"))
    assert completed.returncode == 0, completed.stderr
    written = (tmp_path / "out" / "compute_90.ptx").read_bytes()
    listed = int(completed.stdout.splitlines()[0].split()[5].replace(",", ""))
    assert len(written) == listed
    assert written.startswith(b".version 8.8\n.target sm_90\n.address_size 64")
    lz4 = tmp_path / "speed.fatbin"
    subprocess.run([fatbinary(), f"--create={lz4}", "-64", "--compress-all",
                    "--compress-mode=speed", f"--image3=kind=ptx,sm=90,file={ptx}"],
                   check=True, capture_output=True, timeout=120)
    refused = run_tool(lz4, "--extract", str(tmp_path / "out2"))
    assert refused.returncode != 0 and "cannot extract a lz4 image" in refused.stderr
