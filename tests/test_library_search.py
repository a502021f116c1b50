"""Where fp8q looks for cuBLASLt: the running interpreter's install folders,
CUDA_PATH / CUDA_HOME and the system loader, never the working directory, a
script's folder or an extra sys.path folder (csrc/cuda/cublaslt.h).

A copy of the fake cuBLASLt (tests/fake_cublaslt.c) is planted as
nvidia/cu13/lib/libcublasLt.so.13 (and .12) in each of those folders; a
child interpreter on the fake driver asks for cuBLASLt. The same copy in a
CUDA_PATH toolkit is found, so the planted ones would load if looked for.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fake_gpu import CUBLASLT_NAME, build_fake_driver, child_environment

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the fake driver is built for Linux")

PROBE = """
import json, sys, sysconfig
# The working directory twice over ('' and '.'), as `python -m` and
# `python -c` put it on sys.path.
sys.path[1:1] = ['', '.']
import fp8q
print(json.dumps({"info": fp8q._C._cublaslt_info(),
                  "purelib": sysconfig.get_paths()["purelib"],
                  "sys_path": sys.path}))
"""

NAMES = ("libcublasLt.so.13", "libcublasLt.so.12")


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory):
    return build_fake_driver(tmp_path_factory.mktemp("fake-cuda"))


def plant(fake_driver, folder):
    """Copies the fake cuBLASLt under every name into folder; returns it."""
    folder.mkdir(parents=True)
    for name in NAMES:
        shutil.copy(Path(fake_driver).with_name(CUBLASLT_NAME), folder / name)
    return folder


def probe(fake_driver, tmp_path, toolkit=None):
    """Runs PROBE as a script in a planted folder, from a planted working
    directory, with a planted folder on PYTHONPATH; returns its facts."""
    places = {place: tmp_path / place for place in ("cwd", "script", "extra")}
    for folder in places.values():
        plant(fake_driver, folder / "nvidia" / "cu13" / "lib")
    script = places["script"] / "probe.py"
    script.write_text(PROBE)
    environment = child_environment(fake_driver)
    environment.pop("FP8Q_CUBLASLT", None)
    for variable in ("CUDA_PATH", "CUDA_HOME"):
        environment.pop(variable, None)
    if toolkit is not None:
        environment["CUDA_PATH"] = str(toolkit)
    environment["PYTHONPATH"] = os.pathsep.join(
        filter(None, [environment.get("PYTHONPATH"), str(places["extra"])]))
    completed = subprocess.run(
        [sys.executable, str(script)], cwd=places["cwd"], env=environment,
        capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    facts = json.loads(completed.stdout)
    # The probe really had every planted folder on sys.path.
    for place in ("", ".", str(places["script"]), str(places["extra"])):
        assert place in facts["sys_path"], (place, facts["sys_path"])
    return facts


def test_a_planted_cublaslt_is_never_loaded(fake_driver, tmp_path):
    facts = probe(fake_driver, tmp_path)
    info = facts["info"]
    planted = str(tmp_path)
    assert not (info["found"] and info["path"].startswith(planted)), info
    assert not any(planted in line for line in info["search"]), info["search"]
    if info["found"]:
        pytest.skip(f"a real cuBLASLt is installed here ({info['path']}): "
                    "the search stopped there")
    # The install folders were searched, and every try says why it failed.
    wheel_folder = os.path.join(os.path.normpath(facts["purelib"]),
                                "nvidia", "cu13", "lib", NAMES[0])
    tried = [line.split(" (")[0] for line in info["search"]]
    assert wheel_folder in tried, tried
    assert all(line.endswith(")") for line in info["search"]), info["search"]
    assert NAMES[0] in tried and NAMES[1] in tried, tried  # the system loader


def test_the_same_library_in_cuda_path_is_found(fake_driver, tmp_path):
    toolkit = tmp_path / "toolkit"
    plant(fake_driver, toolkit / "lib64")
    info = probe(fake_driver, tmp_path, toolkit=toolkit)["info"]
    assert info["found"], info
    if not info["path"].startswith(str(toolkit)):
        pytest.skip(f"a real cuBLASLt is installed here ({info['path']}): "
                    "the search stopped there")
    assert info["path"] == str(toolkit / "lib64" / NAMES[0]), info
    assert info["version"] == "13.10.0"


def test_the_error_carries_the_search_or_points_to_info(fake_driver,
                                                         tmp_path):
    """A long search (many install folders) does not fit the message: it
    says how many places and where to read them, instead of ending
    mid-path."""
    facts = probe(fake_driver, tmp_path)
    info = facts["info"]
    if info["found"]:
        pytest.skip(f"a real cuBLASLt is installed here ({info['path']})")
    if info["error"].startswith("cuBLASLt not found: tried "):
        for line in info["search"]:
            assert line in info["error"], (line, info["error"])
    else:
        assert info["error"].startswith(
            f"cuBLASLt not found in {len(info['search'])} places "
            "(`python -m fp8q info` lists each"), info["error"]
    text = subprocess.run(
        [sys.executable, "-m", "fp8q", "info"], cwd=tmp_path,
        env={**child_environment(fake_driver), "FP8Q_CUBLASLT": ""},
        capture_output=True, text=True, timeout=120).stdout
    if "not usable" in text:
        assert "  tried" in text, text


@pytest.mark.parametrize("relative", [".", "cuda", "./"])
def test_a_relative_cuda_path_is_ignored_and_logged(fake_driver, tmp_path,
                                                    relative):
    """CUDA_PATH=. (or another relative folder) would name the working
    directory, where a cuBLASLt is planted as lib64/ and lib/: the search
    skips it and says so in `info`'s list of places."""
    for toolkit in (tmp_path / "cwd", tmp_path / "cwd" / "cuda"):
        for sub in ("lib64", "lib"):
            plant(fake_driver, toolkit / sub)
    facts = probe(fake_driver, tmp_path, toolkit=relative)
    info = facts["info"]
    planted = str(tmp_path)
    assert not (info["found"] and info["path"].startswith(planted)), info
    assert not any(planted in line for line in info["search"]), info["search"]
    assert (f"CUDA_PATH={relative} (not an absolute path: ignored, as it "
            "would be the working directory's)") in info["search"], \
        info["search"]
