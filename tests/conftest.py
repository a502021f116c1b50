"""Shared pytest fixtures for fp8q's numerics tests: a random seed per test,
fixed (from the test's id) so that a commit gives the same result on every
run and reported on failure (torch's global generator is seeded with it
before every test); margins of statistical bounds; and guards that
restore the thread count and the AVX2 switch.

Set FP8Q_TEST_SEED=<n> to run every test with seed n (a failing test prints
the seed it used). Set FP8Q_TEST_SEEDS=START:COUNT to run each test that
takes `seed` (or `rng`) once per seed START ... START+COUNT-1: the seed sweep
of tests/seed_sweep.py, which reports each test's failures and its worst
margin against its bound (docs/numerics.md, "Tests").
Set FP8Q_REQUIRE_GPU=1 (as .ci/gpu-check does) to make a skipped
`cuda`-marked test a failure: on a GPU machine, a skip means the GPU was not
used.
"""
import hashlib
import os
import sys

import pytest

import fp8q


def _seed_of(node_id):
    """The test's fixed 63-bit seed: FP8Q_TEST_SEED where set, else a hash
    of its id (file, name and parameters)."""
    configured = os.environ.get("FP8Q_TEST_SEED")
    if configured:
        return int(configured)
    digest = hashlib.blake2b(node_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def _swept_seeds():
    """range of FP8Q_TEST_SEEDS=START:COUNT, or None when unset."""
    sweep = os.environ.get("FP8Q_TEST_SEEDS")
    if not sweep:
        return None
    start, separator, count = sweep.partition(":")
    if not separator or not start.isdigit() or not count.isdigit():
        raise pytest.UsageError(f"FP8Q_TEST_SEEDS={sweep!r}: expected "
                                "START:COUNT, e.g. 0:200")
    return range(int(start), int(start) + int(count))


def pytest_generate_tests(metafunc):
    seeds = _swept_seeds()
    if seeds is not None and "seed" in metafunc.fixturenames:
        metafunc.parametrize("seed", seeds, indirect=True,
                             ids=[f"seed{value}" for value in seeds])


@pytest.fixture
def seed(request):
    """The test's 63-bit seed (fixed per test id; a sweep's when
    FP8Q_TEST_SEEDS is set); failing tests show it in their report."""
    value = getattr(request, "param", None)
    if value is None:
        value = _seed_of(request.node.nodeid)
    request.node.user_properties.append(("seed", value))
    return value


@pytest.fixture
def record_margin(request):
    """record_margin(observed, bound): notes observed / bound of a
    statistical bound the test checks (the largest of its calls counts);
    tests/seed_sweep.py reports the worst over the seeds."""
    def record(observed, bound):
        request.node.user_properties.append(
            ("margin", float(observed) / float(bound)))
    return record


@pytest.fixture
def rng(seed):
    """numpy Generator seeded with `seed` (quote the seed in assertion
    messages: f"seed={seed}")."""
    import numpy as np

    return np.random.default_rng(seed)


@pytest.fixture(autouse=True)
def _seeded_torch(request):
    """Every test starts with torch's global generator (nn.Linear's
    initialisation, torch.randn without a generator) seeded with the
    test's seed, where torch is imported: its torch randomness is then fixed
    per test, not the state the tests before it left (which changes with
    -k, -n, a subset as CI's step 3 runs, or a test added before it)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(request.getfixturevalue("seed")
                          if "seed" in request.fixturenames
                          else _seed_of(request.node.nodeid))
    yield


@pytest.fixture
def restore_threads():
    """Restores fp8q's default thread count after the test."""
    yield
    fp8q.set_num_threads(0)


@pytest.fixture
def allow_avx2():
    """fp8q._C._allow_avx2 (switches the CPU code's AVX2 variants off and
    on), with them switched back on after the test."""
    yield fp8q._C._allow_avx2
    fp8q._C._allow_avx2(True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if (report.skipped and item.get_closest_marker("cuda") is not None and
            os.environ.get("FP8Q_REQUIRE_GPU") == "1"):
        reason = (report.longrepr[2] if isinstance(report.longrepr, tuple)
                  else str(report.longrepr)).removeprefix("Skipped: ")
        report.outcome = "failed"
        report.longrepr = (f"FP8Q_REQUIRE_GPU=1 and this cuda-marked test "
                           f"was skipped: {reason}")
    if report.failed:
        for name, value in item.user_properties:
            if name == "seed":
                report.sections.append(
                    ("random seed",
                     f"seed={value} (rerun with FP8Q_TEST_SEED={value})"))
    return report
