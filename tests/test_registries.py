"""csrc/registries.py writes the lists a new kernel family or binding file
once had to be added to by hand (the kernels' translation unit, the kernel
list, the binding's function tables), from the files themselves. Run on
copies of the script beside planted kernels/ and csrc/python/ folders, and
on the real tree against the names found by a separate reading."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "csrc" / "registries.py"


def plant(tmp_path, kernels=None, binding=None):
    """A tree with the script at csrc/registries.py and the given files
    ({name: text}) in kernels/ and csrc/python/; returns its root."""
    (tmp_path / "csrc" / "python").mkdir(parents=True)
    (tmp_path / "kernels").mkdir()
    shutil.copy(SCRIPT, tmp_path / "csrc" / "registries.py")
    for folder, files in ((tmp_path / "kernels", kernels or {}),
                          (tmp_path / "csrc" / "python", binding or {})):
        for name, text in files.items():
            (folder / name).write_text(text)
    return tmp_path


def run(root, part, out):
    return subprocess.run([sys.executable, str(root / "csrc" / "registries.py"), part, str(out)],
                          capture_output=True, text=True)


TOY_HEADER = """#define FP8Q_TOY_KERNEL "fp8q_toy"
#define FP8Q_TOY_TWO_KERNEL "fp8q_toy_two"
#define FP8Q_TOY_KERNELS(X)                  \\
    X(FP8Q_KERNEL_TOY, FP8Q_TOY_KERNEL)      \\
    X(FP8Q_KERNEL_TOY_TWO, FP8Q_TOY_TWO_KERNEL)
#define FP8Q_TOY_THREADS 256
"""
AMAX_HEADER = """#define FP8Q_AMAX_KERNEL "fp8q_amax"
#define FP8Q_AMAX_KERNELS(X) X(FP8Q_KERNEL_AMAX, FP8Q_AMAX_KERNEL)
"""


def test_kernels_lists_every_family_by_name(tmp_path):
    root = plant(tmp_path, kernels={"toy.cu": "", "toy.cuh": TOY_HEADER, "amax.cu": "",
                                    "amax.cuh": AMAX_HEADER, "common.cuh": "/* no list */\n"})
    out = tmp_path / "out"
    assert run(root, "kernels", out).returncode == 0
    unit = (out / "fp8q_kernels.cu").read_text()
    assert re.findall(r'^#include "(.*)"$', unit, re.MULTILINE) == ["amax.cu", "toy.cu"]
    kernel_list = (out / "fp8q_kernel_list.h").read_text()
    # Only the headers with a list, for the names.
    assert re.findall(r'^#include "(.*)"$', kernel_list, re.MULTILINE) == ["amax.cuh", "toy.cuh"]
    assert re.findall(r"X\((\w+), (\w+)\)", kernel_list) == [
        ("FP8Q_KERNEL_AMAX", "FP8Q_AMAX_KERNEL"), ("FP8Q_KERNEL_TOY", "FP8Q_TOY_KERNEL"),
        ("FP8Q_KERNEL_TOY_TWO", "FP8Q_TOY_TWO_KERNEL")]
    assert not (out / "fp8q_binding_tables.h").exists()


def test_the_kernel_list_compiles_into_an_enum_and_names(tmp_path):
    """The generated header, included as driver.h and driver.c do, gives
    the enum values in file order and their names."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("needs a C compiler")
    root = plant(tmp_path, kernels={"toy.cuh": TOY_HEADER, "amax.cuh": AMAX_HEADER})
    assert run(root, "kernels", tmp_path / "out").returncode == 0
    (tmp_path / "main.c").write_text("""#define FP8Q_CUDA_KERNEL_NAMES
#include <stdio.h>
#include "fp8q_kernel_list.h"
#define VALUE(value, name) value,
enum kernel { FP8Q_CUDA_KERNEL_LIST(VALUE) COUNT };
#define NAME(value, name) name,
static const char *const names[COUNT] = {FP8Q_CUDA_KERNEL_LIST(NAME)};
int main(void)
{
    printf("%d %d %d %s %s %s\\n", (int)FP8Q_KERNEL_AMAX, (int)FP8Q_KERNEL_TOY_TWO, (int)COUNT,
           names[0], names[1], names[2]);
    return 0;
}
""")
    subprocess.run([compiler, "-std=c11", "-Wall", "-Wextra", "-Wpedantic", "-Werror",
                    "-I", str(tmp_path / "out"), "-I", str(root / "kernels"),
                    str(tmp_path / "main.c"), "-o", str(tmp_path / "main")], check=True)
    result = subprocess.run([str(tmp_path / "main")], capture_output=True, text=True, check=True)
    assert result.stdout == "0 2 3 fp8q_amax fp8q_toy fp8q_toy_two\n"


