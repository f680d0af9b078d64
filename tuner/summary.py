"""What a campaign learned, read from its Optuna study: outcome counts, best and top trials.

The study is the source of truth for outcomes (COMPLETE / PRUNED / FAIL with reasons and
per-epoch values), so ``tuner show`` and ``tuner report`` work on any run folder, finished or
not, without Ray.

Failed trials get their own section (:func:`failure_summary`, :func:`format_failures`): each
with its message, counts by kind, and for every parameter how failures spread over its
values (per choice, or lower vs upper half of a numeric range), so a region of the space
that keeps failing (e.g. out of GPU memory above some width) stands out.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from tuner.front import primary_curve
from tuner.standings import Standings, rank_key
from tuner.study import (
    EPOCHS_ATTR,
    FAILURE_ATTR,
    FAILURE_MESSAGE_ATTR,
    ORPHAN_REASON,
    STOP_REASON_ATTR,
    TUNE_TRIAL_ID_ATTR,
    campaign_trials,
)
from tuner.terminal import fit_table, left_out


@dataclass(frozen=True)
class TrialRow:
    """One trial of a campaign as the summary shows it."""

    number: int
    tune_id: str
    state: str
    value: float | None
    epochs: int
    reason: str
    params: dict[str, Any] = field(default_factory=dict)
    intermediate: dict[int, float] = field(default_factory=dict)
    failure: str = ""
    message: str = ""


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def load_rows(study: optuna.Study) -> list[TrialRow]:
    """Reads every trial of ``study`` into rows (state names as Optuna's)."""
    rows = []
    for t in campaign_trials(study):
        inter = primary_curve(t)  # a multi-objective study keeps them as user attributes
        value = _finite(t.values[0]) if t.state.name == "COMPLETE" and t.values else None
        if value is None and t.state.name == "PRUNED" and inter:
            value = _finite(inter[max(inter)])
        rows.append(
            TrialRow(
                number=t.number,
                tune_id=str(t.user_attrs.get(TUNE_TRIAL_ID_ATTR, "")),
                state=t.state.name,
                value=value,
                epochs=int(t.user_attrs.get(EPOCHS_ATTR, max(inter) if inter else 0)),
                reason=str(t.user_attrs.get(STOP_REASON_ATTR, "")),
                params=dict(t.params),
                intermediate=inter,
                failure=str(t.user_attrs.get(FAILURE_ATTR, "")),
                message=str(t.user_attrs.get(FAILURE_MESSAGE_ATTR, "")),
            )
        )
    return rows


def _distributions(study: optuna.Study) -> dict[str, BaseDistribution]:
    out: dict[str, BaseDistribution] = {}
    for t in campaign_trials(study):
        for name, dist in t.distributions.items():
            out.setdefault(name, dist)
    return out


def rank(rows: list[TrialRow], *, maximize: bool) -> list[TrialRow]:
    """Orders trials best first, by the campaign's one meaning of best
    (:func:`tuner.standings.rank_key`): full-length (COMPLETE) trials, then more epochs,
    then the value at the last epoch."""

    def key(row: TrialRow) -> tuple[int, int, float]:
        return rank_key(
            row.value, complete=row.state == "COMPLETE", epochs=row.epochs, maximize=maximize
        )

    return sorted(rows, key=key)


def standings(rows: Sequence[TrialRow], *, maximize: bool) -> Standings:
    """The standings of the trials the study has finished (told COMPLETE, PRUNED or FAIL),
    as the live line counts them: where a resumed campaign's live line starts from."""
    out = Standings(maximize=maximize)
    for row in sorted(rows, key=lambda r: r.number):
        orphan = row.reason == ORPHAN_REASON  # set aside: Tune never resumes it
        if row.state in ("COMPLETE", "PRUNED", "FAIL") and row.tune_id and not orphan:
            out.add(
                row.tune_id,
                row.value,
                complete=row.state == "COMPLETE",
                epochs=row.epochs,
                failed=row.state == "FAIL" or bool(row.failure),
            )
    return out


def summarize(
    study: optuna.Study | None, *, metric: str, maximize: bool, max_epochs: int, top: int = 10
) -> dict[str, Any]:
    """A JSON-able summary: counts by state, best trial, top trials, epochs consumed (all
    empty without a study: no trial has started)."""
    rows = load_rows(study) if study is not None else []
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
        "failures": failure_summary(rows, _distributions(study) if study is not None else {}),
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


def format_table(
    summary: dict[str, Any], *, limit: int = 10, width: int | None = None, show_all: str = ""
) -> str:
    """A plain-text table of the top trials.

    ``width``: the terminal's columns; the parameter columns that do not fit are left out
    and named in a last line, with ``show_all`` (e.g. ``tuner show RUN``) to see them all.
    None: every column.
    """
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
    out, dropped = fit_table(lines, keep=len(head) - len(names), width=width)
    return "\n".join([*out, *left_out(dropped, show_all, width)])


# -- failed trials --------------------------------------------------------------------------

_FINISHED = ("COMPLETE", "PRUNED", "FAIL")


def _ran(row: TrialRow) -> bool:
    """Finished, and not a FAIL of the campaign's making (orphaned, stopped by the budget)."""
    return row.state in _FINISHED and (row.state != "FAIL" or bool(row.failure))


def _split(dist: BaseDistribution | None, values: Sequence[float]) -> tuple[float, str]:
    """Where a numeric parameter's range is halved (geometric middle on a log scale)."""
    if isinstance(dist, (FloatDistribution, IntDistribution)):
        low, high, log = float(dist.low), float(dist.high), dist.log
    else:
        low, high, log = min(values), max(values), False
    mid = math.sqrt(low * high) if log and low > 0 else (low + high) / 2
    return mid, _fmt(mid)


def failure_regions(
    rows: Sequence[TrialRow], distributions: Mapping[str, BaseDistribution] | None = None
) -> list[dict[str, Any]]:
    """How failures spread over each parameter's values, most uneven parameter first.

    Categorical parameters are split per choice, numeric ones into the lower and upper half
    of their range (from ``distributions``, else the values seen). Each group has
    ``failed`` of ``total`` trials that ran with a value in it; ``spread`` is the largest
    minus the smallest failure share of the parameter's groups. Trials that did not run
    (orphaned, never started under the budget, unfinished) are left out.

    Args:
        rows: The study's trials (:func:`load_rows`).
        distributions: Each parameter's Optuna distribution, for its range and choices.

    Returns:
        One entry per parameter: ``{"param", "kind", "groups", "spread"}``.
    """
    distributions = distributions or {}
    ran = [r for r in rows if _ran(r)]
    names = sorted({name for r in ran for name in r.params})
    out: list[dict[str, Any]] = []
    for name in names:
        have = [r for r in ran if name in r.params]
        dist = distributions.get(name)
        values = [r.params[name] for r in have]
        numeric = not isinstance(dist, CategoricalDistribution) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in values
        )
        groups: list[dict[str, Any]] = []
        if numeric:
            mid, label = _split(dist, [float(v) for v in values])
            lower = [r for r in have if float(r.params[name]) < mid]
            upper = [r for r in have if float(r.params[name]) >= mid]
            groups = [_group(f"< {label}", lower), _group(f">= {label}", upper)]
        else:
            choices = list(dist.choices) if isinstance(dist, CategoricalDistribution) else []
            for value in values:
                if value not in choices:
                    choices.append(value)
            for choice in choices:
                members = [r for r in have if r.params[name] == choice]
                groups.append(_group(_fmt(choice), members))
        shares = [g["failed"] / g["total"] for g in groups if g["total"]]
        out.append(
            {
                "param": name,
                "kind": "numeric" if numeric else "categorical",
                "groups": groups,
                "spread": round(max(shares) - min(shares), 4) if shares else 0.0,
            }
        )
    out.sort(key=lambda entry: (-float(entry["spread"]), str(entry["param"])))
    return out


