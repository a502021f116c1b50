"""torch.distributed on fp8q-quantized models, with two gloo processes on
the CPU (torch.multiprocessing spawn): FSDP2's fully_shard shards the FP8
weights and their scales (1/world per rank) and all-gathers their bytes
(uint8, never an upcast copy); DDP broadcasts no FP8 weight per step;
parallelize_module with ColwiseParallel / RowwiseParallel gives the
unsharded model's output. Each test spawns once and runs its modes in
both ranks; a failure in a rank fails the test with its traceback."""
import pytest

torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed: pip install torch to run the "
                    "fp8q.torch tests")
if not torch.distributed.is_available():
    pytest.skip("this PyTorch build has no torch.distributed",
                allow_module_level=True)

import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

WORLD = 2
# (granularity, activations, static input_scale)
MODES = [("row", None, False), ("tensor", None, False),
         ("block", None, False), ("row", "e4m3", True),
         ("tensor", "e4m3", True)]


def quantized_model(seed, granularity, activations, static):
    """The same quantized 256 -> 256 -> 128 MLP (+ a float head) in every
    rank; block shards hold whole 128x128 blocks."""
    import fp8q.torch as fpt
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 128, bias=False), torch.nn.ReLU(),
        torch.nn.Linear(128, 8))
    fpt.quantize(model, granularity=granularity, activations=activations,
                 exclude=["4"])
    if static:
        with fpt.calibrate(model), torch.no_grad():
            model(torch.randn(8, 256))
        fpt.freeze(model)
    return model


def _spawned(rank, scenario, rendezvous, seed):
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}",
                            rank=rank, world_size=WORLD)
    try:
        scenario(rank, seed)
    finally:
        dist.destroy_process_group()
    # The rank passed: leave without finalizing the interpreter. After a
    # DistributedDataParallel, torch keeps C++ references to the gloo group
    # (destroy_process_group does not free it, so its worker threads are not
    # joined), and a worker drops its last reference to a finished
    # collective after the caller's wait() has returned. Freeing a tensor
    # that Python created takes the GIL; once Py_FinalizeEx has begun,
    # CPython ends such a thread with pthread_exit, whose unwinding through
    # the noexcept work destructor calls std::terminate: the rank dies of
    # SIGABRT ("terminate called without an active exception") after the
    # scenario passed, now and then. A failed rank raises above instead,
    # and torch's spawn wrapper reports its traceback.
    import os
    import sys
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_in_two_ranks(scenario, tmp_path, seed):
    mp.spawn(_spawned, args=(scenario, str(tmp_path / "rendezvous"),
                             seed % (2 ** 31)), nprocs=WORLD)


# ---------------------------------------------------------------------------
# FSDP2


