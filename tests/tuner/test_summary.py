"""Summaries read from an Optuna study: ranking puts full-length trials first."""

from __future__ import annotations

import optuna
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState, create_trial

from tuner.summary import format_table, summarize

DIST = {"lr": FloatDistribution(1e-4, 1.0, log=True)}


def _study() -> optuna.Study:
    study = optuna.create_study(direction="maximize")
    # A full-length trial, good but not the highest value seen.
    study.add_trial(
        create_trial(
            state=TrialState.COMPLETE,
            value=0.97,
            params={"lr": 0.01},
            distributions=DIST,
            intermediate_values={1: 0.8, 2: 0.97},
            user_attrs={"tune_trial_id": "a", "epochs": 2},
        )
    )
    # Pruned after one epoch with a higher one-epoch value: must not outrank the COMPLETE one.
    study.add_trial(
        create_trial(
            state=TrialState.PRUNED,
            value=None,
            params={"lr": 0.1},
            distributions=DIST,
            intermediate_values={1: 0.99},
            user_attrs={"tune_trial_id": "b", "epochs": 1, "stop_reason": "stopped early"},
        )
    )
    # Failed: no value, ranks last.
    study.add_trial(
        create_trial(
            state=TrialState.FAIL,
            params={"lr": 0.5},
            distributions=DIST,
            user_attrs={"tune_trial_id": "c", "stop_reason": "error"},
        )
    )
    return study


def test_best_is_the_best_complete_trial_not_a_low_fidelity_value() -> None:
    summary = summarize(_study(), metric="val_acc", maximize=True, max_epochs=2)
    assert summary["best"]["tune_trial_id"] == "a"
    assert summary["states"] == {"COMPLETE": 1, "FAIL": 1, "PRUNED": 1}
    assert summary["epochs_consumed"] == 3
    assert [row["tune_trial_id"] for row in summary["top"]] == ["a", "b"]


def test_table_lists_trials_with_params() -> None:
    table = format_table(summarize(_study(), metric="val_acc", maximize=True, max_epochs=2))
    lines = table.splitlines()
    assert lines[0].split() == ["#", "trial", "state", "val_acc", "epochs", "lr"]
    assert lines[2].split()[:4] == ["0", "a", "COMPLETE", "0.9700"]
