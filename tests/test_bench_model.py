"""`python -m fp8q bench model` on the CPU with the smallest settings: each
table has its columns and a row for every variant, mode and token count
(CUDA graph rows "not run: no GPU"), the quantized models' outputs stay
close to the float model's, their weights take a quarter of the memory,
and the tokens/s and speed columns are what the times give. Timings are
never asserted. Also: the plain-torch decoder the command falls back to
computes what transformers' LlamaForCausalLM computes, and the KV-cache
decode step computes what the full forward pass computes. Skips without
torch."""
import subprocess
import sys

import pytest

from helpers import markdown_table

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

COLUMNS = ["mode", "tokens", "model", "ms", "tokens/s",
           "speed vs torch float32 eager",
           "speed vs torch float32, same mode",
           "speed vs torchao, same mode", "cosine", "Linear weights MiB"]
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


def _tables(text):
    """Every markdown table of `text`: [(header cells, rows of cells)]."""
    tables = []
    while "\n|" in "\n" + text:
        header, rows = markdown_table(text)
        tables.append((header, rows))
        last = "| " + " | ".join(rows[-1]) + " |"
        text = text[text.index(last) + len(last):]
    return tables


def _bench(*arguments):
    completed = subprocess.run(
        [sys.executable, "-m", "fp8q", "bench", "model", "--device", "cpu",
         "--repeats", "1", *arguments],
        capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def _single_table_rows(text):
    """The rows of the one table `text` holds, after checking its columns."""
    tables = _tables(text)
    assert len(tables) == 1, text
    header, rows = tables[0]
    assert header == COLUMNS, text
    return rows


def _check_rows(rows, expected_groups, fp8q_models, text):
    """The rows are those of expected_groups (mode, tokens) x models, in
    order; measured rows have positive times, tokens/s = tokens / ms,
    speeds that are ratios of the times, cosines near 1; CUDA graph rows
    say "not run: no GPU"; FP8 weights take a quarter of the float
    weights' bytes."""
    models = (fp8q_models + (TORCHAO_MODELS if _has_torchao() else [])
              + (QUANTO_MODELS if _has_quanto() else []))
    expected = [(mode, tokens, model) for mode, tokens in expected_groups
                for model in models]
    assert [tuple(row[:3]) for row in rows] == expected, text
    by_model, times = {}, {}
    for row in rows:
        (mode, tokens, model, ms, per_second, versus_eager, versus_mode,
         versus_torchao, cosine, mib) = row
        by_model[model] = float(mib)
        if "CUDA graph" in mode:
            assert ms == "not run: no GPU", row
            assert {per_second, versus_eager, cosine} == {"-"}, row
            continue
        # optimum-quanto's and torchao's rows may report their own failures
        # (torchao's rowwise FP8 needs a GPU); fp8q's not.
        if (model in QUANTO_MODELS + TORCHAO_MODELS
                and ms.startswith("failed: ")):
            continue
        times[mode, tokens, model] = float(ms)
        assert float(ms) > 0, row
        assert float(per_second) == pytest.approx(
            int(tokens) / float(ms) * 1e3, rel=1e-2, abs=0.1), row
        reference = times[mode, tokens, "torch float32"]
        assert float(versus_mode.rstrip("x")) == pytest.approx(
            reference / float(ms), rel=1e-2, abs=0.01), row
        if mode in ("eager", "decode eager"):
            assert versus_eager == versus_mode, row
        if not _has_torchao():
            assert versus_torchao == "-", row
        assert float(cosine) > MIN_COSINE, row
    for model in fp8q_models[1:]:
        assert by_model[model] < by_model["torch float32"] / 3.8, by_model


def test_bench_model_cpu_llama_eager_and_decode_rows():
    """The decoder: eager forward rows, decode steps over the KV cache run
    eagerly, and CUDA graph decode rows that say why they did not run."""
    text = _bench("--models", "llama", "--layers", "1", "--tokens", "16",
                  "--decode-tokens", "1", "16", "--no-compile")
    rows = _single_table_rows(text)
    assert "1 layers, hidden 256" in text
    _check_rows(rows, [("eager", "16"), ("decode eager", "1"),
                       ("decode eager", "16"), ("decode CUDA graph", "1"),
                       ("decode CUDA graph", "16")], FP8Q_MODELS, text)


def test_bench_model_cpu_flux_eager_graph_and_compile_rows():
    """The FLUX-shaped block (no fused-norm variant: its norms feed adaLN
    modulation) in all three modes, compiled included."""
    text = _bench("--models", "flux", "--flux-tokens", "32")
    rows = _single_table_rows(text)
    assert "hidden 128" in text
    _check_rows(rows, [("eager", "32"), ("CUDA graph", "32"),
                       ("torch.compile", "32")],
                [model for model in FP8Q_MODELS if "fused" not in model],
                text)


def test_bench_model_time_limit_leaves_groups_not_run(capsys):
    """A time limit already reached (0 s: the command line asks for more
    than 0, so the options are given directly): every group prints "not
    run" rows (the float references are still computed)."""
    from fp8q._cli import _bench_model

    _bench_model.print_model_benchmark(_bench_model.ModelOptions(
        repeats=1, models=("flux",), flux_tokens=(8,), time_limit=0))
    text = capsys.readouterr().out
    rows = _single_table_rows(text)
    assert rows and all(
        row[3] == "not run: --time-limit reached" for row in rows), text


def test_decode_step_logits_equal_the_full_forward_logits():
    """The KV-cache decode step at positions context .. context + tokens - 1
    gives the logits the full forward pass over all context + tokens ids
    gives at those positions, for transformers' LlamaForCausalLM and for
    the plain-torch decoder; a repeated step gives the same logits."""
    from fp8q._cli import _bench_decode, _bench_llama

    shape = _bench_llama.CPU_SHAPE
    context, tokens = 11, 5
    ids = torch.randint(0, shape.vocab, (1, context + tokens),
                        generator=torch.Generator().manual_seed(3))
    builds = [_bench_llama.build(shape, torch.float32, "cpu", seed=0)[0]]
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "transformers", None)
        builds.append(_bench_llama.build(shape, torch.float32, "cpu",
                                         seed=0)[0])
    for model in builds:
        with torch.inference_mode():
            expected = model(ids)
            decoder = _bench_decode.KVCacheDecoder(torch, model, shape,
                                                   context, tokens)
            prefilled = decoder.prefill(ids[:, :context])
            first = decoder.step(ids[:, context:]).clone()
            again = decoder.step(ids[:, context:])
        scale = 1e-5 * float(expected.abs().max())
        torch.testing.assert_close(prefilled, expected[:, :context],
                                   rtol=1e-5, atol=scale)
        torch.testing.assert_close(first, expected[:, context:],
                                   rtol=1e-5, atol=scale)
        assert torch.equal(first, again)


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


