"""Campaign work from the ASHA geometry: trial-epochs, wall time and cost-to-finish.

Ray's ASHA (one asynchronous bracket) stops a trial at a rung when its score is below the
``(1 - 1/eta)`` percentile of the scores already recorded there. Early arrivals meet little
competition (the first at each rung always goes on), so the naive "top 1/eta survives"
closed form undercounts. :func:`estimate_work` therefore replays the exact async rule over
``trials`` trials run ``workers`` at a time, with i.i.d. scores and a per-trial speed
spread, and averages a few hundred seeded runs. Pure: no Ray, no torch.

An estimate costs at most :data:`SIM_EVENTS` simulated rung arrivals, whatever the trial
count and the epochs: a run jumps from rung to rung (not epoch by epoch), fewer runs are
averaged as a campaign grows, and a campaign of more than :data:`SIM_TRIALS` trials is
replayed at that size, with its workers scaled alike, and its figures scaled back up.
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import math
import random
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tuner.spec._limits import MIN_REDUCTION_FACTOR

if TYPE_CHECKING:
    from tuner.spec import CampaignSpec

__all__ = [
    "AshaGeometry",
    "CampaignCost",
    "SpotRisk",
    "WorkEstimate",
    "cost_to_finish",
    "estimate_work",
    "naive_trial_epochs",
    "price_work",
]

# Most trials one simulated run replays; a larger campaign is replayed at this size.
SIM_TRIALS = 2_000
# Most rung arrivals (trials x rungs x runs) one estimate simulates; fewer runs beyond.
SIM_EVENTS = 100_000


@dataclass(frozen=True, slots=True)
class AshaGeometry:
    """The shape of a campaign: trials, epochs, and ASHA's rungs (``asha=False``: FIFO)."""

    trials: int
    max_epochs: int
    grace_period: int = 1
    reduction_factor: float = 3.0
    asha: bool = True

    def __post_init__(self) -> None:
        if self.trials < 1:
            raise ValueError(f"`trials >= 1` must hold, but got {self.trials=}.")
        if self.max_epochs < 1:
            raise ValueError(f"`max_epochs >= 1` must hold, but got {self.max_epochs=}.")
        if self.asha and not 1 <= self.grace_period <= self.max_epochs:
            raise ValueError(
                "`1 <= grace_period <= max_epochs` must hold, but got "
                f"({self.grace_period=}, {self.max_epochs=})."
            )
        if self.asha and self.reduction_factor <= 1:
            raise ValueError(f"`reduction_factor > 1` must hold, but got {self.reduction_factor=}.")
        if self.asha and self.reduction_factor < MIN_REDUCTION_FACTOR:
            raise ValueError(
                f"`reduction_factor >= {MIN_REDUCTION_FACTOR}` must hold, but got "
                f"{self.reduction_factor=}."
            )

    @classmethod
    def from_spec(cls, spec: CampaignSpec) -> AshaGeometry:
        """The geometry of a validated campaign spec."""
        from tuner.spec import SchedulerType

        return cls(
            trials=spec.budget.trials,
            max_epochs=spec.budget.max_epochs,
            grace_period=spec.scheduler.grace_period,
            reduction_factor=spec.scheduler.reduction_factor,
            asha=spec.scheduler.type is SchedulerType.ASHA,
        )

    def decision_epochs(self) -> tuple[int, ...]:
        """Epochs at which ASHA may stop a trial, ascending (empty for FIFO).

        Mirrors Ray's ``_Bracket``: ``int(log(R/r)/log(eta) + 1)`` milestones at
        ``r * eta**k``; a milestone is judged at the first epoch ``>=`` it, and none at or
        past ``max_epochs`` ever decides (the trial stops there anyway).
        """
        if not self.asha:
            return ()
        eta, r = self.reduction_factor, self.grace_period
        count = int(math.log(self.max_epochs / r) / math.log(eta) + 1)
        epochs = {math.ceil(r * eta**k - 1e-9) for k in range(count)}
        return tuple(sorted(e for e in epochs if e < self.max_epochs))

    def with_trials(self, trials: int) -> AshaGeometry:
        """The same geometry with a different trial count."""
        return dataclasses.replace(self, trials=trials)


