"""study_storage: campaigns sharing one study store. Two drivers run at once on the same
store (Optuna's journal on a file here; PostgreSQL in test_postgres_store.py), each with a
study of its own name, both finish with their trial counts, and `tuner list
--study-storage` lists both from the store alone; `tuner show` and a resume read the study
back through run.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import yaml

from tests.conftest import kill_session, run_cli, tiny_digits_campaign
from tuner import rundir
from tuner.study import open_study, storage_for

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def run_two_at_once(tmp_path: Path, url: str, env: dict[str, str] | None = None) -> None:
    """Runs campaigns a (4 trials) and b (3 trials) at once on the store at ``url``."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    drivers = {}
    for name, trials in (("a", 4), ("b", 3)):
        budget = {"trials": trials, "max_epochs": 2}
        data = tiny_digits_campaign(name=f"shared-{name}", budget=budget)
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump({**data, "study_storage": url}))
        drivers[name] = subprocess.Popen(
            [sys.executable, "-m", "tuner", "run", f"{name}.yaml", "--num-cpus", "1"],
            cwd=tmp_path,
            env=env,
            start_new_session=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    try:
        outs = {name: proc.communicate(timeout=300)[0] for name, proc in drivers.items()}
    finally:
        for proc in drivers.values():
            kill_session(proc.pid)
    for name, proc in drivers.items():
        assert proc.returncode == 0, outs[name][-3000:]

    names = []
    for name, trials in (("a", 4), ("b", 3)):
        run_dir = tmp_path / "runs" / f"shared-{name}"
        info = json.loads((run_dir / rundir.RUN_FILE).read_text())
        assert info["study_storage"] == url and info["study_name"].startswith(f"shared-{name}-")
        assert not (run_dir / rundir.STUDY_FILE).exists(), "the study is in the store"
        study = open_study(run_dir)
        assert study.study_name == info["study_name"] and len(study.trials) == trials
        assert study.metric_names == ["val_acc"]
        names.append(info["study_name"])
        summary = json.loads((run_dir / rundir.SUMMARY_FILE).read_text())
        assert summary["status"] == "completed" and summary["trials_run"] == trials
    assert sorted(s.study_name for s in optuna.get_all_study_summaries(storage_for(url))) == sorted(
        names
    )
    listed = run_cli(
        ["list", "--study-storage", url, "--json"], cwd=tmp_path / "elsewhere", timeout=60
    )
    assert listed.returncode == 0, listed.stderr
    documents = {doc["study"]: doc for doc in json.loads(listed.stdout)}
    assert sorted(documents) == sorted(names)
    for doc in documents.values():
        assert doc["schema"] == "tuner.status/1" and doc["state"] == "FINISHED"
    table = run_cli(["list", "--study-storage", url], cwd=tmp_path / "elsewhere", timeout=60)
    assert "shared-a" in table.stdout and "shared-b" in table.stdout


def test_two_campaigns_share_a_journal_store(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    run_two_at_once(tmp_path, f"journal:///{tmp_path / 'studies.log'}")


def test_an_unreachable_store_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    data = tiny_digits_campaign(name="nowhere")
    data["study_storage"] = "postgresql+psycopg://tuner@127.0.0.1:9/studies"  # nothing there
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(data))
    done = run_cli(["run", "c.yaml"], cwd=tmp_path, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "study_storage: the study storage cannot be opened" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "runs").exists()
