"""Shared helpers for the browser tests: find the binaries, launch Debian's chromium through
Python playwright, record console errors and requests that leave the machine, and check that
charts and screenshots really hold a picture.

Binaries: the CLI is TRAINSCOPE_BIN (else build/tools/cli/trainscope); make_synthetic_run and
live_writer are TS_SYNTH_BIN / TRAINSCOPE_LIVE_WRITER, else found in the CLI's build tree.
Screenshots go to test-artifacts/ at the repository root.
"""
import base64
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
try:
    import trainscope  # noqa: F401  (./dev puts python/ on the venv's path; the wheel installs it)
except ImportError:
    sys.path.insert(0, str(ROOT / "python"))  # for the runs test_report.py writes itself

from playwright.sync_api import sync_playwright  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def cli_path() -> pathlib.Path:
    p = pathlib.Path(os.environ.get("TRAINSCOPE_BIN") or ROOT / "build/tools/cli/trainscope")
    if not p.exists():
        pytest.fail(f"missing {p}: build first (./dev build) or set TRAINSCOPE_BIN")
    return p.resolve()


def tool_path(name: str, env: str) -> pathlib.Path | None:
    """A test tool built next to the CLI (<build>/tests/tools/NAME), or the path in $env."""
    for cand in (os.environ.get(env), cli_path().parents[2] / "tests" / "tools" / name):
        if cand and pathlib.Path(cand).exists():
            return pathlib.Path(cand)
    return None


def run(args, env=None) -> str:
    """Runs a command, returns its stdout; a failure shows its stderr."""
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                       env={**os.environ, **(env or {})}, timeout=120)
    assert r.returncode == 0, f"{args[0]} failed ({r.returncode}): {r.stderr}"
    return r.stdout


