"""accelerate moves fp8q.torch.Linear's FP8 weights and scales (parameters)
with its default arguments: cpu_offload (as diffusers'
enable_sequential_cpu_offload calls it) offloads them, a "disk" device_map
works, load_checkpoint_and_dispatch keeps them FP8, and with dtype= it
refuses at load time, naming the layer."""
import os

import pytest

torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed: pip install torch to run the "
                    "fp8q.torch tests")
accelerate = pytest.importorskip(
    "accelerate", reason="accelerate is not installed: pip install "
                         "accelerate (.ci/run installs it) to run these tests")
safetensors_torch = pytest.importorskip(
    "safetensors.torch", reason="safetensors is not installed")

import fp8q.torch as fpt  # noqa: E402

ACTIVATIONS = [None, "e4m3"]
ACTIVATION_IDS = ["W8A16", "W8A8"]


def model(seed, activations):
    torch.manual_seed(seed % (2 ** 31))
    float_model = torch.nn.Sequential(
        torch.nn.Linear(64, 96), torch.nn.ReLU(),
        torch.nn.Linear(96, 32, bias=False), torch.nn.ReLU(),
        torch.nn.Linear(32, 16))
    return fpt.quantize(float_model, activations=activations)


def fp8_elements(module):
    return sum(p.numel() for p in module.parameters()
               if p.dtype == torch.float8_e4m3fn)


def same_bits(a, b):
    return a.dtype == b.dtype and torch.equal(
        a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))


@pytest.mark.parametrize("activations", ACTIVATIONS, ids=ACTIVATION_IDS)
def test_cpu_offload_with_defaults_offloads_the_fp8_weights(activations,
                                                            seed):
    offloaded = model(seed, activations)
    x = torch.randn(3, 64)
    with torch.no_grad():
        expected = offloaded(x)
    total = fp8_elements(offloaded)
    # diffusers' enable_sequential_cpu_offload: cpu_offload(model, device,
    # offload_buffers=len(model._parameters) > 0), False for a model.
    accelerate.cpu_offload(offloaded, execution_device="cpu",
                           offload_buffers=False)
    on_meta = sum(p.numel() for p in offloaded.parameters()
                  if p.dtype == torch.float8_e4m3fn and p.is_meta)
    assert on_meta == total == 64 * 96 + 96 * 32 + 32 * 16
    assert all(p.is_meta for p in offloaded.parameters())
    with torch.no_grad():
        assert torch.equal(offloaded(x), expected), f"seed={seed}"


@pytest.mark.parametrize("activations", ACTIVATIONS, ids=ACTIVATION_IDS)
def test_a_disk_device_map_works(activations, seed, tmp_path):
    dispatched = model(seed, activations)
    x = torch.randn(3, 64)
    with torch.no_grad():
        expected = dispatched(x)
    dispatched = accelerate.dispatch_model(
        dispatched, device_map={"0": "cpu", "2": "disk", "4": "disk"},
        offload_dir=str(tmp_path))
    assert dispatched[2].weight.is_meta
    with torch.no_grad():
        assert torch.equal(dispatched(x), expected), f"seed={seed}"


@pytest.mark.parametrize("activations", ACTIVATIONS, ids=ACTIVATION_IDS)
def test_load_checkpoint_and_dispatch_keeps_fp8(activations, seed, tmp_path):
    saved = model(seed, activations)
    safetensors_torch.save_file(saved.state_dict(),
                                os.path.join(tmp_path, "model.safetensors"))
    with accelerate.init_empty_weights():
        empty = model(seed + 1, activations)
    loaded = accelerate.load_checkpoint_and_dispatch(
        empty, str(tmp_path), device_map={"0": "cpu", "2": "cpu",
                                          "4": "disk"},
        offload_folder=str(tmp_path / "offload"))
    for name, tensor in saved.state_dict().items():
        if not name.startswith("4."):
            assert same_bits(loaded.state_dict()[name], tensor), name
    x = torch.randn(2, 64)
    with torch.no_grad():
        assert torch.equal(loaded(x), saved(x)), f"seed={seed}"
    # dtype= converts every floating tensor, scales included (bits lost):
    # refused when the first one is set, naming the layer.
    with accelerate.init_empty_weights():
        empty = model(seed + 1, activations)
    with pytest.raises(ValueError, match=r"fp8q.torch.Linear '0': weight"
                                         r"(_scale)? must stay"):
        accelerate.load_checkpoint_and_dispatch(
            empty, str(tmp_path), device_map={"": "cpu"},
            dtype=torch.bfloat16)
