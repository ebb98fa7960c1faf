"""A step that crashed in the middle of its forward (issue 32, deliver item 3): a real PyTorch
script under `flopscope run --torch` (one rank, CPU) raises inside a module's forward in step 4
of 6, after steps 0-3 finished and after the modules before it ran. That step
  - is left out of every figure, and the report says so in one line ("unfinished steps: step 4
    did not finish ..."): the default report (steps 1:) gives exactly the figures of steps 1-3;
  - `report --steps 4` says it did not finish (no whole-run figures for it), and a window that
    holds it beside finished steps names it and gives the figures of the finished ones.
Before, the crashed step entered the medians and `--steps 4` printed whole-run figures."""

import json
import os
import subprocess
import unittest

from harness import DaemonTestCase, client, tool
from test_torch_support import HAVE_TORCH, NO_TORCH, PYTHON

STEPS = 6
CRASH_STEP = 4  # 0-based: steps 0-3 finish

# No flopscope code: `--torch` adds the module, step and phase ranges. Boom raises in its
# forward at the given step, after `first` ran in that step's forward.
SCRIPT = r"""
import sys
import torch
from torch import nn

steps, crash_step = int(sys.argv[1]), int(sys.argv[2])


class Boom(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls == crash_step + 1:
            raise RuntimeError("boom in the middle of the forward")
        return self.linear(x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(8, 8)
        self.boom = Boom()
        self.last = nn.Linear(8, 8)

    def forward(self, x):
        return self.last(self.boom(self.first(x)))


torch.manual_seed(0)
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(steps):
    loss = model(torch.randn(4, 8)).sum()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    print("step", step, "done", flush=True)
"""

UNFINISHED_LINE = (r"\nunfinished steps: +step 4 did not finish \(the session ended inside it: "
                   r"a crash or an exit mid-step\): left out of every figure\n")


@unittest.skipUnless(HAVE_TORCH, NO_TORCH)
class CrashMidForwardTest(DaemonTestCase):

    def report(self, *args):
        return client(["report", "crash", "--socket", str(self.daemon.socket), *args])

    def json_profile(self, *args):
        result = self.report("--format", "json", *args)
        self.assertEqual(result.returncode, 0, result.stderr)
        return json.loads(result.stdout)["profile"]

    def test_a_step_that_crashed_mid_forward_is_left_out_and_named(self):
        self.daemon.start()
        script = self.root / "crash_job.py"
        script.write_text(SCRIPT)
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        job = subprocess.run(
            [tool("flopscope"), "run", "--torch", "--job", "crash", "--socket",
             str(self.daemon.socket), "--", PYTHON, str(script), str(STEPS), str(CRASH_STEP)],
            capture_output=True, text=True, env=env, timeout=150, check=False)
        self.assertEqual(job.returncode, 1, job.stderr)
        self.assertIn("RuntimeError: boom in the middle of the forward", job.stderr)
        self.assertEqual(job.stdout, "".join(f"step {i} done\n" for i in range(CRASH_STEP)))

        # The default report (steps 1:, step 0 being warm-up): one line names the step, the
        # figures are those of the finished steps 1-3.
        text = self.report()
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertRegex(text.stdout, UNFINISHED_LINE)
        self.assertRegex(text.stdout, r"\nlatencies: +medians per step over the 3 uncounted steps")
        default = self.json_profile()
        self.assertEqual(default["steps"], CRASH_STEP - 1)
        self.assertEqual(default["step_window"]["uncounted"], CRASH_STEP - 1)
        # `first` ran in the crashed step's forward too: its figures are still those of 1-3.
        finished = self.json_profile("--steps", f"1:{CRASH_STEP - 1}")
        self.assertEqual(default["summary"], finished["summary"])
        self.assertIn("Net/first", [row["path"] for row in default["modules"]])
        self.assertEqual(default["modules"], finished["modules"])

        # --steps on the crashed step alone: it did not finish, so no figures, and said.
        alone = self.report("--steps", str(CRASH_STEP))
        self.assertEqual(alone.returncode, 2, alone.stdout)
        self.assertIn(f"steps {CRASH_STEP}:{CRASH_STEP} hold only steps that did not finish "
                      f"({CRASH_STEP}: the session ended inside the step", alone.stderr)
        self.assertEqual(alone.stdout, "")

        # A window that holds it beside a finished step: named, the finished step's figures.
        window = self.report("--steps", f"{CRASH_STEP - 1}:{CRASH_STEP}")
        self.assertEqual(window.returncode, 0, window.stderr)
        self.assertRegex(window.stdout, UNFINISHED_LINE)
        self.assertEqual(self.json_profile("--steps", f"{CRASH_STEP - 1}:{CRASH_STEP}")["summary"],
                         self.json_profile("--steps", str(CRASH_STEP - 1))["summary"])


if __name__ == "__main__":
    unittest.main()
