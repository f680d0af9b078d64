"""One meaning of "best" (tuner/standings.py) everywhere a campaign names its best trial.

A trainable whose value peaks at the first epoch and falls after it makes the two meanings
that used to coexist disagree: the best value at any epoch (the trial with the largest
``x``) and the best value at the trial's last epoch (the smallest ``x``). The live line, the
final line, summary.json, best.yaml, ``tuner show --json``, report.json and
:func:`tuner.open_run` must all name the same trial: the one best at its last epoch.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_cli
from tuner import open_run, rundir
from tuner.finish import NO_REPORT_ENV
from tuner.study import open_study

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[2]
LIVE_BEST = re.compile(r"\| best val_acc=(?P<value>[0-9.]+) \((?P<trial>\w+)\)")
FINAL_BEST = re.compile(r"^best val_acc=(?P<value>[0-9.]+) \(trial (?P<trial>\w+), ", re.M)


def test_every_view_names_the_same_best_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(NO_REPORT_ENV)  # this test reads the report written at the end
    campaign = tmp_path / "peaking.yaml"
    data = {
        "name": "peaking",
        "trainable": "tests.integration.peaking_trainable:train",
        "metric": "val_acc",
        "mode": "max",
        "space": {"x": {"type": "float", "low": 0.0, "high": 1.0}},
        "budget": {"trials": 4, "max_epochs": 2},
        "scheduler": {"type": "fifo"},
        "sampler": {"type": "random", "seed": 7},
        "resources": {"cpu": 1, "gpu": 0},
    }
    campaign.write_text(yaml.safe_dump(data))
    runs = tmp_path / "runs"
    ran = run_cli(
        ["run", str(campaign), "--runs-dir", str(runs), "--num-cpus", "2"], cwd=ROOT, timeout=300
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    run_dir = runs / "peaking"

    # The trial the old live line named (best value at any epoch) is not the best one.
    study = open_study(run_dir)
    by_tune_id = {t.user_attrs["tune_trial_id"]: t for t in study.trials}
    peak = max(by_tune_id, key=lambda tid: max(by_tune_id[tid].intermediate_values.values()))
    last = max(by_tune_id, key=lambda tid: by_tune_id[tid].intermediate_values[2])
    assert peak != last

    live = LIVE_BEST.findall(ran.stdout)
    assert live, ran.stdout
    final = FINAL_BEST.search(ran.stdout)
    assert final is not None, ran.stdout
    summary = json.loads((run_dir / rundir.SUMMARY_FILE).read_text())
    best_yaml = yaml.safe_load((run_dir / rundir.BEST_FILE).read_text())
    shown = run_cli(["show", str(run_dir), "--json"], cwd=ROOT, timeout=120)
    assert shown.returncode == 0, shown.stderr
    report = json.loads((run_dir / "report.json").read_text())
    named = {
        "live line": live[-1][1],
        "final line": final["trial"],
        "summary.json": summary["best"]["tune_trial_id"],
        "best.yaml": best_yaml["trial"],
        "tuner show --json": json.loads(shown.stdout)["best"]["tune_trial_id"],
        "report.json": report["best"]["trial"],
        "open_run": open_run(run_dir).best.trial_id,  # type: ignore[union-attr]
    }
    # tuner list / tuner status read the status.json the driver wrote at the end.
    listed = run_cli(["list", "--runs-dir", str(runs), "--json"], cwd=ROOT, timeout=60)
    assert listed.returncode == 0, listed.stderr
    [status] = json.loads(listed.stdout)
    assert (status["id"], status["state"], status["status"]) == ("peaking", "FINISHED", "completed")
    assert status["trials"] == {
        "total": 4,
        "done": 4,
        "running": 0,
        "pending": 0,
        "stopped_early": 0,
        "failed": 0,
    }
    named["tuner list --json"] = status["best"]["trial"]
    one = run_cli(["status", "peaking", "--runs-dir", str(runs)], cwd=ROOT, timeout=60)
    assert one.returncode == 0, one.stderr
    assert one.stdout.startswith("peaking (peaking): FINISHED, completed\ntrials: 4/4 done")
    assert f"(trial {last})" in one.stdout
    assert set(named.values()) == {last}, named
    assert float(live[-1][0]) == pytest.approx(by_tune_id[last].value, abs=1e-4)
