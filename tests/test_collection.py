"""Test ids are deterministic: pytest-xdist's workers (`pytest -n auto`)
each collect the suite and must find the same ids in the same order, or
the run stops before any test (the 2026-11-24 H100 run could not collect
with `-n 16`: ids held object addresses). The suite is collected twice,
in two fresh interpreters with different hash seeds, and the ids compared.
"""
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).parent


def collected_ids(hash_seed):
    """The ids `pytest --collect-only` lists for tests/ in a fresh
    interpreter with PYTHONHASHSEED=hash_seed, in order."""
    environment = dict(os.environ, PYTHONHASHSEED=str(hash_seed))
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q",
         "-p", "no:cacheprovider", str(TESTS)],
        env=environment, cwd=TESTS.parent, capture_output=True, text=True,
        timeout=600)
    assert completed.returncode == 0, (completed.stdout[-3000:]
                                       + completed.stderr[-3000:])
    return [line for line in completed.stdout.splitlines() if "::" in line]


def test_ids_are_the_same_in_two_collections():
    first, second = collected_ids(1), collected_ids(2)
    assert len(first) > 1000, first[-5:]
    differing = [(one, other) for one, other in zip(first, second)
                 if one != other]
    assert first == second, (len(first), len(second), differing[:5],
                             sorted(set(first) ^ set(second))[:10])
