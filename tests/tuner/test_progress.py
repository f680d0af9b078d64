"""The live view: bars, the money line, and the block redrawn in place on a terminal."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import live_campaign
from tuner._ray.progress import ProgressCallback, bar, format_block, format_money


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class _GuardStandIn:
    """Stands in for a BudgetGuard's live() (the real one needs a Ray cluster to watch;
    tests/tuner/report/test_campaign_report.py checks its line from a real campaign)."""

    def __init__(self, money: dict[str, Any]) -> None:
        self.money = money

    def live(self) -> dict[str, Any]:
        return self.money


MONEY = {
    "usd": 1.25,
    "usd_per_hour": 3.6,
    "gpu_hours": 0.5,
    "limit_usd": 5.0,
    "limit_gpu_hours": None,
    "pending_warnings": 1,
    "last_pending": "waiting for the autoscaler to add a node (gpu_t4)",
    "exhausted": None,
}


def test_bar_clips_and_fills() -> None:
    assert bar(0.25, width=8) == "[##------]"
    assert bar(1.7, width=4) == "[####]"
    assert bar(-1, width=4) == "[----]"


def test_money_line_shows_share_rate_and_pending() -> None:
    text = format_money(MONEY)
    assert text == "$1.25 of $5.00 (25%) at $3.60/h, 1 PENDING warning(s)"
    assert format_money({**MONEY, "limit_usd": None, "pending_warnings": 0}) == "$1.25 at $3.60/h"


def test_block_has_trials_money_status_and_pending_lines() -> None:
    lines = format_block("[0:05] status", done=3, total=12, money=MONEY)
    assert lines[0] == "trials [#####---------------] 3/12"
    assert lines[1].startswith("money  [#####---------------] $1.25 of $5.00")
    assert lines[2] == "[0:05] status"
    assert lines[3] == "PENDING: waiting for the autoscaler to add a node (gpu_t4)"
    assert len(format_block("s", done=0, total=4, money=None)) == 2


@pytest.fixture
def campaign(tmp_path: Path) -> Any:
    """The campaign the callback is handed, with the stand-in guard."""
    return live_campaign(tmp_path, guard=_GuardStandIn(MONEY))


def _callback(stream: io.StringIO, campaign: Any) -> ProgressCallback:
    return ProgressCallback(
        metric="val_acc", maximize=True, total=12, max_epochs=9, stream=stream, campaign=campaign
    )


def test_terminal_block_is_redrawn_in_place(campaign: Any) -> None:
    out = _Tty()
    cb = _callback(out, campaign)
    cb._emit([], force=True)
    first = out.getvalue()
    assert first.startswith("\r\x1b[J") and "money  [" in first and "PENDING: " in first
    cb._emit([], force=True)
    # Back up to the block's first line (4 lines: 3 up), clear, draw again.
    assert out.getvalue()[len(first) :].startswith("\r\x1b[3F\x1b[J")


def test_plain_lines_off_a_terminal(campaign: Any) -> None:
    out = io.StringIO()
    cb = _callback(out, campaign)
    cb._emit([], force=True)
    [line] = out.getvalue().splitlines()
    assert "0/12 trials done" in line and "| $1.25 of $5.00 (25%) at $3.60/h" in line
    assert "\x1b" not in line
