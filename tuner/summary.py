"""What a campaign learned, read from its Optuna study: outcome counts, best and top trials.

The study is the source of truth for outcomes (COMPLETE / PRUNED / FAIL with reasons and
per-epoch values), so ``tuner show`` and ``tuner report`` work on any run folder, finished or
not, without Ray.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna

from tuner.rundir import STUDY_FILE, study_url


@dataclass(frozen=True)
class TrialRow:
    """One trial of a campaign as the summary shows it."""

    number: int
    tune_id: str
    state: str
    value: float | None
    best_value: float | None
    epochs: int
    reason: str
    params: dict[str, Any] = field(default_factory=dict)
    intermediate: dict[int, float] = field(default_factory=dict)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def load_rows(study: optuna.Study, *, maximize: bool) -> list[TrialRow]:
    """Reads every trial of ``study`` into rows (state names as Optuna's)."""
    rows = []
    for t in study.get_trials(deepcopy=False):
        inter = {int(k): float(v) for k, v in t.intermediate_values.items()}
        finite = [v for v in inter.values() if math.isfinite(v)]
        best = (max(finite) if maximize else min(finite)) if finite else None
        value = _finite(t.value) if t.state.name == "COMPLETE" else None
        if value is None and t.state.name == "PRUNED" and inter:
            value = _finite(inter[max(inter)])
        rows.append(
            TrialRow(
                number=t.number,
                tune_id=str(t.user_attrs.get("tune_trial_id", "")),
                state=t.state.name,
                value=value,
                best_value=best,
                epochs=int(t.user_attrs.get("epochs", max(inter) if inter else 0)),
                reason=str(t.user_attrs.get("stop_reason", "")),
                params=dict(t.params),
                intermediate=inter,
            )
        )
    return rows


def rank(rows: list[TrialRow], *, maximize: bool) -> list[TrialRow]:
    """Orders trials best first: full-length (COMPLETE) trials, then by value, then epochs."""

    def key(row: TrialRow) -> tuple[int, int, float]:
        if row.value is None:
            return (2, 0, 0.0)
        signed = -row.value if maximize else row.value
        return (0 if row.state == "COMPLETE" else 1, -row.epochs, signed)

    return sorted(rows, key=key)


def summarize(
    study: optuna.Study, *, metric: str, maximize: bool, max_epochs: int, top: int = 10
) -> dict[str, Any]:
    """A JSON-able summary: counts by state, best trial, top trials, epochs consumed."""
    rows = load_rows(study, maximize=maximize)
    ranked = rank(rows, maximize=maximize)
    best = ranked[0] if ranked and ranked[0].value is not None else None
    counts = Counter(r.state for r in rows)
    return {
        "metric": metric,
        "mode": "max" if maximize else "min",
        "max_epochs": max_epochs,
        "trials": len(rows),
        "states": dict(sorted(counts.items())),
        "orphans": sum(1 for r in rows if r.reason.startswith("orphaned")),
        "epochs_consumed": sum(r.epochs for r in rows),
        "best": _row_dict(best) if best else None,
        "top": [_row_dict(r) for r in ranked[:top] if r.value is not None],
    }


def _row_dict(row: TrialRow) -> dict[str, Any]:
    return {
        "number": row.number,
        "tune_trial_id": row.tune_id,
        "state": row.state,
        "value": row.value,
        "epochs": row.epochs,
        "reason": row.reason,
        "params": row.params,
    }


def format_table(summary: dict[str, Any], *, limit: int = 10) -> str:
    """A plain-text table of the top trials."""
    metric = summary["metric"]
    top = summary["top"][:limit]
    if not top:
        return "No trial reported a finite value yet."
    names = sorted({k for row in top for k in row["params"]})
    head = ["#", "trial", "state", metric, "epochs", *names]
    lines = [head]
    for row in top:
        cells = [
            str(row["number"]),
            row["tune_trial_id"] or "-",
            row["state"],
            f"{row['value']:.4f}",
            str(row["epochs"]),
            *(_fmt(row["params"].get(n)) for n in names),
        ]
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    out = ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) for line in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def open_study(run_dir: Path) -> optuna.Study:
    """Loads the run's study (the single study in ``study.db``)."""
    url = study_url(run_dir)
    if not (run_dir / STUDY_FILE).exists():
        raise FileNotFoundError(f"{run_dir / STUDY_FILE} does not exist")
    names = optuna.get_all_study_names(storage=url)
    return optuna.load_study(study_name=names[0], storage=url)
