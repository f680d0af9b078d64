"""What a campaign's report says, gathered from its run folder (no Ray).

Sources, all in the run folder: the Optuna study (``study.db``: trials, states, per-epoch
values, stop reasons), the spend ledger (``ledger.json``: nodes, rates, sessions, trials'
intervals), ``summary.json`` (predicted against actual work, time and money), the campaign
(``campaign.yaml``: rungs and budget) and Ray Tune's per-trial ``result.json`` (GPU
telemetry where a trial had a GPU). The result is JSON-able: it is ``report.json``.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import optuna
import yaml

from tuner.report._importance import rung_importances
from tuner.report._pareto import objectives_of, pareto_data
from tuner.standings import Standings
from tuner.study import campaign_trials, open_study
from tuner.summary import TrialRow, load_rows, rank

REPORT_FORMAT = 1
TOP = 10
OUTCOMES = ("completed", "pruned", "diverged", "oom", "failed", "stopped by budget", "orphaned")


def outcome_of(row: TrialRow) -> str:
    """The trial's outcome as the report groups it."""
    reason = row.reason or ""
    if row.state == "COMPLETE":
        return "completed"
    if reason.startswith("orphaned"):
        return "orphaned"
    if row.failure == "oom" or reason == "oom":
        return "oom"
    if reason.startswith("diverged"):
        return "diverged"
    if reason.startswith("budget") or reason.startswith("deadline"):
        return "stopped by budget"
    if row.state == "PRUNED":
        return "pruned"
    if row.state in ("RUNNING", "WAITING"):
        return "running"
    return "failed"


def rungs(campaign: Mapping[str, Any]) -> list[int]:
    """ASHA's rung epochs (grace x factor^k up to max_epochs); none for FIFO."""
    scheduler = campaign.get("scheduler") or {}
    max_epochs = int(campaign["budget"]["max_epochs"])
    if scheduler.get("type", "asha") != "asha":
        return []
    grace = int(scheduler.get("grace_period", 1))
    factor = float(scheduler.get("reduction_factor", 3))
    out: list[int] = []
    epoch = float(grace)
    while epoch < max_epochs:
        out.append(round(epoch))
        epoch *= factor
    return out


def history(rows: Sequence[TrialRow], *, maximize: bool) -> list[dict[str, Any]]:
    """Per trial in order: its final value and the best trial's value so far (the one
    meaning of best, :mod:`tuner.standings`: so the last point is the best trial's)."""
    out: list[dict[str, Any]] = []
    standings = Standings(maximize=maximize)
    for row in sorted(rows, key=lambda r: r.number):
        if row.state in ("COMPLETE", "PRUNED"):
            standings.add(
                str(row.number),
                row.value,
                complete=row.state == "COMPLETE",
                epochs=row.epochs,
                failed=bool(row.failure),
            )
        out.append(
            {
                "number": row.number,
                "state": row.state,
                "value": row.value,
                "best": standings.best_value,
            }
        )
    return out


def importances(study: optuna.Study) -> dict[str, Any]:
    """Optuna's fANOVA importances over the finished trials (share of variance per
    parameter), with the evaluator named; a reason instead when too few trials finished."""
    complete = (optuna.trial.TrialState.COMPLETE,)
    done = campaign_trials(study, states=complete)
    if len(done) < 3:
        return {"evaluator": None, "values": {}, "note": f"{len(done)} completed trials: too few"}
    own = study
    if len(done) < len(study.get_trials(deepcopy=False, states=complete)):
        # Warm-start seeds are another campaign's trials: importances are this one's.
        verbosity = optuna.logging.get_verbosity()
        optuna.logging.set_verbosity(optuna.logging.WARNING)  # no "study created" line
        try:
            own = optuna.create_study(directions=study.directions)
        finally:
            optuna.logging.set_verbosity(verbosity)
        own.add_trials(done)
    try:
        values = optuna.importance.get_param_importances(
            own, evaluator=optuna.importance.FanovaImportanceEvaluator(seed=0)
        )
    except (RuntimeError, ValueError) as err:  # e.g. a single distinct configuration
        return {"evaluator": "fanova", "values": {}, "note": str(err)}
    return {
        "evaluator": "fanova",
        "values": {k: float(v) for k, v in values.items()},
        "note": f"over {len(done)} completed trials",
    }


def spend_series(ledger: Mapping[str, Any]) -> list[list[float]]:
    """Cumulative dollars over campaign time: [[seconds since start, usd], ...].

    Each node costs its rate from its start to its end (or last seen); the series is the
    sum at every node event, sampled so that it stays short."""
    nodes = list(ledger.get("nodes") or [])
    if not nodes:
        return []
    start = min(float(n["start"]) for n in nodes)
    end = max(float(n.get("end") or n.get("last_seen") or n["start"]) for n in nodes)
    if end <= start:
        return [[0.0, 0.0]]
    steps = 100
    series: list[list[float]] = []
    for i in range(steps + 1):
        t = start + (end - start) * i / steps
        usd = 0.0
        for n in nodes:
            n_end = float(n.get("end") or n.get("last_seen") or n["start"])
            alive = max(0.0, min(t, n_end) - float(n["start"]))
            usd += alive / 3600 * float(n.get("usd_per_hour") or 0.0)
        series.append([t - start, usd])
    return series


