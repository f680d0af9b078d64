"""``tuner stop`` on a campaign running here, then ``tuner resume``: the stop is clean
(exit status 3, status STOPPED, no RUNNING trial in the study, the report and ledger
written) and the resume finishes the campaign with exactly the trials asked for, no
trial-epoch lost or run twice (counted from the study)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from tests.conftest import kill_session, run_cli, tiny_digits_campaign
from tuner import rundir
from tuner.status import read_status
from tuner.stop import STOP_REQUEST_FILE

pytestmark = [pytest.mark.ray, pytest.mark.slow]

TRIALS = 6


def _slow(data: dict) -> dict:  # type: ignore[type-arg]
    """Every trial runs all its epochs (FIFO) on small batches: a campaign still running
    when the stop arrives, on any machine (a fast one finished the ASHA version first)."""
    return {**data, "scheduler": {"type": "fifo"}, "fixed": {"batch_size": 8}}


def _epochs_in_study(run_dir: Path, name: str) -> dict[int, list[int]]:
    study = optuna.load_study(study_name=name, storage=rundir.study_url(run_dir))
    return {t.number: sorted(t.intermediate_values) for t in study.trials}


def test_stop_then_resume_loses_and_repeats_nothing(tmp_path: Path) -> None:
    data = _slow(tiny_digits_campaign(name="stopped", budget={"trials": TRIALS, "max_epochs": 5}))
    campaign = tmp_path / "stopped.yaml"
    campaign.write_text(yaml.safe_dump(data))
    run_dir = tmp_path / "runs" / "stopped"
    log_path = tmp_path / "driver.out"
    with log_path.open("w") as log:
        driver = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tuner",
                "run",
                str(campaign),
                *("--runs-dir", "runs"),
                "--num-cpus",
                "2",
            ],
            cwd=tmp_path,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 240
            while True:  # a trial has reported: there is something to stop
                status = read_status(run_dir) if run_dir.is_dir() else None
                if status is not None and status["trials"]["running"] >= 1:
                    break
                assert driver.poll() is None, log_path.read_text()
                assert time.monotonic() < deadline, "the campaign never ran a trial"
                time.sleep(0.1)
            stop = run_cli(["stop", "stopped", "--runs-dir", "runs"], cwd=tmp_path, timeout=60)
            assert stop.returncode == 0, stop.stdout + stop.stderr
            assert "stop requested for stopped" in stop.stdout
            code = driver.wait(timeout=180)
        finally:
            kill_session(driver.pid)
    out = log_path.read_text()
    assert code == 3, out  # stopped before the campaign's own end: 3
    assert "stop: stopped by tuner stop" in out, out
    assert "status: stopped: tuner stop" in out, out

    stopped = read_status(run_dir)
    assert stopped is not None and stopped["state"] == "STOPPED", stopped
    summary = json.loads((run_dir / rundir.SUMMARY_FILE).read_text())
    assert summary["status"] == "stopped: tuner stop"
    assert summary["trials_finished"] < TRIALS, "stopped before the end"
    ledger = json.loads((run_dir / "ledger.json").read_text())
    assert ledger["user_stop"] == "stopped by tuner stop"
    study = optuna.load_study(study_name="stopped", storage=rundir.study_url(run_dir))
    assert not [t.number for t in study.trials if t.state is TrialState.RUNNING]
    reasons = [t.user_attrs.get("stop_reason", "") for t in study.trials]
    cut = [reason for reason in reasons if "stopped by tuner stop" in reason]
    assert cut, reasons  # the running ones ended with the reason
    before = _epochs_in_study(run_dir, "stopped")
    assert (run_dir / rundir.DRIVER_LOG_FILE).read_text().strip(), "driver.log written"
    logs = run_cli(["logs", str(run_dir)], cwd=tmp_path, timeout=60)
    assert "stopped by tuner stop" in logs.stdout

    # Stopping a campaign that is not running is refused (exit 2, one error line).
    again = run_cli(["stop", str(run_dir)], cwd=tmp_path, timeout=60)
    assert again.returncode == 2 and "not running (STOPPED)" in again.stderr, again.stderr

    resumed = run_cli(["resume", str(run_dir), "--num-cpus", "2"], cwd=tmp_path, timeout=300)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert not (run_dir / STOP_REQUEST_FILE).exists()
    final = json.loads((run_dir / rundir.SUMMARY_FILE).read_text())
    assert final["status"] == "completed", final["status"]
    after = _epochs_in_study(run_dir, "stopped")
    assert len(after) == TRIALS, after  # exactly the trials asked for
    for number, epochs in before.items():  # nothing lost, nothing run again
        assert after[number] == epochs, (number, epochs, after[number])
    for number, epochs in after.items():  # each trial's epochs once, in order
        assert epochs == list(range(1, len(epochs) + 1)), (number, epochs)
    study = optuna.load_study(study_name="stopped", storage=rundir.study_url(run_dir))
    assert not [t.number for t in study.trials if t.state is TrialState.RUNNING]
    assert read_status(run_dir)["state"] == "FINISHED"  # type: ignore[index]


def test_stop_now_interrupts_and_resume_finishes(tmp_path: Path) -> None:
    """--now: SIGINT to the local driver; Tune ends at once, the campaign is not finished
    (DIED, exit 130 as after Ctrl+C) and a resume finishes it with the trials asked for."""
    data = _slow(tiny_digits_campaign(name="now", budget={"trials": 4, "max_epochs": 5}))
    (tmp_path / "now.yaml").write_text(yaml.safe_dump(data))
    run_dir = tmp_path / "runs" / "now"
    driver = subprocess.Popen(
        [sys.executable, "-m", "tuner", "run", "now.yaml", "--num-cpus", "2"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240
        while True:
            status = read_status(run_dir) if run_dir.is_dir() else None
            if status is not None and status["trials"]["running"] >= 1:
                break
            assert driver.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        stop = run_cli(["stop", "now", "--now"], cwd=tmp_path, timeout=60)
        assert stop.returncode == 0, stop.stdout + stop.stderr
        out, _ = driver.communicate(timeout=120)
    finally:
        kill_session(driver.pid)
    assert driver.returncode == 130, out
    assert "interrupted; `tuner resume" in out, out
    died = read_status(run_dir)
    assert died is not None and died["state"] == "DIED", died
    assert json.loads((run_dir / rundir.SUMMARY_FILE).read_text())["status"] == "not finished"

    resumed = run_cli(["resume", str(run_dir), "--num-cpus", "2"], cwd=tmp_path, timeout=300)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    summary = json.loads((run_dir / rundir.SUMMARY_FILE).read_text())
    assert summary["status"] == "completed" and summary["trials_run"] == 4, summary
    for number, epochs in _epochs_in_study(run_dir, "now").items():
        assert epochs == list(range(1, len(epochs) + 1)), (number, epochs)
