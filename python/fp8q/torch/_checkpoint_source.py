"""Checkpoints as fp8q.torch.load_checkpoint reads them, each with a
tensor(key) that returns a torch tensor: a safetensors file or folder
(fp8q._checkpoint's file checkpoint, which needs no torch, plus tensor),
and a state dict ({key: torch.Tensor}) with the file checkpoints' interface
(entries, array, tensor, release, configs, metadata), so the layout readers
plan it the same way."""
import warnings

import torch

from fp8q._checkpoint._plan import CheckpointError
from fp8q._checkpoint._source import FileCheckpoint, open_checkpoint
from fp8q.torch._checkpoint_dtypes import CODES, TORCH_DTYPES


class TorchFileCheckpoint(FileCheckpoint):
    """fp8q._checkpoint's FileCheckpoint with tensor(key): the tensor's
    bytes as a torch tensor of its dtype, viewing the memory map (no copy;
    read-only memory, so the loader copies what it keeps)."""

    def tensor(self, key):
        with warnings.catch_warnings():  # read-only: the loader copies it
            warnings.simplefilter("ignore", UserWarning)
            raw = torch.from_numpy(self.array(key))
        return raw.view(TORCH_DTYPES[self.entries[key][0]])


def open_torch_checkpoint(path):
    """fp8q._checkpoint.open_checkpoint(path) as a TorchFileCheckpoint:
    the same files, configs and errors, plus tensor(key)."""
    return open_checkpoint(path, TorchFileCheckpoint)


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
        return (self.tensor(key).cpu().contiguous().reshape(-1)
                .view(torch.uint8).numpy())

    def release(self, key):
        """Nothing to release: the caller owns the tensors."""

    def close(self):
        """Nothing to close."""
