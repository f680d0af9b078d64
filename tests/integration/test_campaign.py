"""A real campaign on an embedded local Ray: Optuna TPE proposes, ASHA stops, trials checkpoint.

Uses the real Ray Tune, Optuna and PyTorch (CPU) end to end and checks what a user would:
ASHA stopped trials early, the SQLite study says PRUNED/COMPLETE with per-epoch values,
best.yaml and summary.json exist, checkpoints are on disk.
"""

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

pytestmark = pytest.mark.ray


def test_campaign_end_to_end(tmp_path: Path) -> None:
    spec = parse_campaign(tiny_digits_campaign(), "tiny.yaml")
    run_dir = tmp_path / "runs" / spec.name
    result = run_campaign(spec, run_dir, RayOptions(num_cpus=2))

    study = optuna.load_study(study_name=spec.name, storage=rundir.study_url(run_dir))
    states = [t.state for t in study.trials]
    assert len(study.trials) == spec.budget.trials
    assert TrialState.RUNNING not in states
    pruned = [t for t in study.trials if t.state is TrialState.PRUNED]
    complete = [t for t in study.trials if t.state is TrialState.COMPLETE]
    assert pruned, "ASHA stopped no trial"
    assert complete, "no trial trained to max_epochs"
    for t in complete:
        assert sorted(t.intermediate_values) == [1, 2, 3, 4]
        assert t.value == t.intermediate_values[4]
    for t in pruned:
        epochs = sorted(t.intermediate_values)
        assert epochs == list(range(1, len(epochs) + 1)) and len(epochs) < 4
        assert t.user_attrs["stop_reason"].startswith("stopped early at epoch")

    summary = json.loads((run_dir / rundir.SUMMARY_FILE).read_text())
    assert summary == result.summary
    assert summary["status"] == "completed"
    assert summary["trials_run"] == 8
    assert summary["states"]["PRUNED"] == len(pruned)
    best = yaml.safe_load((run_dir / rundir.BEST_FILE).read_text())
    assert best["value"] == max(t.value for t in complete)
    assert best["config"]["batch_size"] == 64
    assert not any(k.startswith("tuner_") for k in best["config"])

    # The run's own profile, and the work predicted at its start against what it used.
    profile = json.loads((run_dir / rundir.PROFILE_FILE).read_text())
    assert len(profile["trials"]) == 8 and profile["summary"]["epoch_s"] > 0
    prediction = json.loads((run_dir / "prediction.json").read_text())
    assert 8 <= prediction["trial_epochs"] <= 32 and "trial_s" not in prediction  # no profile
    assert summary["cost"]["actual"]["trial_epochs"] == summary["epochs_consumed"]
    assert summary["cost"]["predicted"] == prediction

    checkpoints = list(run_dir.glob("trial_*/checkpoint_*/state.pt"))
    assert checkpoints
    # keep: 2 -> never more than two checkpoints per trial
    for trial_dir in run_dir.glob("trial_*"):
        assert len(list(trial_dir.glob("checkpoint_*"))) <= 2
