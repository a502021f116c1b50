"""fp8q.torch.Linear under torch's tensor parallelism: once
parallelize_module has made its weight a DTensor (ColwiseParallel:
Shard(0), every parameter sharded by output rows; RowwiseParallel:
Shard(1), the bias replicated, the scales left whole), the forward runs
fp8q's operator on the local shards and returns the DTensor the style
expects, as torch's sharding of nn.Linear would."""
import torch

from fp8q.torch import _ops

if torch.distributed.is_available():
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard
else:  # a torch built without torch.distributed
    DTensor = None


def is_sharded(weight):
    """Whether weight is a DTensor (the layer was parallelized)."""
    return DTensor is not None and isinstance(weight, DTensor)


def _local(tensor):
    """The local part of a DTensor; a plain tensor (or None) as it is."""
    return tensor.to_local() if isinstance(tensor, DTensor) else tensor


def _scale(layer, weight, axis):
    """The weight scales of this rank's shard of the weight, sharded along
    axis (0: output rows, 1: input columns). Block scales are cut to the
    shard's blocks (unless ColwiseParallel has sharded them by rows);
    ValueError naming the problem unless the shard starts and ends on
    128-element block boundaries."""
    scale = layer.weight_scale
    if layer.granularity != "block":
        return _local(scale)
    full, local = weight.shape[axis], _local(weight).shape[axis]
    mesh = weight.device_mesh
    start = mesh.get_local_rank() * -(-full // mesh.size())
    if start % _ops.BLOCK or (local % _ops.BLOCK and start + local != full):
        raise ValueError(
            f"fp8q.torch.Linear: a weight in {_ops.BLOCK}x{_ops.BLOCK} "
            f"blocks sharded along axis {axis} needs shards of whole "
            f"blocks; this rank holds {start}..{start + local} of {full}")
    if isinstance(scale, DTensor) and isinstance(scale.placements[0], Shard):
        return scale.to_local()
    return _local(scale).narrow(axis, start // _ops.BLOCK,
                                -(-local // _ops.BLOCK))


def forward(layer, x, operator):
    """layer(x) for a parallelized layer: operator(x, weight, weight_scale,
    bias, input_scale) (the layer's custom operator call) on the local
    shards. Colwise
    (weight Shard(0)): x replicated, the result Shard(-1). Rowwise (weight
    Shard(1)): x sharded on its last axis, the partial products summed
    across ranks, then the bias added once. W8A8 with dynamic activation
    scales quantizes each rank's slice of x per token (rowwise: per token
    and slice), which can round differently from the unsharded layer; a
    static input_scale quantizes as the unsharded layer does.
    ValueError naming the problem for a mesh of more than one dimension or
    another placement."""
    weight = layer.weight
    mesh = weight.device_mesh
    if mesh.ndim != 1 or not isinstance(weight.placements[0], Shard):
        raise ValueError(
            "fp8q.torch.Linear: tensor parallelism takes a weight sharded "
            "on a 1-D mesh (ColwiseParallel or RowwiseParallel), got "
            f"placements {weight.placements} on a {mesh.ndim}-D mesh")
    if not isinstance(x, DTensor):
        x = DTensor.from_local(x, mesh, [Replicate()], run_check=False)
    if weight.placements[0].dim == 0:  # colwise
        y = operator(x.redistribute(mesh, [Replicate()]).to_local(),
                     _local(weight), _scale(layer, weight, 0),
                     _local(layer.bias), _local(layer.input_scale))
        return DTensor.from_local(y, mesh, [Shard(y.dim() - 1)],
                                  run_check=False)
    x_local = x.redistribute(mesh, [Shard(x.dim() - 1)]).to_local()
    y = DTensor.from_local(
        operator(x_local, _local(weight), _scale(layer, weight, 1), None,
                 _local(layer.input_scale)),
        mesh, [Partial()], run_check=False)
    bias = layer.bias
    if bias is None:
        return y
    if not isinstance(bias, DTensor):
        bias = DTensor.from_local(bias, mesh, [Replicate()], run_check=False)
    return y.redistribute(mesh, [Replicate()]) + bias.to(y.dtype)
