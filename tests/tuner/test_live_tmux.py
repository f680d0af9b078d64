"""The live view on a real terminal: an 80x30 tmux pane runs tests/tuner/live_pane.py (the
real progress callback and rich, Tune's trials stood in for, no Ray, then the end-of-run
printout tuner run prints) and its screen and scrollback are read back: no line wrapped,
none drawn twice, the extra trials summed up, the parameter columns that do not fit named."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WIDTH, HEIGHT = 80, 30


def _tmux(session: str, *args: str) -> list[str]:
    # A tmux server of the test's own (its socket named after the session): none of the
    # user's sessions is seen or touched.
    return ["tmux", "-L", session, *args]


def _capture(session: str) -> list[str]:
    # -J joins lines the terminal wrapped: a wrapped line comes back longer than the pane.
    out = subprocess.run(
        _tmux(session, "capture-pane", "-p", "-J", "-S", "-200", "-t", session),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line.rstrip() for line in out.splitlines()]


@pytest.fixture
def pane_lines() -> list[str]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (Debian's package tmux)")
    session = f"tuner-live-{os.getpid()}"
    root = shlex.quote(str(ROOT))
    command = f"cd {root} && PYTHONPATH={root} {shlex.quote(sys.executable)} "
    command += "-m tests.tuner.live_pane; sleep 30"
    size = ["-x", str(WIDTH), "-y", str(HEIGHT)]
    subprocess.run(_tmux(session, "new-session", "-d", "-s", session, *size, command), check=True)
    try:
        deadline = time.monotonic() + 25
        lines = _capture(session)
        while "LIVE-PANE-DONE" not in lines and time.monotonic() < deadline:
            time.sleep(0.5)
            lines = _capture(session)
        assert "LIVE-PANE-DONE" in lines, "\n".join(lines)
        return lines
    finally:
        subprocess.run(_tmux(session, "kill-session", "-t", session), check=False)


def test_live_view_fits_an_80_column_pane_without_wrapped_or_repeated_lines(
    pane_lines: list[str],
) -> None:
    screen = "\n".join(pane_lines)
    too_long = [line for line in pane_lines if len(line) > WIDTH]
    assert too_long == [], screen
    drawn = [line for line in pane_lines if line.strip()]
    repeated = {line for line in drawn if drawn.count(line) > 1}
    assert repeated == set(), screen
    # The view, once, below what was printed while it was up; the rows that did not fit
    # the pane counted rather than drawn.
    titles = [i for i, line in enumerate(pane_lines) if line.startswith("tiny-digits ")]
    printed = [i for i, line in enumerate(pane_lines) if line.startswith("a line printed")]
    assert len(titles) == 1 and len(printed) == 6 and max(printed) < titles[0], screen
    assert any(line.startswith("epochs ") and "trial-epochs" in line for line in drawn), screen
    more = [line for line in drawn if line.startswith("+") and line.endswith(" more running")]
    assert len(more) == 1, screen
    table = next(i for i, line in enumerate(pane_lines) if line.startswith("#   trial "))
    view = pane_lines[titles[0] : table - 1]  # a blank line between the view and the table
    assert len(view) <= HEIGHT - 1, screen
    # The end-of-run printout below it: the top trials' table keeps its leading columns,
    # leaves out the parameters that do not fit and names them; prose wrapped by tuner.
    closing = pane_lines[table : pane_lines.index("LIVE-PANE-DONE")]
    assert pane_lines[table].split()[:5] == ["#", "trial", "state", "val_acc", "epochs"], screen
    hidden = [line for line in closing if line.startswith("+") and "not shown:" in line]
    assert len(hidden) == 1 and "weight_decay" in " ".join(closing), screen
    best = next(i for i, line in enumerate(closing) if line.startswith("best val_acc=0.9900"))
    assert closing[best + 1].startswith("  /tmp/a-long-runs-folder-name/"), screen
    assert any(line.startswith("ledger: spent $5.01") for line in closing), screen
