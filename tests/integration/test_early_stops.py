"""Plateau and divergence stops decided inside trials reach the Optuna study with reasons."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tests.conftest import tiny_digits_campaign
from tuner import rundir
from tuner._ray.cluster import RayOptions
from tuner._ray.driver import run_campaign
from tuner.spec import parse_campaign

pytestmark = pytest.mark.ray


def test_plateau_and_divergence_are_pruned_with_their_reasons(tmp_path: Path) -> None:
    data = tiny_digits_campaign(
        name="early-stops",
        budget={"trials": 4, "max_epochs": 5},
        sampler={"type": "random", "seed": 0},
        space={
            # 1e6 diverges at once; 1e-3 trains and then must improve val_loss by > 10 nats
            # per epoch, which it cannot: a plateau stop after 1 epoch without improvement.
            "lr": {"type": "categorical", "choices": [1.0e6, 1.0e-3]},
            "optimizer": {"value": "sgd"},
        },
        fixed={"batch_size": 64, "plateau_patience": 1, "plateau_min_delta": 10.0},
    )
    data["sampler"].pop("startup_trials")
    data["scheduler"] = {"type": "fifo"}
    spec = parse_campaign(data, "early.yaml")  # FIFO: only the trials' own rules stop them
    run_dir = tmp_path / "runs" / spec.name
    run_campaign(spec, run_dir, RayOptions(num_cpus=2))

    study = optuna.load_study(study_name=spec.name, storage=rundir.study_url(run_dir))
    reasons = {t.params["lr"]: t.user_attrs["stop_reason"] for t in study.trials}
    assert {t.state for t in study.trials} == {TrialState.PRUNED}
    assert set(reasons) == {1.0e6, 1.0e-3}, "random sampling over 4 trials hit both lrs"
    assert reasons[1.0e6].startswith("diverged: train loss is nan at epoch 1")
    assert reasons[1.0e-3].startswith("plateau: no val_loss improvement > 10 for 1 epoch")
    for t in study.trials:
        assert t.user_attrs["epochs"] == (1 if t.params["lr"] == 1.0e6 else 2)