def gpu_utilization(run_dir: Path, rows: Iterable[TrialRow]) -> dict[str, dict[str, float]]:
    """Mean GPU utilization (and peak memory) per trial from Tune's result.json files,
    for trials whose epochs reported NVML telemetry."""
    out: dict[str, dict[str, float]] = {}
    for row in rows:
        path = run_dir / f"trial_{row.tune_id}" / "result.json"
        if not row.tune_id or not path.is_file():
            continue
        utils: list[float] = []
        mems: list[float] = []
        for line in path.read_text().splitlines():
            try:
                result = json.loads(line)
            except json.JSONDecodeError:
                continue
            util = result.get("gpu_util_pct")
            if isinstance(util, int | float) and math.isfinite(util):
                utils.append(float(util))
            mem = result.get("gpu_mem_used_gib")
            if isinstance(mem, int | float) and math.isfinite(mem):
                mems.append(float(mem))
        if utils:
            out[row.tune_id] = {
                "mean_util_pct": sum(utils) / len(utils),
                "peak_mem_gib": max(mems) if mems else math.nan,
                "epochs": float(len(utils)),
            }
    return out


def _row(row: TrialRow) -> dict[str, Any]:
    return {
        "number": row.number,
        "trial": row.tune_id,
        "state": row.state,
        "outcome": outcome_of(row),
        "value": row.value,
        "epochs": row.epochs,
        "reason": row.reason,
        "params": row.params,
    }


def collect(run_dir: Path, study: optuna.Study | None = None) -> dict[str, Any]:
    """Everything the report shows, as a JSON-able dict (``report.json``); ``study`` is the
    run's (opened here when not given)."""
    campaign = yaml.safe_load((run_dir / "campaign.yaml").read_text())
    objectives = objectives_of(campaign)
    metric, mode = objectives[0]  # the primary objective: best, top, history and curves
    maximize = mode == "max"
    study = open_study(run_dir) if study is None else study
    rows = load_rows(study)
    ranked = [r for r in rank(rows, maximize=maximize) if r.value is not None]
    ledger = _read_json(run_dir / "ledger.json")
    summary = _read_json(run_dir / "summary.json")
    best = ranked[0] if ranked else None
    margin = None
    if best is not None and len(ranked) > 1 and ranked[1].value is not None:
        assert best.value is not None
        margin = best.value - ranked[1].value
    counts = Counter(outcome_of(r) for r in rows)
    reasons: dict[str, Counter[str]] = {}
    for r in rows:
        reasons.setdefault(outcome_of(r), Counter())[r.reason or r.state.lower()] += 1
    totals = ledger.get("totals") or {}
    limits = ledger.get("limits") or {}
    return {
        "format": REPORT_FORMAT,
        "campaign": campaign["name"],
        "status": summary.get("status"),
        "metric": metric,
        "mode": mode,
        "max_epochs": int(campaign["budget"]["max_epochs"]),
        "rungs": rungs(campaign),
        "trials": len(rows),
        "epochs_consumed": sum(r.epochs for r in rows),
        "best": (
            {**_row(best), "margin_over_second": margin, "intermediate": best.intermediate}
            if best
            else None
        ),
        "top": [_row(r) for r in ranked[:TOP]],
        "history": history(rows, maximize=maximize),
        "curves": {
            r.tune_id or str(r.number): {
                "outcome": outcome_of(r),
                "epochs": sorted(r.intermediate),
                "values": [r.intermediate[e] for e in sorted(r.intermediate)],
            }
            for r in rows
            if r.intermediate
        },
        "importances": importances(study),
        "rung_importances": rung_importances(
            campaign_trials(study), rungs(campaign), int(campaign["budget"]["max_epochs"])
        ),
        "outcomes": {k: counts[k] for k in (*OUTCOMES, "running") if counts[k]},
        "outcome_reasons": {k: dict(v.most_common(5)) for k, v in reasons.items()},
        "spend": {
            "usd": totals.get("usd"),
            "node_hours": totals.get("node_hours"),
            "gpu_hours": totals.get("gpu_hours"),
            "limit_usd": limits.get("usd"),
            "limit_gpu_hours": limits.get("gpu_hours"),
            "series": spend_series(ledger),
            "exhausted": ledger.get("exhausted"),
        },
        "cost": summary.get("cost"),
        "gpu": gpu_utilization(run_dir, rows),
        **({"pareto": pareto_data(study, objectives)} if len(objectives) > 1 else {}),
    }


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    data: dict[str, Any] = json.loads(path.read_text())
    return data
