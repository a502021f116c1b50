"""fp8q._atomic_file.atomic_file, the one way fp8q's savers replace a file
(CalibrationCache.save, fp8q.gemm_tuning.save, python -m fp8q convert):
whole or not at all, no temporary file left behind, and two writers of one
path never share a temporary file (gemm_tuning.save once named it after
the process id alone)."""
import os

import pytest

from fp8q._atomic_file import atomic_file


def names(directory):
    return sorted(os.listdir(directory))


def test_the_file_is_replaced_whole(tmp_path):
    path = tmp_path / "choices.txt"
    path.write_bytes(b"old")
    with atomic_file(path) as file:
        file.write(b"new ")
        assert path.read_bytes() == b"old"  # not yet
        file.write(b"content")
    assert path.read_bytes() == b"new content"
    assert names(tmp_path) == ["choices.txt"]


def test_a_failure_keeps_the_old_file_and_leaves_nothing(tmp_path):
    path = tmp_path / "cache.json"
    path.write_bytes(b"old")
    with pytest.raises(ZeroDivisionError):
        with atomic_file(path) as file:
            file.write(b"half")
            1 / 0
    assert path.read_bytes() == b"old"
    assert names(tmp_path) == ["cache.json"]


def test_two_writers_of_one_path_do_not_collide(tmp_path):
    """Interleaved in one process (as two threads would be): each has its
    own temporary file, and the last to finish wins."""
    path = tmp_path / "tuning.txt"
    with atomic_file(path) as first:
        first.write(b"first")
        with atomic_file(path) as second:
            second.write(b"second")
        assert path.read_bytes() == b"second"
    assert path.read_bytes() == b"first"
    assert names(tmp_path) == ["tuning.txt"]


def test_an_unwritable_folder_raises_oserror(tmp_path):
    with pytest.raises(OSError):
        with atomic_file(tmp_path / "missing" / "file.bin") as file:
            file.write(b"never")
