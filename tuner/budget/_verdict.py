"""The budget guard's arithmetic: may another trial start, and is the money spent?

Pure functions of what the ledger says was used and what the running trials are expected to
need; the Ray glue (``tuner._ray.guard``) asks them every second or so.

- A new trial starts only if what was spent, plus what the running trials are expected to
  cost until they stop, plus what a new trial is expected to cost, fits every limit
  (dollars, GPU-hours, running time).
- At a limit the budget is exhausted: running trials checkpoint and stop.

Expected epochs follow ASHA's rungs: a trial surely runs to the next rung, and past each
rung it goes on with probability ``1/eta`` (the fraction ASHA promotes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tuner.cost._work import AshaGeometry
from tuner.spec import Budget


@dataclass(frozen=True, slots=True)
class Limits:
    """The campaign's hard limits (None: not limited)."""

    usd: float | None = None
    gpu_hours: float | None = None
    deadline_s: float | None = None

    @classmethod
    def from_budget(cls, budget: Budget) -> Limits:
        """The limits of a campaign's ``budget:`` section."""
        return cls(usd=budget.usd, gpu_hours=budget.gpu_hours, deadline_s=budget.deadline_s)

    @property
    def any(self) -> bool:
        """Whether anything is limited."""
        return any(v is not None for v in (self.usd, self.gpu_hours, self.deadline_s))


@dataclass(frozen=True, slots=True)
class Usage:
    """What the campaign used so far (from the ledger)."""

    usd: float
    gpu_hours: float
    running_s: float


@dataclass(frozen=True, slots=True)
class Outlook:
    """What the rest is expected to cost.

    Attributes:
        usd_per_trial_s: Dollars per second of one trial's slot, idle share included.
        gpu_h_per_trial_s: GPU-hours per second of one trial's slot.
        new_trial_s: Expected seconds of a trial started now (None: not known yet).
        running_left_s: Expected seconds each running trial still needs.
        usd_per_s_now: What the cluster costs per second now.
        gpu_h_per_s_now: GPU-hours the cluster accrues per second now.
        stop_lead_s: Seconds from the decision to stop until trials have stopped (about
            an epoch): the limit counts as reached that long before it is, so the spend
            stays within it.
    """

    usd_per_trial_s: float
    gpu_h_per_trial_s: float
    new_trial_s: float | None
    running_left_s: Sequence[float] = ()
    usd_per_s_now: float = 0.0
    gpu_h_per_s_now: float = 0.0
    stop_lead_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Verdict:
    """The guard's decision and why."""

    launch: bool
    exhausted: bool
    reason: str


def expected_epochs_left(geometry: AshaGeometry, epoch: int) -> float:
    """Expected further epochs of a trial that has done ``epoch`` epochs."""
    if epoch >= geometry.max_epochs:
        return 0.0
    marks = [m for m in (*geometry.decision_epochs(), geometry.max_epochs) if m > epoch]
    survive = 1.0 / geometry.reduction_factor if geometry.asha else 1.0
    total, weight, last = 0.0, 1.0, epoch
    for mark in marks:
        total += weight * (mark - last)
        weight *= survive
        last = mark
    return total


def _money(usd: float) -> str:
    return f"${usd:,.2f}"


def _hours(h: float) -> str:
    return f"{h:.3g} GPU-h"


def _clock(s: float) -> str:
    if s >= 3600:
        return f"{s / 3600:.2f} h"
    if s >= 60:
        return f"{s / 60:.1f} min"
    return f"{s:.0f} s"


def assess(limits: Limits, usage: Usage, outlook: Outlook) -> Verdict:
    """Decides whether a new trial may start, and whether the budget is exhausted."""
    lead = outlook.stop_lead_s
    spent = [
        ("usd", limits.usd, usage.usd, outlook.usd_per_s_now * lead, _money),
        ("gpu_hours", limits.gpu_hours, usage.gpu_hours, outlook.gpu_h_per_s_now * lead, _hours),
        ("deadline", limits.deadline_s, usage.running_s, lead, _clock),
    ]
    for key, limit, used, ahead, fmt in spent:
        if limit is not None and used + ahead >= limit:
            return Verdict(False, True, f"budget exhausted: {fmt(used)} of {fmt(limit)} ({key})")
    if outlook.new_trial_s is None:
        return Verdict(True, False, "no trial has finished an epoch yet: nothing to predict from")
    left_s = sum(outlook.running_left_s)
    # Running trials cost money and GPU-hours until they stop; against the deadline they
    # run alongside a new trial, which only has to finish in the time left itself.
    needs = [
        (
            "usd",
            limits.usd,
            usage.usd,
            left_s * outlook.usd_per_trial_s,
            outlook.new_trial_s * outlook.usd_per_trial_s,
            _money,
        ),
        (
            "gpu_hours",
            limits.gpu_hours,
            usage.gpu_hours,
            left_s * outlook.gpu_h_per_trial_s,
            outlook.new_trial_s * outlook.gpu_h_per_trial_s,
            _hours,
        ),
        (
            "deadline",
            limits.deadline_s,
            usage.running_s,
            0.0,
            outlook.new_trial_s,
            _clock,
        ),
    ]
    for key, limit, used, running, new, fmt in needs:
        if limit is None:
            continue
        if used + running + new > limit:
            return Verdict(
                False,
                False,
                f"{key}: {fmt(used)} of {fmt(limit)} used; the "
                f"{len(outlook.running_left_s)} running trial(s) need ~{fmt(running)} more "
                f"and a new one ~{fmt(new)}: no new trials",
            )
    return Verdict(True, False, "within budget")


def affordable_slots(
    limits: Limits, *, usd_per_trial_s: float, gpu_h_per_trial_s: float, first_rung_s: float
) -> int | None:
    """Most trials at once that the budget affords: each must reach ASHA's first rung.

    None when neither money nor GPU-hours are limited (or nothing costs anything).
    """
    caps: list[int] = []
    for limit, per_trial_s in (
        (limits.usd, usd_per_trial_s),
        (limits.gpu_hours, gpu_h_per_trial_s),
    ):
        # A rate or an epoch so small that the quotient is no finite number caps nothing.
        cost = per_trial_s * first_rung_s
        if limit is not None and cost > 0 and math.isfinite(limit / cost):
            caps.append(math.floor(limit / cost))
    return max(1, min(caps)) if caps else None