def _group(label: str, members: Sequence[TrialRow]) -> dict[str, Any]:
    return {"group": label, "failed": sum(1 for r in members if r.failure), "total": len(members)}


def failure_summary(
    rows: Sequence[TrialRow], distributions: Mapping[str, BaseDistribution] | None = None
) -> dict[str, Any]:
    """The failed trials (those with a failure kind): counts by kind, each trial's message,
    and where in the space they failed (:func:`failure_regions`, only when any failed)."""
    failed = [r for r in rows if r.failure]
    by_reason = Counter(r.failure for r in failed)
    return {
        "count": len(failed),
        "of": sum(1 for r in rows if _ran(r)),
        "by_reason": dict(by_reason.most_common()),
        "trials": [
            {
                "number": r.number,
                "tune_trial_id": r.tune_id,
                "failure": r.failure,
                "reason": r.reason,
                "message": r.message,
                "epochs": r.epochs,
                "params": r.params,
            }
            for r in failed
        ],
        "regions": failure_regions(rows, distributions) if failed else [],
    }


def format_failures(summary: Mapping[str, Any], *, limit: int = 10) -> str:
    """The failed trials in a few lines; empty when none failed.

    e.g.::

        failed trials: 4 of 12 (oom 3, error 1)
          #5 trial 3f2a1b (width=96): ran out of GPU memory at epoch 1 (...)
        where they failed (failed/total):
          width: < 64: 0/6, >= 64: 3/6
          act: relu: 2/6, tanh: 2/6
    """
    failures = summary.get("failures") or {}
    if not failures.get("count"):
        return ""
    kinds = ", ".join(f"{kind} {n}" for kind, n in failures["by_reason"].items())
    lines = [f"failed trials: {failures['count']} of {failures['of']} ({kinds})"]
    trials = failures["trials"]
    for trial in trials[:limit]:
        message = trial["message"] or f"trial {trial['tune_trial_id']}: {trial['reason']}"
        lines.append(f"  #{trial['number']} {message}")
    if len(trials) > limit:
        lines.append(f"  ... and {len(trials) - limit} more (summary.json: failures.trials)")
    if failures["regions"]:
        lines.append("where they failed (failed/total):")
        for region in failures["regions"]:
            groups = ", ".join(
                f"{g['group']}: {g['failed']}/{g['total']}" for g in region["groups"] if g["total"]
            )
            lines.append(f"  {region['param']}: {groups}")
    return "\n".join(lines)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