@pytest.mark.parametrize("body", [
    "X(FP8Q_KERNEL_TOY, FP8Q_TOY_KERNEL) Y(FP8Q_KERNEL_OTHER, FP8Q_OTHER_KERNEL)",
    "X(fp8q_toy, FP8Q_TOY_KERNEL)",
    ""])
def test_a_malformed_list_is_refused(tmp_path, body):
    root = plant(tmp_path, kernels={"toy.cuh": f"#define FP8Q_TOY_KERNELS(X) {body}\n"})
    result = run(root, "kernels", tmp_path / "out")
    assert result.returncode != 0
    assert "kernels/toy.cuh: FP8Q_TOY_KERNELS(X) must hold only" in result.stderr


def test_one_list_name_in_two_headers_is_refused(tmp_path):
    root = plant(tmp_path, kernels={"a.cuh": AMAX_HEADER, "b.cuh": AMAX_HEADER})
    result = run(root, "kernels", tmp_path / "out")
    assert result.returncode != 0 and "kernels/b.cuh: FP8Q_AMAX_KERNELS is defined twice" in result.stderr


def test_binding_lists_the_exported_tables_only(tmp_path):
    root = plant(tmp_path, binding={
        "zeta.c": "PyMethodDef fp8q_py_zeta_functions[] = {\n    {NULL, NULL, 0, NULL},\n};\n",
        "alpha.c": ("static PyMethodDef own_functions[] = {{NULL, NULL, 0, NULL}};\n"
                    "/* PyMethodDef fp8q_py_comment_functions[] = { */\n"
                    "PyMethodDef fp8q_py_alpha_functions[] = {\n    {NULL, NULL, 0, NULL},\n};\n"),
        "types.c": "int fp8q_py_types_init(PyObject *module);\n"})
    out = tmp_path / "out"
    assert run(root, "binding", out).returncode == 0
    text = (out / "fp8q_binding_tables.h").read_text()
    assert re.findall(r"^extern PyMethodDef (\w+)\[\];$", text, re.MULTILINE) == [
        "fp8q_py_alpha_functions", "fp8q_py_zeta_functions"]
    macro = text[text.index("#define FP8Q_BINDING_FUNCTION_TABLES"):]
    assert re.findall(r"^    (\w+), \\$", macro, re.MULTILINE) == [
        "fp8q_py_alpha_functions", "fp8q_py_zeta_functions"]
    assert not (out / "fp8q_kernel_list.h").exists()


@pytest.mark.parametrize("text", [
    "PyMethodDef fp8q_py_zeta_functions[] =\n{\n    {NULL, NULL, 0, NULL},\n};\n",
    "PyMethodDef fp8q_py_zeta_functions[2] = {\n    {NULL, NULL, 0, NULL},\n};\n",
    "PyMethodDef  fp8q_py_zeta_functions[] = {{NULL, NULL, 0, NULL}};\n"])
def test_an_exported_table_in_another_form_is_refused_not_dropped(tmp_path, text):
    """A table the strict pattern does not read would be left out of
    FP8Q_BINDING_FUNCTION_TABLES, its functions silently missing from
    fp8q._C: refused instead."""
    root = plant(tmp_path, binding={"zeta.c": text})
    result = run(root, "binding", tmp_path / "out")
    assert result.returncode != 0
    assert "csrc/python/zeta.c: fp8q_py_zeta_functions must be defined" in result.stderr


