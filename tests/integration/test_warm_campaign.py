"""A warm start on a real campaign: an earlier campaign with another max_epochs and a wider
lr range seeds a new one through ``--warm-start``; the new campaign's first trials are the
source's best, its trial count is its own, and a source that cannot seed it is an error
before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest
import yaml

from tests.conftest import run_cli, tiny_digits_campaign
from tuner import rundir
from tuner.study import SEED_ATTR, campaign_trials, open_study
from tuner.warm_start import FIRST_ATTR

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_a_campaign_warm_started_from_an_earlier_one(tmp_path: Path) -> None:
    source = tiny_digits_campaign(name="source", budget={"trials": 4, "max_epochs": 1})
    source["space"]["lr"]["high"] = 5.0e-2  # wider than the target's
    (tmp_path / "source.yaml").write_text(yaml.safe_dump(source))
    done = run_cli(["run", "source.yaml", "--num-cpus", "2"], cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    target = tiny_digits_campaign(name="target", budget={"trials": 3, "max_epochs": 2})
    target["warm_start"] = {"from": "runs/nowhere", "top": 2}  # the flag overrides it
    (tmp_path / "target.yaml").write_text(yaml.safe_dump(target))
    argv = ["run", "target.yaml", "--num-cpus", "2", "--warm-start", "runs/source"]
    done = run_cli(argv, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "warm start from runs/source:" in done.stdout

    run_dir = tmp_path / "runs" / "target"
    summary = json.loads((run_dir / rundir.SUMMARY_FILE).read_text())
    warm = summary["warm_start"]
    source_study = open_study(tmp_path / "runs" / "source")
    inside = [
        t
        for t in source_study.trials
        if t.state.is_finished() and t.intermediate_values and t.params["lr"] <= 3.0e-2
    ]
    assert warm["from"] == "runs/source" and warm["source_trials"] == 4
    assert warm["seeded"] == len(inside) and warm["refused"] == 4 - len(inside)
    assert warm["seeded_complete"] == 0, "1-epoch trials never reach the target's 2"
    assert warm["tried_first"] == min(2, len(inside))
    assert summary["trials_run"] == 3, "the campaign's own trials, not the seeds"
    shown = run_cli(["show", "runs/target"], cwd=tmp_path, timeout=60)
    assert shown.stdout.startswith("target: 3 trials ("), shown.stdout
    assert f"warm start from runs/source: {warm['seeded']} of its trials seeded" in shown.stdout

    study = open_study(run_dir)
    seeds = [t for t in study.trials if SEED_ATTR in t.user_attrs]
    assert len(seeds) == warm["seeded"]
    assert all(t.state == optuna.trial.TrialState.PRUNED for t in seeds)
    own = campaign_trials(study)
    assert len(own) == 3
    best = sorted(
        inside,
        key=lambda t: (
            -max(t.intermediate_values),
            -t.intermediate_values[max(t.intermediate_values)],
        ),
    )[: warm["tried_first"]]
    for rank, (trial, seed) in enumerate(zip(own, best, strict=False), start=1):
        assert trial.user_attrs.get(FIRST_ATTR) == rank
        assert trial.params["lr"] == seed.params["lr"]
        assert trial.params["optimizer"] == seed.params["optimizer"]
        assert trial.state.is_finished() and trial.intermediate_values, "it ran"


def test_a_source_that_cannot_seed_writes_nothing(tmp_path: Path) -> None:
    target = tiny_digits_campaign(name="target", warm_start="runs/missing")
    (tmp_path / "target.yaml").write_text(yaml.safe_dump(target))
    done = run_cli(["run", "target.yaml", "--num-cpus", "2"], cwd=tmp_path, timeout=120)
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        .splitlines()[0]
        .startswith("error: target.yaml: warm_start.from: no such run folder (got 'runs/missing')")
    ), done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists()
