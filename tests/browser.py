"""Headless Chromium for report tests: load a local HTML file, dump its DOM, screenshot it.

Chromium comes from Debian's package (``.ci/run`` installs it when missing); tests that use
it skip with the reason where it is absent, and fail under ``CI=true``
(``tests/no_silent_skips.py``). The flags keep it off the network, which this
machine does not have.
"""

from __future__ import annotations

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