def test_cuda_graph_runner_warms_up_captures_once_and_replays_into_static():
    """The CUDA graph runner's logic on a fake torch.cuda (the CPU has no
    graphs): warm-up calls on a side stream that waits for the current
    one, one capture on the static copy of the example, and replays that
    copy the new input into the static tensor and return the captured
    output, which the replay refreshes."""
    from fp8q._cli import _bench_decode

    log = []

    class FakeStream:
        def __init__(self, name="side"):
            self.name = name

        def wait_stream(self, other):
            log.append(("wait", self.name, other.name))

    main_stream = FakeStream("main")
    state = {"stream": main_stream, "capturing": None}

    class FakeGraph:
        def __init__(self):
            self.kernels = []

        def replay(self):
            log.append(("replay",))
            for kernel in self.kernels:
                kernel()

    class Switch:
        def __init__(self, key, value):
            self.key, self.value = key, value

        def __enter__(self):
            self.before = state[self.key]
            state[self.key] = self.value

        def __exit__(self, *exception):
            state[self.key] = self.before

    class FakeCuda:
        Stream = FakeStream
        CUDAGraph = FakeGraph

        @staticmethod
        def current_stream():
            return state["stream"]

        @staticmethod
        def stream(stream):
            return Switch("stream", stream)

        @staticmethod
        def graph(graph):
            return Switch("capturing", graph)

    class FakeTorch:
        cuda = FakeCuda

    def function(x):
        """Doubles x; under capture, the doubling is recorded as the
        graph's kernel writing into the captured output."""
        output = torch.empty_like(x)

        def kernel():
            torch.mul(x, 2, out=output)
        kernel()
        graph = state["capturing"]
        log.append(("call", state["stream"].name, graph is not None))
        if graph is not None:
            graph.kernels.append(kernel)
        function.inputs.append(x)
        return output
    function.inputs = []

    example = torch.tensor([1.0, 2.0])
    replay = _bench_decode.cuda_graph_runner(FakeTorch, function, example,
                                             warm_up_calls=2)
    assert log == [("wait", "side", "main"), ("call", "side", False),
                   ("call", "side", False), ("wait", "main", "side"),
                   ("call", "main", True)]
    static = function.inputs[0]
    assert static is not example and all(
        x is static for x in function.inputs)
    first = replay(torch.tensor([3.0, 4.0]))
    second = replay(torch.tensor([5.0, -1.0]))
    assert first is second
    assert second.tolist() == [10.0, -2.0]
    assert static.tolist() == [5.0, -1.0]
    assert example.tolist() == [1.0, 2.0]
    assert log[-2:] == [("replay",), ("replay",)]
    assert len(function.inputs) == 3  # the replays call nothing in Python


@pytest.mark.parametrize("option", ["--layers", "--decode-tokens",
                                    "--flux-tokens", "--tokens"])
def test_bench_model_refuses_counts_below_one(option):
    completed = subprocess.run(
        [sys.executable, "-m", "fp8q", "bench", "model", "--device", "cpu",
         option, "0"], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 2, completed.stdout
    assert "must be >= 1" in completed.stderr
    assert "|" not in completed.stdout
