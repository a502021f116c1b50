"""The bounded fuzz stage: runs the harnesses of tests/fuzz (DLPack
consumer, calibration-cache and TensorRT-cache parsers, ops against NumPy /
ml_dtypes) for a fixed number of iterations and at most a fixed number of
seconds each, with fresh seeds that it prints (or the given one), and fails
listing every finding with the seed that reproduces it. A finding becomes a
regression test in the suite.

usage: python tests/fuzz/run.py [--seed N] [--scale F] [--deterministic]
  --scale multiplies the iterations and seconds (e.g. 10 for a long run).
  --deterministic (CI, .ci/run): every harness runs exactly its iterations
  (no time limit, so a loaded machine runs the same cases) from the fixed
  seed FIXED_SEED (or --seed): the same cases on every run of a commit.
"""
import argparse
import pathlib
import secrets
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import fuzz_cache  # noqa: E402
import fuzz_dlpack  # noqa: E402
import fuzz_ops  # noqa: E402

# (name, run, iterations, seconds): about 90 s in all on a slow machine.
HARNESSES = [
    ("dlpack", fuzz_dlpack.run, 20000, 30),
    ("calibration cache", fuzz_cache.run, 6000, 30),
    ("ops", fuzz_ops.run, 3000, 30),
]


# --deterministic's seed when --seed is not given.
FIXED_SEED = 20261128


def stopped_clock():
    """A clock that never advances: with it a harness's time limit never
    ends its loop, so it runs exactly its iterations."""
    return 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--deterministic", action="store_true")
    arguments = parser.parse_args()
    if arguments.deterministic and arguments.seed is None:
        arguments.seed = FIXED_SEED
    clock = stopped_clock if arguments.deterministic else time.monotonic
    findings = 0
    for name, run, iterations, seconds in HARNESSES:
        seed = (arguments.seed if arguments.seed is not None
                else secrets.randbits(63))
        started = time.monotonic()
        done, failures = run(np.random.default_rng(seed),
                             int(iterations * arguments.scale),
                             seconds * arguments.scale, clock)
        print(f"fuzz {name}: seed {seed}, {done} cases in "
              f"{time.monotonic() - started:.1f} s, {len(failures)} "
              "finding(s)", flush=True)
        for failure in failures[:20]:
            print(f"  {failure}")
        findings += len(failures)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