def fsdp2_scenario(rank, seed):
    from torch.distributed.fsdp import fully_shard
    gathered = []
    all_gather = dist.all_gather_single

    def recording(output, input, *args, **kwargs):
        gathered.append((input.dtype, input.numel() * input.element_size()))
        return all_gather(output, input, *args, **kwargs)

    dist.all_gather_single = recording
    for granularity, activations, static in MODES:
        mode = (granularity, activations, static)
        model = quantized_model(seed, *mode)
        x = torch.randn(4, 256)
        with torch.no_grad():
            expected = model(x)
        whole = {name: tensor.clone()
                 for name, tensor in model.state_dict().items()}
        # Layer 2 "tensor" has a scalar scale (a buffer) and no bias: alone
        # it would all-gather float8 itself, which gloo cannot carry (NCCL
        # can); sharded with the float head in the root's group, the group
        # is mixed and goes as uint8.
        for index in ((0,) if granularity == "tensor" else (0, 2, 4)):
            fully_shard(model[index])
        fully_shard(model)
        for name, parameter in model.named_parameters():
            # Rows split as torch.chunk splits them: 1/WORLD each.
            rows = whole[name].shape[0]
            chunk = -(-rows // WORLD)
            local = parameter.to_local()
            assert local.shape == (max(0, min(chunk, rows - rank * chunk)),
                                   *whole[name].shape[1:]), (mode, name)
            assert local.dtype == whole[name].dtype, (mode, name)
        gathered.clear()
        with torch.no_grad():
            got = model(x)
        assert torch.equal(got, expected), mode
        # One all-gather per layer: the fp8q layers' mixed FP8 and float32
        # parameters travel as their own bytes in uint8, the float head in
        # float32; each rank sends its half of every non-scalar tensor
        # (scalar scales are buffers, which stay whole).
        assert [dtype for dtype, _ in gathered] == (
            [torch.uint8, torch.uint8] if granularity == "tensor"
            else [torch.uint8, torch.uint8, torch.float32]), (mode, gathered)
        parameter_bytes = sum(t.numel() * t.element_size()
                              for t in whole.values() if t.dim() > 0)
        sent = sum(size for _, size in gathered)
        padding = 4 * 2 if granularity == "block" else 0  # (1, 2) scales
        assert sent * WORLD == parameter_bytes + padding, (mode, gathered)


def test_fsdp2_shards_and_gathers_fp8_bytes(tmp_path, seed):
    run_in_two_ranks(fsdp2_scenario, tmp_path, seed)


# ---------------------------------------------------------------------------
# DDP


def ddp_scenario(rank, seed):
    from torch.nn.parallel import DistributedDataParallel
    broadcast = dist._broadcast_coalesced
    sent = []

    def recording(group, tensors, *args, **kwargs):
        sent.extend((t.dtype, t.numel() * t.element_size()) for t in tensors)
        return broadcast(group, tensors, *args, **kwargs)

    dist._broadcast_coalesced = recording
    for granularity, activations, static in MODES:
        model = quantized_model(seed, granularity, activations, static)
        fp8 = {name: t.clone() for name, t in model.state_dict().items()
               if t.dtype == torch.float8_e4m3fn}
        # gloo has no float8: skip the start-up broadcast (every rank holds
        # the same checkpoint); NCCL broadcasts FP8 as bytes.
        ddp = DistributedDataParallel(model, init_sync=False)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
        sent.clear()
        for step in range(2):
            optimizer.zero_grad()
            x = torch.randn(4, 256, generator=torch.Generator().manual_seed(
                seed + 10 * rank + step))
            ddp(x).square().mean().backward()
            optimizer.step()
        assert not any(dtype == torch.float8_e4m3fn for dtype, _ in sent)
        # Per step at most the scalar scales (4 bytes each) travel.
        assert sum(size for _, size in sent) <= 2 * 4 * 4, sent
        for name, tensor in fp8.items():
            assert torch.equal(model.state_dict()[name].view(torch.uint8),
                               tensor.view(torch.uint8)), name
        # The float head trained, identically in both ranks.
        head = model[4].weight.detach().clone()
        copies = [torch.empty_like(head) for _ in range(WORLD)]
        dist.all_gather(copies, head)
        assert torch.equal(copies[0], copies[1])


def test_ddp_broadcasts_no_fp8_weight(tmp_path, seed):
    run_in_two_ranks(ddp_scenario, tmp_path, seed)


# ---------------------------------------------------------------------------
# Tensor parallelism


def tensor_parallel_scenario(rank, seed):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (
        ColwiseParallel, RowwiseParallel, parallelize_module)
    mesh = init_device_mesh("cpu", (WORLD,))
    for granularity, activations, static in MODES:
        mode = (granularity, activations, static)
        model = quantized_model(seed, *mode)
        x = torch.randn(4, 256)
        with torch.no_grad():
            expected = model(x)
        # gloo has no float8: every rank cuts its shard from its own copy
        # (src_data_rank=None) instead of receiving it from rank 0.
        parallelize_module(model, mesh, {"0": ColwiseParallel(),
                                         "2": RowwiseParallel()},
                           src_data_rank=None)
        assert model[0].weight.to_local().shape == (128, 256)
        assert model[2].weight.to_local().shape == (128, 128)
        with torch.no_grad():
            got = model(x)
        assert type(got) is torch.Tensor
        # Rowwise sums the ranks' partial products: float32 rounding.
        assert torch.allclose(got, expected, rtol=1e-5, atol=1e-6), (
            mode, float((got - expected).abs().max()))


def test_tensor_parallel_gives_the_unsharded_output(tmp_path, seed):
    run_in_two_ranks(tensor_parallel_scenario, tmp_path, seed)
