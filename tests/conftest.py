"""Shared pytest fixtures for fp8q's numerics tests: a fresh random seed per
test, reported on failure, and guards that restore the thread count and the
AVX2 switch.

Set FP8Q_TEST_SEED=<n> to rerun a failing test with the seed it printed.
Set FP8Q_REQUIRE_GPU=1 (as .ci/gpu-check does) to make a skipped
`cuda`-marked test a failure: on a GPU machine, a skip means the GPU was not
used.
"""
import os

import pytest

import fp8q


def _fresh_seed():
    configured = os.environ.get("FP8Q_TEST_SEED")
    if configured:
        return int(configured)
    return int.from_bytes(os.urandom(8), "little") >> 1


@pytest.fixture
def seed(request):
    """A fresh 63-bit seed; failing tests show it in their report."""
    value = _fresh_seed()
    request.node.user_properties.append(("seed", value))
    return value


@pytest.fixture
def rng(seed):
    """numpy Generator seeded with `seed` (quote the seed in assertion
    messages: f"seed={seed}")."""
    import numpy as np

    return np.random.default_rng(seed)


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
