"""The ASHA work model against a real local campaign: predicted vs consumed trial-epochs.

A real 24-trial campaign (max_epochs 9, grace 1, reduction factor 3; one trial at a time, so
the run is deterministic) runs on an embedded Ray, and the epochs it consumed (``summary.json``) are
compared with :func:`tuner.cost._work.estimate_work` made before it started.

Tolerance, and why it is not 10 %: one ASHA run is a noisy draw. The first trials at each
rung meet no competition, so whether a couple of them happen to run to the end moves the
total by 10-20 epochs. The model's own spread for this geometry is sd ~ 17.7 on a mean of
79.6 (22 %); eight seeded real runs with random search (seeds 0-7) consumed 50, 102, 86,
54, 72, 76, 80, 72 epochs (mean 74.0, sd 16.7: the mean is within 8 %, the spread
matches). A 10 % bound on one run would fail about two runs in three even for an exact
model, so this test asserts the real run lies in the model's central ~95 % band
(mean +- 2 sd) and prints the relative error. Seed 0, used here, is the lowest of the
eight (50, inside the band's lower edge of ~44): it was not picked to pass.
Random search is used because its trials are i.i.d., the model's assumption; a learning
sampler (TPE) needs ``sampler_drift`` (see ``estimate_work``).
"""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest

from tests.conftest import tiny_digits_campaign
from tuner import rundir
from tuner.campaign import RayOptions, max_concurrent_trials, run_campaign
from tuner.cost._work import AshaGeometry, estimate_work, naive_trial_epochs
from tuner.spec import parse_campaign

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_predicted_trial_epochs_match_a_real_campaign(tmp_path: Path) -> None:
    data = tiny_digits_campaign(
        name="work-prediction",
        budget={"trials": 24, "max_epochs": 9},
        scheduler={"type": "asha", "grace_period": 1, "reduction_factor": 3},
        sampler={"type": "random", "seed": 0},
        # One trial at a time: results arrive in a fixed order, so ASHA's decisions (and the
        # epochs consumed) are the same on every run of this test; no timing races.
        resources={"max_concurrent": 1},
    )
    data["sampler"].pop("startup_trials")
    spec = parse_campaign(data, "x.yaml")
    geometry = AshaGeometry.from_spec(spec)
    workers = max_concurrent_trials(spec, {"CPU": 2.0})
    predicted = estimate_work(geometry, epoch_s=1.0, workers=workers, runs=1000)

    run_dir = tmp_path / "runs" / spec.name
    result = run_campaign(spec, run_dir, RayOptions(num_cpus=2))

    summary = json.loads((run_dir / rundir.SUMMARY_FILE).read_text())
    study = optuna.load_study(study_name=spec.name, storage=rundir.study_url(run_dir))
    per_trial = [len(t.intermediate_values) for t in study.trials]
    actual = summary["epochs_consumed"]
    assert actual == sum(per_trial) == result.summary["epochs_consumed"]
    assert len(per_trial) == 24
    error = (predicted.trial_epochs - actual) / actual
    print(
        f"predicted {predicted.trial_epochs:.1f} +- {predicted.trial_epochs_sd:.1f} "
        f"(naive {naive_trial_epochs(geometry):.0f}), consumed {actual}, error {error:+.0%}; "
        f"reach predicted {[round(r, 1) for r in predicted.reach]}, actual "
        f"{[sum(e >= m for e in per_trial) for m in (1, 3, 9)]}"
    )
    assert abs(predicted.trial_epochs - actual) <= 2 * predicted.trial_epochs_sd
