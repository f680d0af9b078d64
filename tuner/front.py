"""Multi-objective studies: where each epoch's values live, and the campaign's Pareto front.

Optuna refuses ``trial.report`` in a study with several objectives, so a multi-objective
campaign keeps each trial's per-epoch values as user attributes of its Optuna trial, one per
epoch: ``epoch_values.<epoch>`` holds the list of the objectives' values at that epoch, in
the order of the campaign's ``metric`` list (JSON, so any study storage keeps it). One
attribute per epoch: a report writes one small row and never rewrites the others. A trial
told PRUNED keeps them, its last epoch's vector being where it stopped; a COMPLETE trial
also has its final vector as the study's ``values``. The searcher writes them
(:mod:`tuner._ray.mo_searcher`) and reads them back after a restore (which epochs the study
already has); summaries read the primary objective's curve from them
(:func:`primary_curve`). The scheduler's rungs keep their own copy of the vectors in its
state file (``scheduler_state.json``), as single-objective rungs keep their values.

The Pareto front is taken over COMPLETE trials only: a trial stopped at epoch 1 would be
compared at another fidelity than one trained to ``max_epochs``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import optuna

from tuner.pareto import pareto_front
from tuner.study import EPOCHS_ATTR, TUNE_TRIAL_ID_ATTR
from tuner.terminal import fit_table, left_out, wrap

__all__ = [
    "EPOCH_VALUES_PREFIX",
    "cell",
    "epoch_attr",
    "epoch_values",
    "format_front",
    "front_rows",
    "primary_curve",
]

EPOCH_VALUES_PREFIX = "epoch_values."


def epoch_attr(epoch: int) -> str:
    """The user attribute holding the values of ``epoch``: ``epoch_values.<epoch>``."""
    return f"{EPOCH_VALUES_PREFIX}{epoch}"


def epoch_values(user_attrs: Mapping[str, Any]) -> dict[int, list[float]]:
    """Each epoch's objective values recorded in a trial's user attributes, by epoch."""
    out: dict[int, list[float]] = {}
    for key, value in user_attrs.items():
        if not key.startswith(EPOCH_VALUES_PREFIX) or not isinstance(value, list):
            continue
        suffix = key[len(EPOCH_VALUES_PREFIX) :]
        if suffix.isdigit():
            out[int(suffix)] = [float(v) for v in value]
    return dict(sorted(out.items()))


def primary_curve(trial: optuna.trial.FrozenTrial) -> dict[int, float]:
    """The trial's per-epoch values of its (primary) objective: Optuna's intermediate values
    in a single-objective study, the first of each epoch's vector in a multi-objective one."""
    if trial.intermediate_values:
        return {int(k): float(v) for k, v in trial.intermediate_values.items()}
    return {epoch: values[0] for epoch, values in epoch_values(trial.user_attrs).items()}


def _finite(values: Sequence[float] | None) -> bool:
    return values is not None and all(math.isfinite(v) for v in values)


def front_rows(
    study: optuna.Study | None, metrics: Sequence[str], maximize: Sequence[bool]
) -> list[dict[str, Any]]:
    """The Pareto front of the study's COMPLETE trials, JSON-able, best primary value first.

    Each row: ``number``, ``tune_trial_id``, ``epochs``, ``values`` (metric -> value) and
    ``params``. Equal value vectors are all on the front.
    """
    if study is None:
        return []
    done = [
        t
        for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        if t.values is not None and len(t.values) == len(metrics) and _finite(t.values)
    ]
    on_front = pareto_front([(t.number, list(t.values)) for t in done], maximize)
    by_number = {t.number: t for t in done}
    rows: list[dict[str, Any]] = [
        {
            "number": number,
            "tune_trial_id": str(by_number[number].user_attrs.get(TUNE_TRIAL_ID_ATTR, "")),
            "epochs": int(by_number[number].user_attrs.get(EPOCHS_ATTR, 0)),
            "values": dict(zip(metrics, by_number[number].values, strict=True)),
            "params": dict(by_number[number].params),
        }
        for number in on_front
    ]
    sign = -1.0 if maximize[0] else 1.0
    rows.sort(key=lambda r: (sign * by_number[int(r["number"])].values[0], r["number"]))
    return rows


def format_front(
    front: Sequence[Mapping[str, Any]],
    metrics: Sequence[str],
    *,
    width: int | None = None,
    show_all: str = "",
) -> str:
    """The Pareto front as a plain-text table (one row per trial on it); ``width`` and
    ``show_all`` as for :func:`tuner.summary.format_table`."""
    if not front:
        return "Pareto front: no trial completed all epochs with finite values yet."
    names = sorted({k for row in front for k in row["params"]})
    head = ["#", "trial", *metrics, "epochs", *names]
    lines = [head]
    for row in front:
        lines.append(
            [
                str(row["number"]),
                row["tune_trial_id"] or "-",
                *(cell(row["values"][m]) for m in metrics),
                str(row["epochs"]),
                *(cell(row["params"].get(n)) for n in names),
            ]
        )
    out, dropped = fit_table(lines, keep=len(head) - len(names), width=width)
    title = f"Pareto front ({len(front)} trial{'s' if len(front) != 1 else ''}): " + ", ".join(
        metrics
    )
    return "\n".join([wrap(title, width), *out, *left_out(dropped, show_all, width)])


def cell(value: Any, digits: int = 6) -> str:
    """A table cell: ``-`` for None, a float to ``digits`` significant digits."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)
