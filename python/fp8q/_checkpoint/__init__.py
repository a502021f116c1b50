"""Reading the FP8 checkpoint layouts in circulation, without torch: open a
safetensors file or a folder of shards (`open_checkpoint`), detect its
layout and plan what each tensor becomes (`plan_checkpoint`). The plan is
what `fp8q.torch.load_checkpoint` loads, what `python -m fp8q inspect`
prints and what `python -m fp8q convert` re-lays into the vLLM /
compressed-tensors layout. docs/checkpoints.md describes the layouts.
"""
from fp8q._checkpoint._detect import plan_checkpoint
from fp8q._checkpoint._plan import CheckpointError, LayerPlan, Plan
from fp8q._checkpoint._source import open_checkpoint

__all__ = ["CheckpointError", "LayerPlan", "Plan", "open_checkpoint",
           "plan_checkpoint"]
