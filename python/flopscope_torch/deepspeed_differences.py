"""Where the estimate's FLOPs differ from what DeepSpeed's flops profiler prints, and why.

The estimate counts by DeepSpeed's rules (flop_estimate), so on most models the two agree to the
printed digit (tests/integration/test_deepspeed_parity.py). They part where the same rules see
different calls, and the hooks can tell where from the model itself, once, when its tree is
announced (`deepspeed_differs <model path>=<why>`, docs/marks.md):

- a module holding a counted `torch.nn.functional` function in an attribute (transformers'
  GELUActivation keeps `nn.functional.gelu` as `self.act`). DeepSpeed's profiler replaces the
  functions of `torch.nn.functional` when its profile starts; a reference taken before, when the
  model was built, still calls the function it held, which DeepSpeed never counts. flopscope's
  wrappers are in place from `import torch` on, so the reference holds one of them and is counted;
- a batch norm in training mode: 5 FLOPs per element with an affine weight (4 without), as
  DeepSpeed's profiler counts it in a training step; its `get_model_profile` switches the model
  to eval mode first, where the same rule gives 2 (1).

Each reason names the module's class and the function, so that the report can list the modules
that share it (client/text/profile_text.cc, "differs from DeepSpeed").
"""


def held_functions(module, counted):
    """(attribute, function name) for each attribute of `module`'s own __dict__ that holds a
    counted torch.nn.functional wrapper (`counted`: wrapper -> name)."""
    held = []
    for attribute, value in vars(module).items():
        if attribute.startswith("_"):
            continue  # nn.Module's own bookkeeping (_parameters, _modules, hooks)
        try:
            name = counted.get(value)
        except TypeError:  # an unhashable value
            continue
        if name is not None:
            held.append((attribute, name))
    return held


def _is_training_batch_norm(module):
    from torch.nn.modules.batchnorm import _BatchNorm  # pylint: disable=import-outside-toplevel
    if not isinstance(module, _BatchNorm):
        return False
    # F.batch_norm counts as training when the module trains or keeps no running statistics.
    return module.training or not module.track_running_stats


def reasons(module, counted):
    """Why DeepSpeed's printed FLOPs for `module` (its own calls, not its children's) differ from
    the estimate's, one reason per line of text; [] where they agree."""
    found = []
    class_name = type(module).__name__
    for attribute, name in held_functions(module, counted):
        found.append(
            f"{class_name} calls torch.nn.functional.{name} through its attribute '{attribute}', "
            "a reference taken when the model was built: DeepSpeed's profiler replaces "
            "torch.nn.functional's functions only when its profile starts, so it counts 0 FLOPs "
            "for these calls; flopscope counts them")
    if _is_training_batch_norm(module):
        found.append(
            f"{class_name} ran in training mode: 5 FLOPs per element with an affine weight (4 "
            "without), as DeepSpeed's profiler counts a training step; DeepSpeed's "
            "get_model_profile switches the model to eval mode first (2 per element, 1 without)")
    return found
