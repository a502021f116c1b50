"""fp8q.torch.calibrate and freeze: static activation scales for the
fp8q.torch.Linear layers of a model, from fp8q.calib's calibrators."""
import contextlib
import copy
import uuid

import numpy as np
import torch

from fp8q import calib
from fp8q.torch._convert import from_torch
from fp8q.torch._linear import Linear

HISTOGRAM_METHODS = ("percentile", "entropy", "mse")


def _calibrated_layers(model):
    """(name, layer) of the layers that take a static activation scale."""
    fp8_layers = [(name, module) for name, module in model.named_modules()
                  if isinstance(module, Linear)
                  and module.activations is not None]
    if not fp8_layers:
        raise ValueError(
            "calibrate: the model has no fp8q.torch.Linear with FP8 "
            "activations; quantize it with activations=\"e4m3\" first")
    layers = [(name, module) for name, module in fp8_layers
              if module.granularity != "block"]
    if not layers:
        raise ValueError(
            "calibrate: every FP8-activation layer of the model has "
            "granularity=\"block\" weight scales, whose activations are "
            "scaled per 1x128 block on the fly; a static per-tensor scale "
            "does not pair with them. Use the model as it is (dynamic "
            "activations, no calibration needed), or quantize with "
            "granularity=\"row\" or \"tensor\" to calibrate static scales")
    return layers


# The options each method's compute_amax takes (the target is always
# float8_e4m3fn, the activations' format).
METHOD_OPTIONS = {"max": (), "percentile": ("percentile",), "entropy": (),
                  "mse": ()}


def _new_calibrator(method, momentum, options):
    """A fresh calibrator for `method`; its option names and values are
    checked here, before any batch runs, by the compute_amax that freeze()
    will call (on a one-value histogram)."""
    if method not in METHOD_OPTIONS:
        raise ValueError("method: expected \"max\", \"percentile\", "
                         f"\"entropy\" or \"mse\", got {method!r}")
    unknown = sorted(set(options) - set(METHOD_OPTIONS[method]))
    if unknown:
        raise TypeError(f"calibrate: method {method!r} takes no option "
                        f"{', '.join(unknown)}")
    if method == "max":
        return calib.MaxCalibrator(momentum=momentum)
    if momentum is not None:
        raise ValueError("momentum applies to method=\"max\" only")
    probe = calib.HistogramCalibrator()
    probe.update(np.ones(1, np.float32))
    try:
        probe.compute_amax(method, **options)
    except (TypeError, ValueError) as error:
        raise type(error)(f"calibrate: {error}") from None
    return calib.HistogramCalibrator()


@contextlib.contextmanager
def calibrate(model, method="max", *, momentum=None, skip_nonfinite=False,
              **method_options):
    """Records the inputs of every fp8q.torch.Linear of `model` that has FP8
    activations and row or tensor weight scales (block-scaled layers stay
    dynamic) while the block runs:

        with fp8q.torch.calibrate(model, method="max"):
            for batch in samples:
                model(batch)
        fp8q.torch.freeze(model)

    method: "max" (the maximum |x| over every batch; momentum=m for
    optimum-quanto's moving average instead), or "percentile", "entropy",
    "mse" (a HistogramCalibrator and its compute_amax; method_options such
    as percentile=99.9 go to it). Inputs are read as float32, on their
    device.
    NaN or infinity in an input raises ValueError naming the layer, unless
    skip_nonfinite=True, which leaves those values out of the statistics
    (the calibrators' update(x, skip_nonfinite=True)): at the forward pass
    for a CPU input; for a CUDA input, whose statistics stay on the GPU
    without a host wait per batch, when the block ends and each layer's
    statistics are read once (the error names the update of that layer
    that held them). The statistics stay
    on each layer until freeze(model) turns them into input_scale (they
    can be copied and pickled meanwhile: copy.deepcopy(model) and
    torch.save(model) work, and a copy made inside the block records its
    own inputs only while the block runs); when the block raises, or that
    final read does, they are dropped, so freeze(model) cannot use
    incomplete ones.
    Calibrating again starts over. ValueError when the model has no layer
    to calibrate."""
    layers = _calibrated_layers(model)
    session = uuid.uuid4().hex
    handles = []
    _ACTIVE_SESSIONS.add(session)
    try:
        for name, layer in layers:
            layer._calibration = (_new_calibrator(method, momentum,
                                                  method_options),
                                  method, dict(method_options), session)
            handles.append(layer.register_forward_pre_hook(
                _InputRecorder(name, skip_nonfinite, session),
                with_kwargs=True))
        try:
            yield model
            for name, layer in layers:
                _settle(name, layer._calibration[0])
        except BaseException:
            # Incomplete statistics are not left for freeze() to use.
            for _, layer in layers:
                del layer._calibration
            raise
    finally:
        # Copies of the model made meanwhile (copy.deepcopy, torch.save)
        # carry a hook of this session too: ending it makes theirs inert.
        _ACTIVE_SESSIONS.discard(session)
        for handle in handles:
            handle.remove()


