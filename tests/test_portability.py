"""The portability lint (.ci/lint.py) catches what MSVC and nvcc cannot compile.

Each rule gets a planted violation in a temporary csrc/ tree and must fail
there with `path:line: rule:`; the clean twin of each plant and the real tree
must pass. These tests need only the repository checkout, not the extension.
"""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = ROOT / ".ci" / "lint.py"

pytestmark = pytest.mark.skipif(not LINT.is_file(), reason="needs the repository checkout (.ci/lint.py)")


# Wine's CreateProcess now and then fails with ERROR_INTERNAL_ERROR (1359)
# before the child runs (seen once in CI's Windows suite, section 7w); the
# lint never started then, so starting it again changes no verdict.
WINE_SPAWN_ERROR = 1359


def run_lint(root: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, str(LINT), "--root", str(root)]
    try:
        return subprocess.run(command, capture_output=True, text=True,
                              timeout=120)
    except OSError as error:
        if getattr(error, "winerror", None) != WINE_SPAWN_ERROR:
            raise
        return subprocess.run(command, capture_output=True, text=True,
                              timeout=120)


def plant(tmp_path: Path, files: dict[str, str]) -> Path:
    """Writes a small repository tree: csrc/ always exists."""
    (tmp_path / "csrc").mkdir(exist_ok=True)
    for relative, text in files.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return tmp_path


CLEAN_PREFIX = """
/* a file with nothing wrong in it before the planted line */
#include <stdint.h>
#include "core/status.h"

"""

# rule -> (planted source that violates it, a line number it is reported on)
VIOLATIONS = {
    "inline-asm": ("static void f(void) { asm(\"nop\"); }\n", 5),
    "vla": ("static void f(int n)\n{\n    float row[n];\n    row[0] = 0.0f;\n}\n", 7),
    "alloca": ("static void *f(int n) { return alloca(n); }\n", 5),
    "statement-expr": ("static int f(int x) { return ({ int y = x; y + 1; }); }\n", 5),
    "attribute": ("static int f(void) __attribute__((unused));\n", 5),
    "builtin": ("static int f(unsigned x) { return __builtin_clz(x); }\n", 5),
    "int128": ("static unsigned __int128 wide;\n", 5),
    "typeof": ("#define SWAP(a, b) do { typeof(a) t = a; a = b; b = t; } while (0)\n", 5),
    "os-header": ("#include <pthread.h>\n", 5),
    "long": ("static long count;\n", 5),
}


@pytest.mark.parametrize("rule", sorted(VIOLATIONS))
def test_lint_rejects_planted_violation(tmp_path, rule):
    source, line = VIOLATIONS[rule]
    root = plant(tmp_path, {"csrc/core/planted.c": CLEAN_PREFIX + source})
    result = run_lint(root)
    assert result.returncode == 1, result.stdout + result.stderr
    expected = f"csrc/core/planted.c:{line}: {rule}:"
    assert expected in result.stdout, f"expected {expected!r} in:\n{result.stdout}"


@pytest.mark.parametrize("suffix", [".cu", ".cuh"])
@pytest.mark.parametrize("rule", sorted(VIOLATIONS))
def test_lint_rejects_planted_violation_in_kernels(tmp_path, rule, suffix):
    """kernels/ gets every rule too: nvcc hosts MSVC on Windows."""
    source, line = VIOLATIONS[rule]
    relative = "kernels/planted" + suffix
    root = plant(tmp_path, {relative: CLEAN_PREFIX + source})
    result = run_lint(root)
    assert result.returncode == 1, result.stdout + result.stderr
    expected = f"{relative}:{line}: {rule}:"
    assert expected in result.stdout, f"expected {expected!r} in:\n{result.stdout}"


