"""Parameter importances per rung: every trial that reached a rung counts there.

ASHA compares trials at its rungs (epochs); a trial stopped at epoch 1 still tells which
parameters mattered at epoch 1. So for each rung, and for ``max_epochs`` (the trials that
trained to the end), the trials with a finite value of the primary objective at that
epoch become COMPLETE trials of a throw-away in-memory study whose value is that epoch's,
and Optuna's fANOVA evaluator runs on it. Importances over the COMPLETE trials alone miss
a parameter whose bad values never got past the first rung.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import optuna

from tuner.front import primary_curve

__all__ = ["EVALUATOR", "MIN_TRIALS", "rung_importances"]

EVALUATOR = "fanova"
# fANOVA's forest needs a spread of trials; below this a rung gets a note, not numbers.
MIN_TRIALS = 3


def _quiet_study() -> optuna.Study:
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # no "study created" line
    try:
        return optuna.create_study()
    finally:
        optuna.logging.set_verbosity(verbosity)


def _at_epoch(trials: Sequence[optuna.trial.FrozenTrial], epoch: int) -> list[Any]:
    """The trials with a finite primary value at ``epoch``, as COMPLETE trials valued there."""
    out = []
    for trial in trials:
        value = primary_curve(trial).get(epoch)
        if value is None or not math.isfinite(value) or not trial.params:
            continue
        out.append(
            optuna.trial.create_trial(
                value=value, params=trial.params, distributions=trial.distributions
            )
        )
    return out


def _one(trials: Sequence[optuna.trial.FrozenTrial], epoch: int, seed: int) -> dict[str, Any]:
    at = _at_epoch(trials, epoch)
    entry: dict[str, Any] = {"epoch": epoch, "trials": len(at), "values": {}, "note": ""}
    if len(at) < MIN_TRIALS:
        entry["note"] = f"{len(at)} trials reached it: too few (< {MIN_TRIALS})"
        return entry
    study = _quiet_study()
    study.add_trials(at)
    try:
        values = optuna.importance.get_param_importances(
            study, evaluator=optuna.importance.FanovaImportanceEvaluator(seed=seed)
        )
    except (RuntimeError, ValueError) as err:  # e.g. a single distinct configuration
        entry["note"] = str(err)
        return entry
    entry["values"] = {k: float(v) for k, v in values.items()}
    entry["note"] = f"over the {len(at)} trials that reached it"
    return entry


def rung_importances(
    trials: Sequence[optuna.trial.FrozenTrial],
    rungs: Sequence[int],
    max_epochs: int,
    *,
    seed: int = 0,
) -> dict[str, Any]:
    """fANOVA importances of the primary objective at each rung and at ``max_epochs``.

    ``trials`` are the campaign's own (no warm-start seeds), any state: a PRUNED trial
    counts at every rung it reached. JSON-able: ``{"evaluator": "fanova", "rungs": [{"epoch",
    "trials", "values": {param: share}, "note"}, ...]}``, lowest epoch first; ``values`` is
    empty (and ``note`` says why) where too few trials reached the epoch.
    """
    epochs = sorted({*(int(r) for r in rungs if int(r) < max_epochs), int(max_epochs)})
    return {"evaluator": EVALUATOR, "rungs": [_one(trials, e, seed) for e in epochs]}
