"""fp8q.torch.quanto_compat's names: the qtype objects (against torch.finfo
and, when installed, optimum-quanto's own), Python's attribute protocol
for every quanto name, the optimizers, absmax_scale, and the stand-ins for
quanto's tensor internals."""
import math

import pytest

torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed: pip install torch to run the "
                    "fp8q.torch tests")

from fp8q.torch import quanto_compat as qc  # noqa: E402

FP8_QTYPES = ["qfloat8", "qfloat8_e4m3fn", "qfloat8_e4m3fnuz", "qfloat8_e5m2"]
INTEGER_QTYPES = {"qint2": 2, "qint4": 4, "qint8": 8}


def quanto_or_skip():
    return pytest.importorskip("optimum.quanto",
                               reason="optimum-quanto is not installed")


@pytest.mark.parametrize("name", FP8_QTYPES)
def test_float_qtypes_describe_their_format(name):
    qtype = qc.qtypes[name]
    dtype = (torch.float8_e4m3fn if name == "qfloat8"
             else getattr(torch, name.removeprefix("q")))
    finfo = torch.finfo(dtype)
    assert (qtype.dtype, qtype.bits, qtype.is_floating_point) == (dtype, 8,
                                                                   True)
    assert (qtype.qmin, qtype.qmax) == (finfo.min, finfo.max)
    assert getattr(qc, name) is qtype
    assert str(qtype) == f"quanto.q{str(dtype)[6:]}"


@pytest.mark.parametrize("name,bits", INTEGER_QTYPES.items())
def test_integer_qtypes_exist_and_are_refused_when_used(name, bits):
    qtype = getattr(qc, name)
    assert (qtype.bits, qtype.is_floating_point, qtype.dtype) == (
        bits, False, torch.int8)
    assert (qtype.qmin, qtype.qmax) == (-2 ** (bits - 1), 2 ** (bits - 1) - 1)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8))
    for call in (lambda: qc.quantize(model, weights=qtype),
                 lambda: qc.QLinear(8, 8, weights=name),
                 lambda: qc.quantize(model, weights=qc.qfloat8,
                                     activations=qtype)):
        with pytest.raises(ValueError, match=f"fp8q supports the FP8 qtypes "
                                             f"qfloat8.*got {name}; integer"):
            call()
    assert isinstance(model[0], torch.nn.Linear)  # nothing changed


def test_qtypes_match_optimum_quanto():
    quanto = quanto_or_skip()
    assert sorted(qc.qtypes) == sorted(quanto.qtypes)
    for name, theirs in quanto.qtypes.items():
        ours = qc.qtypes[name]
        for field in ("name", "is_floating_point", "bits", "dtype", "qmin",
                      "qmax"):
            assert getattr(ours, field) == getattr(theirs, field), (name,
                                                                    field)
        assert str(ours) == str(theirs) and hash(ours) == hash(theirs)


def test_fnuz_is_refused_with_the_alternative():
    with pytest.raises(ValueError, match="weights: fp8q supports.*got "
                                         "qfloat8_e4m3fnuz$"):
        qc.QLinear(8, 8, weights=qc.qfloat8_e4m3fnuz)
    with pytest.raises(ValueError, match="activations: fp8q supports.*got "
                                         "qfloat8_e4m3fnuz$"):
        qc.QLinear(8, 8, weights=qc.qfloat8, activations="qfloat8_e4m3fnuz")
    with pytest.raises(ValueError, match="weights: expected a qtype or one "
                                         "of"):
        qc.QLinear(8, 8, weights="float8")


