"""Decides the sanitizer stage (.ci/sanitize) from the reports its processes
wrote into a folder (ASan's and UBSan's log_path files, one per process):
every AddressSanitizer or UBSan error fails it, and so does every leak whose
stack passes through fp8q's code (the _C module or csrc/); leaks of other
code (the interpreter's caches, the compilers the tests run) are counted and
left out. Prints what failed, in full.

usage: python .ci/sanitize_reports.py LOG_FOLDER
"""
import pathlib
import re
import sys

ERROR = re.compile(r"ERROR: (AddressSanitizer|UndefinedBehaviorSanitizer)"
                   r"|runtime error:")
FP8Q_FRAME = re.compile(r"/_C\.cpython[^ ]*\.so|/csrc/")


def leak_records(text):
    """The "Direct/Indirect leak of ..." blocks of a LeakSanitizer report."""
    return [block for block in re.split(r"\n\s*\n", text)
            if re.match(r"\s*(Direct|Indirect) leak of", block)]


def main(folder):
    failures = []
    ignored_leaks = 0
    reports = sorted(pathlib.Path(folder).iterdir())
    for report in reports:
        text = report.read_text(errors="replace")
        if ERROR.search(text):
            failures.append((report.name, text))
            continue
        for record in leak_records(text):
            if FP8Q_FRAME.search(record):
                failures.append((report.name, record))
            else:
                ignored_leaks += 1
    for name, text in failures:
        print(f"--- {name}\n{text}")
    print(f"sanitize: {len(reports)} report file(s), {len(failures)} "
          f"finding(s) in fp8q's code, {ignored_leaks} leak record(s) of "
          "other code left out")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