# The calibrate() blocks running now, by session token: a hook records only
# while its session is in here. The token is a string, so a copy of a model
# (copy.deepcopy keeps it as it is, pickle as an equal string) carries its
# session, and one unpickled in another process matches none.
_ACTIVE_SESSIONS = set()


def _settle(name, calibrator):
    """Reads a layer's statistics once, bringing those kept on a GPU to the
    host: a batch refused there for NaN/inf raises now, naming the layer."""
    try:
        calibrator.nonfinite_count
    except ValueError as error:
        raise ValueError(f"calibrate: the input of layer {name!r}: "
                         f"{error}") from None


class _InputRecorder:
    """The forward pre-hook of a calibrated layer: feeds its input to the
    layer's calibrator while the calibrate() block of `session` runs and
    the layer's statistics are that session's. The hook of a copy of the
    model (copy.deepcopy or torch.save while the block ran) outlives the
    block: it then records nothing and removes itself at its next call.
    Plain attributes of a module-level class: it copies and pickles."""

    def __init__(self, name, skip_nonfinite, session):
        self.name = name
        self.skip_nonfinite = skip_nonfinite
        self.session = session

    def __call__(self, layer, args, kwargs=None):
        # kwargs: the keyword arguments of the call (forward(input=x));
        # None for a hook pickled by an fp8q that registered it without.
        if self.session not in _ACTIVE_SESSIONS:
            self._remove_from(layer)
            return
        calibration = getattr(layer, "_calibration", None)
        if calibration is None or calibration[3:] != (self.session,):
            # Frozen meanwhile, or calibrating in a later session.
            return
        if args:
            x = args[0]
        elif kwargs and "input" in kwargs:
            x = kwargs["input"]
        else:
            return  # no input: the layer's forward raises its TypeError
        # A GPU batch is reduced on the GPU by the calibrator (on torch's
        # stream, after the work that wrote it), with no host wait.
        try:
            calibration[0].update(from_torch(x),
                                  skip_nonfinite=self.skip_nonfinite)
        except ValueError as error:
            raise ValueError(f"calibrate: the input of layer "
                             f"{self.name!r}: {error}") from None

    def _remove_from(self, layer):
        # What RemovableHandle.remove() does, for a hook whose handle
        # stayed with the original model. Module.__call__ iterates over a
        # copy of the hooks, so this is safe from inside one.
        for hook_id, hook in list(layer._forward_pre_hooks.items()):
            if hook is self:
                # pop: two threads may both find it.
                layer._forward_pre_hooks.pop(hook_id, None)
                layer._forward_pre_hooks_with_kwargs.pop(hook_id, None)


def _distributed():
    return (torch.distributed.is_available()
            and torch.distributed.is_initialized())


def _reduced_amax(name, calibrator, method, options):
    """The calibrated amax of layer `name`, combined across the ranks of
    torch.distributed when it is initialized (docs/calibration.md's
    recipe: the MAX of the amax; histograms summed on a common grid).
    ValueError naming the layer when it saw no input (on no rank). The
    calibrator is left as it was: the combined histogram is a copy's."""
    amax = calibrator.amax
    if _distributed():
        # -1 stands for "no input here"; every rank sees the same result,
        # so every rank raises together rather than waiting on the others.
        reduced = torch.tensor([-1.0 if amax is None else amax],
                               dtype=torch.float32)
        torch.distributed.all_reduce(reduced,
                                     op=torch.distributed.ReduceOp.MAX)
        amax = None if float(reduced) < 0 else float(reduced)
    if amax is None:
        raise ValueError(f"freeze: layer {name!r} saw no input during "
                         "calibration; run samples through the model "
                         "inside fp8q.torch.calibrate(model)")
    if isinstance(calibrator, calib.MaxCalibrator):
        return amax
    if _distributed():
        calibrator = copy.deepcopy(calibrator)
        calibrator.extend_range(amax)
        state = calibrator.state_dict()
        counts = torch.from_numpy(state["counts"])
        torch.distributed.all_reduce(counts, op=torch.distributed.ReduceOp.SUM)
        state["counts"] = counts.numpy()
        state["amax"] = amax
        calibrator.load_state_dict(state)
    return calibrator.compute_amax(method, **options)


def freeze(model):
    """Turns the statistics of the last calibrate(model, ...) into each
    layer's input_scale: scale_from_amax(amax) for float8_e4m3fn, the amax
    combined across ranks first when torch.distributed is initialized (MAX
    of the amax; histograms summed on a common grid). From then on those
    layers quantize their inputs with that static scale. All or nothing:
    every layer's scale is computed before any is set, so on ValueError
    (a layer that saw no input on any rank, named) no layer changes and the
    statistics stay for another try. Returns the model."""
    pending = [(name, layer) for name, layer in model.named_modules()
               if getattr(layer, "_calibration", None) is not None]
    if not pending:
        raise ValueError("freeze: nothing to freeze; run the model inside "
                         "fp8q.torch.calibrate(model) first")
    scales = [calib.scale_from_amax(
                  _reduced_amax(name, *layer._calibration[:3]),
                  "float8_e4m3fn")
              for name, layer in pending]
    for (_, layer), scale in zip(pending, scales):
        layer.set_input_scale(scale)
        del layer._calibration
    return model
