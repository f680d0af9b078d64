"""What a campaign produced, as typed values read from its run folder.

:func:`open_run` reads any run folder, finished or not: an ended campaign's ``summary.json``
and ``best.yaml``, or, for a campaign still running or whose driver stopped, its study as it
stands. :func:`tuner.run` and :func:`tuner.resume` return the same :class:`Result` when the
campaign ends. No Ray and no torch: results open anywhere the run folder is.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from tuner import rundir
from tuner.finish import Status, run_summary, trial_config
from tuner.spec import CampaignSpec, load_campaign
from tuner.study import open_study
from tuner.summary import TrialRow, load_rows

if TYPE_CHECKING:
    import optuna

__all__ = ["Best", "CostCheck", "ParetoPoint", "Result", "Spend", "TrialRow", "open_run"]


@dataclass(frozen=True)
class Best:
    """The best trial of a campaign: full-length trials first, then longer ones, then by
    the value at the trial's last epoch (the one meaning of best, :mod:`tuner.standings`).

    Attributes:
        trial_id: Its Tune trial id (its folder is ``trial_<id>`` in the run folder).
        value: Its value of the campaign's metric.
        epochs: Epochs it trained.
        state: ``COMPLETE`` (trained to ``max_epochs``) or ``PRUNED`` (stopped earlier).
        params: The hyperparameters the search chose.
        config: What it ran with: ``params`` plus the campaign's fixed settings (the
            ``config`` of ``best.yaml``), reusable as a campaign's ``fixed:`` section.
    """

    trial_id: str
    value: float
    epochs: int
    state: str
    params: Mapping[str, Any]
    config: Mapping[str, Any]


@dataclass(frozen=True)
class ParetoPoint:
    """A trial on a multi-objective campaign's Pareto front: no COMPLETE trial is at least
    as good on every objective and better on one.

    Attributes:
        number: Its Optuna trial number.
        trial_id: Its Tune trial id.
        values: Its value of each objective, by metric name (in the campaign's order).
        epochs: Epochs it trained (``max_epochs``: only COMPLETE trials are compared).
        params: The hyperparameters the search chose.
        config: What it ran with: ``params`` plus the campaign's fixed settings.
    """

    number: int
    trial_id: str
    values: Mapping[str, float]
    epochs: int
    params: Mapping[str, Any]
    config: Mapping[str, Any]

    @classmethod
    def from_summary(cls, row: Mapping[str, Any]) -> ParetoPoint:
        """From one entry of summary.json's ``pareto_front``."""
        return cls(
            number=int(row["number"]),
            trial_id=str(row["tune_trial_id"]),
            values={str(k): float(v) for k, v in row["values"].items()},
            epochs=int(row["epochs"]),
            params=dict(row["params"]),
            config=dict(row.get("config") or row["params"]),
        )


@dataclass(frozen=True)
class Spend:
    """What the campaign's nodes cost, from the spend ledger, against its limits.

    Attributes:
        usd: Dollars the nodes cost while the campaign ran.
        gpu_hours: GPU-hours of those nodes.
        node_hours: Node-hours.
        trial_gpu_hours: GPU-hours the trials held.
        nodes: Nodes seen.
        usd_limit: ``budget.usd`` (None: not limited).
        gpu_hours_limit: ``budget.gpu_hours``.
        deadline_s: ``budget.deadline`` in seconds.
        exhausted: Why the budget ran out, if it did.
        held_back: Why no further trial was started, if the budget afforded none.
    """

    usd: float
    gpu_hours: float
    node_hours: float
    trial_gpu_hours: float
    nodes: int
    usd_limit: float | None = None
    gpu_hours_limit: float | None = None
    deadline_s: float | None = None
    exhausted: str | None = None
    held_back: str | None = None

    @classmethod
    def from_summary(cls, budget: Mapping[str, Any]) -> Spend:
        """From the ``budget`` section of summary.json."""
        limits = budget.get("limits") or {}
        return cls(
            usd=float(budget.get("usd", 0.0)),
            gpu_hours=float(budget.get("gpu_hours", 0.0)),
            node_hours=float(budget.get("node_hours", 0.0)),
            trial_gpu_hours=float(budget.get("trial_gpu_hours", 0.0)),
            nodes=int(budget.get("nodes", 0)),
            usd_limit=limits.get("usd"),
            gpu_hours_limit=limits.get("gpu_hours"),
            deadline_s=limits.get("deadline_s"),
            exhausted=budget.get("exhausted"),
            held_back=budget.get("held_back"),
        )


@dataclass(frozen=True)
class CostCheck:
    """What was predicted at the start against what the trials used.

    Attributes:
        predicted: The prediction (``prediction.json``): trial-epochs, and with a profile
            trial-hours, GPU-hours and dollars.
        actual: The same figures as the campaign used them.
        error: ``predicted / actual - 1`` of each figure both sides have.
    """

    predicted: Mapping[str, Any]
    actual: Mapping[str, Any]
    error: Mapping[str, float]


@dataclass(frozen=True)
class Result:
    """A campaign's outcome: its status, best trial, every trial, spend and cost check.

    Attributes:
        run_dir: The run folder everything was read from.
        campaign: The campaign's name.
        metric: The metric it optimized.
        mode: ``max`` or ``min``.
        status: How it ended (:class:`~tuner.finish.Status`; ``UNFINISHED`` while it runs
            or after its driver stopped).
        trials_requested: ``budget.trials``.
        trials_finished: Trials that ended (COMPLETE, PRUNED or FAIL), orphans aside.
        wall_s: Seconds the campaign ran (its last session), when it ended.
        best: The best trial, or None while no trial has a value.
        trials: Every trial of the study, in the order they were asked for.
        spend: The spend ledger's totals (None for a folder without a budget guard).
        predicted_vs_actual: The cost check (None when nothing was measured).
        summary: ``summary.json`` as written (or as it would read now, for an unfinished
            campaign): the figures not typed above.
        objectives: Each objective as (metric, mode), the primary (``metric``) first; more
            than one for a multi-objective campaign.
        pareto_front: A multi-objective campaign's Pareto front over its COMPLETE trials,
            best primary value first (empty for a single-objective campaign).
    """

    run_dir: Path
    campaign: str
    metric: str
    mode: str
    status: Status
    trials_requested: int
    trials_finished: int
    wall_s: float | None
    best: Best | None
    trials: tuple[TrialRow, ...]
    spend: Spend | None
    predicted_vs_actual: CostCheck | None
    summary: Mapping[str, Any]
    objectives: tuple[tuple[str, str], ...] = ()
    pareto_front: tuple[ParetoPoint, ...] = ()

    @property
    def multi_objective(self) -> bool:
        """Whether the campaign optimized several metrics (it has a Pareto front)."""
        return len(self.objectives) > 1

    @property
    def ended(self) -> bool:
        """Whether the campaign ended (it has a status other than ``UNFINISHED``)."""
        return self.status is not Status.UNFINISHED

    @property
    def best_value(self) -> float | None:
        """The best trial's value, or None."""
        return self.best.value if self.best is not None else None

    @property
    def best_config(self) -> Mapping[str, Any] | None:
        """The best trial's full configuration, or None."""
        return self.best.config if self.best is not None else None

    def study(self) -> optuna.Study:
        """The campaign's Optuna study (``study.db``), loaded.

        Raises:
            FileNotFoundError: No trial has started yet, so there is no study.
        """
        return open_study(self.run_dir)


def open_run(run_dir: str | Path) -> Result:
    """Reads a run folder into a :class:`Result`: ended, running or stopped.

    Args:
        run_dir: A folder ``tuner run`` (or :func:`tuner.run`) created.

    Raises:
        RunFolderError: No such folder, or not a run folder.
    """
    folder = Path(run_dir)
    spec = load_campaign(rundir.check_resumable(folder), check_trainable=False)
    summary_file = folder / rundir.SUMMARY_FILE
    if summary_file.is_file():
        summary: dict[str, Any] = json.loads(summary_file.read_text())
    else:
        summary = run_summary(spec, folder)
    try:
        rows = tuple(load_rows(open_study(folder)))
    except FileNotFoundError:
        rows = ()
    return Result(
        run_dir=folder,
        campaign=str(summary.get("campaign", spec.name)),
        metric=spec.metric,
        mode=spec.mode.value,
        status=Status(summary["status"]),
        trials_requested=int(summary.get("trials_requested", spec.budget.trials)),
        trials_finished=int(summary.get("trials_finished", 0)),
        wall_s=summary.get("wall_s"),
        best=_best(spec, folder, summary.get("best")),
        trials=rows,
        spend=Spend.from_summary(summary["budget"]) if summary.get("budget") else None,
        predicted_vs_actual=CostCheck(**summary["cost"]) if summary.get("cost") else None,
        summary=summary,
        objectives=tuple((o.metric, o.mode.value) for o in spec.objectives),
        pareto_front=tuple(ParetoPoint.from_summary(r) for r in summary.get("pareto_front", [])),
    )


def _best(spec: CampaignSpec, run_dir: Path, best: Mapping[str, Any] | None) -> Best | None:
    if best is None or best.get("value") is None or not math.isfinite(best["value"]):
        return None
    trial_id = str(best["tune_trial_id"])
    config: Mapping[str, Any] | None = None
    best_file = run_dir / rundir.BEST_FILE
    if best_file.is_file():
        written = yaml.safe_load(best_file.read_text()) or {}
        if str(written.get("trial")) == trial_id:
            config = written.get("config")
    if config is None:
        config = trial_config(run_dir, trial_id) or {**dict(spec.fixed), **best["params"]}
    return Best(
        trial_id=trial_id,
        value=float(best["value"]),
        epochs=int(best["epochs"]),
        state=str(best["state"]),
        params=dict(best["params"]),
        config=dict(config),
    )
