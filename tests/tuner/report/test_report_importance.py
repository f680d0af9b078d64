"""Importances per rung from synthetic trials (no Ray): a pruned trial counts at every rung
it reached, so a parameter that only decides who gets past the first rung shows there."""

from __future__ import annotations

import random

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState

from tuner.report import rung_importances
from tuner.report._collect import importances

DISTS = {"a": FloatDistribution(0.0, 1.0), "b": FloatDistribution(0.0, 1.0)}


def _trials(n: int = 40) -> list[optuna.trial.FrozenTrial]:
    """``a`` decides epoch 1 (trials with a < 0.7 are pruned there); among the survivors
    epoch 3 and the final epoch 9 are decided by ``b`` alone."""
    rng = random.Random(0)
    out = []
    for _ in range(n):
        a, b = rng.random(), rng.random()
        curve = {1: a + 0.01 * b}
        if a < 0.7:
            state, value = TrialState.PRUNED, None
        else:
            curve |= {3: 0.5 + 0.4 * b, 9: 0.6 + 0.4 * b}
            state, value = TrialState.COMPLETE, curve[9]
        out.append(
            optuna.trial.create_trial(
                state=state,
                value=value,
                params={"a": a, "b": b},
                distributions=DISTS,
                intermediate_values=curve,
            )
        )
    return out


def test_a_parameter_that_prunes_shows_at_its_rung_but_not_over_completed_trials() -> None:
    trials = _trials()
    result = rung_importances(trials, [1, 3], 9)
    assert result["evaluator"] == "fanova"
    by_epoch = {r["epoch"]: r for r in result["rungs"]}
    assert list(by_epoch) == [1, 3, 9]
    complete = sum(t.state == TrialState.COMPLETE for t in trials)
    assert by_epoch[1]["trials"] == len(trials)  # the pruned ones count at epoch 1
    assert by_epoch[3]["trials"] == by_epoch[9]["trials"] == complete < len(trials)
    assert by_epoch[1]["values"]["a"] > 0.9
    assert by_epoch[9]["values"]["a"] < 0.2 and by_epoch[9]["values"]["b"] > 0.8
    assert sum(by_epoch[1]["values"].values()) == pytest.approx(1.0)

    # The COMPLETE-only importances (the report's older figure) miss `a`.
    study = optuna.create_study(direction="maximize")
    study.add_trials(trials)
    assert importances(study)["values"]["a"] < 0.2


def test_rungs_with_too_few_trials_get_a_note() -> None:
    every = _trials()
    trials = [t for t in every if t.state == TrialState.PRUNED][:4]
    trials += [t for t in every if t.state == TrialState.COMPLETE][:2]
    complete = 2
    result = rung_importances(trials, [1, 3, 9], 9)  # a rung at max_epochs is not doubled
    last = result["rungs"][-1]
    assert [r["epoch"] for r in result["rungs"]] == [1, 3, 9]
    assert last["values"] == {}
    assert last["note"] == f"{complete} trials reached it: too few (< 3)"
    assert result["rungs"][0]["values"] and result["rungs"][0]["trials"] == 6


def test_non_finite_values_and_trials_without_parameters_are_left_out() -> None:
    trials = _trials(10)
    nan = optuna.trial.create_trial(
        state=TrialState.PRUNED,
        params={"a": 0.5, "b": 0.5},
        distributions=DISTS,
        intermediate_values={1: float("nan")},
    )
    bare = optuna.trial.create_trial(value=1.0, intermediate_values={1: 1.0})
    result = rung_importances([*trials, nan, bare], [], 1)
    assert [r["epoch"] for r in result["rungs"]] == [1]
    assert result["rungs"][0]["trials"] == 10
