"""The folders where pip installs packages for the running interpreter.

fp8q._C looks for NVIDIA's cuBLASLt wheels (nvidia/cu13/lib, ...) under these
folders only (csrc/cuda/cublaslt.h, step 3): the environment's site-packages
(sys.prefix and sys.exec_prefix, and the base interpreter's where a virtual
environment sees it), then the user site. Never sys.path as such: it holds
the working directory ('' under `python -m` and `-c`), a script's folder and
whatever PYTHONPATH names, where a planted library would be loaded into the
process.
"""
import os
import site
import sysconfig


def package_folders():
    """The install folders, absolute, without duplicates, in search order."""
    paths = sysconfig.get_paths()
    candidates = [paths["purelib"], paths["platlib"]]
    # site.getsitepackages is missing in some embedded interpreters.
    candidates += getattr(site, "getsitepackages", list)()
    if site.ENABLE_USER_SITE:
        candidates.append(site.getusersitepackages())
    folders = []
    for folder in candidates:
        if not os.path.isabs(folder):
            continue
        folder = os.path.normpath(folder)
        if folder not in folders:
            folders.append(folder)
    return folders
