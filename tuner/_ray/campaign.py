"""One campaign's state in the driver, in one object that the Tune objects are handed.

A :class:`Campaign` holds what a running campaign knows beyond its spec: its run folder,
the stop key of its trials, where progress goes, the budget guard (ledger and limits), the
failure watch, and the trials that wait at an ASHA rung for peers. The driver makes it; the
searcher, the schedulers and the callbacks receive it through their constructors, and read
and write its state there (no lookup by name, no module-level registry).

Tune pickles those objects (``tuner.pkl`` when the Tuner is made, the searcher's state at
each snapshot); each leaves the campaign out of its pickle. A resumed campaign builds them
again around a new Campaign (:func:`tuner._ray.build.restore_tuner`).
:class:`CampaignCallback` is the campaign's own Tune callback, which feeds its budget guard.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import optuna
from ray.tune import Callback
from ray.tune.experiment import Trial

from tuner._ray.cluster import ClusterView
from tuner._ray.failures import FailureWatch
from tuner._ray.guard import GATE_OPEN, BudgetGuard
from tuner.budget import Goal, Goals, Ledger, Limits, NodePricer, affordable_slots
from tuner.contract import EPOCH_KEY
from tuner.cost import AshaGeometry, Profile
from tuner.spec import CampaignSpec, Mode
from tuner.standings import Standings
from tuner.status import STATUS_ATTR, write_status
from tuner.study import storage_for, study_storage
from tuner.terminal import fit
from tuner.tracking import ParentRun

logger = logging.getLogger(__name__)


def campaign_goal(spec: CampaignSpec) -> Goal | Goals | None:
    """``budget.goal`` as the guard asks it: one value, or one per objective (all to meet)."""
    goal = spec.budget.goal
    if goal is None:
        return None
    if isinstance(goal, tuple):
        return Goals(
            tuple(
                Goal(o.metric, value, maximize=o.mode is Mode.MAX)
                for o, value in zip(spec.objectives, goal, strict=True)
            )
        )
    return Goal(spec.metric, goal, maximize=spec.mode is Mode.MAX)


@dataclass(eq=False)
class Campaign:
    """A running campaign's state in the driver.

    Attributes:
        spec: The campaign.
        run_dir: Its run folder.
        stop_key: Key of the trials' stop signal in Ray's key-value store (None: a run
            folder of a version without a budget guard).
        stream: Where progress and messages go (None: stdout).
        storage: The storage URI of Tune's experiment, if not the run folder.
        guard: The budget guard (None without a stop key).
        watch: The failure watch.
        waiting: Tune ids of the trials paused at an ASHA rung until it has peers (the
            scheduler sets it; the searcher counts them out of the live trials).
        started_unix_s: When this driver started it (for ``status.json``).
        earlier: A resumed campaign's trials that the study had finished before this
            driver started (the live line starts from them); None for a new campaign.
        status_mirror: A submitted campaign's copy of ``status.json`` in the Ray
            session's log folder (:mod:`tuner._ray.jobs`), or None.
        study_url: The study storage URL (None: ``study.db`` in the run folder).
        study_name: The study's name there (None: the campaign's name, in ``study.db``).
        interrupted: Tune's run was interrupted (SIGINT: Ctrl+C, ``tuner stop --now``):
            it ended without ending the campaign, which ``tuner resume`` continues.
        ended: What the searcher decided about each trial that ended, by Tune id: its
            ``stop_reason``, ``epochs`` and ``cost_usd`` (the trackers log them).
        watchers: More Tune callbacks that only watch (``tuner profile``'s progress).
        parent_run: The campaign's MLflow run, its trials' runs' parent (None: no MLflow).
    """

    spec: CampaignSpec
    run_dir: Path
    stop_key: str | None = None
    stream: TextIO | None = None
    storage: str | None = None
    guard: BudgetGuard | None = None
    watch: FailureWatch | None = None
    waiting: frozenset[str] = frozenset()
    earlier: Standings | None = None
    started_unix_s: float = field(default_factory=time.time)
    status_mirror: Path | None = None
    interrupted: bool = False
    study_url: str | None = None
    study_name: str | None = None
    ended: dict[str, dict[str, Any]] = field(default_factory=dict)
    parent_run: ParentRun | None = None
    watchers: tuple[Callback, ...] = ()
    _storage: Any = field(default=None, repr=False)
    _study: Any = field(default=None, repr=False)

    @property
    def out(self) -> TextIO:
        """Where progress and messages go."""
        return self.stream or sys.stdout

    @property
    def exhausted(self) -> str | None:
        """Why the budget is spent, or None while it is not (or there is no guard)."""
        return self.guard.exhausted if self.guard is not None else None

    def gate(self, live: int) -> str:
        """Whether a new trial may start (``open``, ``wait`` or ``closed``; see the guard)."""
        return self.guard.gate(live) if self.guard is not None else GATE_OPEN

    def should_stop(self, trial_id: str, result: Mapping[str, Any]) -> bool:
        """Whether a trial stops at this result: at ``max_epochs``, or the budget is spent."""
        if self.guard is not None:
            return self.guard.should_stop(trial_id, result)
        epoch = result.get(EPOCH_KEY)
        return isinstance(epoch, (int, float)) and epoch >= self.spec.budget.max_epochs

    def stop_all(self) -> bool:
        """Whether every trial left must stop now (the budget is spent; see the guard)."""
        return self.guard.stop_all() if self.guard is not None else False

    def trial_usd(self, trial_id: str) -> float | None:
        """The trial's share of the spend so far (None without a budget guard)."""
        return self.guard.trial_usd(trial_id) if self.guard is not None else None

    def study_storage(self) -> optuna.storages.BaseStorage:
        """The Optuna storage of the campaign's study (one per campaign: an RDB storage
        holds a connection pool)."""
        if self._storage is None:
            if self.study_url is None:
                self._storage = study_storage(self.run_dir)
            else:
                self._storage = storage_for(self.study_url)
        storage: optuna.storages.BaseStorage = self._storage
        return storage

    @property
    def name_of_study(self) -> str:
        """The study's name in its storage."""
        return self.study_name or self.spec.name

    def publish(self, document: Mapping[str, Any]) -> None:
        """Writes the campaign's status: ``status.json``, the submitted campaign's copy in
        the Ray session's log folder, and the study's ``tuner_status`` user attribute
        (what ``tuner list --study-storage`` reads); a failed study write is logged, not
        raised (the campaign goes on)."""
        write_status(self.run_dir, document, mirror=self.status_mirror)
        try:
            if self._study is None:  # loaded once: the publisher runs every 10 s
                self._study = optuna.load_study(
                    study_name=self.name_of_study, storage=self.study_storage()
                )
            self._study.set_user_attr(STATUS_ATTR, dict(document))
        except KeyError:  # the searcher creates the study with the first trial
            pass
        except Exception:
            logger.warning("status not written to the study", exc_info=True)

    def start(self) -> None:
        """Starts the budget guard (its ledger session and node watcher)."""
        if self.guard is not None:
            self.guard.start()

    def close(self) -> None:
        """Stops the budget guard and writes the ledger."""
        if self.guard is not None:
            self.guard.close()


def make_guard(
    spec: CampaignSpec,
    run_dir: Path,
    *,
    ledger: Ledger,
    pricer: NodePricer,
    cluster: ClusterView,
    concurrent: int,
    profile: Profile | None,
    stream: TextIO | None,
    stop_key: str,
) -> BudgetGuard:
    """The campaign's budget guard; with a profile and a budget, trials at once are capped
    at what the budget affords with every one reaching ASHA's first rung."""
    geometry = AshaGeometry.from_spec(spec)
    limits = Limits.from_budget(spec.budget)
    epoch_s = profile.epoch_s if profile is not None and profile.trials else None
    guard = BudgetGuard(
        run_dir=run_dir,
        ledger=ledger,
        pricer=pricer,
        limits=limits,
        geometry=geometry,
        request=spec.resources.bundle(),
        slots=concurrent,
        node_types=cluster.node_types,
        max_workers=cluster.max_workers,
        epoch_s=epoch_s,
        pending_warning_s=spec.resources.pending_warning_s,
        max_epochs=spec.budget.max_epochs,
        epoch_attr=EPOCH_KEY,
        stop_key=stop_key,
        goal=campaign_goal(spec),
        stream=stream,
    )
    if epoch_s is not None and limits.any and spec.resources.max_concurrent is None:
        usd_s, gpu_s = guard.planned_rates()
        first = (*geometry.decision_epochs(), geometry.max_epochs)[0]
        cap = affordable_slots(
            limits, usd_per_trial_s=usd_s, gpu_h_per_trial_s=gpu_s, first_rung_s=epoch_s * first
        )
        if cap is not None and cap < concurrent:
            out = stream or sys.stdout
            line = (
                f"budget: {cap} trial(s) at a time (of {concurrent} the cluster fits): what "
                "the budget affords with every one reaching ASHA's first rung"
            )
            print(fit(line, out), file=out)
            guard.slots = cap
    return guard


class CampaignCallback(Callback):
    """The campaign as a Ray Tune callback: trials starting, reporting and ending feed its
    budget guard, and each step of Tune's loop lets the guard check the budget.

    Tune pickles its callbacks into ``tuner.pkl``; the campaign is left out of that pickle,
    and a resumed campaign hands Tune new callbacks around its own campaign.
    """

    def __init__(self, campaign: Campaign) -> None:
        self._campaign: Campaign | None = campaign

    def __getstate__(self) -> dict[str, Any]:
        return {"_campaign": None}

    @property
    def _guard(self) -> BudgetGuard | None:
        return self._campaign.guard if self._campaign is not None else None

    def on_step_begin(self, iteration: int, trials: list[Trial], **info: Any) -> None:
        if (guard := self._guard) is not None:
            guard.on_step_begin(iteration, trials, **info)

    def on_trial_start(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        if (guard := self._guard) is not None:
            guard.on_trial_start(iteration, trials, trial, **info)

    def on_trial_result(
        self, iteration: int, trials: list[Trial], trial: Trial, result: dict[str, Any], **info: Any
    ) -> None:
        if (guard := self._guard) is not None:
            guard.on_trial_result(iteration, trials, trial, result, **info)

    def on_trial_complete(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        if (guard := self._guard) is not None:
            guard.on_trial_complete(iteration, trials, trial, **info)

    def on_trial_error(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        if (guard := self._guard) is not None:
            guard.on_trial_error(iteration, trials, trial, **info)
