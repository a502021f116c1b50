"""Every test starts with torch's global generator seeded with its own seed
(tests/conftest.py, _seeded_torch): a test that draws from it (nn.Linear's
initialisation, torch.randn without a generator) gets the same numbers
whichever tests ran before it, in a whole run, a -k subset or a -n worker.
The second test draws first, so that the third would see the draw if the
generator were not reseeded between tests.
"""
import pytest

torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed: pip install torch to run the "
                    "fp8q.torch tests")

from conftest import _seed_of  # noqa: E402


def state_after_seeding(value):
    """torch's global generator state right after manual_seed(value); the
    generator is left seeded with value."""
    torch.manual_seed(value)
    return torch.get_rng_state()


def test_a_test_with_the_seed_fixture_starts_from_its_seed(seed):
    at_start = torch.get_rng_state()
    assert torch.equal(at_start, state_after_seeding(seed)), f"seed={seed}"


def test_drawing_in_one_test(request):
    at_start = torch.get_rng_state()
    assert torch.equal(at_start,
                       state_after_seeding(_seed_of(request.node.nodeid)))
    torch.randn(1000)
    torch.nn.Linear(64, 64)


def test_the_next_test_starts_from_its_own_seed_again(request):
    at_start = torch.get_rng_state()
    assert torch.equal(at_start,
                       state_after_seeding(_seed_of(request.node.nodeid)))
