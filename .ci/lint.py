#!/usr/bin/env python3
"""lint.py - the portability lint of fp8q's C and CUDA sources (no dependencies).

fp8q must compile with gcc, clang, MSVC (/std:c11) and nvcc, so everything
outside csrc/platform.{h,c} is restricted to the C11 subset all of them accept
(see shared DESIGN.md, "Portable C"). This script scans csrc/ and kernels/ and
prints one line per violation:

    path:line: rule: what was found

and exits 1 if there was any (0 when clean, 2 on a usage error).

Usage: python3 .ci/lint.py [--root DIR] [--list-rules]

Comments, string literals and character literals are blanked before scanning
(line numbers are kept), so prose such as "no inline asm" is never flagged.

Rules (name: what it rejects; "everywhere" includes csrc/platform.*):
  inline-asm         asm, _asm, __asm, __asm__ in any spelling (asm volatile,
                     asm goto, __asm__ __volatile__, MSVC __asm { }): everywhere
  vla                arrays whose size is not a constant expression: everywhere
  alloca             alloca / _alloca (the other way to get VLA-like stack
                     memory): everywhere
  statement-expr     GNU statement expressions "({ ... })": everywhere
  attribute          __attribute__ / __attribute, __declspec: outside platform.*
  builtin            __builtin_* intrinsics: outside platform.*
  int128             __int128, __int128_t, __uint128_t: outside platform.*
  typeof             typeof, __typeof__, __typeof, typeof_unqual, __auto_type:
                     outside platform.*
  os-header          #include of an OS or threading header: <pthread.h>,
                     <unistd.h>, <dlfcn.h>, <windows.h> (and <winbase.h>,
                     <winnt.h>, ...), <stdatomic.h>, <threads.h>, <sys/...>,
                     <sched.h>, <semaphore.h>, <process.h>, <io.h>, <malloc.h>,
                     <intrin.h>: outside platform.*
  long               `long` used as a type (long, unsigned long, long int,
                     long double): outside platform.*; Windows is LLP64, use
                     int64_t / uint64_t / size_t / ptrdiff_t. `long long` is
                     allowed: it is 64 bits everywhere, and it is what
                     PyLong_FromLongLong and PyErr_Format's %lld take.

The VLA rule is a heuristic, not a C parser. It looks for declarations
`TYPE [*...] NAME[SIZE]` that start a statement (after ';', '{' or '}') or,
without '*', a parameter (after '(' or ','), where TYPE is not a statement
keyword such as `return`. SIZE is accepted when, after removing `sizeof(...)`
and `sizeof NAME` terms, every identifier left in it is an ALL_CAPS name (a
macro or enum constant, e.g. FP8Q_MAX_DIMS) - numeric literals and operators
are fine, and `[]` is fine. So `float row[n];` and `int64_t v[count + 1];` are
rejected and `char message[FP8Q_ERROR_MESSAGE_SIZE];` and
`uint8_t table[2 * 128];` are accepted. Declarators after a comma in one
declaration (`int a, b[n];`) are not seen: write one declaration per line.
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

SCANNED_DIRECTORIES = ("csrc", "kernels")
SCANNED_LABEL = ", ".join(name + "/" for name in SCANNED_DIRECTORIES)
SOURCE_SUFFIXES = {".c", ".h", ".cu", ".cuh", ".cpp", ".hpp", ".cc", ".inc"}

RULES = {
    "inline-asm": "inline assembly (use C, or cuda_fp8.h/cuda_bf16.h intrinsics in kernels)",
    "vla": "variable-length array (MSVC has none): use a constant size or allocate",
    "alloca": "alloca (not portable): use a constant-size array or allocate",
    "statement-expr": "GNU statement expression '({' (MSVC has none)",
    "attribute": "compiler attribute: put compiler-specific spellings in csrc/platform.h",
    "builtin": "__builtin_* intrinsic: put compiler-specific code in csrc/platform.*",
    "int128": "__int128 (no such type in MSVC)",
    "typeof": "typeof / __auto_type (GNU extension in C11)",
    "os-header": "OS or threading header: only csrc/platform.* may include it",
    "long": "`long` as a type (32-bit on Windows): use int64_t, uint64_t, size_t or ptrdiff_t (`long long` is fine)",
}

# Rules that csrc/platform.{h,c} is exempt from: the platform layer is where
# compiler- and OS-specific code lives, behind #if guards.
PLATFORM_EXEMPT = {"attribute", "builtin", "int128", "typeof", "os-header", "long"}

# ---------------------------------------------------------------------------
# Token rules

TOKEN_RULES = [
    ("inline-asm", re.compile(r"\b(?:asm|_asm|__asm|__asm__)\b")),
    ("alloca", re.compile(r"\b(?:alloca|_alloca|__builtin_alloca)\s*\(")),
    ("statement-expr", re.compile(r"\(\s*\{")),
    ("attribute", re.compile(r"\b(?:__attribute__|__attribute|__declspec)\b")),
    ("builtin", re.compile(r"\b__builtin_\w+")),
    ("int128", re.compile(r"\b(?:__int128|__int128_t|__uint128_t)\b")),
    ("typeof", re.compile(r"\b(?:typeof|__typeof__|__typeof|typeof_unqual|__typeof_unqual__|__auto_type)\b")),
    # `long long` is 64 bits everywhere (and what PyLong_FromLongLong and
    # PyErr_Format's %lld take), so only a lone `long` is flagged.
    ("long", re.compile(r"\blong\b(?:\s+long\b)?")),
]
TOKEN_RULE_EXCEPTIONS = {"long": re.compile(r"long\s+long")}

# ---------------------------------------------------------------------------
# OS headers

OS_HEADER_PATTERN = re.compile(
    r"""^\s*\#\s*(?:include|include_next|import)\s*[<"]\s*(?P<name>[^>"]+?)\s*[>"]""",
    re.MULTILINE,
)
OS_HEADERS = {
    "pthread.h", "unistd.h", "dlfcn.h", "stdatomic.h", "threads.h",
    "sched.h", "semaphore.h", "process.h", "io.h", "malloc.h", "intrin.h",
    "fcntl.h", "direct.h", "windows.h", "winbase.h", "winnt.h", "windef.h",
    "winsock2.h", "synchapi.h", "processthreadsapi.h", "sysinfoapi.h",
    "libloaderapi.h", "memoryapi.h",
}


