"""The campaign spec: typed, frozen sections and their round trip to the file schema."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tuner.rundir import check_study_storage
from tuner.spec._checks import RESERVED_PREFIX, Checker, check_campaign_name, check_seed
from tuner.spec._durations import parse_duration
from tuner.spec._enums import Mode, SamplerType, SchedulerType
from tuner.spec._frozen import FrozenDict, thaw
from tuner.spec._limits import CAMPAIGN
from tuner.spec._params import Space
from tuner.spec._tracking import Tracking
from tuner.spec._warm_start import DEFAULT_TOP, WarmStart

__all__ = [
    "RESERVED_PREFIX",
    "Budget",
    "CampaignSpec",
    "CheckpointPolicy",
    "FailurePolicy",
    "Mode",
    "Objective",
    "Pricing",
    "Resources",
    "SamplerSpec",
    "SamplerType",
    "SchedulerSpec",
    "SchedulerType",
]


@dataclass(frozen=True, slots=True)
class Objective:
    """One objective of a campaign: a reported metric and whether to minimize or maximize it."""

    metric: str
    mode: Mode

    @property
    def maximize(self) -> bool:
        """Whether larger values are better."""
        return self.mode is Mode.MAX


def _num(value: float) -> float | int:
    """Integral floats as ints, so dumped YAML reads ``cpu: 1`` rather than ``cpu: 1.0``."""
    return int(value) if float(value).is_integer() else value


@dataclass(frozen=True, slots=True)
class Budget:
    """How much the campaign may do and spend.

    Attributes:
        trials: Trials to run.
        max_epochs: Epochs a trial may reach.
        time_limit_s: Wall-clock seconds after which Tune stops everything at once.
        usd: Dollars the cluster's nodes may cost while the campaign runs (idle ones too).
        gpu_hours: GPU-hours of nodes (GPUs x hours alive) the campaign may use.
        deadline_s: Seconds of running time the campaign may take; unlike ``time_limit_s``
            it is enforced like money: no trial starts that cannot finish in time, and at
            the deadline running trials checkpoint and stop.
        goal: A value of the metric that is good enough (in its mode's direction): once a
            trial reports it, the campaign stops as a spent budget does, and ends
            ``goal reached`` (exit status 0). A multi-objective campaign gives one value
            per objective, in the objectives' order: one result must meet them all.
    """

    trials: int
    max_epochs: int
    time_limit_s: float | None = None
    usd: float | None = None
    gpu_hours: float | None = None
    deadline_s: float | None = None
    goal: float | tuple[float, ...] | None = None

    @property
    def limited(self) -> bool:
        """Whether a money, GPU-hour or deadline limit is set (the budget guard runs)."""
        return any(v is not None for v in (self.usd, self.gpu_hours, self.deadline_s))

    def to_dict(self) -> dict[str, Any]:
        """The ``budget:`` section (durations in seconds)."""
        out: dict[str, Any] = {"trials": self.trials, "max_epochs": self.max_epochs}
        if self.time_limit_s is not None:
            out["time_limit"] = _num(self.time_limit_s)
        if self.usd is not None:
            out["usd"] = _num(self.usd)
        if self.gpu_hours is not None:
            out["gpu_hours"] = _num(self.gpu_hours)
        if self.deadline_s is not None:
            out["deadline"] = _num(self.deadline_s)
        if isinstance(self.goal, tuple):
            out["goal"] = [_num(v) for v in self.goal]
        elif self.goal is not None:
            out["goal"] = _num(self.goal)
        return out


@dataclass(frozen=True, slots=True)
class Pricing:
    """What nodes cost, for the spend ledger.

    Nodes are priced by their labels (``tuner.io/usd-per-hour``, else
    ``tuner.io/instance-type`` looked up in the catalog), else by their GPUs'
    ``accelerator_type`` in the catalog, else at ``node_usd_per_hour``.

    Attributes:
        node_usd_per_hour: Rate of a node nothing else prices (a local run: 0).
        catalog: A user catalog of instances (CSV) added to the built-in one.
        spot: Price catalog nodes at their spot rate.
    """

    node_usd_per_hour: float = 0.0
    catalog: str | None = None
    spot: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The ``pricing:`` section."""
        out: dict[str, Any] = {"node_usd_per_hour": _num(self.node_usd_per_hour)}
        if self.catalog is not None:
            out["catalog"] = self.catalog
        if self.spot:
            out["spot"] = True
        return out


@dataclass(frozen=True, slots=True)
class SchedulerSpec:
    """Trial scheduler; ``grace_period``, ``reduction_factor`` and ``min_peers`` apply to
    ASHA only.

    ``min_peers``: results of other trials a rung must hold before a trial reaching it is
    judged there; until then the trial pauses at the rung (its checkpoint kept) and is
    judged once they exist (a result without a checkpoint is judged at once). The default
    is ``ceil(reduction_factor) - 1``; 0 is Ray Tune's ASHA, which lets the first trials at
    a rung continue unjudged.
    """

    type: SchedulerType = SchedulerType.ASHA
    grace_period: int = 1
    reduction_factor: float = 3.0
    min_peers: int = 2

    def to_dict(self) -> dict[str, Any]:
        """The ``scheduler:`` section."""
        if self.type is SchedulerType.FIFO:
            return {"type": self.type.value}
        return {
            "type": self.type.value,
            "grace_period": self.grace_period,
            "reduction_factor": _num(self.reduction_factor),
            "min_peers": self.min_peers,
        }


def default_min_peers(reduction_factor: float) -> int:
    """ASHA keeps the top ``1 / reduction_factor`` of a rung: judging that needs this many
    results besides the trial's own."""
    return max(1, math.ceil(reduction_factor) - 1)


@dataclass(frozen=True, slots=True)
class SamplerSpec:
    """Optuna sampler; ``startup_trials`` (TPE, GP, CMA-ES) ``None`` means the default."""

    type: SamplerType = SamplerType.TPE
    seed: int | None = None
    startup_trials: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``sampler:`` section."""
        out: dict[str, Any] = {"type": self.type.value}
        if self.seed is not None:
            out["seed"] = self.seed
        if self.startup_trials is not None:
            out["startup_trials"] = self.startup_trials
        return out


@dataclass(frozen=True, slots=True)
class Resources:
    """Per-trial resources; ``max_concurrent`` ``None`` lets the cluster (and budget) decide.

    A trial PENDING longer than ``pending_warning_s`` is reported with the reason.

    ``workers`` > 1 trains each trial data-parallel (DDP) on that many Ray Train workers,
    each with ``cpu`` CPUs and ``gpu`` GPUs.
    """

    cpu: float = 1.0
    gpu: float = 0.0
    max_concurrent: int | None = None
    workers: int = 1
    pending_warning_s: float = 300.0

    @property
    def gpus_per_trial(self) -> float:
        """GPUs one trial holds: ``gpu`` on each of its ``workers``."""
        return self.gpu * self.workers

    @property
    def cpus_per_trial(self) -> float:
        """CPUs one trial holds: ``cpu`` on each of its ``workers``."""
        return self.cpu * self.workers

    def bundle(self) -> dict[str, float]:
        """What one trial (one worker of a data-parallel trial) asks Ray for."""
        request = {"CPU": self.cpu}
        if self.gpu > 0:
            request["GPU"] = self.gpu
        return request

    def to_dict(self) -> dict[str, Any]:
        """The ``resources:`` section."""
        out: dict[str, Any] = {"cpu": _num(self.cpu), "gpu": _num(self.gpu)}
        if self.workers != 1:
            out["workers"] = self.workers
        if self.max_concurrent is not None:
            out["max_concurrent"] = self.max_concurrent
        if self.pending_warning_s != 300.0:
            out["pending_warning"] = _num(self.pending_warning_s)
        return out


@dataclass(frozen=True, slots=True)
class CheckpointPolicy:
    """Checkpoint every ``every`` epochs and keep the ``keep`` most recent."""

    every: int = 1
    keep: int = 2

    def to_dict(self) -> dict[str, Any]:
        """The ``checkpoint:`` section."""
        return {"every": self.every, "keep": self.keep}


@dataclass(frozen=True, slots=True)
class FailurePolicy:
    """What the campaign does about trials that fail.

    Attributes:
        max_retries: Retries of a trial that raised, each from its latest checkpoint (a
            trial that ran out of GPU memory is never retried: it would again).
        max_failed_trials: Failed trials the campaign tolerates; once more have failed no
            new trial starts and the campaign ends with status ``stopped: failure limit
            reached`` (``tuner run`` exits 3). None (the default): no limit.
    """

    max_retries: int = 2
    max_failed_trials: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``failure:`` section."""
        out: dict[str, Any] = {"max_retries": self.max_retries}
        if self.max_failed_trials is not None:
            out["max_failed_trials"] = self.max_failed_trials
        return out


@dataclass(frozen=True, slots=True)
class CampaignSpec:
    """A validated tuning campaign.

    Build one with :func:`tuner.spec.load_campaign` or :func:`tuner.spec.parse_campaign`;
    the constructor itself does not validate.

    Attributes:
        name: Campaign name; names the run folder.
        trainable: Built-in trainable name or ``package.module:function``.
        metric: Reported metric to optimize; with several objectives, the first (primary)
            one, which ranks ``best`` and drives the live progress line.
        mode: Minimize or maximize ``metric``.
        space: Search space, parameters in topological order.
        budget: Trials, epochs per trial, optional wall-clock limit.
        scheduler: ASHA or FIFO settings.
        sampler: Optuna sampler settings.
        resources: Per-trial CPU/GPU and concurrency cap.
        checkpoint: Checkpoint frequency and retention.
        failure: Retries of failed trials and how many may fail.
        pricing: What nodes cost (the spend ledger).
        fixed: Read-only mapping passed to the trainable as-is (nested values frozen;
            use :func:`tuner.spec.thaw` for plain dicts and lists).
        description: Free text.
        study_storage: Where the Optuna study lives, a URL (None: ``study.db`` in the run
            folder); see :func:`tuner.rundir.check_study_storage`.
        warm_start: The earlier campaign whose trials seed this one's sampler (None: a
            cold start); see :mod:`tuner.warm_start`.
        objectives: Every objective, the primary one (``metric``, ``mode``) first; two to
            four make a multi-objective campaign (see :attr:`multi_objective`). Left empty,
            it is filled in as the one objective ``(metric, mode)``.
        tracking: The experiment trackers (MLflow, W&B) trials are logged to (None: none).
        source: Where the spec came from (file path as given, or ``"<dict>"``); not
            compared by ``==``.
    """

    name: str
    trainable: str
    metric: str
    mode: Mode
    space: Space
    budget: Budget
    scheduler: SchedulerSpec = field(default_factory=SchedulerSpec)
    sampler: SamplerSpec = field(default_factory=SamplerSpec)
    resources: Resources = field(default_factory=Resources)
    checkpoint: CheckpointPolicy = field(default_factory=CheckpointPolicy)
    failure: FailurePolicy = field(default_factory=FailurePolicy)
    pricing: Pricing = field(default_factory=Pricing)
    fixed: Mapping[str, Any] = field(default_factory=FrozenDict)
    description: str = ""
    study_storage: str | None = None
    warm_start: WarmStart | None = None
    objectives: tuple[Objective, ...] = ()
    tracking: Tracking | None = None
    # Provenance, not content: a spec equals its round trip through to_dict().
    source: str = field(default="<dict>", compare=False)

    def __post_init__(self) -> None:
        primary = Objective(self.metric, self.mode)
        if not self.objectives:
            object.__setattr__(self, "objectives", (primary,))
        elif self.objectives[0] != primary:
            raise ValueError(
                f"`objectives[0]` must be (metric, mode), but got {self.objectives[0]!r} "
                f"with metric={self.metric!r}, mode={self.mode.value!r}."
            )

    @property
    def multi_objective(self) -> bool:
        """Whether the campaign optimizes several metrics at once (a Pareto front)."""
        return len(self.objectives) > 1

    @property
    def metrics(self) -> tuple[str, ...]:
        """The objectives' metric names, primary first."""
        return tuple(o.metric for o in self.objectives)

    def to_dict(self) -> dict[str, Any]:
        """The campaign as a plain, YAML-dumpable dict in the campaign-file schema.

        ``parse_campaign(spec.to_dict()) == spec`` holds (``source`` is not compared).
        Optional values that are unset are left out; the time limit is in seconds.
        """
        out: dict[str, Any] = {"name": self.name}
        if self.description:
            out["description"] = self.description
        out |= {
            "trainable": self.trainable,
            "metric": list(self.metrics) if self.multi_objective else self.metric,
            "mode": [o.mode.value for o in self.objectives]
            if self.multi_objective
            else self.mode.value,
            "space": self.space.to_dict(),
            "budget": self.budget.to_dict(),
            "scheduler": self.scheduler.to_dict(),
            "sampler": self.sampler.to_dict(),
            "resources": self.resources.to_dict(),
            "checkpoint": self.checkpoint.to_dict(),
            "failure": self.failure.to_dict(),
        }
        if self.pricing != Pricing():
            out["pricing"] = self.pricing.to_dict()
        if self.fixed:
            out["fixed"] = thaw(self.fixed)
        if self.study_storage is not None:
            out["study_storage"] = self.study_storage
        if self.warm_start is not None:
            out["warm_start"] = self.warm_start.to_dict()
        if self.tracking is not None:
            out["tracking"] = self.tracking.to_dict()
        return out

    def with_overrides(
        self,
        *,
        trials: int | None = None,
        max_epochs: int | None = None,
        time_limit_s: float | str | None = None,
        seed: int | None = None,
        name: str | None = None,
        usd: float | None = None,
        gpu_hours: float | None = None,
        deadline_s: float | str | None = None,
        study_storage: str | None = None,
        warm_start: str | None = None,
        tracking: Tracking | None = None,
    ) -> CampaignSpec:
        """Return a copy with command-line overrides applied and re-validated.

        Args:
            trials: ``--trials``; an int >= 1.
            max_epochs: ``--max-epochs``; an int >= 1 and, with ASHA, at least
                ``scheduler.grace_period``.
            time_limit_s: ``--time-limit``; seconds, or a duration string like ``"2h"``.
            seed: ``--seed``; the sampler seed.
            name: ``--name``; the campaign name.
            usd: ``--budget-usd``; dollars, > 0.
            gpu_hours: ``--budget-gpu-hours``; GPU-hours, > 0.
            deadline_s: ``--deadline``; seconds, or a duration string like ``"6h"``.
            study_storage: ``--study-storage``; a study storage URL.
            warm_start: ``--warm-start``; a run folder whose trials seed this campaign
                (``top`` as the file says, else its default).
            tracking: The ``tracking`` section in place of the file's (see
                :func:`tuner.spec._tracking.tracking_flags` for the flags).

        Returns:
            The updated spec (``self`` unchanged).

        Raises:
            SpecError: An override is invalid; ``source`` is ``"<cli>"`` and ``path``
                the flag.
        """
        ck = Checker("<cli>")
        budget, sampler, new_name = self.budget, self.sampler, self.name
        if trials is not None:
            count = ck.integer(trials, "--trials", limit=CAMPAIGN["budget.trials"])
            budget = dataclasses.replace(budget, trials=count)
        if max_epochs is not None:
            epochs = ck.integer(max_epochs, "--max-epochs", limit=CAMPAIGN["budget.max_epochs"])
            grace = self.scheduler.grace_period
            if self.scheduler.type is SchedulerType.ASHA and epochs < grace:
                ck.fail(
                    "--max-epochs",
                    f"is below scheduler.grace_period={grace}",
                    got=epochs,
                    fix=f"pass --max-epochs {grace} or more, "
                    f"or lower scheduler.grace_period in {self.source}",
                )
            budget = dataclasses.replace(budget, max_epochs=epochs)
        if time_limit_s is not None:
            limit = parse_duration(time_limit_s, source="<cli>", path="--time-limit")
            budget = dataclasses.replace(budget, time_limit_s=limit)
        if usd is not None:
            dollars = ck.number(usd, "--budget-usd", limit=CAMPAIGN["budget.usd"])
            budget = dataclasses.replace(budget, usd=dollars)
        if gpu_hours is not None:
            hours = ck.number(gpu_hours, "--budget-gpu-hours", limit=CAMPAIGN["budget.gpu_hours"])
            budget = dataclasses.replace(budget, gpu_hours=hours)
        if deadline_s is not None:
            deadline = parse_duration(deadline_s, source="<cli>", path="--deadline")
            budget = dataclasses.replace(budget, deadline_s=deadline)
        if seed is not None:
            sampler = dataclasses.replace(sampler, seed=check_seed(ck, seed, "--seed"))
        if name is not None:
            new_name = check_campaign_name(ck, name, "--name")
        store = self.study_storage
        if study_storage is not None:
            store = check_study_storage(study_storage)
        warm = self.warm_start
        if warm_start is not None:
            top = min(warm.top if warm is not None else DEFAULT_TOP, budget.trials)
            warm = WarmStart(run=ck.string(warm_start, "--warm-start"), top=top)
        return dataclasses.replace(
            self,
            name=new_name,
            budget=budget,
            sampler=sampler,
            study_storage=store,
            warm_start=warm,
            tracking=self.tracking if tracking is None else tracking,
        )
