"""tests/fuzz/run.py --deterministic (CI's fuzz stage, .ci/run step 7s) runs
the same cases on every run of a commit: each harness gets the fixed seed
FIXED_SEED and runs its whole iteration count, however long it takes (a
loaded machine would otherwise hit the time limit after fewer cases), while
a plain run keeps its time limit and draws fresh seeds. The real harnesses
are replaced by a stand-in with their loop (iterations bounded by a clock).
"""
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np
import pytest

RUN = Path(__file__).parent / "fuzz" / "run.py"


@pytest.fixture
def fuzz_stage(monkeypatch):
    """tests/fuzz/run.py as a module, its harnesses one stand-in that runs
    the harnesses' loop and records (first draw of its rng, cases run)."""
    monkeypatch.syspath_prepend(str(RUN.parent))
    spec = importlib.util.spec_from_file_location("fuzz_stage_run", RUN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    runs = []

    def harness(rng, iterations, seconds, clock):
        start = clock()
        done = 0
        while done < iterations and clock() - start < seconds:
            time.sleep(0.001)
            done += 1
        runs.append((int(rng.integers(1 << 62)), done))
        return done, []

    # 400 cases of >= 1 ms each: more than the 0.05 s limit allows.
    monkeypatch.setattr(module, "HARNESSES", [("stand-in", harness, 400,
                                               0.05)])

    def main(*arguments):
        monkeypatch.setattr(sys, "argv", ["run.py", *arguments])
        assert module.main() == 0
        return runs.pop()

    return module, main


def test_deterministic_runs_every_case_from_the_fixed_seed(fuzz_stage):
    module, main = fuzz_stage
    fixed_draw = int(np.random.default_rng(module.FIXED_SEED).integers(
        1 << 62))
    assert main("--deterministic") == (fixed_draw, 400)
    assert main("--deterministic") == (fixed_draw, 400)
    given_draw = int(np.random.default_rng(7).integers(1 << 62))
    assert main("--deterministic", "--seed", "7") == (given_draw, 400)


def test_a_plain_run_keeps_its_time_limit_and_fresh_seeds(fuzz_stage):
    _, main = fuzz_stage
    (first_draw, first_done), (second_draw, second_done) = main(), main()
    assert first_done < 400 and second_done < 400
    assert first_draw != second_draw
