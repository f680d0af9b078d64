"""status.json: the document, a driver that died, the end from summary.json, the list."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tuner.status import (
    SCHEMA,
    State,
    ended_document,
    format_list,
    read_status,
    status_document,
    write_status,
)

TRIALS = {"total": 12, "done": 5, "running": 2, "pending": 1, "stopped_early": 3, "failed": 1}
BEST = {"metric": "val_acc", "mode": "max", "value": 0.93, "trial": "abc123"}
SPEND = {"usd": 1.5, "usd_per_hour": 3.0, "gpu_hours": 0.5, "limit_usd": 20.0}


def _running(run_dir: Path, **kw: object) -> dict[str, object]:
    return status_document(
        run_dir=run_dir,
        name="digits-cnn",
        state=State.RUNNING,
        status="running",
        trials=TRIALS,
        best=BEST,
        spend=SPEND,
        started_unix_s=1_700_000_000.0,
        now_unix_s=1_700_000_060.0,
        **kw,  # type: ignore[arg-type]
    )


def test_the_document_has_the_documented_keys(tmp_path: Path) -> None:
    doc = _running(tmp_path / "digits-cnn")
    assert doc["schema"] == SCHEMA and doc["id"] == "digits-cnn"
    assert doc["trials"] == TRIALS and doc["best"] == BEST
    assert doc["spend"] == {**SPEND, "limit_gpu_hours": None}
    assert doc["started"] == "2023-11-14T22:13:20+00:00"
    assert doc["updated"] == "2023-11-14T22:14:20+00:00" and doc["ended"] is None
    assert doc["pid"] == os.getpid()
    assert doc["campaign_sha256"] is None, "no campaign.yaml written yet"
    json.dumps(doc)  # JSON-able


def test_the_document_names_the_campaign_file_by_its_hash(tmp_path: Path) -> None:
    import hashlib

    run_dir = tmp_path / "digits-cnn"
    run_dir.mkdir()
    (run_dir / "campaign.yaml").write_text("name: digits-cnn\n")
    expected = hashlib.sha256(b"name: digits-cnn\n").hexdigest()
    assert _running(run_dir)["campaign_sha256"] == expected
    (run_dir / "campaign.yaml").write_text("name: digits-cnn-2\n")
    assert _running(run_dir)["campaign_sha256"] != expected


def test_a_running_driver_reads_running_and_a_dead_one_died(tmp_path: Path) -> None:
    run_dir = tmp_path / "digits-cnn"
    run_dir.mkdir()
    write_status(run_dir, _running(run_dir))
    assert read_status(run_dir)["state"] == State.RUNNING  # type: ignore[index]
    # A driver process that has exited: its pid is gone.
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    write_status(run_dir, {**_running(run_dir), "pid": int(gone.stdout)})
    died = read_status(run_dir)
    assert died is not None and died["state"] == State.DIED
    assert "tuner resume" in died["status"]


def test_a_driver_elsewhere_is_dead_once_silent_for_a_minute(tmp_path: Path) -> None:
    run_dir = tmp_path / "c"
    run_dir.mkdir()
    write_status(run_dir, {**_running(run_dir), "host": "another-host", "pid": 1})
    written = (run_dir / "status.json").stat().st_mtime
    assert read_status(run_dir, now_unix_s=written + 30)["state"] == State.RUNNING  # type: ignore[index]
    assert read_status(run_dir, now_unix_s=written + 61)["state"] == State.DIED  # type: ignore[index]


def test_the_end_comes_from_the_summary(tmp_path: Path) -> None:
    run_dir = tmp_path / "digits-cnn"
    run_dir.mkdir()
    summary = {
        "campaign": "digits-cnn",
        "status": "stopped: failure limit reached",
        "trials_requested": 12,
        "trials_finished": 7,
        "metric": "val_acc",
        "mode": "max",
        "states": {"COMPLETE": 2, "PRUNED": 3, "FAIL": 2},
        "orphans": 0,
        "best": {"value": 0.9, "tune_trial_id": "t1"},
        "budget": {"usd": 2.5, "gpu_hours": 1.0, "limits": {"usd": 20.0, "gpu_hours": None}},
    }
    doc = ended_document(run_dir, summary, started_unix_s=100.0, ended_unix_s=200.0)
    assert doc["state"] == State.STOPPED and doc["ended"] == "1970-01-01T00:03:20+00:00"
    assert doc["trials"] == {
        "total": 12,
        "done": 7,
        "running": 0,
        "pending": 0,
        "stopped_early": 3,
        "failed": 2,
    }
    assert doc["best"] == {"metric": "val_acc", "mode": "max", "value": 0.9, "trial": "t1"}
    assert doc["spend"]["usd"] == 2.5 and doc["spend"]["limit_usd"] == 20.0
    # A run folder without status.json (an older version) reads from its summary.json.
    (run_dir / "summary.json").write_text(json.dumps({**summary, "status": "completed"}))
    assert read_status(run_dir)["state"] == State.FINISHED  # type: ignore[index]
    unfinished = {**summary, "status": "not finished"}
    assert ended_document(run_dir, unfinished)["state"] == State.DIED
    assert read_status(tmp_path / "nothing") is None


def test_the_list_has_a_line_per_campaign(tmp_path: Path) -> None:
    rest = {"trial_epochs": 40.0, "wall_s": 720.0, "usd": 2.0, "gpu_hours": 0.6}
    running = _running(tmp_path / "a", to_finish=rest)
    idle = {**_running(tmp_path / "b"), "best": None, "spend": None, "state": State.FINISHED}
    lines = format_list([running, idle]).splitlines()
    header = ["id", "name", "state", "trials", "best", "spend", "eta", "started"]
    assert lines[0].split() == header
    assert lines[1].split()[:3] == ["a", "digits-cnn", "RUNNING"]
    assert "5/12 (2 running, 3 pruned, 1 failed)" in lines[1]
    assert "val_acc=0.93" in lines[1]
    assert "$1.50 ($3.00/h)" in lines[1] and "~12m" in lines[1]
    assert lines[2].split()[:3] == ["b", "digits-cnn", "FINISHED"]
    assert "/h)" not in lines[2] and " ~" not in lines[2]  # no rate nor ETA once ended


def test_to_finish_is_in_the_document_while_it_runs(tmp_path: Path) -> None:
    rest = {"trial_epochs": 40.0, "wall_s": 720.0, "usd": 2.0, "gpu_hours": 0.6}
    assert _running(tmp_path / "a", to_finish=rest)["to_finish"] == rest
    assert _running(tmp_path / "a")["to_finish"] is None
