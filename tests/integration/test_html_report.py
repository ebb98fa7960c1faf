"""`flopscope report --format html` checked in a real browser: Debian's Chromium, headless and
kept off the network, opens the page of a real job (the demo's two-rank transformer_nvtx, and
imported PyTorch-profiler traces from ../shared/data, and a trace whose module names are markup),
and the test asserts that it rendered
without a console message, that the module names and figures it shows are the JSON report's
(read from `flopscope report --format json`, never typed in) and that the icicle has one box per
module. Screenshots go to <build>/test-artifacts/. Skips only when Chromium is not installed or
cannot start here."""

import json
import os
import shutil
import subprocess
import tempfile
import unittest
from html.parser import HTMLParser
from pathlib import Path

from harness import BUILD_DIR, DaemonTestCase, client, rank_env, start_job, tool

CHROMIUM = shutil.which("chromium")
ARTIFACTS = BUILD_DIR / "test-artifacts"
DATA = Path(os.environ.get("FLOPSCOPE_SHARED_DATA_DIR",
                           Path(__file__).resolve().parents[3] / "shared" / "data"))
HTA = DATA / "HolisticTraceAnalysis" / "tests" / "data" / "trace_filter"
TRACES = [HTA / "sampled_rank-0.json.gz", HTA / "sampled_rank-1.json.gz"]


