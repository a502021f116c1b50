"""Which x86 features fp8q's CPU code uses (fp8q._C._cpu_features(), the
"cpu_features" of fp8q.info() and the lines under "cpu" in `python -m fp8q
info`), against the operating system's own list: the flags of /proc/cpuinfo
on Linux, the kernel's reading of CPUID without the features whose
registers it has not enabled. A wheel whose compiler runtime cannot detect
features (zig's) fails here on any Linux machine with AVX2 and FMA.

What needs which feature, as docs/architecture.md says: the conversions
(convert_avx2.c) AVX2 and F16C; scaled_mm's kernels (scaled_mm_avx2.c)
AVX2, FMA and F16C. Where the OS keeps no such list (Windows) the checks
that need none still run.
"""
import platform

import pytest

import fp8q
from fp8q import _C, _info

FEATURES = ["AVX2", "FMA", "F16C"]
# The code each feature runs in, by the flags it needs.
CONVERSIONS = {"avx2", "f16c"}
SCALED_MM = {"avx2", "fma", "f16c"}
USERS = {"AVX2": ("conversions", "scaled_mm"), "FMA": ("scaled_mm",),
         "F16C": ("conversions", "scaled_mm")}
NEEDS = {"conversions": CONVERSIONS, "scaled_mm": SCALED_MM}
X86_MACHINES = {"x86_64", "amd64", "i386", "i686", "x86"}
SWITCHED_OFF = "switched off (fp8q_convert_allow_avx2(0))"
MISSING = {"not reported by the CPU", "the OS has not enabled AVX state"}


def os_flags():
    """The flags of /proc/cpuinfo's first processor, or None without it."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


def is_x86():
    return platform.machine().lower() in X86_MACHINES


def test_every_feature_is_reported():
    features = _C._cpu_features()
    assert list(features) == FEATURES
    for name, use in features.items():
        assert set(use) == {"used", "by", "why_not"}, name
        assert isinstance(use["used"], bool), name
        # Exactly one of the two texts.
        assert (use["by"] is None) != use["used"], (name, use)
        assert (use["why_not"] is None) == use["used"], (name, use)
    if features["FMA"]["used"]:
        assert features["AVX2"]["used"] and features["F16C"]["used"]


@pytest.mark.parametrize("name", FEATURES)
def test_used_where_the_os_reports_it(name):
    """Used exactly where /proc/cpuinfo lists every flag of the code that
    needs it (so AVX2 and FMA both, where it lists avx2, fma and f16c);
    otherwise the reason names what is missing."""
    use = _C._cpu_features()[name]
    flags = os_flags()
    if not is_x86():
        assert use == {"used": False, "by": None,
                       "why_not": "not built (non-x86)"}
        return
    if flags is None:
        # No OS list here (Windows): never the non-x86 reason on x86.
        assert use["why_not"] != "not built (non-x86)"
        return
    users = [user for user in USERS[name] if NEEDS[user] <= flags]
    if users:
        assert use == {"used": True, "by": ", ".join(users),
                       "why_not": None}, sorted(flags & SCALED_MM)
    elif name.lower() not in flags:
        assert not use["used"] and use["why_not"] in MISSING, use
    else:
        # Its own flag is there, a partner's is not.
        assert not use["used"] and use["why_not"].startswith("needs "), use


def test_switching_the_avx2_variants_off_and_on(allow_avx2):
    before = _C._cpu_features()
    allow_avx2(False)
    off = _C._cpu_features()
    for name in FEATURES:
        assert not off[name]["used"], name
        if before[name]["used"]:
            assert off[name]["why_not"] == SWITCHED_OFF, name
        else:
            assert off[name] == before[name], name
    allow_avx2(True)
    assert _C._cpu_features() == before


def test_info_prints_each_feature(capsys):
    features = _C._cpu_features()
    assert fp8q.info()["cpu_features"] == features
    _info.print_info()
    lines = capsys.readouterr().out.splitlines()
    for name, use in features.items():
        expected = (f"used by {use['by']}" if use["used"]
                    else f"not used: {use['why_not']}")
        printed = [line for line in lines if line.split()[:1] == [name]]
        assert len(printed) == 1, lines
        assert printed[0].startswith("  ") and \
            printed[0].split(None, 1)[1] == expected, printed
