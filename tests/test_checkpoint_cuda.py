"""fp8q.torch.load_checkpoint into a model on a GPU: the FP8 layers land on
the module's device with the checkpoint's codes, and each runs on the GPU
within the float64 reference's tolerance (cuda-marked: .ci/gpu-check runs
it; skipped without a CUDA device)."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.cuda
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device and PyTorch with CUDA",
                allow_module_level=True)

import fp8q.torch as fpt  # noqa: E402
from checkpoint_layouts import (LINEARS, check_layers,  # noqa: E402
                                layout, tiny)


@pytest.mark.parametrize("name, options", [
    ("finegrained", {}), ("compressed-tensors", {"static": True}),
    ("compressed-tensors", {"dynamic": True}),
    ("comfy-scaled", {"fmt": "e5m2"}),
    ("quanto", {}), ("plain", {})])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_loads_onto_the_gpu_and_runs(name, options, dtype):
    state, _ = layout(name, tiny(), **options)
    model = tiny(seed=1).to("cuda", dtype)
    fpt.load_checkpoint(model, state)
    for layer in LINEARS:
        module = getattr(model, layer)
        assert module.weight.is_cuda and module.weight_scale.is_cuda
        codes = state.get(layer + ".weight",
                          state.get(layer + ".weight._data"))
        assert torch.equal(module.weight.cpu().view(torch.uint8),
                           codes.view(torch.uint8))
    assert model.norm.weight.is_cuda and model.norm.weight.dtype == dtype
    torch.manual_seed(3)
    check_layers(model, torch.randn(4, 40, device="cuda", dtype=dtype))