def is_os_header(name: str) -> bool:
    lowered = name.strip().lower()
    return lowered in OS_HEADERS or lowered.startswith(("sys/", "mach/", "linux/", "asm/"))


# ---------------------------------------------------------------------------
# VLA heuristic

STATEMENT_KEYWORDS = {
    "return", "else", "case", "goto", "do", "sizeof", "break", "continue",
    "if", "while", "for", "switch", "default", "_Alignof", "alignof",
}
QUALIFIERS = r"(?:(?:const|volatile|static|register|extern|typedef|unsigned|signed|struct|enum|union|restrict|FP8Q_\w+)\s+)*"
# TYPE NAME[SIZE] or TYPE *NAME[SIZE] at the start of a statement.
VLA_STATEMENT = re.compile(
    r"[;{}]\s*" + QUALIFIERS
    + r"(?P<type>[A-Za-z_]\w*)(?:\s+|\s*\*[\s*]*(?:(?:const|volatile|restrict)\s+)?)"
    r"(?P<name>[A-Za-z_]\w*)(?P<size>(?:\s*\[[^\[\]]*\])+)"
)
# TYPE NAME[SIZE] as a parameter (no '*': `(a * b[i])` is an expression).
VLA_PARAMETER = re.compile(
    r"[(,]\s*" + QUALIFIERS
    + r"(?P<type>[A-Za-z_]\w*)\s+(?P<name>[A-Za-z_]\w*)(?P<size>(?:\s*\[[^\[\]]*\])+)"
)
SIZEOF_PARENS = re.compile(r"\b(?:sizeof|_Alignof|alignof)\s*\((?:[^()]|\([^()]*\))*\)")
SIZEOF_NAME = re.compile(r"\bsizeof\s+[A-Za-z_]\w*")
IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*")
CONSTANT_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")


def size_is_constant(size: str) -> bool:
    """size: one or more bracketed extents, e.g. "[4][n]"."""
    size = size.replace("[", " ").replace("]", " ")
    size = SIZEOF_PARENS.sub(" 1 ", size)
    size = SIZEOF_NAME.sub(" 1 ", size)
    size = re.sub(r"\bstatic\b", " ", size)  # `a[static 4]` is caught by the compilers
    for identifier in IDENTIFIER.findall(size):
        if not CONSTANT_NAME.match(identifier):
            return False
    return True


# ---------------------------------------------------------------------------
# Source cleaning


