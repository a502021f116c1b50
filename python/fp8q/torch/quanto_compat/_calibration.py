"""quanto_compat.Calibration: optimum-quanto's activation calibration
(per-tensor absmax scales of each QLinear's input and output, folded into
a moving average), for every QLinear that runs inside the block, through
torch's global module hooks as quanto's (so copies of a model calibrate
too)."""
import torch
from torch.nn.modules.module import (register_module_forward_hook,
                                     register_module_forward_pre_hook)

from fp8q.torch.quanto_compat._qlinear import QModuleMixin


def _updated_scale(scale, batch_scale, momentum):
    """quanto's update: a scale still at its initial 1 takes the batch's
    scale, any other becomes momentum * scale + (1 - momentum) *
    batch_scale. A batch scale of 0 (an all-zero batch) leaves the scale as
    it was."""
    moved = momentum * scale + batch_scale * (1.0 - momentum)
    updated = torch.where(scale == 1, batch_scale, moved)
    return torch.where(batch_scale > 0, updated, scale)


class Calibration:
    """Context manager, as optimum.quanto.Calibration: while the block
    runs, each QLinear with FP8 activations that is called gets, before
    its forward, input_scale updated from its input's per-tensor absmax
    scale (max |x| / qtype.qmax, in float32), and after it output_scale
    from its output's (in the output's dtype), each as quanto updates them
    (_updated_scale). The layer's forward inside the block already uses
    the updated input_scale. Layers that do not run keep their scales (1
    until calibrated), and freeze() accepts them.

    momentum: the moving average's weight of the previous scale (0.9).
    quanto 0.2.7 applies it to output scales and always uses 0.9 for
    input scales; fp8q applies it to both (the same with the default).
    streamline: accepted; quanto uses it to skip quantizing outputs that
    feed float-only functions, and fp8q never quantizes outputs, so it
    changes nothing. debug=True prints, when the block ends, one line per
    calibrated layer with its input and output scales.
    skip_nonfinite (fp8q's): NaN and infinity raise a ValueError naming
    the layer (each batch's scale is checked on the host) unless True,
    which leaves them out of the absmax."""

    def __init__(self, *, momentum=0.9, streamline=True, debug=False,
                 skip_nonfinite=False):
        if not 0 <= momentum <= 1:
            raise ValueError(f"momentum: expected a value in [0, 1], got "
                             f"{momentum!r}")
        self.momentum = momentum
        self.streamline = streamline
        self.debug = debug
        self.skip_nonfinite = skip_nonfinite
        self._handles = []
        self._calibrated = {}

    def __enter__(self):
        self._calibrated = {}
        self._handles = [register_module_forward_pre_hook(self._input),
                         register_module_forward_hook(self._output)]
        return self

    def __exit__(self, *exc_info):
        while self._handles:
            self._handles.pop().remove()
        if self.debug and exc_info[0] is None:
            for layer in self._calibrated:
                print(f"{_layer_name(layer)}: input_scale "
                      f"{float(layer.input_scale)}, output_scale "
                      f"{float(layer.output_scale)} "
                      f"({layer.activation_qtype.name})")
        return False

    def _batch_scale(self, layer, tensor, which, dtype):
        """max |tensor| / qmax in `dtype`, checked finite."""
        magnitude = tensor.detach().abs()
        if self.skip_nonfinite:
            magnitude = torch.where(torch.isfinite(magnitude), magnitude, 0)
        amax = (magnitude.max() if magnitude.numel()
                else magnitude.new_zeros(()))
        scale = amax.to(dtype) / layer.activation_qtype.qmax
        if not torch.isfinite(scale):
            raise ValueError(
                f"Calibration: the {which} of layer {_layer_name(layer)} "
                "holds NaN or infinity; Calibration(skip_nonfinite=True) "
                "leaves such values out")
        return scale

    def _input(self, module, inputs):
        if not _calibrated(module):
            return
        batch_scale = self._batch_scale(module, inputs[0], "input",
                                        torch.float32)
        module.input_scale = _updated_scale(module.input_scale, batch_scale,
                                            self.momentum)
        self._calibrated[module] = None

    def _output(self, module, inputs, output):
        if not _calibrated(module):
            return
        batch_scale = self._batch_scale(module, output, "output",
                                        output.dtype)
        module.output_scale = _updated_scale(module.output_scale,
                                             batch_scale, self.momentum)


def _calibrated(module):
    return (isinstance(module, QModuleMixin)
            and module.activation_qtype is not None)


def _layer_name(layer):
    """The name quantize() gave the layer, or its class for one built
    directly."""
    name = getattr(layer, "name", None)
    return repr(name) if name is not None else type(layer).__name__