@pytest.mark.parametrize("text", [
    "#define FP8Q_TOY_KERNELS(Y) Y(FP8Q_KERNEL_TOY, FP8Q_TOY_KERNEL)\n",
    "#  define FP8Q_TOY_KERNELS(X) X(FP8Q_KERNEL_TOY, FP8Q_TOY_KERNEL)\n",
    "#define FP8Q_TOY_KERNELS( X ) X(FP8Q_KERNEL_TOY, FP8Q_TOY_KERNEL)\n"])
def test_a_kernel_list_in_another_form_is_refused_not_dropped(tmp_path, text):
    """Likewise for a kernel header's list macro: its kernels would be
    missing from FP8Q_CUDA_KERNEL_LIST."""
    root = plant(tmp_path, kernels={"toy.cuh": text})
    result = run(root, "kernels", tmp_path / "out")
    assert result.returncode != 0
    assert "kernels/toy.cuh: FP8Q_TOY_KERNELS must be written" in result.stderr


def test_an_unchanged_list_is_not_rewritten(tmp_path):
    """A file is written only where its text changed, so that the build
    recompiles nothing for an edit that leaves the lists as they were."""
    root = plant(tmp_path, kernels={"amax.cuh": AMAX_HEADER},
                 binding={"a.c": "PyMethodDef fp8q_py_a_functions[] = {\n};\n"})
    out = tmp_path / "out"
    for part in ("kernels", "binding"):
        assert run(root, part, out).returncode == 0
    before = {path.name: path.stat().st_mtime_ns for path in out.iterdir()}
    (root / "kernels" / "amax.cuh").write_text(AMAX_HEADER + "/* a comment */\n")
    for part in ("kernels", "binding"):
        assert run(root, part, out).returncode == 0
    assert {path.name: path.stat().st_mtime_ns for path in out.iterdir()} == before
    (root / "kernels" / "amax.cu").write_text("")
    assert run(root, "kernels", out).returncode == 0
    assert '#include "amax.cu"' in (out / "fp8q_kernels.cu").read_text()


def test_usage(tmp_path):
    result = subprocess.run([sys.executable, str(SCRIPT), "everything", str(tmp_path)],
                            capture_output=True, text=True)
    assert result.returncode == 2 and "usage:" in result.stderr


def test_the_real_tree_lists_every_kernel_and_table(tmp_path):
    """On the real tree: every kernel name a header of kernels/ defines
    ("fp8q_..." in a FP8Q_*KERNEL* macro) is listed once, every .cu file
    is in the unit, and every exported table of csrc/python is added, each
    found here by a separate reading of the files."""
    for part in ("kernels", "binding"):
        assert subprocess.run([sys.executable, str(SCRIPT), part, str(tmp_path)]).returncode == 0
    name_macros = set()
    for header in (ROOT / "kernels").glob("*.cuh"):
        name_macros |= set(re.findall(r'#define (FP8Q_\w*KERNEL\w*) "fp8q_\w+"',
                                      header.read_text()))
    listed = re.findall(r"X\((\w+), (\w+)\)", (tmp_path / "fp8q_kernel_list.h").read_text())
    assert sorted(name for _, name in listed) == sorted(name_macros)
    assert len({value for value, _ in listed}) == len(listed)
    unit = (tmp_path / "fp8q_kernels.cu").read_text()
    assert sorted(re.findall(r'#include "(.*)"', unit)) == sorted(
        path.name for path in (ROOT / "kernels").glob("*.cu"))
    tables = set()
    for source in (ROOT / "csrc" / "python").glob("*.c"):
        for line in source.read_text().splitlines():
            if line.startswith("PyMethodDef fp8q_py_"):
                tables.add(line.split()[1].split("[")[0])
    assert tables and set(re.findall(r"extern PyMethodDef (\w+)\[\];",
                                     (tmp_path / "fp8q_binding_tables.h").read_text())) == tables
