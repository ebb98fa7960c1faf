"""ThreadRanges: backward ranges follow their forward ancestry; pops never cross threads."""

import threading
import unittest

from flopscope_torch.thread_ranges import ThreadRanges
from recording_backend import Recorder


class _Info:
    def __init__(self, name):
        self.name = name


class ThreadRangesTest(unittest.TestCase):
    def setUp(self):
        self.recorder = Recorder()
        self.ranges = ThreadRanges(self.recorder.backend())

    def forward_tree(self):
        """Forward entries root > a > (a1, a2) and root > b, as the forward hooks leave them."""
        entries = {}

        def enter(name, parent):
            path = name if parent is None else f"{entries[parent].path}/{name}"
            entries[name] = self.ranges.push_forward(_Info(name), path, name,
                                                     entries.get(parent))

        def leave(name):
            self.assertIs(self.ranges.pop_forward(entries[name].info), entries[name])

        enter("root", None)
        enter("a", "root")
        enter("a1", "a")
        leave("a1")
        enter("a2", "a")
        leave("a2")
        leave("a")
        enter("b", "root")
        leave("b")
        leave("root")
        return entries

    def open_paths(self):
        return [entry.path for entry in self.ranges.state().entries]

    def test_backward_push_reopens_missing_ancestors_and_closes_siblings(self):
        e = self.forward_tree()
        self.ranges.push_backward(e["a2"])  # nothing open: root and a are reopened first
        self.assertEqual(self.open_paths(), ["root", "root/a", "root/a/a2"])
        self.ranges.push_backward(e["a1"])  # a2's end was never seen: a sibling closes it
        self.assertEqual(self.open_paths(), ["root", "root/a", "root/a/a1"])
        self.ranges.pop_backward(e["a"])  # closes a and what is open inside it
        self.assertEqual(self.open_paths(), ["root"])
        self.ranges.pop_backward(e["a"])  # already closed: nothing happens
        self.ranges.push_backward(e["b"])
        self.ranges.close_backward()
        self.assertEqual(self.open_paths(), [])
        backward = [c.path for c in self.recorder.closed()][5:]  # after the 5 forward ranges
        self.assertEqual(backward, ["root/a/a2", "root/a/a1", "root/a", "root/b", "root"])

    def test_a_module_called_twice_gets_two_backward_ranges(self):
        e = self.forward_tree()
        self.ranges.push_backward(e["b"])
        self.ranges.push_backward(e["b"])
        self.ranges.close_backward()
        backward = [c.path for c in self.recorder.closed()][5:]
        self.assertEqual(backward.count("root/b"), 2)
        self.assertEqual(backward.count("root"), 1)

    def test_forward_ranges_below_are_never_popped_by_backward(self):
        e = self.forward_tree()
        recompute = self.ranges.push_forward(_Info("root"), "root", "root", None)
        self.ranges.push_backward(e["a1"])
        self.ranges.close_backward()
        self.assertEqual(self.ranges.state().entries, [recompute])

    def test_pops_for_another_threads_ranges_do_nothing_here(self):
        e = self.forward_tree()
        self.ranges.push_backward(e["a1"])
        worker = threading.Thread(target=lambda: self.ranges.pop_backward(e["a1"]))
        worker.start()
        worker.join()
        self.assertEqual(self.open_paths(), ["root", "root/a", "root/a/a1"])
        self.recorder.replay()  # no pop on the worker thread, so no unmatched pop

    def test_stale_ranges_close_at_the_owning_threads_next_backward_event(self):
        e = self.forward_tree()
        self.ranges.push_backward(e["a1"])
        state = self.ranges.state()
        worker = threading.Thread(target=lambda: setattr(state, "stale", True))
        worker.start()
        worker.join()
        self.ranges.push_backward(e["b"])  # a new pass: the stale ones close first
        self.assertEqual(self.open_paths(), ["root", "root/b"])
        backward = [c.path for c in self.recorder.closed()][5:]
        self.assertEqual(backward, ["root/a/a1", "root/a", "root"])


if __name__ == "__main__":
    unittest.main()
