"""A real multi-objective campaign (search_spaces/digits_pareto.yaml: the digits CNN's
val_acc against its param_count) on an embedded local Ray, with real Optuna (MOTPE) and
PyTorch on CPU: MO-ASHA stops trials, the study holds vectors, and the Pareto front reaches
summary.json, `tuner show`, the report's plot and the Python API's result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from optuna.study import StudyDirection
from optuna.trial import TrialState

import tuner
from tests.conftest import kill_session, run_cli
from tuner import rundir
from tuner.front import epoch_values
from tuner.pareto import dominates

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[2]
MAXIMIZE = (True, False)


def test_multi_objective_campaign_finds_a_pareto_front(tmp_path: Path) -> None:
    # Through the CLI, as test_search_spaces runs every other campaign file (it leaves this
    # one to this test); the Python API reads the run back.
    campaign = ROOT / "search_spaces" / "digits_pareto.yaml"
    spec = tuner.load_campaign(campaign)
    assert spec.multi_objective
    argv = ["run", str(campaign), "--runs-dir", "runs", "--num-cpus", "2"]
    done = run_cli(argv, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run_dir = tmp_path / "runs" / spec.name
    result = tuner.open_run(run_dir)
    assert result.status is tuner.Status.COMPLETED
    assert result.objectives == (("val_acc", "max"), ("param_count", "min"))

    # The study: one direction per objective, vectors for COMPLETE trials, per-epoch vectors
    # as user attributes, PRUNED trials stopped early keeping theirs.
    study = result.study()
    assert study.directions == [StudyDirection.MAXIMIZE, StudyDirection.MINIMIZE]
    assert len(study.trials) == spec.budget.trials
    complete = [t for t in study.trials if t.state is TrialState.COMPLETE]
    pruned = [t for t in study.trials if t.state is TrialState.PRUNED]
    assert pruned, "MO-ASHA stopped no trial"
    for t in complete:
        per_epoch = epoch_values(t.user_attrs)
        assert sorted(per_epoch) == [1, 2, 3]
        assert per_epoch[3] == t.values
    for t in pruned:
        assert 1 <= len(epoch_values(t.user_attrs)) < 3
        assert t.user_attrs["stop_reason"].startswith("stopped early at epoch")

    # The front: at least 3 trials, none dominating another, and every other COMPLETE trial
    # dominated by one of them.
    front = result.pareto_front
    assert len(front) >= 3, [p.values for p in front]
    vectors = {p.number: (p.values["val_acc"], p.values["param_count"]) for p in front}
    for a in vectors.values():
        assert not any(dominates(b, a, MAXIMIZE) for b in vectors.values())
    for t in complete:
        if t.number not in vectors:
            assert any(dominates(v, tuple(t.values), MAXIMIZE) for v in vectors.values())
    assert [p.values["val_acc"] for p in front] == sorted(
        (p.values["val_acc"] for p in front), reverse=True
    )
    assert all(p.config["batch_size"] == 64 and "channels" in p.params for p in front)

    summary = json.loads((run_dir / rundir.SUMMARY_FILE).read_text())
    assert [r["number"] for r in summary["pareto_front"]] == [p.number for p in front]
    assert summary["objectives"] == [
        {"metric": "val_acc", "mode": "max"},
        {"metric": "param_count", "mode": "min"},
    ]
    # The rungs persisted vectors, which a resume reads back.
    state = json.loads((run_dir / rundir.SCHEDULER_STATE_FILE).read_text())
    recorded = [v for rung in state["rungs"] for v in rung["recorded"].values()]
    assert recorded and all(isinstance(v, list) and len(v) == 2 for v in recorded)

    show = run_cli(["show", str(run_dir)], cwd=tmp_path, timeout=120)
    assert show.returncode == 0, show.stderr
    assert f"Pareto front ({len(front)} trials): val_acc, param_count" in show.stdout
    shown = run_cli(["show", str(run_dir), "--json"], cwd=tmp_path, timeout=120)
    assert [r["number"] for r in json.loads(shown.stdout)["pareto_front"]] == list(vectors)

    report = run_cli(["report", str(run_dir)], cwd=tmp_path, timeout=120)
    assert report.returncode == 0, report.stderr
    assert (run_dir / "report_plots" / "pareto.png").stat().st_size > 1000
    assert "## Pareto front" in (run_dir / "report.md").read_text()
    assert 'id="plot-pareto"' in (run_dir / "report.html").read_text()


@pytest.mark.slow
def test_multi_objective_campaign_resumes_after_sigkill(tmp_path: Path) -> None:
    data = yaml.safe_load((ROOT / "search_spaces" / "digits_pareto.yaml").read_text())
    data |= {"name": "mo-killed", "budget": {"trials": 10, "max_epochs": 3}}
    campaign = tmp_path / "mo.yaml"
    campaign.write_text(yaml.safe_dump(data))
    run_dir = tmp_path / "runs" / "mo-killed"
    state_file = run_dir / rundir.SCHEDULER_STATE_FILE
    log = (tmp_path / "driver.log").open("w")
    args = ["run", str(campaign), "--runs-dir", "runs", "--num-cpus", "2"]
    driver = subprocess.Popen(
        [sys.executable, "-m", "tuner.cli", *args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 240
        while _finished(state_file) < 3:
            assert driver.poll() is None, (tmp_path / "driver.log").read_text()
            assert time.monotonic() < deadline, "campaign made no progress"
            time.sleep(0.2)
        time.sleep(1.5)
        assert driver.poll() is None, "the campaign ended before the kill"
    finally:
        kill_session(driver.pid)
        driver.wait(timeout=30)
        log.close()
    before = json.loads(state_file.read_text())

    resumed = run_cli(["resume", str(run_dir), "--num-cpus", "2"], cwd=tmp_path, timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "Pareto front (" in resumed.stdout

    study = tuner.open_run(run_dir).study()
    real = [t for t in study.trials if not t.user_attrs.get("stop_reason", "").startswith("orph")]
    assert len(real) == 10
    assert not [t for t in study.trials if t.state is TrialState.RUNNING]
    assert all(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in real)
    for t in real:  # per-epoch vectors contiguous: nothing lost, nothing told twice
        epochs = sorted(epoch_values(t.user_attrs))
        assert epochs == list(range(1, len(epochs) + 1)), (t.number, epochs)
    # The rungs' vectors from before the kill were read back and kept.
    after = json.loads(state_file.read_text())
    for rung_before, rung_after in zip(before["rungs"], after["rungs"], strict=True):
        for trial_id, vector in rung_before["recorded"].items():
            assert rung_after["recorded"][trial_id] == vector
    summary = json.loads((run_dir / rundir.SUMMARY_FILE).read_text())
    assert summary["status"] == "completed" and summary["pareto_front"]


def _finished(state_file: Path) -> int:
    try:
        return len(json.loads(state_file.read_text())["finished"])
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return 0