@pytest.mark.parametrize("spelling", [
    "asm(\"nop\");",
    "asm volatile(\"\" ::: \"memory\");",
    "__asm__ __volatile__(\"pause\");",
    "__asm__(\"nop\");",
    "__asm(\"nop\");",
    "asm goto(\"jmp %l0\" :::: done);",
    "__asm { nop }",
    "_asm nop",
])
def test_lint_rejects_every_asm_spelling(tmp_path, spelling):
    root = plant(tmp_path, {"kernels/planted.cu": f"void f(void)\n{{\n    {spelling}\n}}\n"})
    result = run_lint(root)
    assert result.returncode == 1
    assert "kernels/planted.cu:3: inline-asm:" in result.stdout, result.stdout


@pytest.mark.parametrize("header", [
    "<unistd.h>", "<dlfcn.h>", "<windows.h>", "<Windows.h>", "<stdatomic.h>",
    "<threads.h>", "<sys/mman.h>", "<sys/types.h>", "\"sys/stat.h\"",
])
def test_lint_rejects_os_headers(tmp_path, header):
    root = plant(tmp_path, {"csrc/python/planted.c": f"#include {header}\n"})
    result = run_lint(root)
    assert result.returncode == 1
    assert "csrc/python/planted.c:1: os-header:" in result.stdout, result.stdout


@pytest.mark.parametrize("declaration", [
    "float row[n];",
    "int64_t shape[ndim + 1];",
    "const char *names[count];",
    "unsigned char buffer[sizeof(float) * n];",
    "double grid[4][n];",
])
def test_lint_rejects_vla_forms(tmp_path, declaration):
    root = plant(tmp_path, {"csrc/core/planted.c": f"void f(int n, int ndim, int count)\n{{\n    {declaration}\n}}\n"})
    result = run_lint(root)
    assert result.returncode == 1
    assert "csrc/core/planted.c:3: vla:" in result.stdout, result.stdout


def test_lint_rejects_vla_parameter(tmp_path):
    root = plant(tmp_path, {"csrc/core/planted.c": "void f(int n, float values[n]) { (void)values; }\n"})
    result = run_lint(root)
    assert result.returncode == 1
    assert "csrc/core/planted.c:1: vla:" in result.stdout, result.stdout


@pytest.mark.parametrize("spelling", ["unsigned long mask;", "long int count;", "long double wide;",
                                      "long\nvalue;"])
def test_lint_rejects_every_long_spelling(tmp_path, spelling):
    root = plant(tmp_path, {"csrc/core/planted.h": f"extern {spelling}\n"})
    result = run_lint(root)
    assert result.returncode == 1
    assert "csrc/core/planted.h:1: long:" in result.stdout, result.stdout


ACCEPTED = """
/* Prose may say asm, __attribute__, long, typeof, ({ and <pthread.h>. */
#include <stdint.h>
#include <string.h>
#include "core/view.h"

#define FP8Q_TABLE_SIZE 256
enum { BLOCK_ROWS = 128 };

typedef struct fp8q_thing {
    int64_t shape[FP8Q_MAX_DIMS];
    char message[FP8Q_ERROR_MESSAGE_SIZE];
} fp8q_thing;

static const uint8_t table[FP8Q_TABLE_SIZE * 2];
static const char *const names[] = {"asm", "long", "__builtin_x", "({"};

int64_t f(const int64_t *values, int64_t count, char separator)
{
    float row[BLOCK_ROWS];
    unsigned char bytes[sizeof(float) * 4];
    int64_t total = 0;
    int64_t index;
    const char *text = "__asm__ __attribute__((x)) typeof long ({ })";
    (void)text;
    (void)separator;
    memset(row, 0, sizeof row);
    memset(bytes, 0, sizeof bytes);
    for (index = 0; index < count; index++) {
        total += values[index] * table[index];
        row[index % BLOCK_ROWS] = (float)values[count - 1];
    }
    if (count > 0) {
        return values[count - 1] * total;
    }
    return (int64_t)names[0][0] + (separator == '{' ? 1 : 0);
}
"""


