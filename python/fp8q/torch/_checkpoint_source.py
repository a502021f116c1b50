"""A state dict ({key: torch.Tensor}) seen as a checkpoint, with the
interface of fp8q._checkpoint's file checkpoints (entries, array, tensor,
release, configs, metadata), so the layout readers plan it the same way."""
from fp8q._checkpoint._plan import CheckpointError
from fp8q.torch._checkpoint_dtypes import CODES


class StateDictCheckpoint:
    """entries: {key: (safetensors dtype code, shape)}; tensor(key): the
    tensor itself; array(key): its raw bytes as a flat NumPy uint8 array
    (for the small tensors layouts read, such as comfy_quant's JSON)."""

    configs = {}
    metadata = {}

    def __init__(self, state_dict):
        self.path = "the state dict"
        self._tensors = dict(state_dict)
        self.entries = {}
        for key, tensor in self._tensors.items():
            if not hasattr(tensor, "dtype") or tensor.dtype not in CODES:
                raise CheckpointError(
                    f"{key}: a {type(tensor).__name__} of dtype "
                    f"{getattr(tensor, 'dtype', None)}, not a tensor a "
                    "checkpoint holds")
            self.entries[key] = (CODES[tensor.dtype], tuple(tensor.shape))

    def tensor(self, key):
        return self._tensors[key].detach()

    def array(self, key):
        import torch

        return (self.tensor(key).cpu().contiguous().reshape(-1)
                .view(torch.uint8).numpy())

    def release(self, key):
        """Nothing to release: the caller owns the tensors."""

    def close(self):
        """Nothing to close."""
