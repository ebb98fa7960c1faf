"""Put first on PYTHONPATH by `flopscope run --torch`: every Python process of the job (torchrun's
ranks included, which inherit the environment) turns flopscope's PyTorch hooks on when it imports
torch. No change to the training script.

Python imports only the first `sitecustomize` on its path, and this one hides any other (Debian
ships one in /usr/lib/python3.X, virtual environments may have their own), so that one is run
first, exactly as Python would have run it.
"""

import importlib.machinery
import importlib.util
import os
import sys


def _run_shadowed_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [entry for entry in sys.path
            if os.path.abspath(entry or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # pylint: disable=broad-except
        # Python itself reports a failing sitecustomize and carries on; so do we.
        print(f"Error in sitecustomize ({spec.origin}): {error}", file=sys.stderr)


def _start_flopscope_torch():
    try:
        from flopscope_torch import autostart  # pylint: disable=import-outside-toplevel
        autostart.install()
    except Exception as error:  # pylint: disable=broad-except
        print(f"flopscope_torch: autostart failed: {error}", file=sys.stderr)


_run_shadowed_sitecustomize()
_start_flopscope_torch()
