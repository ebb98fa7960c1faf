"""Turns the hooks on as soon as the job imports torch (used by `flopscope run --torch`).

Importing torch at interpreter start would cost every Python process of the job a second or
more, including the many that never use it (launchers, data tools). Instead a finder on
sys.meta_path waits for `import torch` to finish and then calls flopscope_torch.enable(); a
process that never imports torch pays one string comparison per import.
"""

import importlib.abc
import os
import sys

DISABLE_ENV = "FLOPSCOPE_TORCH"  # "0" turns autostart off for a process


class _EnableAfterTorch(importlib.abc.Loader):
    """Delegates to torch's real loader, then enables the hooks."""

    def __init__(self, loader, on_loaded):
        self._loader = loader
        self._on_loaded = on_loaded

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        # Later readers of torch.__spec__ / __loader__ see the real loader.
        module.__loader__ = self._loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._loader
        self._on_loaded()

    def __getattr__(self, name):
        return getattr(self._loader, name)


class TorchImportWatcher(importlib.abc.MetaPathFinder):
    def __init__(self, on_loaded):
        self._on_loaded = on_loaded
        self._searching = False

    def find_spec(self, fullname, path, target=None):
        if fullname != "torch" or self._searching:
            return None
        self._searching = True
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        finally:
            self._searching = False
        if spec is None or spec.loader is None:
            return None
        self.remove()
        spec.loader = _EnableAfterTorch(spec.loader, self._on_loaded)
        return spec

    def remove(self):
        if self in sys.meta_path:
            sys.meta_path.remove(self)


def _enable_quietly():
    try:
        import flopscope_torch  # pylint: disable=import-outside-toplevel
        flopscope_torch.enable()
    except Exception as error:  # pylint: disable=broad-except
        print(f"flopscope_torch: could not turn the PyTorch hooks on: {error}", file=sys.stderr)


def install(environ=os.environ):
    """Enables the hooks now when torch is already imported, else once it is. Returns the
    watcher (None when it was not needed or autostart is off)."""
    if environ.get(DISABLE_ENV) == "0":
        return None
    if "torch" in sys.modules:
        _enable_quietly()
        return None
    watcher = TorchImportWatcher(_enable_quietly)
    sys.meta_path.insert(0, watcher)
    return watcher
