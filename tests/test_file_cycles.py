"""No cycle between csrc files (DESIGN.md: "No cycles between files"), and
no csrc folder including what its floor may not call (docs/architecture.md's
table of floors).

A file-level graph of csrc/: a unit is a .c file with its .h of the same
name; unit A depends on unit B when A includes B's header or calls a
function that B alone defines (a call through a struct member, a table's
hook, is no dependency). The test finds the strongly connected components
of that graph and asserts that none holds two units (KNOWN_CYCLES lists
any still to be broken; the list may only shrink). A planted two-file cycle checks that the finder sees one. Needs
only the repository checkout, not the extension.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CSRC = ROOT / "csrc"

pytestmark = pytest.mark.skipif(not CSRC.is_dir(), reason="needs the repository checkout (csrc/)")

# Cycles still to be broken (the list may only shrink): none.
KNOWN_CYCLES: list[set[str]] = []

_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'')
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
_DIRECTIVE = re.compile(r"^\s*#(?:[^\n]*\\\n)*[^\n]*", re.M)
_NAME_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
_KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "defined"}


def _definitions_and_calls(code: str) -> tuple[set[str], set[str]]:
    """Names defined at file scope (a name, its parameters, then `{`) and
    names called inside function bodies, in C code without comments,
    strings and preprocessor lines."""
    defined, called = set(), set()
    depth = 0
    position = 0
    for match in re.finditer(r"[{}]|(?:->|\.)?\s*\b[A-Za-z_]\w*\s*\(", code):
        token = match.group(0)
        if token == "{":
            depth += 1
            continue
        if token == "}":
            depth -= 1
            continue
        if token.startswith(("->", ".")):
            continue  # a call through a struct member (a table's hook)
        name = _NAME_CALL.search(token).group(1)
        if name in _KEYWORDS or match.start() < position:
            continue
        if depth > 0:
            called.add(name)
            continue
        # At file scope: a definition when the parameter list closes and a
        # body opens.
        level, index = 0, match.end() - 1
        while index < len(code):
            if code[index] == "(":
                level += 1
            elif code[index] == ")":
                level -= 1
                if level == 0:
                    break
            index += 1
        rest = code[index + 1:].lstrip()
        if rest.startswith("{"):
            defined.add(name)
        position = index + 1
    return defined, called


def file_graph(csrc: Path) -> dict[str, set[str]]:
    """unit -> the units it depends on (units named by path under csrc,
    without the extension)."""
    units: dict[str, list[Path]] = {}
    for path in sorted(csrc.rglob("*.[ch]")):
        units.setdefault(path.relative_to(csrc).with_suffix("").as_posix(), []).append(path)
    definers: dict[str, set[str]] = {}
    calls: dict[str, set[str]] = {}
    edges: dict[str, set[str]] = {unit: set() for unit in units}
    for unit, paths in units.items():
        for path in paths:
            text = path.read_text(encoding="utf-8", errors="replace")
            for include in _INCLUDE.findall(text):
                for candidate in (include, (path.parent.relative_to(csrc) / include).as_posix()):
                    target = candidate.rsplit(".", 1)[0]
                    if target in units and target != unit:
                        edges[unit].add(target)
            code = _DIRECTIVE.sub("", _STRING.sub('""', _COMMENT.sub(" ", text)))
            defined, called = _definitions_and_calls(code)
            for name in defined:
                definers.setdefault(name, set()).add(unit)
            calls.setdefault(unit, set()).update(called)
    for unit, names in calls.items():
        for name in names:
            owners = definers.get(name, set())
            if len(owners) == 1:
                (owner,) = owners
                if owner != unit:
                    edges[unit].add(owner)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one unit (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(unit: str) -> None:
        index[unit] = low[unit] = len(index)
        stack.append(unit)
        on_stack.add(unit)
        for target in sorted(edges.get(unit, ())):
            if target not in index:
                visit(target)
                low[unit] = min(low[unit], low[target])
            elif target in on_stack:
                low[unit] = min(low[unit], index[target])
        if low[unit] == index[unit]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == unit:
                    break
            if len(component) > 1:
                found.append(component)

    for unit in sorted(edges):
        if unit not in index:
            visit(unit)
    return found


def test_no_cycle_between_csrc_files():
    found = cycles(file_graph(CSRC))
    unexpected = [sorted(component) for component in found if component not in KNOWN_CYCLES]
    assert unexpected == [], f"new cycles between csrc files: {unexpected}"
    stale = [sorted(known) for known in KNOWN_CYCLES if known not in found]
    assert stale == [], f"cycles listed in KNOWN_CYCLES no longer exist; remove them: {stale}"


def test_the_finder_sees_a_planted_cycle(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "one.c").write_text(
        '#include "a/one.h"\n/* two_call() in a comment */\n'
        'int one_call(int x)\n{\n    return x > 0 ? two_call(x - 1) : 0;\n}\n')
    (tmp_path / "a" / "one.h").write_text("int one_call(int x);\n")
    (tmp_path / "a" / "two.c").write_text(
        'struct table { int (*three_call)(void); };\n'
        'static int helper(void) { return 1; }\n'
        'int two_call(int x, struct table *t)\n{\n'
        '    return helper() + one_call(x) + t->three_call();\n}\n')
    (tmp_path / "a" / "three.c").write_text(
        'int three_call(void)\n{\n    return one_call(1);\n}\n')
    edges = file_graph(tmp_path)
    assert edges["a/two"] == {"a/one"}
    assert edges["a/one"] == {"a/two"}
    assert edges["a/three"] == {"a/one"}
    assert cycles(edges) == [{"a/one", "a/two"}]


# docs/architecture.md's table of floors: what each csrc folder may not
# include. Headers are matched by their include text: "python/..." (the
# binding), "cuda/..." (the CUDA host floor), a kernels launch contract
# ("*.cuh"), <Python.h>, and a CUDA toolkit header.
_ANY_INCLUDE = re.compile(r'^\s*#\s*include\s+[<"]([^>"]+)[>"]', re.M)
_FORBIDDEN_BY_FLOOR = {
    "core": ("python/", "cuda/", ".cuh", "Python.h", "numpy/", "cuda.h",
             "cuda_runtime"),
    "cuda": ("python/", "Python.h", "numpy/", "cuda.h", "cuda_runtime"),
    "python": (".cuh", "cuda.h", "cuda_runtime"),
}


def _floor_violations(csrc: Path) -> list[str]:
    """'FILE includes HEADER' for every include in csrc/<floor>/ that its
    floor may not make (_FORBIDDEN_BY_FLOOR)."""
    found = []
    for floor, forbidden in _FORBIDDEN_BY_FLOOR.items():
        for path in sorted((csrc / floor).glob("*.[ch]")):
            code = _COMMENT.sub(" ", path.read_text(encoding="utf-8"))
            for header in _ANY_INCLUDE.findall(code):
                if header.startswith(forbidden) or header.endswith(forbidden):
                    found.append(f"{path.relative_to(csrc).as_posix()} includes {header}")
    return found


def test_each_floor_includes_only_what_it_may_call():
    assert _floor_violations(CSRC) == []


def test_the_floor_check_sees_a_planted_violation(tmp_path):
    for floor in ("core", "cuda", "python"):
        (tmp_path / floor).mkdir()
    (tmp_path / "core" / "planted.c").write_text('#include "cuda/driver.h"\n')
    (tmp_path / "python" / "planted.c").write_text('#include "gemv.cuh"\n')
    (tmp_path / "cuda" / "planted.c").write_text("#include <Python.h>\n")
    assert _floor_violations(tmp_path) == [
        "core/planted.c includes cuda/driver.h",
        "cuda/planted.c includes Python.h",
        "python/planted.c includes gemv.cuh",
    ]