def blank_comments_and_literals(text: str) -> str:
    """Replaces comments and string/char literal contents by spaces, keeping
    newlines (so line numbers stay right) and the quote characters. The
    path of an #include "..." is kept so the os-header rule can read it."""
    out = []
    i = 0
    n = len(text)
    line_start = True  # only whitespace seen since the last newline
    in_include = False
    while i < n:
        c = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "*":
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:end]))
            i = end
            continue
        if c == "/" and nxt == "/":
            end = text.find("\n", i)
            end = n if end < 0 else end
            # a backslash-continued // comment is rare enough to ignore
            out.append(" " * (end - i))
            i = end
            continue
        if c == "#" and line_start:
            rest = text[i:i + 64]
            in_include = re.match(r"#\s*(?:include|include_next|import)\b", rest) is not None
        if c in "\"'":
            # a literal, honouring backslash escapes; an unclosed one ends at
            # the end of its line
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            closed = j < n and text[j] == c
            body = text[i + 1:min(j, n)]
            if in_include and c == '"':
                out.append(c + body)
            else:
                out.append(c + "".join(ch if ch == "\n" else " " for ch in body))
            if closed:
                out.append(c)
                j += 1
            i = min(j, n)
            continue
        if c == "\n":
            line_start = True
            in_include = False
        elif not c.isspace():
            line_start = False
        out.append(c)
        i += 1
    return "".join(out)


# ---------------------------------------------------------------------------
# Scanning


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    rule: str
    found: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.rule}: {RULES[self.rule]} (found '{self.found}')"


def is_platform_file(relative: str) -> bool:
    return re.fullmatch(r"csrc/platform\.[^/]+", relative) is not None


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def scan_text(relative: str, text: str) -> list[Violation]:
    exempt = PLATFORM_EXEMPT if is_platform_file(relative) else set()
    clean = blank_comments_and_literals(text)
    violations: list[Violation] = []

    def report(rule: str, offset: int, found: str) -> None:
        if rule not in exempt:
            found = " ".join(found.split())
            violations.append(Violation(relative, line_of(clean, offset), rule, found[:60]))

    for match in OS_HEADER_PATTERN.finditer(clean):
        if is_os_header(match.group("name")):
            report("os-header", match.start("name"), "#include " + match.group("name"))
    # The path of an #include "..." was kept; blank it for the token rules.
    tokens_text = re.sub(r'(#\s*(?:include|include_next|import)\s*")([^"\n]*)(")',
                         lambda m: m.group(1) + " " * len(m.group(2)) + m.group(3), clean)

    for rule, pattern in TOKEN_RULES:
        for match in pattern.finditer(tokens_text):
            exception = TOKEN_RULE_EXCEPTIONS.get(rule)
            if exception is not None and exception.fullmatch(match.group(0)):
                continue
            report(rule, match.start(), match.group(0))

    seen_vla = set()
    for pattern in (VLA_STATEMENT, VLA_PARAMETER):
        for match in pattern.finditer(tokens_text):
            if match.group("type") in STATEMENT_KEYWORDS:
                continue
            if size_is_constant(match.group("size")):
                continue
            if match.start("name") in seen_vla:
                continue
            seen_vla.add(match.start("name"))
            report("vla", match.start("name"),
                   f"{match.group('type')} {match.group('name')}{''.join(match.group('size').split())}")

    violations.sort(key=lambda v: (v.line, v.rule))
    return violations


def scan_tree(root: Path) -> tuple[list[Violation], int]:
    violations: list[Violation] = []
    n_files = 0
    for directory in SCANNED_DIRECTORIES:
        base = root / directory
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            if not path.is_file() or path.suffix not in SOURCE_SUFFIXES:
                continue
            relative = path.relative_to(root).as_posix()
            text = path.read_text(encoding="utf-8", errors="replace")
            violations.extend(scan_text(relative, text))
            n_files += 1
    return violations, n_files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent,
                        help="repository root holding csrc/ and kernels/ (default: this checkout)")
    parser.add_argument("--list-rules", action="store_true", help="print the rules and exit")
    args = parser.parse_args(argv)

    if args.list_rules:
        for rule, message in RULES.items():
            where = "outside csrc/platform.*" if rule in PLATFORM_EXEMPT else "everywhere"
            print(f"{rule:15} {where:24} {message}")
        return 0
    root = args.root
    if not (root / "csrc").is_dir():
        print(f"lint.py: {root} has no csrc/ directory", file=sys.stderr)
        return 2

    violations, n_files = scan_tree(root)
    for violation in violations:
        print(violation)
    if violations:
        print(f"lint.py: {len(violations)} violation(s) in {n_files} files under "
              f"{SCANNED_LABEL} (rules: python3 .ci/lint.py --list-rules)")
        return 1
    print(f"lint.py: {n_files} files under {SCANNED_LABEL} clean")
    return 0


if __name__ == "__main__":
    sys.exit(main())