def test_lint_accepts_long_long(tmp_path):
    """`long long` is 64 bits on every platform (and what CPython's API takes)."""
    source = "void f(long long *out, unsigned long long bits)\n{\n    *out = (long long)bits;\n}\n"
    root = plant(tmp_path, {"csrc/python/accepted.c": source})
    result = run_lint(root)
    assert result.returncode == 0, result.stdout + result.stderr


def test_lint_accepts_portable_code(tmp_path):
    root = plant(tmp_path, {"csrc/core/accepted.c": ACCEPTED, "kernels/accepted.cu": ACCEPTED})
    result = run_lint(root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "clean" in result.stdout


def test_platform_layer_may_use_os_and_compiler_specifics(tmp_path):
    platform = """
    #if defined(_WIN32)
    #include <windows.h>
    #else
    #include <pthread.h>
    #include <unistd.h>
    #endif
    static long cpu_count_cache;
    #if defined(__GNUC__)
    #define FP8Q_LIKELY(x) __builtin_expect(!!(x), 1)
    static int helper(void) __attribute__((unused));
    #endif
    """
    root = plant(tmp_path, {"csrc/platform.c": platform, "csrc/platform.h": "#include <stdint.h>\n"})
    result = run_lint(root)
    assert result.returncode == 0, result.stdout + result.stderr


def test_platform_layer_still_has_no_inline_asm_or_vla(tmp_path):
    platform = "void f(int n)\n{\n    char scratch[n];\n    __asm__(\"pause\");\n}\n"
    root = plant(tmp_path, {"csrc/platform.c": platform})
    result = run_lint(root)
    assert result.returncode == 1
    assert "csrc/platform.c:3: vla:" in result.stdout
    assert "csrc/platform.c:4: inline-asm:" in result.stdout


def test_lint_reports_every_violation_with_its_line(tmp_path):
    source = "#include <dlfcn.h>\nstatic long a;\nstatic void f(void) { __asm__(\"nop\"); }\n"
    root = plant(tmp_path, {"csrc/core/a.c": source, "csrc/core/b.h": "#include <unistd.h>\n"})
    result = run_lint(root)
    assert result.returncode == 1
    lines = [line for line in result.stdout.splitlines() if line.startswith("csrc/")]
    assert [line.split(": ")[0] + ": " + line.split(": ")[1] for line in lines] == [
        "csrc/core/a.c:1: os-header",
        "csrc/core/a.c:2: long",
        "csrc/core/a.c:3: inline-asm",
        "csrc/core/b.h:1: os-header",
    ]


def test_line_numbers_survive_multiline_comments_and_strings(tmp_path):
    source = '/*\n * asm\n */\nstatic const char *s = "a\\\nb";\nstatic long x;\n'
    root = plant(tmp_path, {"csrc/core/a.c": source})
    result = run_lint(root)
    assert "csrc/core/a.c:6: long:" in result.stdout, result.stdout


def test_real_tree_is_clean():
    result = run_lint(ROOT)
    assert result.returncode == 0, "portability lint failed on the repository:\n" + result.stdout + result.stderr


def test_top_level_layout():
    for name in ["pyproject.toml", "CMakeLists.txt", "csrc", "kernels", "python/fp8q",
                 "tests", "wheels", "docs", "README.md", ".ci/run"]:
        assert (ROOT / name).exists(), f"missing top-level entry {name}"


def test_readme_commands_are_what_ci_runs():
    """.ci/run reads the install and test commands from README.md: the
    fenced block after each marker must be there."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for marker in ("install-command", "test-command"):
        assert f"readme_command {marker}" in ci
        position = readme.find(f"<!-- {marker} -->")
        assert position >= 0, f"README.md lacks <!-- {marker} -->"
        block = re.search(r"```[a-z]*\n(.*?)\n```", readme[position:], re.S)
        assert block is not None and block.group(1).strip(), f"no command after <!-- {marker} -->"
    assert "python -m fp8q info" in readme
