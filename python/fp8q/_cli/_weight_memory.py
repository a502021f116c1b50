"""Bytes held by the weights of a torch model's linear layers, float or
quantized (fp8q.torch.Linear, optimum-quanto's QLinear), for the weight
memory column of `python -m fp8q demo` and `python -m fp8q bench model`.
"""


def linear_weight_bytes(model):
    """Bytes of the weights (and weight scales) of every linear layer in
    `model`: an fp8q.torch.Linear counts its `weight` codes and its
    `weight_scale`; any other torch.nn.Linear counts its weight, or, for
    optimum-quanto's quantized weights (a tensor subclass holding its codes
    in `_data` and its scales in `_scale`), those two. Biases, input scales
    and the other modules' parameters are not counted."""
    import torch

    import fp8q.torch as fpt

    def size(tensor):
        return tensor.numel() * tensor.element_size()

    total = 0
    for module in model.modules():
        if isinstance(module, fpt.Linear):
            total += size(module.weight) + size(module.weight_scale)
        elif isinstance(module, torch.nn.Linear):
            weight = module.weight
            if hasattr(weight, "_data") and hasattr(weight, "_scale"):
                total += size(weight._data) + size(weight._scale)
            else:
                total += size(weight)
    return total
