"""Resume after the driver is SIGKILLed mid-campaign.

The campaign runs in a subprocess started in its own session; the test kills that whole
process group (the driver and the Ray processes it started) by its PID, then resumes in
another subprocess and checks: exactly the requested trials, no RUNNING leftovers in the
study, no trial told twice, finished trials not rerun, ASHA rungs from before the crash kept.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from tests.conftest import kill_session, run_cli, tiny_digits_campaign
from tuner import rundir
from tuner._ray.snapshot import BACKUP_DIR, STAGING_FILE, current_slot
from tuner.budget import LEDGER_FILE
from tuner.status import STATUS_FILE, read_status
from tuner.summary import load_rows, standings

pytestmark = [pytest.mark.ray, pytest.mark.slow]

TRIALS = 16  # test_resume_after_sigkill's campaign


def _finished_trials(run_dir: Path) -> int:
    state = run_dir / rundir.SCHEDULER_STATE_FILE
    if not state.exists():
        return 0
    try:
        return len(json.loads(state.read_text())["finished"])
    except (json.JSONDecodeError, KeyError):
        return 0


def _finished_ids(run_dir: Path) -> list[str]:
    """Trials ASHA's state records as finished (none before the first one finished)."""
    state = run_dir / rundir.SCHEDULER_STATE_FILE
    return list(json.loads(state.read_text())["finished"]) if state.exists() else []


def _result_lines(run_dir: Path) -> dict[str, int]:
    return {
        p.parent.name: len(p.read_text().splitlines()) for p in run_dir.glob("trial_*/result.json")
    }


def _rerun_rows(run_dir: Path, name: str, killed_at: float) -> list[int]:
    """Epochs the trial reported after ``killed_at`` (a rerun: it had finished by then)."""
    path = run_dir / name / "result.json"
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [row["epoch"] for row in rows if row["tuner_epoch_end_unix_s"] > killed_at]


def _logged_epochs(run_dir: Path, trial: Any) -> None:
    """Every epoch the study holds for ``trial`` is in its result log: nothing was lost."""
    path = run_dir / f"trial_{trial.user_attrs['tune_trial_id']}" / "result.json"
    assert path.exists(), path
    logged = {json.loads(line)["epoch"] for line in path.read_text().splitlines()}
    assert set(trial.intermediate_values) <= logged, (path, sorted(logged))


def _tuner(*args: str, cwd: Path) -> list[str]:
    return [sys.executable, "-m", "tuner.cli", *args]


