"""The end of a campaign: summary.json and best.yaml from the study, profile.json and the
predicted-vs-actual comparison, trials the budget never let start, and the report.

No Ray: everything here reads the run folder (a resume and ``tuner report`` use it too).
"""

from __future__ import annotations

import json
import os
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from tuner import atomic, rundir
from tuner.contract import (
    hyperparameters,
)
from tuner.cost import Profile, profile_from_run
from tuner.cost._reality import (
    actual_cost,
    compare,
    read_prediction,
)
from tuner.errors import TunerError
from tuner.front import front_rows
from tuner.spec import CampaignSpec, Mode, thaw
from tuner.study import (
    FAILURE_ATTR,
    ORPHAN_REASON,
    STOP_REASON_ATTR,
    TUNE_TRIAL_ID_ATTR,
    open_study,
)
from tuner.summary import summarize
from tuner.terminal import fit

if TYPE_CHECKING:
    import optuna

NO_REPORT_ENV = "TUNER_NO_REPORT"
"""Set (to anything but empty or 0) to skip the report at the end of a campaign (the test
suite does: ~2 s of plotting per campaign); ``tuner report RUN_DIR`` writes it later."""


def write_report_safely(run_dir: Path, out: TextIO) -> None:
    """The campaign report at the end of the run; its failure never loses the campaign."""
    if os.environ.get(NO_REPORT_ENV, "") not in ("", "0"):
        return
    from tuner.report import write_report

    try:
        written = write_report(run_dir)
    except Exception as err:  # the results are saved; the report can be rewritten
        print(
            fit(
                f"report not written ({type(err).__name__}: {err}); `tuner report {run_dir}` "
                "retries",
                out,
            ),
            file=out,
        )
        return
    line = f"report: {written['html']} (also {written['markdown'].name}, {written['json'].name})"
    print(fit(line, out), file=out)


def final_trial_ids(run_dir: Path) -> set[str]:
    """Tune ids of the study's trials that ended (not as orphans): whole trials."""
    try:
        study = open_study(run_dir)
    except FileNotFoundError:
        return set()
    return {
        str(t.user_attrs[TUNE_TRIAL_ID_ATTR])
        for t in study.get_trials(deepcopy=False)
        if t.state.is_finished()
        and TUNE_TRIAL_ID_ATTR in t.user_attrs
        and t.user_attrs.get(STOP_REASON_ATTR) != ORPHAN_REASON
    }


def failed_trial_count(run_dir: Path) -> int:
    """Trials of the study that failed by their own fault (what the failure limit counts)."""
    try:
        study = open_study(run_dir)
    except FileNotFoundError:
        return 0
    return sum(1 for t in study.get_trials(deepcopy=False) if FAILURE_ATTR in t.user_attrs)


class Status(str, Enum):
    """How a campaign ended (``status`` in summary.json), or that it has not."""

    COMPLETED = "completed"
    """Every trial asked for finished."""
    TIME_LIMIT = "time limit reached"
    """``budget.time_limit`` ended it first."""
    BUDGET_EXHAUSTED = "budget exhausted"
    """Money, GPU-hours or the deadline ran out: running trials checkpointed and stopped."""
    HELD_BACK = "stopped: the budget affords no further trial"
    """What is left of the budget affords no further trial: none started, the campaign ended."""
    FAILURE_LIMIT = "stopped: failure limit reached"
    """More trials failed than ``failure.max_failed_trials`` allows."""
    GOAL_REACHED = "goal reached"
    """A trial reached ``budget.goal``: running trials checkpointed and stopped."""
    STOPPED = "stopped: tuner stop"
    """``tuner stop`` asked for it: running trials checkpointed and ended; resumable."""
    UNFINISHED = "not finished"
    """No end was recorded: the campaign is running, or its driver stopped (resume it)."""

    def __str__(self) -> str:
        return str(self.value)


def close_unstarted(run_dir: Path, spec: CampaignSpec, reason: str) -> None:
    """Trials asked for but stopped by the budget before they started: FAIL, with why.

    Tune ends such trials without telling the searcher; left RUNNING, they would look
    orphaned to a resume.
    """
    from optuna.trial import TrialState

    study = open_study(run_dir)
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study._storage.set_trial_user_attr(
            trial._trial_id, STOP_REASON_ATTR, f"{reason}; it never started"
        )
        study.tell(trial.number, state=TrialState.FAIL)


def predicted_vs_actual(spec: CampaignSpec, run_dir: Path, wall_s: float) -> dict[str, Any] | None:
    """Writes profile.json; compares what the trials used with prediction.json."""
    run_profile = write_profile(spec, run_dir)
    prediction = read_prediction(run_dir)
    if prediction is None or run_profile is None:
        return None
    actual = actual_cost(
        run_profile,
        gpus_per_trial=spec.resources.gpus_per_trial,
        usd_per_gpu_hour=float(prediction.get("usd_per_gpu_hour", 0.0)),
        wall_s=wall_s,
    )
    return compare(prediction, actual)


