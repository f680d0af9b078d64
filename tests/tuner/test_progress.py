"""The progress callback: the money line and plain lines off a terminal, the rich live view
(tuner.live) drawn and redrawn in place on one."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import live_campaign
from tuner import atomic
from tuner._ray.progress import ProgressCallback, format_money
from tuner.cost import AshaGeometry
from tuner.cost._reality import PREDICTION_FILE, predict_cost
from tuner.standings import Standings


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class _GuardStandIn:
    """Stands in for a BudgetGuard's live() (the real one needs a Ray cluster to watch;
    tests/tuner/report/test_campaign_report.py checks its line from a real campaign)."""

    slots = 2

    def __init__(self, money: dict[str, Any]) -> None:
        self.money = money

    def live(self) -> dict[str, Any]:
        return self.money

    def to_finish(self, *, done: int) -> dict[str, Any] | None:
        return None  # tests/tuner/test_budget_guard.py checks the real one


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


def test_money_line_shows_share_rate_and_pending() -> None:
    text = format_money(MONEY)
    assert text == "$1.25 of $5.00 (25%) at $3.60/h, 1 PENDING warning(s)"
    assert format_money({**MONEY, "limit_usd": None, "pending_warnings": 0}) == "$1.25 at $3.60/h"


@pytest.fixture
def campaign(tmp_path: Path) -> Any:
    """The campaign the callback is handed, with the stand-in guard."""
    return live_campaign(tmp_path, guard=_GuardStandIn(MONEY))


def _callback(stream: io.StringIO, campaign: Any) -> ProgressCallback:
    return ProgressCallback(
        metric="val_acc", maximize=True, total=12, max_epochs=9, stream=stream, campaign=campaign
    )


def test_terminal_gets_the_live_view_redrawn_in_place(campaign: Any) -> None:
    # The prediction the driver writes at the start (the live view's total before any epoch
    # is timed).
    geometry = AshaGeometry.from_spec(campaign.spec)
    prediction = predict_cost(geometry, workers=2, gpus_per_trial=0, usd_per_gpu_hour=0)
    atomic.write_json(campaign.run_dir / PREDICTION_FILE, prediction)
    out = _Tty()
    cb = _callback(out, campaign)
    running = _Trial("run1", "RUNNING", [0.5, 0.6])
    cb._emit([running], force=True)
    first = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", out.getvalue())  # without colours
    # The tiny campaign's rungs (1, 2 and max_epochs 4): run1 reached 2 of them, goes on to 4;
    # no epoch time measured yet, so the total is the cost model's plan and the ETA unknown.
    assert "run1" in first and "2/3 next 4" in first and "0.6000" in first, first
    assert "2/~" in first and "ETA -" in first and "$1.25 of $5.00" in first
    assert "PENDING: waiting for the autoscaler" in first
    cb._emit([running], force=True)
    again = out.getvalue().split("PENDING", 1)[1]
    # rich's Live: back up over the view it drew (cursor up, erase line), draw it again.
    assert "\x1b[2K\x1b[1A" in again and "run1" in again
    cb.on_experiment_end([running])
    assert cb._live is None


def test_plain_lines_off_a_terminal(campaign: Any) -> None:
    out = io.StringIO()
    cb = _callback(out, campaign)
    cb._emit([], force=True)
    [line] = out.getvalue().splitlines()
    assert "0/12 trials done" in line and "| $1.25 of $5.00 (25%) at $3.60/h" in line
    assert "\x1b" not in line


class _Trial:
    """What the callback reads of a Tune trial (real Trial objects need a registered
    trainable; the real callback on real trials runs in tests/integration/test_best.py)."""

    def __init__(self, trial_id: str, status: str, values: list[float]) -> None:
        self.trial_id = trial_id
        self.status = status
        epochs = len(values)
        self.last_result = {"epoch": epochs, "val_acc": values[-1]} if values else {}


def _best_in(line: str) -> str:
    return line.split("| best ", 1)[1].split(" | ")[0] if "| best " in line else ""


def test_live_best_is_the_last_value_of_the_best_finished_trial(campaign: Any) -> None:
    out = io.StringIO()
    cb = _callback(out, campaign)
    # "peak" was the best at epoch 1 (0.99) but ended at 0.20; "steady" ended at 0.70.
    peak = _Trial("peak", "TERMINATED", [0.99] + [0.2] * 8)
    steady = _Trial("steady", "TERMINATED", [0.5] * 8 + [0.7])
    short = _Trial("short", "TERMINATED", [0.9, 0.95])  # stopped early at epoch 2
    running = _Trial("running", "RUNNING", [0.98])  # no final value yet
    trials: list[Any] = [peak, steady, short, running]
    cb.on_trial_result(1, trials, running, {"epoch": 1, "val_acc": 0.98})
    for t in (peak, steady, short):
        cb.on_trial_complete(1, trials, t)
    line = out.getvalue().splitlines()[-1]
    assert _best_in(line) == "val_acc=0.7000 (steady)", line
    assert "3/12 trials done" in line and "1 stopped early" in line


def test_resumed_line_starts_from_the_trials_finished_before(campaign: Any) -> None:
    earlier = Standings(maximize=True)
    earlier.add("before", 0.8, complete=True, epochs=9, failed=False)
    earlier.add("lost", 0.3, complete=False, epochs=3, failed=False)  # not in Tune's snapshot
    out = io.StringIO()
    cb = ProgressCallback(
        metric="val_acc",
        maximize=True,
        total=12,
        max_epochs=9,
        stream=out,
        campaign=campaign,
        standings=earlier,
    )
    restored = _Trial("before", "TERMINATED", [0.8] * 9)
    also_done = _Trial("snap", "TERMINATED", [0.1, 0.2])  # finished, unknown to the study
    resumed = _Trial("resumed", "RUNNING", [0.5])
    trials: list[Any] = [restored, also_done, resumed]
    cb.on_trial_result(1, trials, resumed, {"epoch": 1, "val_acc": 0.5})
    line = out.getvalue().splitlines()[-1]
    # before (Tune and the study) + snap (Tune) + lost (the study) = 3 done.
    assert "3/12 trials done" in line and "2 stopped early" in line, line
    assert _best_in(line) == "val_acc=0.8000 (before)", line
