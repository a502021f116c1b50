"""Runs a function right after a module is imported, or now where it is
imported already: a one-shot import hook for fp8q's integrations with
libraries that fp8q never imports itself (transformers' quantizers, peft's
LoRA layers), so that they work whichever is imported first."""
import importlib.abc
import importlib.util
import sys


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when a module it waits for is about to be
    imported, it makes that module's loader run the waiting functions once
    the module has run, and leaves sys.meta_path when nothing waits."""

    def __init__(self):
        self.waiting = {}  # module name -> [function(module)]

    def find_spec(self, name, path, target=None):
        functions = self.waiting.pop(name, None)
        if functions is None:
            return None
        if not self.waiting and self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module):
            run(module)
            for function in functions:
                function(module)

        # The loader itself stays (its get_source, resource readers).
        loader.exec_module = exec_module
        return spec


_hook = _AfterImport()


def after_import(module_name, function):
    """function(module) now if `module_name` is imported, else once, right
    after its import has run (within that import: an exception it raises
    fails the import, so functions catch their own)."""
    module = sys.modules.get(module_name)
    if module is not None:
        function(module)
        return
    _hook.waiting.setdefault(module_name, []).append(function)
    if _hook not in sys.meta_path:
        sys.meta_path.insert(0, _hook)