@dataclass(frozen=True, slots=True)
class WorkEstimate:
    """Expected work of (the rest of) a campaign, averaged over simulated runs.

    Attributes:
        geometry: The campaign shape simulated.
        workers: Trials run at once.
        epoch_s: Mean seconds per trial-epoch.
        startup_s: Seconds a trial spends starting before its first epoch.
        cold_start_s: Extra seconds the first trial of each worker pays (a fresh process
            imports torch and the trainable; later trials reuse it).
        trials: Trials still to run (all of them before the campaign starts).
        trial_epochs: Expected trial-epochs.
        trial_epochs_sd: Standard deviation of trial-epochs across simulated runs.
        wall_s: Expected wall-clock seconds with ``workers`` at once, tail included.
        reach: Expected trials reaching each decision epoch and ``max_epochs``.
        prefix_epochs: Expected trial-epochs of the first ``k * prefix_step`` trials (start
            order) at index ``k``; :meth:`prefix` reads it for any ``k``.
        prefix_step: Trials per entry of ``prefix_epochs`` (1 unless the campaign was
            replayed at a smaller size).
    """

    geometry: AshaGeometry
    workers: int
    epoch_s: float
    startup_s: float
    trials: int
    trial_epochs: float
    trial_epochs_sd: float
    wall_s: float
    reach: tuple[float, ...] = ()
    prefix_epochs: tuple[float, ...] = ()
    cold_start_s: float = 0.0
    prefix_step: float = 1.0

    def prefix(self, k: int) -> float:
        """Expected trial-epochs of the first ``k`` trials (start order), interpolated."""
        pos = k / self.prefix_step
        lo = min(math.floor(pos), len(self.prefix_epochs) - 1)
        hi = min(lo + 1, len(self.prefix_epochs) - 1)
        return self.prefix_epochs[lo] + (self.prefix_epochs[hi] - self.prefix_epochs[lo]) * (
            pos - lo
        )

    @property
    def trial_s(self) -> float:
        """Trial-seconds: epochs, each trial's start-up, and each worker's cold start."""
        return (
            self.epoch_s * self.trial_epochs
            + self.startup_s * self.trials
            + self.cold_start_s * min(self.workers, self.trials)
        )

    def gpu_h(self, gpus_per_trial: float) -> float:
        """GPU-hours when every trial holds ``gpus_per_trial`` GPUs."""
        return self.trial_s * gpus_per_trial / 3600.0


def _percentile(ordered: list[float], q: float) -> float:
    """Linear-interpolated percentile of sorted values, as ``np.nanpercentile`` computes
    ASHA's cutoff."""
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _simulate(
    geometry: AshaGeometry,
    workers: int,
    startup_epochs: float,
    cold_epochs: float,
    speed_sd: float,
    drift: float,
    rng: random.Random,
) -> tuple[list[int], float]:
    """One run of the async rule; returns epochs per trial (start order) and makespan.

    A trial's events are its arrivals at the decision epochs and at ``max_epochs`` (nothing
    happens in between), so a run costs trials x rungs, not trials x epochs.
    """
    n, max_epochs = geometry.trials, geometry.max_epochs
    marks = (*geometry.decision_epochs(), max_epochs)
    q = 1.0 - 1.0 / geometry.reduction_factor
    # A trial keeps its rank at every rung (curves rarely cross); a sampler that learns
    # proposes better trials later, which then pass cutoffs set by earlier ones.
    score = [rng.random() + drift * i / max(n - 1, 1) for i in range(n)]
    # Configs differ in speed (model size, batch); mean epoch time stays 1.
    speed = [rng.lognormvariate(-(speed_sd**2) / 2, speed_sd) for _ in range(n)]
    recorded: list[list[float]] = [[] for _ in marks]  # each rung's scores, sorted
    epochs = [0] * n
    rung_of = [0] * n  # index in marks of the trial's next arrival
    # (time the trial reaches its next mark, trial)
    events: list[tuple[float, int]] = []
    started, now = 0, 0.0
    while started < min(workers, n):
        first = cold_epochs + startup_epochs + marks[0] * speed[started]
        heapq.heappush(events, (first, started))
        started += 1
    while events:
        now, i = heapq.heappop(events)
        k = rung_of[i]
        e = epochs[i] = marks[k]
        stop = e >= max_epochs
        if not stop:
            rung = recorded[k]
            stop = bool(rung) and score[i] < _percentile(rung, q)
            bisect.insort(rung, score[i])
        if not stop:
            rung_of[i] = k + 1
            heapq.heappush(events, (now + (marks[k + 1] - e) * speed[i], i))
        elif started < n:
            heapq.heappush(events, (now + startup_epochs + marks[0] * speed[started], started))
            started += 1
    return epochs, now