class Proc:
    """A background process whose stdout and stderr are collected while it runs."""

    def __init__(self, args):
        self.p = subprocess.Popen([str(a) for a in args], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        self.out, self.err = [], []
        self._readers = [threading.Thread(target=self._read, args=(s, b), daemon=True)
                         for s, b in ((self.p.stdout, self.out), (self.p.stderr, self.err))]
        for t in self._readers:
            t.start()

    @staticmethod
    def _read(stream, buf):
        for line in stream:
            buf.append(line)

    @property
    def stdout(self) -> str:
        return "".join(self.out)

    def wait(self, timeout: float) -> int | None:
        """The exit code, or None if it is still running after `timeout` seconds."""
        try:
            code = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        for t in self._readers:
            t.join(timeout=5)
        return code

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
        if self.wait(10) is None:
            self.p.kill()
            self.p.wait()


def until(fn, what: str, timeout: float = 30.0):
    """Polls fn() every 0.1 s until it returns something true; fails after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.1)
    pytest.fail("timed out waiting for " + what)


@pytest.fixture(scope="session")
def browser():
    """A chromium context with a fresh profile, 1280×900."""
    profile = tempfile.mkdtemp(prefix="ts-chromium-")
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            user_data_dir=profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900})
        try:
            yield context
        finally:
            context.close()
            shutil.rmtree(profile, ignore_errors=True)


class Problems:
    """What went wrong on a page: console errors, page errors, requests to elsewhere."""

    def __init__(self, page, local):
        self.console, self.external = [], []
        page.on("console", lambda m: m.type == "error" and self.console.append(m.text))
        page.on("pageerror", lambda e: self.console.append(f"pageerror: {e}"))
        page.on("request", lambda r: None if local(r.url) else self.external.append(r.url))


def open_page(context, url: str, local=lambda u: u.startswith(("file:", "data:"))):
    """Opens url in a new page; `local(url)` says which requests stay on the machine."""
    page = context.new_page()
    problems = Problems(page, local)
    page.goto(url, wait_until="load")
    return page, problems


# Per chart (figure.ts-chart): its canvases' size and how many coloured pixels are drawn on them, and
# every y axis label with its text, whether the text overflows its box, and whether the box
# lies inside the figure.
CHART_FACTS = """(sel) => [...document.querySelectorAll(sel)].map((f) => {
  const fr = f.getBoundingClientRect();
  let drawn = 0, w = 0, h = 0;
  for (const c of f.querySelectorAll('canvas')) {
    const r = c.getBoundingClientRect();
    w = Math.max(w, r.width); h = Math.max(h, r.height);
    if (!c.width || !c.height) continue;
    const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    for (let i = 0; i < px.length; i += 4) {  // coloured: series, bars, markers (not the grey grid)
      if (px[i + 3] > 100 && Math.max(px[i], px[i + 1], px[i + 2]) - Math.min(px[i], px[i + 1], px[i + 2]) > 60) drawn++;
    }
  }
  const labels = [...f.querySelectorAll('.dygraph-axis-label-y')].map((d) => {
    const r = d.getBoundingClientRect();
    return { text: d.textContent, overflows: d.scrollWidth > d.clientWidth + 1,
      inside: r.left >= fr.left - 1 && r.right <= fr.right + 1 && r.top >= fr.top - 1 && r.bottom <= fr.bottom + 1 };
  });
  return { id: f.dataset.chart, scale: f.dataset.scale || null, canvas: w > 0, w, h, drawn, labels,
    caption: (f.querySelector('figcaption') || {}).textContent || '',
    note: (f.querySelector('.ts-scale-note') || {}).textContent || '' };
})"""


def chart_facts(page, selector="figure.ts-chart"):
    return page.evaluate(CHART_FACTS, selector)


def check_charts(page, min_charts: int, selector="figure.ts-chart"):
    """Every chart has a canvas of a sensible size with something drawn on it, and y axis labels
    that are readable (not cut off, inside the chart)."""
    charts = chart_facts(page, selector)
    assert len(charts) >= min_charts, f"expected at least {min_charts} charts, got {len(charts)}"
    for c in charts:
        assert c["canvas"], f"chart {c['id']} has no canvas"
        assert c["w"] > 100 and c["h"] > 50, f"chart {c['id']} is {c['w']}x{c['h']}"
        assert c["drawn"] > 200, f"chart {c['id']} draws no data ({c['drawn']} coloured pixels)"
        for lab in c["labels"]:
            assert not lab["overflows"], f"chart {c['id']}: y label {lab['text']!r} is cut off"
            assert lab["inside"], f"chart {c['id']}: y label {lab['text']!r} lies outside the chart"
    return charts


def colour_pixels(page, selector: str, rgb) -> int:
    """Pixels of (about) colour rgb on the canvases under selector: markers are drawn in the
    severity colours."""
    return page.evaluate("""([sel, rgb]) => {
      let n = 0;
      for (const c of document.querySelectorAll(sel + ' canvas')) {
        const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        for (let i = 0; i < px.length; i += 4) {
          if (px[i + 3] > 200 && Math.abs(px[i] - rgb[0]) < 24 && Math.abs(px[i + 1] - rgb[1]) < 24 &&
              Math.abs(px[i + 2] - rgb[2]) < 24) n++;
        }
      }
      return n;
    }""", [selector, list(rgb)])


def screenshot(context, page, name: str) -> dict:
    """Saves a full-page screenshot as test-artifacts/NAME.png and checks it holds a picture
    (decoded in a separate blank page, so the page under test sees no extra request)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    png = page.screenshot(path=str(path), full_page=True)
    viewer = context.new_page()
    try:
        stats = viewer.evaluate("""async (src) => {
          const img = new Image();
          img.src = src;
          await img.decode();
          const c = document.createElement('canvas');
          c.width = img.width; c.height = img.height;
          const ctx = c.getContext('2d');
          ctx.drawImage(img, 0, 0);
          const px = ctx.getImageData(0, 0, c.width, c.height).data;
          const colours = new Set();
          let dark = 0;
          for (let i = 0; i < px.length; i += 4 * 7) {
            colours.add((px[i] << 16) | (px[i + 1] << 8) | px[i + 2]);
            if (px[i] + px[i + 1] + px[i + 2] < 300) dark++;
          }
          return { w: c.width, h: c.height, colours: colours.size, dark };
        }""", "data:image/png;base64," + base64.b64encode(png).decode())
    finally:
        viewer.close()
    assert stats["w"] >= 1000 and stats["h"] >= 600, f"{path}: {stats}"
    assert stats["colours"] > 50 and stats["dark"] > 1000, f"{path} looks blank: {stats}"
    return stats