def test_attribute_protocol_for_quanto_names():
    """hasattr / getattr(..., default) work (issue 24 defect 7): the
    integer qtypes exist; every other quanto name is an AttributeError
    listing what fp8q offers."""
    assert hasattr(qc, "qint8") and getattr(qc, "qint4", None) is qc.qint4
    for name in qc.QUANTO_ONLY + ("no_such_name",):
        assert not hasattr(qc, name)
        assert getattr(qc, name, None) is None
        with pytest.raises(AttributeError, match=f"no attribute '{name}'.*"
                                                 "it offers .*QLinear"):
            getattr(qc, name)
    with pytest.raises(AttributeError, match="QConv2d has no FP8 "
                                             "counterpart"):
        qc.QConv2d  # noqa: B018
    with pytest.raises(ImportError):
        exec("from fp8q.torch.quanto_compat import QLayerNorm", {})
    for name in qc.__all__:
        if name.startswith("QuantizedModel") or name == \
                "QuantizedTransformersModel":
            continue  # needs transformers: test_torch_quanto_compat_load.py
        assert getattr(qc, name) is not None
    from fp8q.torch.quanto_compat.nn import QLinear, QModuleMixin
    assert (QLinear, QModuleMixin) == (qc.QLinear, qc.QModuleMixin)


def test_every_quanto_public_name_is_offered_or_listed():
    """Checked against optimum-quanto's own top-level names (modules and
    typing helpers left out)."""
    quanto = quanto_or_skip()
    import types
    import typing
    public = {name for name in dir(quanto) if not name.startswith("_")
              and not isinstance(getattr(quanto, name), types.ModuleType)
              and getattr(typing, name, None) is not getattr(quanto, name)
              and name not in ("Mapping", "importlib", "os", "torch")}
    assert public <= set(qc.__all__) | set(qc.QUANTO_ONLY), \
        sorted(public - set(qc.__all__) - set(qc.QUANTO_ONLY))


def test_tensor_internals_import_and_name_the_alternative():
    for cls in (qc.QTensor, qc.ActivationQBytesTensor, qc.WeightQBytesTensor):
        assert not isinstance(torch.ones(1), cls)
        with pytest.raises(TypeError, match="plain torch FP8 tensors with "
                                            "float32 scales.*qweight"):
            cls(torch.ones(1))
    with pytest.raises(NotImplementedError, match="qweight"):
        qc.quantize_weight(torch.ones(2, 2), qc.qfloat8, axis=0)
    with pytest.raises(NotImplementedError, match="activations=qfloat8"):
        qc.quantize_activation(torch.ones(2), qtype=qc.qfloat8, scale=1.0)


def test_absmax_scale_and_absmax_optimizer(seed):
    torch.manual_seed(seed % 2 ** 31)
    x = torch.randn(6, 10) * 3
    amax = max(abs(v) for v in x.flatten().tolist())
    assert math.isclose(float(qc.absmax_scale(x, qc.qfloat8)), amax / 448,
                        rel_tol=2 ** -24)
    per_row = qc.AbsmaxOptimizer()(x, qtype=qc.qfloat8_e5m2, axis=0)
    assert per_row.shape == (6, 1)
    assert torch.equal(per_row, x.abs().amax(1, keepdim=True) / 57344.0)
    with pytest.raises(ValueError, match="qtype: fp8q supports"):
        qc.absmax_scale(x)  # quanto's default qtype is qint8
    quanto = pytest.importorskip("optimum.quanto",
                                 reason="optimum-quanto is not installed")
    for axis in (None, 0, -1):
        assert torch.equal(qc.absmax_scale(x, qc.qfloat8, axis),
                           quanto.absmax_scale(x, quanto.qfloat8, axis))


def test_optimizers_accepted_where_quanto_uses_them_for_fp8():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8))
    qc.quantize(model, weights=qc.qfloat8, optimizer=qc.AbsmaxOptimizer())
    assert isinstance(model[0], qc.QLinear)
    assert isinstance(model[0].optimizer, qc.AbsmaxOptimizer)
    with pytest.raises(ValueError, match="optimizer: .*absmax scales.*got "
                                         "MaxOptimizer"):
        qc.quantize(torch.nn.Sequential(torch.nn.Linear(8, 8)),
                    weights=qc.qfloat8, optimizer=qc.MaxOptimizer())
    with pytest.raises(ValueError, match="AbsmaxOptimizer"):
        qc.MaxOptimizer()(torch.ones(2, 2), qc.qfloat8, 0)