def estimate_work(
    geometry: AshaGeometry,
    *,
    epoch_s: float,
    startup_s: float = 0.0,
    cold_start_s: float = 0.0,
    workers: int = 1,
    runs: int = 300,
    seed: int = 0,
    speed_sd: float = 0.25,
    sampler_drift: float = 0.0,
) -> WorkEstimate:
    """Expected trial-epochs and wall time of a campaign, by replaying ASHA's rule.

    Args:
        geometry: Trials, max epochs, grace period, reduction factor.
        epoch_s: Mean seconds per trial-epoch on the target hardware.
        startup_s: Seconds per trial before its first epoch (data load, model set-up).
        cold_start_s: Extra seconds for each worker's first trial (process start, imports).
        workers: Trials run at once (``>= 1``; capped at ``geometry.trials``).
        runs: Seeded simulated runs to average.
        seed: Seed of the first run; the estimate is deterministic given it.
        speed_sd: Log-normal spread of per-trial epoch time (arrival order, tail).
        sampler_drift: How much better the last trial's score is than the first's, in
            units of the score spread: 0 for random search (i.i.d. trials); a model-based
            sampler (TPE) that homes in on good regions makes late trials survive more.

    Returns:
        The expected work, its spread, and the wall time with the tail.

    Raises:
        ValueError: A count or duration is out of range.
    """
    if epoch_s <= 0 or min(startup_s, cold_start_s) < 0 or workers < 1 or runs < 1:
        raise ValueError(
            "`epoch_s > 0`, `startup_s >= 0`, `cold_start_s >= 0`, `workers >= 1` and "
            f"`runs >= 1` must hold, but got ({epoch_s=}, {startup_s=}, {cold_start_s=}, "
            f"{workers=}, {runs=})."
        )
    n, workers = geometry.trials, min(workers, geometry.trials)
    marks = (*geometry.decision_epochs(), geometry.max_epochs)
    # The campaign replayed: at most SIM_TRIALS trials (fewer with many rungs), with the
    # same share of them running at once; its figures are scaled back up below.
    m = min(n, SIM_TRIALS, max(1, SIM_EVENTS // len(marks)))
    scale = n / m
    sim_workers = max(1, round(workers / scale))
    sim = geometry.with_trials(m)
    runs = max(1, min(runs, SIM_EVENTS // (m * len(marks))))
    totals: list[float] = []
    makespans: list[float] = []
    prefix = [0.0] * (m + 1)
    reach = [0.0] * len(marks)
    for k in range(runs):
        rng = random.Random(seed * 1_000_003 + k)
        per_trial, makespan = _simulate(
            sim,
            sim_workers,
            startup_s / epoch_s,
            cold_start_s / epoch_s,
            speed_sd,
            sampler_drift,
            rng,
        )
        totals.append(float(sum(per_trial)))
        makespans.append(makespan)
        running = 0
        for i, e in enumerate(per_trial):
            running += e
            prefix[i + 1] += running / runs
        for j, mark in enumerate(marks):
            reach[j] += sum(1 for e in per_trial if e >= mark) / runs
    # n trials on `workers` take as long as m on `sim_workers` when the shares match; the
    # rounding of sim_workers is undone.
    wall_factor = scale * sim_workers / workers
    return WorkEstimate(
        geometry=geometry,
        workers=workers,
        epoch_s=epoch_s,
        startup_s=startup_s,
        trials=n,
        trial_epochs=statistics.fmean(totals) * scale,
        trial_epochs_sd=statistics.pstdev(totals) * math.sqrt(scale),
        wall_s=statistics.fmean(makespans) * epoch_s * wall_factor,
        reach=tuple(r * scale for r in reach),
        prefix_epochs=tuple(p * scale for p in prefix),
        cold_start_s=cold_start_s,
        prefix_step=scale,
    )


def naive_trial_epochs(geometry: AshaGeometry) -> float:
    """Closed form "exactly 1/eta of each rung survives"; a lower bound for async ASHA."""
    marks = (*geometry.decision_epochs(), geometry.max_epochs)
    total, alive, last = 0.0, float(geometry.trials), 0
    for mark in marks:
        total += alive * (mark - last)
        alive, last = alive / geometry.reduction_factor, mark
    return total


def cost_to_finish(
    estimate: WorkEstimate,
    *,
    trials_finished: int,
    finished_epochs: int,
    trials_running: int = 0,
    running_epochs: int = 0,
    prior_trials: float = 4.0,
) -> WorkEstimate:
    """The remaining work of a running campaign, corrected by what it consumed so far.

    Finished trials are taken as the first ones started. Their actual epochs over the
    predicted epochs of that prefix gives a correction ratio, shrunk toward 1 by
    ``prior_trials`` pseudo-trials, applied to the predicted rest; epochs that running
    trials already did are subtracted.

    Args:
        estimate: The campaign's estimate from :func:`estimate_work` (before it started).
        trials_finished: Trials stopped or completed.
        finished_epochs: Trial-epochs those trials consumed.
        trials_running: Trials now running.
        running_epochs: Trial-epochs the running trials have done so far.
        prior_trials: Weight of the prediction, in trials, against the observation.

    Returns:
        An estimate for the rest (``trials`` = trials not started yet).

    Raises:
        ValueError: The counts do not fit the campaign.
    """
    n = estimate.geometry.trials
    if not 0 <= trials_finished + trials_running <= n or min(trials_finished, trials_running) < 0:
        raise ValueError(
            "`0 <= trials_finished + trials_running <= trials` must hold, but got "
            f"({trials_finished=}, {trials_running=}, trials={n})."
        )
    if finished_epochs < 0 or running_epochs < 0:
        raise ValueError(f"epochs must be >= 0, but got {finished_epochs=}, {running_epochs=}.")
    k = trials_finished
    total, done = estimate.prefix(n), estimate.prefix(k)
    pseudo = prior_trials * total / n
    ratio = (finished_epochs + pseudo) / (done + pseudo)
    unstarted = n - k - trials_running  # each runs at least to the first rung
    first = (*estimate.geometry.decision_epochs(), estimate.geometry.max_epochs)[0]
    remaining = max(ratio * (total - done) - running_epochs, float(unstarted * first))
    share = remaining / estimate.trial_epochs if estimate.trial_epochs else 0.0
    return dataclasses.replace(
        estimate,
        trials=unstarted,
        trial_epochs=remaining,
        trial_epochs_sd=estimate.trial_epochs_sd * math.sqrt(share),
        wall_s=estimate.wall_s * share,
        reach=(),
        prefix_epochs=(),
        prefix_step=1.0,
    )


@dataclass(frozen=True, slots=True)
class SpotRisk:
    """Spot preemption model: each preemption loses work since the last checkpoint.

    Attributes:
        preemptions_per_h: Expected preemptions per instance-hour.
        checkpoint_every_epochs: Epochs between checkpoints (half is lost on average).
        restart_s: Seconds to get a replacement instance and restore (start-up included).
    """

    preemptions_per_h: float = 0.05
    checkpoint_every_epochs: int = 1
    restart_s: float = 180.0

    def overhead(self, epoch_s: float) -> float:
        """Fraction of each spot hour lost to preemptions (lost work plus restart)."""
        lost_s = self.checkpoint_every_epochs * epoch_s / 2.0 + self.restart_s
        return self.preemptions_per_h * lost_s / 3600.0


@dataclass(frozen=True, slots=True)
class CampaignCost:
    """What a campaign costs on ``instances`` machines.

    Attributes:
        instances: Machines rented for the whole wall time.
        wall_s: On-demand wall-clock seconds.
        instance_h: Machine-hours billed on demand.
        gpu_h: GPU-hours the trials use.
        usd_ondemand: Dollars on demand.
        spot_wall_s: Wall seconds on spot, preemptions included (inf: never finishes).
        usd_spot: Dollars on spot (None: no spot price).
    """

    instances: int
    wall_s: float
    instance_h: float
    gpu_h: float
    usd_ondemand: float
    spot_wall_s: float
    usd_spot: float | None


def price_work(
    work: WorkEstimate,
    *,
    instances: int,
    gpus_per_trial: float,
    usd_per_hour_ondemand: float,
    usd_per_hour_spot: float | None = None,
    spot: SpotRisk | None = None,
    provision_s: float = 0.0,
) -> CampaignCost:
    """Dollars and hours of ``work`` on ``instances`` machines billed by the hour.

    Machines are paid for the whole wall time, idle tail included. On spot each hour
    loses ``spot.overhead`` of itself to preemptions, and the redone work can be
    preempted too, so wall time grows by ``1 / (1 - overhead)``.

    Args:
        work: The campaign (or remaining) work at the chosen worker count.
        instances: Machines rented.
        gpus_per_trial: GPUs each trial holds.
        usd_per_hour_ondemand: On-demand price per machine-hour.
        usd_per_hour_spot: Spot price per machine-hour, if offered.
        spot: Preemption model (default :class:`SpotRisk`).
        provision_s: Seconds a machine is billed before it can run a trial (boot, the
            cluster's setup commands); added to the wall time and to every machine's bill.

    Returns:
        Hours and dollars both ways.
    """
    if instances < 1:
        raise ValueError(f"`instances >= 1` must hold, but got {instances=}.")
    risk = spot or SpotRisk()
    overhead = risk.overhead(work.epoch_s)
    if provision_s < 0:
        raise ValueError(f"`provision_s >= 0` must hold, but got {provision_s=}.")
    wall_s = work.wall_s + provision_s
    spot_wall_s = wall_s / (1.0 - overhead) if overhead < 1.0 else math.inf
    instance_h = instances * wall_s / 3600.0
    usd_spot = None
    if usd_per_hour_spot is not None:
        usd_spot = instances * spot_wall_s / 3600.0 * usd_per_hour_spot
    return CampaignCost(
        instances=instances,
        wall_s=wall_s,
        instance_h=instance_h,
        gpu_h=work.gpu_h(gpus_per_trial),
        usd_ondemand=instance_h * usd_per_hour_ondemand,
        spot_wall_s=spot_wall_s,
        usd_spot=usd_spot,
    )
