"""The campaign-work prediction against a real local campaign: trial-epochs and trial-seconds.

``tuner profile`` measures the trainable (16 random configurations x 12 epochs), then a real
64-trial ASHA campaign runs with that profile, so the prediction it writes before its first
trial (prediction.json: the ASHA work model replayed with the measured epoch, start-up and
cold-start times) is compared, at the end, with what its trials consumed (Ray's
``time_total_s`` per trial). Trial-epochs must be within 10 %; trial-seconds within 35 %
here, and within the 10 % target over the rounds of bench/predict_work.py (see below).

Why this geometry (max_epochs 9, grace period 4, reduction factor 2: rungs at 4 and 8).
One ASHA run is a draw: which of the first trials at a rung happen to be good decides how
many run on. The model's own spread of trial-epochs for a run is sd 5.2 % here, so a 10 %
bound is about two of its standard deviations; with the default's rungs at 1 and 3 and 24
trials the spread is 22 % and no single run can be held to 10 % (eight seeded real runs of
that geometry: mean within 8 % of the model). Trials run one at a time with a seeded
random sampler, so results arrive in a fixed order and the epochs consumed are the same on
every run of this test; val_loss (not a quantized accuracy) keeps ties out of ASHA's cut.

Why this space and these sizes. Time is measured twice, minutes apart, on a machine whose
speed drifts: the same single-threaded torch loop, run eight times here, took 2.07-3.28 s
(CV 17 %). Averaging over a long enough window is what keeps that out of the comparison:
the profile spans ~20 s of epochs (16 configurations, 11 steady epochs each; with 2 steady
epochs the same profile, repeated back to back, read 0.237-0.316 s per epoch), and the
epochs (~0.11 s, batches of 4) are mostly training, not Ray's ~15 ms report and checkpoint.
The space varies the learning rate and regularization only, so an epoch costs about the
same for every configuration. The prediction uses the profile's mean epoch over the
configurations it drew; it cannot know which ones ASHA will keep. Where the cost depends
on the configuration, that choice shows: with model size in the space the profile's mean
and the mean over the configurations ASHA kept differed by 5-20 %; with the optimizer in
it, Adam's epochs here took 16 % longer than SGD's (0.117 vs 0.100 s; batches of 4 make
the optimizer step a large share) and ASHA kept mostly Adam trials (59 % of the epochs),
so the campaign ran 5-15 % slower than its profile.
"""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

import tuner
from tuner import rundir
from tuner._ray.cluster import RayOptions
from tuner._ray.driver import run_campaign
from tuner.spec import parse_campaign

pytestmark = [pytest.mark.ray, pytest.mark.slow]

CAMPAIGN = {
    "name": "work-prediction",
    "trainable": "tabular_mlp",
    "metric": "val_loss",
    "mode": "min",
    "space": {
        "lr": {"type": "float", "low": 1e-4, "high": 1e-1, "log": True},
        "weight_decay": {"type": "float", "low": 1e-6, "high": 1e-2, "log": True},
        "dropout": {"type": "float", "low": 0.0, "high": 0.5},
    },
    "budget": {"trials": 64, "max_epochs": 9},
    "scheduler": {"type": "asha", "grace_period": 4, "reduction_factor": 2},
    "sampler": {"type": "random", "seed": 0},
    # One trial at a time: a fixed result order, and no trial competing with another.
    "resources": {"cpu": 1, "gpu": 0, "max_concurrent": 1},
    "checkpoint": {"every": 1, "keep": 1},
    # Small batches: ~57 steps an epoch, so an epoch is mostly training, not Ray's report.
    "fixed": {"batch_size": 4, "hidden": 64, "layers": 2, "optimizer": "adam"},
}


def test_predicted_work_and_time_match_a_real_campaign(tmp_path: Path) -> None:
    spec = parse_campaign(CAMPAIGN, "work-prediction.yaml")
    options = RayOptions(num_cpus=2)
    profile = tuner.profile(spec, trials=16, epochs=12, num_cpus=2)

    run_dir = tmp_path / "runs" / spec.name
    run_campaign(spec, run_dir, options, profile=profile)

    # The prediction as written before the first trial ran.
    predicted = json.loads((run_dir / "prediction.json").read_text())
    # What the run consumed, counted here from its own records: the study's epochs per
    # trial, and Ray's time_total_s at each trial's last result.
    study = optuna.load_study(study_name=spec.name, storage=rundir.study_url(run_dir))
    assert len(study.trials) == 64
    assert {t.state for t in study.trials} <= {TrialState.COMPLETE, TrialState.PRUNED}
    epochs = sum(len(t.intermediate_values) for t in study.trials)
    seconds = 0.0
    for trial in study.trials:
        rows = run_dir / f"trial_{trial.user_attrs['tune_trial_id']}" / "result.json"
        last = json.loads(rows.read_text().splitlines()[-1])
        assert last["epoch"] == max(trial.intermediate_values)
        seconds += last["time_total_s"]
    epochs_error = predicted["trial_epochs"] / epochs - 1.0
    seconds_error = predicted["trial_s"] / seconds - 1.0
    print(
        f"\ntrial-epochs: predicted {predicted['trial_epochs']:.1f} "
        f"+- {predicted['trial_epochs_sd']:.1f}, consumed {epochs} ({epochs_error:+.1%}); "
        f"trial-seconds: predicted {predicted['trial_s']:.1f}, consumed {seconds:.1f} "
        f"({seconds_error:+.1%}); epoch {predicted['epoch_s']:.4f} s profiled"
    )
    assert abs(epochs_error) <= 0.10
    # The 10 % target for trial-seconds is measured by bench/predict_work.py over several
    # rounds: one round carries the machine's drift between profile and campaign (epochs
    # 0.83-1.24x as long in the campaign as in its profile, over 11 rounds here). This
    # bound catches a broken time model (epochs, start-up or cold starts left out or
    # counted twice), not the drift.
    assert abs(seconds_error) <= 0.35
