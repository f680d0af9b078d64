"""The pure parts of the campaign report: outcomes, rungs, history, spend (no Ray)."""

from __future__ import annotations

import pytest

from tuner.report import outcome_of, rungs, spend_series
from tuner.report._collect import history
from tuner.summary import TrialRow


def _row(
    number: int, state: str, value: float | None, reason: str = "", failure: str = ""
) -> TrialRow:
    return TrialRow(number, f"t{number}", state, value, 1, reason, failure=failure)


@pytest.mark.parametrize(
    ("state", "reason", "failure", "outcome"),
    [
        ("COMPLETE", "completed", "", "completed"),
        ("PRUNED", "stopped early at epoch 1 of 9", "", "pruned"),
        ("PRUNED", "diverged: train loss is nan at epoch 2", "", "diverged"),
        ("FAIL", "oom", "oom", "oom"),
        ("FAIL", "error: ValueError", "error", "failed"),
        ("PRUNED", "budget exhausted: $0.12 of $0.12", "", "stopped by budget"),
        ("FAIL", "orphaned: started after Tune's last snapshot", "", "orphaned"),
    ],
)
def test_outcome_of(state: str, reason: str, failure: str, outcome: str) -> None:
    assert outcome_of(_row(0, state, 0.5, reason, failure)) == outcome


def test_rungs_are_asha_milestones_below_max_epochs() -> None:
    asha = {"budget": {"max_epochs": 9}, "scheduler": {"type": "asha", "grace_period": 1}}
    assert rungs({**asha, "scheduler": {**asha["scheduler"], "reduction_factor": 3}}) == [1, 3]
    assert rungs({"budget": {"max_epochs": 27}, "scheduler": {"grace_period": 3}}) == [3, 9]
    assert rungs({"budget": {"max_epochs": 9}, "scheduler": {"type": "fifo"}}) == []


def test_history_best_so_far_counts_completed_trials_only() -> None:
    rows = [_row(0, "COMPLETE", 0.5), _row(1, "PRUNED", 0.9), _row(2, "COMPLETE", 0.7)]
    assert [h["best"] for h in history(rows, maximize=True)] == [0.5, 0.5, 0.7]
    assert [h["best"] for h in history(rows, maximize=False)] == [0.5, 0.5, 0.5]


def test_spend_series_integrates_each_node_rate() -> None:
    ledger = {
        "nodes": [
            {"start": 1000.0, "end": 1000.0 + 3600, "usd_per_hour": 2.0},
            {"start": 1000.0 + 1800, "last_seen": 1000.0 + 3600, "end": None, "usd_per_hour": 4.0},
        ]
    }
    series = spend_series(ledger)
    assert series[0] == [0.0, 0.0]
    assert series[-1][0] == pytest.approx(3600)
    assert series[-1][1] == pytest.approx(2.0 + 2.0)  # 1 h at $2 plus 0.5 h at $4
    assert series[50][1] == pytest.approx(1.0)  # half-way: only the first node, half an hour
    assert spend_series({"nodes": []}) == []
