"""Data-parallel trials: 2 Ray Train workers each (gloo on CPU) under Tune, ASHA and Optuna."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from tests.conftest import tiny_digits_campaign
from tuner import rundir
from tuner._ray.cluster import RayOptions
from tuner._ray.driver import run_campaign
from tuner.spec import parse_campaign

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_two_worker_ddp_trials_report_checkpoint_and_stop(tmp_path: Path) -> None:
    data = tiny_digits_campaign(
        name="ddp",
        budget={"trials": 3, "max_epochs": 3},
        resources={"cpu": 1, "gpu": 0, "workers": 2, "max_concurrent": 1},
    )
    spec = parse_campaign(data, "ddp.yaml")
    run_dir = tmp_path / "runs" / "ddp"
    run_campaign(spec, run_dir, RayOptions(num_cpus=2))

    study = optuna.load_study(study_name="ddp", storage=rundir.study_url(run_dir))
    assert len(study.trials) == 3
    assert {t.state for t in study.trials} <= {TrialState.COMPLETE, TrialState.PRUNED}
    assert TrialState.COMPLETE in {t.state for t in study.trials}
    for trial in study.trials:
        epochs = sorted(trial.intermediate_values)
        assert epochs == list(range(1, len(epochs) + 1))
        assert "lr" in trial.params  # Optuna's names stay flat; Tune nests them for Ray Train
    for trial_dir in run_dir.glob("trial_*"):
        results = [
            json.loads(line) for line in (trial_dir / "result.json").read_text().splitlines()
        ]
        assert results and all(r["workers"] == 2 for r in results)
        assert list(trial_dir.glob("checkpoint_*/state.pt")), trial_dir
    best = yaml.safe_load((run_dir / rundir.BEST_FILE).read_text())
    assert best["config"]["batch_size"] == 64 and "lr" in best["config"]
