"""budget.goal on a real campaign: the first result that meets it stops the campaign
promptly (no epoch starts after it but those already under way), exit status 0, status
``goal reached``, and the summary says which trial and what was not spent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_cli, tiny_digits_campaign
from tuner import rundir

pytestmark = [pytest.mark.ray, pytest.mark.slow]

GOAL = 0.5  # the tiny digits CNN passes it within its first epochs
LATENCY_S = 2.0  # the driver's reaction: result -> guard -> stop key -> next epoch's end


def _rows(run_dir: Path) -> list[dict]:  # type: ignore[type-arg]
    rows = []
    for path in run_dir.glob("trial_*/result.json"):
        for line in path.read_text().splitlines():
            rows.append({**json.loads(line), "trial": path.parent.name})
    return rows


def _begun_after_goal(run_dir: Path) -> list[tuple[str, int]]:
    """(trial, epoch) of the epochs begun later than LATENCY_S after the first result with
    val_acc >= GOAL ended (in the two-objective test the other goal always holds)."""
    rows = _rows(run_dir)
    first = min(r["tuner_epoch_end_unix_s"] for r in rows if r["val_acc"] >= GOAL)
    return [
        (r["trial"], r["epoch"])
        for r in rows
        if r["tuner_epoch_end_unix_s"] - r["epoch_time_s"] > first + LATENCY_S
    ]


def test_the_campaign_stops_at_its_goal(tmp_path: Path) -> None:
    data = tiny_digits_campaign(name="goal", budget={"trials": 16, "max_epochs": 6, "goal": GOAL})
    (tmp_path / "goal.yaml").write_text(yaml.safe_dump(data))
    done = run_cli(["run", "goal.yaml", "--num-cpus", "2"], cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run_dir = tmp_path / "runs" / "goal"
    summary = json.loads((run_dir / rundir.SUMMARY_FILE).read_text())
    assert summary["status"] == "goal reached", summary["status"]
    reached = summary["goal"]["reached"]
    assert reached.startswith("goal reached: val_acc=") and f">= {GOAL:g}" in reached
    assert summary["trials_run"] < 16, "stopped before every trial ran"
    assert summary["goal"]["trial_epochs_saved"] > 0
    assert "status: goal reached" in done.stdout

    late = _begun_after_goal(run_dir)
    assert late == [], f"epochs begun after the goal was reached: {late}"


def test_a_multi_objective_campaign_stops_when_one_result_meets_every_goal(
    tmp_path: Path,
) -> None:
    data = tiny_digits_campaign(
        name="goals",
        metric=["val_acc", "param_count"],
        mode=["max", "min"],
        budget={"trials": 16, "max_epochs": 6, "goal": [GOAL, 1.0e9]},
    )
    (tmp_path / "goals.yaml").write_text(yaml.safe_dump(data))
    done = run_cli(["run", "goals.yaml", "--num-cpus", "2"], cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((tmp_path / "runs" / "goals" / rundir.SUMMARY_FILE).read_text())
    assert summary["status"] == "goal reached", summary["status"]
    reached = summary["goal"]["reached"]
    assert (
        reached.startswith("goal reached: val_acc=") and f">= {GOAL:g} and param_count=" in reached
    )
    assert "<= 1e+09" in reached, reached
    assert summary["trials_run"] < 16, "stopped before every trial ran"
    late = _begun_after_goal(tmp_path / "runs" / "goals")
    assert late == [], f"epochs begun after the goals were met: {late}"
