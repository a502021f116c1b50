"""fp8q.torch.load_checkpoint of a checkpoint holding tensors of dtypes fp8q
reads but does not compute with (C64, F8_E8M0: SafetensorsReader copies
them): they load into the model's tensors bit for bit, as a float tensor
does; an unexpected one is left out under strict=False."""
import pytest

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")

import fp8q.torch as fpt  # noqa: E402


class WithBuffers(torch.nn.Module):
    """A Linear beside a complex64 and a float8_e8m0fnu buffer."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 8)
        self.register_buffer("phase", torch.zeros(4, dtype=torch.complex64))
        self.register_buffer("exponents",
                             torch.zeros(4, dtype=torch.float8_e8m0fnu))


def test_complex_and_e8m0_tensors_load_bit_for_bit(tmp_path):
    """They used to raise KeyError: 'C64' (no torch dtype for the code)."""
    generator = torch.Generator().manual_seed(1)
    tensors = {
        "lin.weight": torch.randn(8, 16, generator=generator).to(
            torch.float8_e4m3fn),
        "lin.bias": torch.randn(8, generator=generator),
        "phase": torch.randn(4, dtype=torch.complex64, generator=generator),
        "exponents": torch.tensor([0.25, 1.0, 8.0, 2.0 ** 100]).to(
            torch.float8_e8m0fnu),
        "extra": torch.ones(2, dtype=torch.complex64),
    }
    path = tmp_path / "model.safetensors"
    safetensors_torch.save_file(tensors, str(path))
    model = WithBuffers()
    fpt.load_checkpoint(model, str(path), strict=False)
    assert torch.equal(model.phase, tensors["phase"])
    assert torch.equal(model.exponents.view(torch.uint8),
                       tensors["exponents"].view(torch.uint8))
    assert model.lin.weight.dtype == torch.float8_e4m3fn
