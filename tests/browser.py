"""Headless Chromium for report tests: load a local HTML file, dump its DOM (with its console
messages), screenshot it, and read what plotly.js drew on it.

Chromium comes from Debian's package (``.ci/run`` installs it when missing); tests that use
it skip with the reason where it is absent, and fail under ``CI=true``
(``tests/no_silent_skips.py``). The flags keep it off the network, which this
machine does not have.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="needs chromium (apt install chromium)"
)
_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def _run(page: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        return subprocess.run(
            [CHROMIUM, *_FLAGS, f"--user-data-dir={profile}", *extra, page.resolve().as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )


def dump_dom(page: Path) -> str:
    """The DOM Chromium built from ``page``, serialized."""
    return _run(page, "--dump-dom").stdout


# Chromium's log line for each console message of the page (any level) and uncaught error.
_CONSOLE = re.compile(r':CONSOLE(?::\d+)?\] "(.*)", source: ')


def dump_dom_and_console(page: Path) -> tuple[str, list[str]]:
    """The DOM Chromium built from ``page``, and every console message and uncaught error
    the page produced on the way, as Chromium logged them."""
    done = _run(page, "--enable-logging=stderr", "--v=0", "--dump-dom")
    return done.stdout, _CONSOLE.findall(done.stderr)


def screenshot(page: Path, out: Path, *, width: int = 1200, height: int = 1600) -> Path:
    """A PNG of ``page`` as Chromium renders it."""
    _run(page, f"--screenshot={out}", f"--window-size={width},{height}")
    return out


# Appended to a copy of a page: once the page has loaded, for each plot <div>, whether
# plotly.js drew it (its class and an <svg>), the data points of its traces, and the marks
# it drew for them (markers, bars, lines, contour paths), written into the DOM that
# --dump-dom prints.
_PROBE = """<script>
window.addEventListener("load", () => {
  const out = {};
  for (const el of document.querySelectorAll(".plotly-graph-div")) {
    let points = 0;
    // _fullData: the traces as plotly.js drew them (numpy arrays arrive as base64 specs
    // in .data and are decoded to typed arrays there).
    for (const t of el._fullData || []) {
      const sizes = ["x", "y", "z", "values"].map((k) => (t[k] ? t[k].length : 0));
      for (const d of t.dimensions || []) sizes.push(d.values ? d.values.length : 0);
      points += Math.max(0, ...sizes);
    }
    const marks = el.querySelectorAll(
      ".scatterlayer .point, .barlayer .point, .scatterlayer .js-line, .contourlayer path"
    ).length;
    out[el.id] = {
      drawn: el.classList.contains("js-plotly-plot") && el.querySelector(".main-svg") !== null,
      points: points,
      marks: marks,
    };
  }
  const pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def plotly_plots(page: Path, tmp: Path) -> tuple[dict[str, dict[str, object]], str, list[str]]:
    """What plotly.js drew on ``page`` (a copy with :data:`_PROBE` goes in ``tmp``): by plot
    id, ``drawn``, ``points`` and ``marks``; the DOM; and the console messages."""
    probed = tmp / f"probed-{page.name}"
    probed.write_text(page.read_text().replace("</body>", _PROBE + "</body>"))
    dom, console = dump_dom_and_console(probed)
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found is not None, "the probe script did not run"
    seen: dict[str, dict[str, object]] = json.loads(html.unescape(found.group(1)))
    return seen, dom, console