def chromium(page, *mode, profile_dir):
    """Runs headless Chromium on `page` (a file) with `mode` (--dump-dom or --screenshot=...);
    returns (stdout, console lines). Network: no DNS, a dead proxy, no background services."""
    flags = [
        "--headless", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-default-apps", "--disable-extensions", "--metrics-recording-only",
        "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
        f"--user-data-dir={profile_dir}", "--enable-logging=stderr", "--v=0",
        "--window-size=1300,2000",
    ]
    if os.geteuid() == 0:
        flags.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
    result = subprocess.run([CHROMIUM, *flags, *mode, Path(page).resolve().as_uri()],
                            capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise AssertionError(f"chromium exited with {result.returncode}:\n{result.stderr[-3000:]}")
    console = [line for line in result.stderr.splitlines() if ":CONSOLE" in line]
    return result.stdout, console


def chromium_runs():
    if CHROMIUM is None:
        return False
    with tempfile.TemporaryDirectory() as root:
        page = Path(root) / "blank.html"
        page.write_text("<!DOCTYPE html><title>t</title><p id=x>ok</p>")
        try:
            out, _ = chromium(page, "--dump-dom", profile_dir=Path(root) / "profile")
        except (AssertionError, OSError, subprocess.TimeoutExpired):
            return False
        return 'id="x"' in out


class Element:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent = tag, dict(attrs), parent
        self.children, self.text = [], ""

    def classes(self):
        return self.attrs.get("class", "").split()

    def walk(self):
        yield self
        for child in self.children:
            yield from child.walk()

    def all_text(self):
        return self.text + "".join(child.all_text() for child in self.children)


class Dom(HTMLParser):
    """The dumped DOM as a small element tree (void elements closed at once)."""
    VOID = {"meta", "link", "br", "img", "input", "hr", "col", "wbr"}

    def __init__(self, text):
        super().__init__()
        self.root = Element("#root", {}, None)
        self.at = self.root
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        element = Element(tag, attrs, self.at)
        self.at.children.append(element)
        if tag not in self.VOID:
            self.at = element

    def handle_startendtag(self, tag, attrs):
        self.at.children.append(Element(tag, attrs, self.at))

    def handle_endtag(self, tag):
        at = self.at
        while at is not self.root and at.tag != tag:
            at = at.parent
        if at is not self.root:
            self.at = at.parent

    def handle_data(self, data):
        self.at.text += data

    def by_id(self, wanted):
        return next(e for e in self.root.walk() if e.attrs.get("id") == wanted)

    def find(self, under, tag=None, cls=None):
        return [e for e in under.walk() if (tag is None or e.tag == tag)
                and (cls is None or cls in e.classes())]


def number(attribute):
    return None if attribute == "" else float(attribute)


class HtmlReportTest(DaemonTestCase):

    @classmethod
    def setUpClass(cls):
        if not chromium_runs():
            raise unittest.SkipTest("Debian's chromium is not installed or cannot start here "
                                    "(scripts/setup_deps.sh test installs it)")

    def write_report(self, job, steps=None):
        extra = ["--steps", steps] if steps else []
        base = ["report", job, "--socket", str(self.daemon.socket), *extra]
        result = client([*base, "--format", "json"])
        self.assertEqual(result.returncode, 0, result.stderr)
        document = json.loads(result.stdout)
        page = self.root / f"{job}.html"
        result = client([*base, "--format", "html", "-o", str(page)])
        self.assertEqual(result.returncode, 0, result.stderr)
        return document, page

    def open_page(self, page, screenshot_name):
        out, console = chromium(page, "--dump-dom", profile_dir=self.root / "profile")
        self.assertEqual(console, [], "the page wrote to the console")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / screenshot_name
        shot.unlink(missing_ok=True)
        chromium(page, f"--screenshot={shot}", profile_dir=self.root / "profile")
        self.assertTrue(shot.exists() and shot.stat().st_size > 10000, f"no screenshot at {shot}")
        return Dom(out)

    def check_page(self, document, dom):
        status = dom.by_id("render-status").attrs
        self.assertEqual(status.get("data-ok"), "true", status.get("data-errors"))
        embedded = json.loads(dom.by_id("report-data").all_text())
        self.assertEqual(embedded, document, "the page embeds another document than --format json")
        profile = document["profile"]
        self.check_icicle(profile, dom)
        self.check_modules_table(profile, dom)
        self.check_summary(profile, dom)
        self.check_heatmap(document, dom)
        self.check_step_times(document, dom)

    def check_icicle(self, profile, dom):
        shown = profile["model_modules"] or len(profile["modules"])
        boxes = dom.find(dom.by_id("icicle"), "g", "icicle-box")
        self.assertEqual(len(boxes), shown, "one icicle box per module")
        for box, module in zip(boxes, profile["modules"]):
            self.assertEqual(box.attrs["data-path"], module["path"])
            self.assertEqual(number(box.attrs["data-value"]), module["latency_s"])
            self.assertEqual(number(box.attrs["data-colour-value"]), module["flops_per_s"])
        labels = {text.all_text() for box in boxes for text in dom.find(box, "text")}
        names = {m["class"] if m["depth"] == 0 else m["path"].split("/")[-1]
                 for m in profile["modules"][:shown]}
        # Boxes wide enough to hold a label show the module's name (cut with "…" when long).
        self.assertTrue(labels, "no icicle box is labelled")
        for label in labels:
            self.assertTrue(any(name == label or name.startswith(label.rstrip("…"))
                                for name in names), label)

    def rows(self, dom, table_id):
        table = dom.by_id(table_id)
        return [{td.attrs["data-key"]: td for td in dom.find(tr, "td")}
                for tr in dom.find(dom.find(table, "tbody")[0], "tr")]

    def check_modules_table(self, profile, dom):
        rows = self.rows(dom, "modules")
        self.assertEqual([row["path"].attrs["data-value"] for row in rows],
                         [m["path"] for m in profile["modules"]])
        for row, module in zip(rows, profile["modules"]):
            self.assertEqual(row["path"].all_text().strip("\u2003"), module["path"].split("/")[-1])
            for key in ("params", "macs", "latency_s", "bwd_latency_s", "flops", "flops_per_s",
                        "estimated_flops"):
                self.assertEqual(number(row[key].attrs["data-value"]), module[key],
                                 f"{module['path']} {key}")

    def check_summary(self, profile, dom):
        rows = self.rows(dom, "summary")
        self.assertEqual([row["name"].attrs["data-value"] for row in rows],
                         list(profile["summary"]))
        for row, figure in zip(rows, profile["summary"].values()):
            self.assertEqual(number(row["value"].attrs["data-value"]), figure["value"])
            self.assertEqual(row["note"].all_text(), figure["note"])

    def check_heatmap(self, document, dom):
        per_rank = document["per_rank"]
        shown = document["profile"]["model_modules"] or len(document["profile"]["modules"])
        cells = dom.find(dom.by_id("heatmap"), "rect", "heat-cell")
        self.assertEqual(len(cells), shown * len(per_rank["ranks"]))
        by_cell = {(c.attrs["data-path"], int(c.attrs["data-rank"])): c for c in cells}
        for module in per_rank["modules"][:shown]:
            for rank, latency in zip(per_rank["ranks"], module["latency_s"]):
                cell = by_cell[(module["path"], rank["rank"])]
                self.assertEqual(number(cell.attrs["data-value"]), latency)
        marks = {(m.attrs["data-path"], int(m.attrs["data-rank"]))
                 for m in dom.find(dom.by_id("heatmap"), "path", "slowest-mark")}
        self.assertEqual(marks, {(m["path"], m["slowest_rank"]) for m in per_rank["modules"][:shown]
                                 if m["spread_s"]})

    def check_step_times(self, document, dom):
        points = dom.find(dom.by_id("steps"), "circle", "step-point")
        shown = sorted((int(p.attrs["data-rank"]), int(p.attrs["data-step"]),
                        float(p.attrs["data-value"])) for p in points)
        expected = sorted((line["rank"], step, s) for line in document["per_rank"]["step_time_s"]
                          for step, s in zip(line["steps"], line["s"]))
        self.assertEqual(shown, expected)

    def test_demo_job(self):
        self.daemon.start()
        # Both ranks at once, as a launcher starts them (one run of job "demo").
        ranks = [start_job(self.daemon.socket, "demo",
                           [tool("transformer_nvtx"), "--steps", "4", "--layers", "2"],
                           env=rank_env(rank, 2)) for rank in range(2)]
        for process in ranks:
            _, err = process.communicate(timeout=120)
            self.assertEqual(process.returncode, 0, err)
        document, page = self.write_report("demo")
        self.assertEqual([r["rank"] for r in document["per_rank"]["ranks"]], [0, 1])
        # Steps 1-3 of each rank (step 0 is warm-up), one point each.
        self.assertEqual({line["rank"]: line["steps"] for line in document["per_rank"]["step_time_s"]},
                         {0: [1, 2, 3], 1: [1, 2, 3]})
        self.check_page(document, self.open_page(page, "html_report_demo.png"))

    def test_module_names_that_look_like_markup_stay_text(self):
        """Producer text is data: a module named like a closing script tag is shown as a name."""
        names = ["</script><script>document.title='owned'</script>", "<!--x & \"q\" '\u00e9'"]
        events, start = [], 1000
        for step in range(3):
            events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}",
                           "ts": start, "dur": 100, "pid": 1, "tid": 1})
            for depth, name in enumerate(names):  # the second nested in the first
                events.append({"ph": "X", "cat": "user_annotation", "name": name,
                               "ts": start + 10 + 5 * depth, "dur": 50 - 30 * depth,
                               "pid": 1, "tid": 1})
            start += 200
        trace = self.root / "markup.json"
        trace.write_text(json.dumps({"distributedInfo": {"rank": 0, "world_size": 1},
                                     "traceEvents": events}))
        self.daemon.start()
        result = client(["import", str(trace), "--job", "markup", "--socket",
                         str(self.daemon.socket)])
        self.assertEqual(result.returncode, 0, result.stderr)
        document, page = self.write_report("markup")
        self.assertEqual([m["path"] for m in document["profile"]["modules"]],
                         [names[0], "/".join(names)])
        dom = self.open_page(page, "html_report_markup.png")
        self.check_page(document, dom)
        title = next(e for e in dom.root.walk() if e.tag == "title").all_text()
        self.assertEqual(title, "flopscope report: markup")

    @unittest.skipUnless(all(t.exists() for t in TRACES), f"shared data not found under {DATA}")
    def test_imported_traces(self):
        self.daemon.start()
        result = client(["import", *map(str, TRACES), "--job", "hta", "--socket",
                         str(self.daemon.socket)], timeout=120)
        self.assertEqual(result.returncode, 0, result.stderr)
        document, page = self.write_report("hta", steps="0:")
        self.check_page(document, self.open_page(page, "html_report_imported.png"))


if __name__ == "__main__":
    unittest.main()