def test_resume_after_sigkill(tmp_path: Path) -> None:
    data = tiny_digits_campaign(name="killed", budget={"trials": TRIALS, "max_epochs": 6})
    campaign = tmp_path / "killed.yaml"
    campaign.write_text(yaml.safe_dump(data))
    run_dir = tmp_path / "runs" / "killed"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    log_path = tmp_path / "driver.log"
    log = log_path.open("w")

    driver = subprocess.Popen(
        _tuner(
            "run",
            str(campaign),
            "--runs-dir",
            str(tmp_path / "runs"),
            "--num-cpus",
            "2",
            cwd=tmp_path,
        ),
        cwd=tmp_path,
        env=env,
        start_new_session=True,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        # Kill 1.5 s after three trials finished (a snapshot of the Tune experiment lands
        # in between) with most of the campaign still to run: 16 trials, so that CI's faster
        # machine, which finished a 10-trial campaign within those 1.5 s, does not. (Killing
        # right after a snapshot instead hits a rarer moment: see the closing note of #27.)
        deadline = time.monotonic() + 240
        while _finished_trials(run_dir) < 3:
            assert driver.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, "campaign made no progress"
            time.sleep(0.2)
        time.sleep(1.5)
        assert driver.poll() is None, "the campaign ended before the kill"
        running = read_status(run_dir)
        assert running is not None and running["state"] == "RUNNING", running
    finally:
        kill_session(driver.pid)  # the driver and everything it started
        driver.wait(timeout=30)
        killed_at = time.time()
        log.close()
    assert driver.returncode == -signal.SIGKILL
    died = read_status(run_dir)  # `tuner list` shows the killed driver as such
    assert died is not None and died["state"] == "DIED", died

    before = json.loads((run_dir / rundir.SCHEDULER_STATE_FILE).read_text())
    finished_before = set(before["finished"])
    lines_before = _result_lines(run_dir)
    assert len(finished_before) >= 3
    # A whole copy of the snapshot was kept from the driver's staging folder, all three files.
    slot = current_slot(run_dir)
    assert slot is not None
    kinds = sorted(p.name.split("-")[0] for p in slot.iterdir() if p.is_file())
    assert kinds == ["experiment_state", "search_gen_state", "searcher"], kinds
    # With the trials' result logs as that snapshot knew them.
    assert list((slot / "logs").glob("trial_*/result.json"))

    # What the study had finished at the crash: the resumed live line starts from it.
    before_crash = standings(
        load_rows(optuna.load_study(study_name="killed", storage=rundir.study_url(run_dir))),
        maximize=True,
    )
    finished_at_crash = before_crash.count_not_in(set())
    assert before_crash.best_trial is not None

    resumed = run_cli(["resume", str(run_dir), "--num-cpus", "2"], cwd=tmp_path, timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    first = next(line for line in resumed.stdout.splitlines() if " trials done | " in line)
    done = int(first.split("] ", 1)[1].split("/", 1)[0])
    assert done >= finished_at_crash, (first, finished_at_crash)
    if done == finished_at_crash:  # no trial ended between the restore and this line
        assert f"({before_crash.best_trial})" in first, (first, before_crash)
    # The resumed driver's Tune staging folder kept its own snapshot files only: the copies
    # of tuner's files its restore downloaded are gone, so no upload overwrote the run
    # folder's ledger, status or rung state with them.
    staging = Path((run_dir / BACKUP_DIR / STAGING_FILE).read_text().strip())
    assert list(staging.glob("experiment_state-*.json")), staging
    kept = {p.name for p in staging.iterdir() if p.is_file()}
    assert not kept & {
        rundir.RUN_FILE,
        rundir.SCHEDULER_STATE_FILE,
        LEDGER_FILE,
        STATUS_FILE,
    }, kept

    study = optuna.load_study(study_name="killed", storage=rundir.study_url(run_dir))
    tune_ids = [t.user_attrs.get("tune_trial_id") for t in study.trials]
    real = [
        t for t in study.trials if not t.user_attrs.get("stop_reason", "").startswith("orphaned")
    ]
    assert len(real) == TRIALS, [(t.number, t.state, t.user_attrs) for t in study.trials]
    assert len(set(tune_ids)) == len(tune_ids), "an Optuna trial per Tune trial, no duplicates"
    assert not [t for t in study.trials if t.state is TrialState.RUNNING]
    failed = [
        (t.number, t.state.name, t.user_attrs, t.intermediate_values)
        for t in real
        if t.state not in (TrialState.COMPLETE, TrialState.PRUNED)
    ]
    assert not failed, (failed, resumed.stdout[-4000:], resumed.stderr[-4000:])

    # Finished trials were not rerun: no result of theirs is newer than the kill. Their logs
    # lost nothing (the resume may add rows that Tune's copy had not carried over yet).
    lines_after = _result_lines(run_dir)
    for trial_id in finished_before:
        name = f"trial_{trial_id}"
        assert _rerun_rows(run_dir, name, killed_at) == [], name
        assert lines_after.get(name, 0) >= lines_before.get(name, 0), name
    for t in real:
        _logged_epochs(run_dir, t)
    # Rung records from before the crash are still there after the resume.
    after = json.loads((run_dir / rundir.SCHEDULER_STATE_FILE).read_text())
    for rung_before, rung_after in zip(before["rungs"], after["rungs"], strict=True):
        assert rung_before["recorded"].items() <= rung_after["recorded"].items()
    # Per-epoch values are contiguous: nothing lost, nothing reported twice.
    for t in real:
        epochs = sorted(t.intermediate_values)
        assert epochs == list(range(1, len(epochs) + 1)), (t.number, epochs)
    summary = json.loads((run_dir / rundir.SUMMARY_FILE).read_text())
    assert summary["trials_run"] == TRIALS


def _driver(args: list[str], tmp_path: Path, log: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        _tuner(*args, cwd=tmp_path),
        cwd=tmp_path,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _snapshot_names(run_dir: Path) -> set[str]:
    # Tune names each session's snapshot by the session's start (experiment_state-<time>):
    # a new name is this session's. (Not mtimes: a resume restores the last whole snapshot
    # of the session before into the run folder, which is a fresh write.)
    return {p.name for p in run_dir.glob("experiment_state-*.json")}


# The kill moments are drawn from this seed, which is in the test's id
# (test_repeated_kills_at_random_moments[kill_seed=N]); TUNER_KILL_SEED=N replays another.
KILL_SEED = int(os.environ.get("TUNER_KILL_SEED", "27"))


@pytest.mark.parametrize("seed", [KILL_SEED], ids=lambda seed: f"kill_seed={seed}")
def test_repeated_kills_at_random_moments(tmp_path: Path, seed: int) -> None:
    """The driver is SIGKILLed at KILLS random moments, each after Tune wrote a snapshot in
    that session, and resumed each time; then a last resume finishes the campaign."""
    kills = 5
    rng = random.Random(seed)
    print(f"kill moments drawn with TUNER_KILL_SEED={seed}")
    data = tiny_digits_campaign(name="kills", budget={"trials": 32, "max_epochs": 4})
    campaign = tmp_path / "kills.yaml"
    campaign.write_text(yaml.safe_dump(data))
    run_dir = tmp_path / "runs" / "kills"
    first = ["run", str(campaign), "--runs-dir", str(tmp_path / "runs"), "--num-cpus", "2"]
    resume = ["resume", str(run_dir), "--num-cpus", "2"]

    # trial folder -> (result lines, the kill's time) at the first kill after it finished
    finished_lines: dict[str, tuple[int, float]] = {}
    orphans_seen = 0
    starts = 0
    deadline = time.monotonic() + 240
    for n in range(kills):
        log_path = tmp_path / f"driver-{n}.log"
        with log_path.open("w") as log:
            seen = _snapshot_names(run_dir)
            driver = _driver(first if n == 0 else resume, tmp_path, log)
            starts += 1
            try:
                # A snapshot of this session first, so there is something to resume from.
                while not _snapshot_names(run_dir) - seen:
                    assert driver.poll() is None, log_path.read_text()
                    assert time.monotonic() < deadline, "no snapshot in this session"
                    time.sleep(0.05)
                time.sleep(rng.uniform(0.2, 6.0))
                finished_early = driver.poll() is not None
            finally:
                kill_session(driver.pid)
                driver.wait(timeout=30)
                killed_at = time.time()
        assert not finished_early, f"the campaign finished before kill {n + 1}"
        lines = _result_lines(run_dir)
        for trial_id in _finished_ids(run_dir):
            name = f"trial_{trial_id}"
            finished_lines.setdefault(name, (lines.get(name, 0), killed_at))
        orphans_seen = len(list((run_dir / ".orphaned").glob("trial_*")))

    final = run_cli(resume, cwd=tmp_path, timeout=300)
    starts += 1
    assert final.returncode == 0, final.stdout + final.stderr
    orphans = sorted(p.name for p in (run_dir / ".orphaned").glob("trial_*"))
    print(f"{kills} kills; {len(orphans)} orphaned trial folder(s) set aside: {orphans}")
    assert len(orphans) >= orphans_seen

    study = optuna.load_study(study_name="kills", storage=rundir.study_url(run_dir))
    real = [
        t for t in study.trials if not t.user_attrs.get("stop_reason", "").startswith("orphaned")
    ]
    assert len(real) == 32, [(t.number, t.state, t.user_attrs) for t in study.trials]
    tune_ids = [t.user_attrs.get("tune_trial_id") for t in study.trials]
    assert len(set(tune_ids)) == len(tune_ids)
    assert not [t for t in study.trials if t.state is TrialState.RUNNING]
    assert {t.state for t in real} <= {TrialState.COMPLETE, TrialState.PRUNED}
    for t in real:
        epochs = sorted(t.intermediate_values)
        assert epochs == list(range(1, len(epochs) + 1)), (t.number, epochs)
    # Every real trial has its folder; every folder left belongs to a real trial.
    folders = {p.name for p in run_dir.glob("trial_*")}
    assert folders == {f"trial_{t.user_attrs['tune_trial_id']}" for t in real}
    # A trial finished before a kill was never rerun: no result newer than that kill; and
    # its log lost nothing, nor did any other trial's.
    lines = _result_lines(run_dir)
    for name, (count, killed_at) in finished_lines.items():
        assert _rerun_rows(run_dir, name, killed_at) == [], name
        assert lines.get(name, 0) >= count, name
    for t in real:
        _logged_epochs(run_dir, t)
    summary = json.loads((run_dir / rundir.SUMMARY_FILE).read_text())
    assert summary["trials_run"] == 32
    # The ledger: one session per driver start, in order, none overlapping the next.
    sessions = json.loads((run_dir / "ledger.json").read_text())["sessions"]
    assert len(sessions) == starts
    for (s0, e0), (s1, _) in itertools.pairwise(sessions):
        assert s0 <= e0 <= s1