def run_summary(
    spec: CampaignSpec,
    run_dir: Path,
    *,
    ended: bool = False,
    wall_s: float | None = None,
    tune_trials: int | None = None,
    cost: dict[str, Any] | None = None,
    budget: dict[str, Any] | None = None,
    failure_limit: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The campaign's summary from its study: counts by state, best and top trials, status.

    Args:
        spec: The campaign.
        run_dir: Its run folder (an empty summary while it has no study yet).
        ended: The campaign has ended (its status then says how); otherwise the status is
            ``not finished``.
        wall_s: Seconds it ran.
        tune_trials: Trials Tune ran in its last session.
        cost: Predicted vs actual (see :mod:`tuner.cost._reality`).
        budget: The ledger's totals and the guard's outcome.
        failure_limit: The failure watch's count against ``failure.max_failed_trials``.
    """
    try:
        study = open_study(run_dir)
    except FileNotFoundError:
        study = None
    summary = summarize(
        study,
        metric=spec.metric,
        maximize=spec.mode is Mode.MAX,
        max_epochs=spec.budget.max_epochs,
    )
    if spec.multi_objective:
        summary |= pareto_summary(spec, run_dir, study)
    orphans = summary["orphans"]
    real = summary["trials"] - orphans
    finished = sum(summary["states"].get(s, 0) for s in ("COMPLETE", "PRUNED", "FAIL")) - orphans
    status = Status.COMPLETED if finished >= spec.budget.trials else Status.TIME_LIMIT
    if not ended:
        status = Status.UNFINISHED
    if budget is not None and budget.get("goal_reached"):
        status = Status.GOAL_REACHED
    elif budget is not None and budget.get("user_stop"):
        status = Status.STOPPED
    elif budget is not None and budget.get("exhausted"):
        status = Status.BUDGET_EXHAUSTED
    elif budget is not None and budget.get("held_back") and finished < spec.budget.trials:
        status = Status.HELD_BACK
    if failure_limit is not None and failure_limit.get("limit_reached"):
        status = Status.FAILURE_LIMIT
    summary = {
        "campaign": spec.name,
        "status": status.value,
        "trials_requested": spec.budget.trials,
        "trials_run": real,
        "trials_finished": finished,
        "tune_trials": tune_trials,
        "wall_s": wall_s,
        **summary,
        **({"cost": cost} if cost is not None else {}),
        **({"budget": budget} if budget is not None else {}),
        **({"failure_limit": failure_limit} if failure_limit is not None else {}),
    }
    if status is Status.GOAL_REACHED and budget is not None:
        summary["goal"] = {"reached": budget["goal_reached"], **goal_savings(cost)}
    warm = rundir.read_run_record(run_dir).get("warm_start")
    if warm is not None:
        summary["warm_start"] = warm
    return summary


def pareto_summary(spec: CampaignSpec, run_dir: Path, study: optuna.Study | None) -> dict[str, Any]:
    """A multi-objective campaign's ``objectives`` and ``pareto_front`` (each trial on it
    with its values by metric, its hyperparameters and the full config it ran with)."""
    maximize = [o.maximize for o in spec.objectives]
    front = front_rows(study, spec.metrics, maximize)
    for row in front:
        row["config"] = trial_config(run_dir, row["tune_trial_id"]) or {
            **thaw(spec.fixed),
            **row["params"],
        }
    return {
        "objectives": [{"metric": o.metric, "mode": o.mode.value} for o in spec.objectives],
        "pareto_front": front,
    }


def goal_savings(cost: dict[str, Any] | None) -> dict[str, float]:
    """What stopping at the goal saved against the prediction at the start: trial-epochs
    not run and, at the dollars per trial-epoch the campaign paid, their price."""
    if not cost or "predicted" not in cost or "actual" not in cost:
        return {}
    predicted = float(cost["predicted"].get("trial_epochs") or 0.0)
    actual = cost["actual"]
    used = float(actual.get("trial_epochs") or 0.0)
    saved = max(0.0, predicted - used)
    per_epoch = float(actual.get("usd") or 0.0) / used if used else 0.0
    return {"trial_epochs_saved": round(saved, 1), "usd_saved": round(saved * per_epoch, 4)}


def write_summary(
    spec: CampaignSpec,
    run_dir: Path,
    *,
    wall_s: float | None,
    tune_trials: int,
    cost: dict[str, Any] | None = None,
    budget: dict[str, Any] | None = None,
    failure_limit: dict[str, Any] | None = None,
    ended: bool = True,
) -> dict[str, Any]:
    """Writes the campaign's summary.json and best.yaml at the end of its driver's run;
    returns the summary (:func:`run_summary` says what goes in). ``ended``: False when
    the run was interrupted before the campaign's end (status ``not finished``)."""
    summary = run_summary(
        spec,
        run_dir,
        ended=ended,
        wall_s=wall_s,
        tune_trials=tune_trials,
        cost=cost,
        budget=budget,
        failure_limit=failure_limit,
    )
    atomic.write_json(run_dir / rundir.SUMMARY_FILE, summary)
    best = summary["best"]
    if best is not None:
        config = trial_config(run_dir, best["tune_trial_id"]) or dict(best["params"])
        rundir.write_yaml(
            run_dir / rundir.BEST_FILE,
            {
                "campaign": spec.name,
                "trial": best["tune_trial_id"],
                "metric": spec.metric,
                "value": best["value"],
                "epochs": best["epochs"],
                "config": config,
            },
        )
    return summary


def write_profile(spec: CampaignSpec, run_dir: Path) -> Profile | None:
    """Writes profile.json: what the campaign's real trials measured (see tuner.cost)."""
    try:
        profile = profile_from_run(run_dir, campaign=spec.name, trainable=spec.trainable)
    except TunerError:
        return None  # no trial reported an epoch: nothing measured
    profile.write(run_dir / rundir.PROFILE_FILE)
    return profile


def trial_config(run_dir: Path, tune_id: str) -> dict[str, Any] | None:
    """The full config a trial ran with (hyperparameters and fixed settings)."""
    params = run_dir / f"trial_{tune_id}" / "params.json"
    if not params.is_file():
        return None
    with open(params) as handle:
        config: dict[str, Any] = json.load(handle)
    return hyperparameters(config)
