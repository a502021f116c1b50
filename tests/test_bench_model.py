"""`python -m fp8q bench model` on the CPU with the smallest settings: the
table has its columns and a row for every model, mode and token count, the
quantized models' logits stay close to the float model's, and their weights
take a quarter of the memory. Timings are never asserted. Also: the
plain-torch decoder the command falls back to computes what transformers'
LlamaForCausalLM computes. Skips without torch."""
import subprocess
import sys

import pytest

from helpers import markdown_table

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

COLUMNS = ["mode", "tokens", "model", "ms",
           "speed vs torch float32 eager",
           "speed vs torch float32, same mode", "cosine",
           "Linear weights MiB"]
FP8Q_MODELS = ["torch float32", "fp8q W8A8", "fp8q W8A8 fused norms",
               "fp8q W8A16"]
QUANTO_MODELS = ["optimum-quanto qfloat8 W8A8",
                 "optimum-quanto qfloat8 W8A16"]
TORCHAO_MODELS = ["torchao float8 rowwise W8A8"]
MIN_COSINE = 0.9


def _has_torchao():
    try:
        import torchao  # noqa: F401
    except ImportError:
        return False
    return True


def _has_quanto():
    try:
        from optimum import quanto  # noqa: F401
    except ImportError:
        return False
    return True


def test_bench_model_cpu_prints_every_row_with_close_logits():
    completed = subprocess.run(
        [sys.executable, "-m", "fp8q", "bench", "model", "--device", "cpu",
         "--tokens", "1", "16", "--repeats", "1"],
        capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr
    header, rows = markdown_table(completed.stdout)
    assert header == COLUMNS, completed.stdout
    models = (FP8Q_MODELS + (TORCHAO_MODELS if _has_torchao() else [])
              + (QUANTO_MODELS if _has_quanto() else []))
    expected = [(mode, tokens, model)
                for mode in ("eager", "torch.compile")
                for tokens in ("1", "16") for model in models]
    assert [tuple(row[:3]) for row in rows] == expected, completed.stdout
    by_model = {}
    for row in rows:
        mode, tokens, model, ms, _, _, cosine, mib = row
        # optimum-quanto's and torchao's rows may report their own failures
        # (torchao's rowwise FP8 needs a GPU); fp8q's not.
        if (model in QUANTO_MODELS + TORCHAO_MODELS
                and ms.startswith("failed: ")):
            continue
        assert float(ms) > 0, row
        assert float(cosine) > MIN_COSINE, row
        by_model[model] = float(mib)
    for model in FP8Q_MODELS[1:]:
        assert by_model[model] < by_model["torch float32"] / 3.9, by_model


def test_plain_decoder_computes_what_transformers_llama_computes(
        monkeypatch):
    """bench model's fallback without transformers: given the weights of
    transformers' LlamaForCausalLM, the plain-torch decoder gives the same
    logits (float32 rounding apart)."""
    pytest.importorskip("transformers",
                        reason="transformers is not installed")
    from fp8q._cli import _bench_llama

    shape = _bench_llama.CPU_SHAPE
    llama, source = _bench_llama.build(shape, torch.float32, "cpu", seed=0)
    assert source.startswith("transformers")
    monkeypatch.setitem(sys.modules, "transformers", None)
    plain, source = _bench_llama.build(shape, torch.float32, "cpu", seed=1)
    assert source.startswith("plain torch")
    plain.load_state_dict({
        name.removeprefix("model.").removeprefix("model."): tensor
        for name, tensor in llama.state_dict().items()})
    ids = torch.randint(0, shape.vocab, (2, 37),
                        generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        expected, got = llama(ids), plain(ids)
    assert got.shape == (2, 37, shape.vocab)
    torch.testing.assert_close(got, expected, rtol=1e-5,
                               atol=1e-5 * float(expected.abs().max()))
