"""Which instances to rent for a campaign: hours and dollars per option, Pareto front, picks.

Each option is an instance type with a predicted epoch time for this model on its GPU.
The campaign's work (:mod:`tuner.cost._work`) is replayed at the worker count the option
gives (``gpu_count // gpus_per_trial`` trials per machine, more machines if a deadline
needs them), priced by the machine-hour, and compared. Pure: no Ray, no torch.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any

from tuner.cost._work import AshaGeometry, SpotRisk, WorkEstimate, estimate_work, price_work

__all__ = [
    "TABLE_HEADER",
    "CampaignNeeds",
    "InstanceOption",
    "OptionPlan",
    "Recommendation",
    "recommend",
]


@dataclass(frozen=True, slots=True)
class InstanceOption:
    """One rentable machine and this model's predicted epoch time on its GPU."""

    name: str
    cloud: str
    region: str
    gpu: str
    gpu_count: int
    usd_per_hour_ondemand: float
    usd_per_hour_spot: float | None
    gpu_mem_gib: float
    predicted_epoch_s: float
    note: str = ""
    vcpus: int | None = None


@dataclass(frozen=True, slots=True)
class CampaignNeeds:
    """What the campaign needs: its geometry, start-up, GPUs and memory per trial.

    ``gpus_per_trial`` may be a fraction (trials sharing a GPU); ``mem_gib_per_gpu`` is
    one trial's memory, so sharing trials need it once each.
    """

    geometry: AshaGeometry
    startup_s: float = 30.0
    gpus_per_trial: float = 1.0
    mem_gib_per_gpu: float = 0.0
    cold_start_s: float = 0.0
    cpus_per_trial: float = 0.0

    @property
    def trials_per_gpu(self) -> int:
        """Trials that share one GPU (1 unless ``gpus_per_trial`` < 1)."""
        return max(1, math.floor(1.0 / self.gpus_per_trial + 1e-9))

    def slots(self, gpu_count: int, vcpus: int | None = None) -> int:
        """Trials one machine runs at once: its GPUs, and its vCPUs when known."""
        slots = math.floor(gpu_count / self.gpus_per_trial + 1e-9)
        if vcpus is not None and self.cpus_per_trial > 0:
            slots = min(slots, math.floor(vcpus / self.cpus_per_trial + 1e-9))
        return slots


@dataclass(frozen=True, slots=True)
class OptionPlan:
    """The campaign on one option; hours and dollars are None when it cannot run there.

    Attributes:
        option: The instance type.
        fits: Memory fits, enough GPUs per machine, and a price for the chosen pricing.
        reason: Why it does not fit ("" when it does).
        instances: Machines rented.
        workers: Trials at once.
        wall_h: Campaign wall-clock hours.
        usd: Campaign dollars (on demand or spot, as asked).
        gpu_h: GPU-hours the trials use.
        meets_deadline: Done by the deadline (True without one).
        within_budget: Dollars within the budget.
        pareto: On the cost-vs-time Pareto front of the options that fit.
        trials_bought: Trials the budget buys at this option (all when it fits).
        trial_epochs_bought: Expected trial-epochs of those trials.
    """

    option: InstanceOption
    fits: bool
    reason: str = ""
    instances: int = 0
    workers: int = 0
    wall_h: float | None = None
    usd: float | None = None
    gpu_h: float | None = None
    meets_deadline: bool = False
    within_budget: bool = False
    pareto: bool = False
    trials_bought: int = 0
    trial_epochs_bought: float = 0.0


@dataclass(frozen=True, slots=True)
class Recommendation:
    """Plans for every option and the two picks (option names, None if none qualifies)."""

    trials: int
    trial_epochs: float
    budget_usd: float
    deadline_h: float | None
    spot: bool
    plans: tuple[OptionPlan, ...]
    cheapest_within_deadline: str | None
    fastest_within_budget: str | None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (infinities become None)."""
        out = dataclasses.asdict(self)
        return _finite(out)  # type: ignore[no-any-return]

    def to_json(self) -> str:
        """The recommendation as indented JSON."""
        return json.dumps(self.to_dict(), indent=2)

    def rows(self) -> list[list[str]]:
        """Table cells, one list per option, columns as in ``TABLE_HEADER``."""
        rows = []
        for p in self.plans:
            picks = [
                label
                for label, name in (
                    ("cheapest", self.cheapest_within_deadline),
                    ("fastest", self.fastest_within_budget),
                )
                if name == p.option.name
            ]
            o = p.option
            rows.append(
                [
                    o.name,
                    f"{o.gpu_count}x {o.gpu}",
                    "yes" if p.fits else f"no: {p.reason}",
                    str(p.instances) if p.fits else "-",
                    str(p.workers) if p.fits else "-",
                    _num(p.wall_h, "{:.3g}"),
                    _usd(p.usd),
                    _yes(p.fits and p.meets_deadline),
                    _yes(p.fits and p.within_budget),
                    "" if not p.fits or p.within_budget else f"{p.trials_bought}/{self.trials}",
                    "*" if p.pareto else "",
                    ", ".join(picks),
                ]
            )
        return rows

    def table(self) -> str:
        """A fixed-width terminal table, one row per option."""
        rows = [list(TABLE_HEADER), *self.rows()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(TABLE_HEADER))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
        return "\n".join([self.headline(), *[line.rstrip() for line in lines]])

    def markdown(self) -> str:
        """A Markdown table with a one-line heading."""
        lines = [f"**{self.headline()}**", "", *[f"- {f}" for f in self.findings()], ""]
        lines.append("| " + " | ".join(TABLE_HEADER) + " |")
        lines.append("|" + "---|" * len(TABLE_HEADER))
        lines += ["| " + " | ".join(r) + " |" for r in self.rows()]
        return "\n".join(lines)

    def plan(self, name: str | None) -> OptionPlan | None:
        """The plan of the option called ``name`` (a pick), or None."""
        return next((p for p in self.plans if p.option.name == name), None)

    def findings(self) -> list[str]:
        """The answer in sentences: the two picks, and what the budget buys if too small."""
        lines = []
        for label, name in (
            ("Cheapest within the deadline", self.cheapest_within_deadline),
            ("Fastest within the budget", self.fastest_within_budget),
        ):
            p = self.plan(name)
            if p is None or p.usd is None or p.wall_h is None:
                lines.append(f"{label}: none of the options.")
            else:
                lines.append(
                    f"{label}: {name}, {p.instances} machine(s) x {p.option.gpu_count} "
                    f"{p.option.gpu}, {p.workers} trial(s) at once: ~{p.wall_h:.3g} h, "
                    f"~${_usd(p.usd)}."
                )
        fits = [p for p in self.plans if p.fits]
        if fits and not any(p.within_budget for p in fits):
            best = max(fits, key=lambda p: (p.trials_bought, p.trial_epochs_bought))
            lines.append(
                f"No option runs the whole campaign within ${self.budget_usd:,.2f}. The "
                f"most it buys: {best.trials_bought} of {self.trials} trials "
                f"(~{best.trial_epochs_bought:.0f} trial-epochs) on {best.option.name}."
            )
        if fits and self.deadline_h is not None and not any(p.meets_deadline for p in fits):
            quickest = min(fits, key=lambda p: p.wall_h or math.inf)
            lines.append(
                f"No option finishes within {self.deadline_h:g} h; the quickest is "
                f"{quickest.option.name} at ~{quickest.wall_h or math.inf:.2f} h."
            )
        if not fits:
            lines.append("No option can run this campaign (see the fits column).")
        return lines

    def headline(self) -> str:
        """One line: trials, work, budget, deadline, pricing."""
        deadline = f"{self.deadline_h:g} h" if self.deadline_h is not None else "none"
        pricing = "spot" if self.spot else "on demand"
        return (
            f"{self.trials} trials, ~{self.trial_epochs:.0f} trial-epochs; budget "
            f"${self.budget_usd:,.2f}, deadline {deadline}, {pricing}"
        )


_FASTEST_TIE = 0.02

TABLE_HEADER = (
    "option", "gpus", "fits", "inst", "workers", "hours", "usd",
    "deadline", "budget", "buys", "pareto", "pick",
)  # fmt: skip


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else "inf" if math.isinf(value) else fmt.format(value)


def _usd(value: float | None) -> str:
    """Cents for a campaign that costs dollars; 3 digits for one that costs less."""
    if value is None or not math.isfinite(value) or value >= 1:
        return _num(value, "{:.2f}")
    return f"{value:.3g}"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _misfit(option: InstanceOption, needs: CampaignNeeds, spot: bool) -> str:
    if not math.isfinite(option.predicted_epoch_s):
        return option.note or "no prediction for this GPU"
    if option.gpu_count < needs.gpus_per_trial:
        return f"{option.gpu_count} GPUs < {needs.gpus_per_trial:g} per trial"
    if needs.slots(option.gpu_count, option.vcpus) < 1:
        return f"{option.vcpus} vCPUs < {needs.cpus_per_trial:g} per trial"
    mem = needs.mem_gib_per_gpu * needs.trials_per_gpu
    if mem > option.gpu_mem_gib:
        return f"needs {mem:.3g} GiB > {option.gpu_mem_gib:g} GiB"
    if spot and option.usd_per_hour_spot is None:
        return "no spot price"
    return ""


class _Pricer:
    """Prices one option at a machine count, caching the simulated work."""

    def __init__(self, option: InstanceOption, needs: CampaignNeeds, spot: SpotRisk | None,
                 use_spot: bool, runs: int, provision_s: float) -> None:  # fmt: skip
        self.option, self.needs, self.risk, self.use_spot, self.runs = (
            option, needs, spot, use_spot, runs,
        )  # fmt: skip
        self.provision_s = provision_s
        self.slots = needs.slots(option.gpu_count, option.vcpus)

    def work(self, instances: int, trials: int) -> WorkEstimate:
        return estimate_work(
            self.needs.geometry.with_trials(trials),
            epoch_s=self.option.predicted_epoch_s,
            startup_s=self.needs.startup_s,
            cold_start_s=self.needs.cold_start_s,
            workers=instances * self.slots,
            runs=self.runs,
        )

    def hours_usd(self, work: WorkEstimate, instances: int) -> tuple[float, float]:
        cost = price_work(
            work,
            instances=instances,
            gpus_per_trial=self.needs.gpus_per_trial,
            usd_per_hour_ondemand=self.option.usd_per_hour_ondemand,
            usd_per_hour_spot=self.option.usd_per_hour_spot,
            spot=self.risk,
            provision_s=self.provision_s,
        )
        if self.use_spot and cost.usd_spot is not None:
            return cost.spot_wall_s / 3600.0, cost.usd_spot
        return cost.wall_s / 3600.0, cost.usd_ondemand


def _plan(
    pricer: _Pricer, budget_usd: float, deadline_h: float | None, max_instances: int
) -> OptionPlan:
    trials = pricer.needs.geometry.trials
    instances, work, wall_h, usd = _at(pricer, 1, trials)
    if deadline_h is not None and wall_h > deadline_h:
        # More machines until the deadline holds, up to one trial per slot; past it, the
        # most we allow is the closest.
        most = min(max_instances, max(1, math.ceil(trials / pricer.slots)))
        if most > 1:
            instances, work, wall_h, usd = _fewest_in_time(pricer, trials, deadline_h, most)
    bought, bought_epochs = trials, work.trial_epochs
    if usd > budget_usd:
        bought, bought_epochs = 0, 0.0
        lo, hi = 1, trials - 1  # largest trial count whose cost fits the budget
        while lo <= hi:
            mid = (lo + hi) // 2
            part = pricer.work(instances, mid)
            if pricer.hours_usd(part, instances)[1] <= budget_usd:
                bought, bought_epochs, lo = mid, part.trial_epochs, mid + 1
            else:
                hi = mid - 1
    return OptionPlan(
        option=pricer.option,
        fits=True,
        instances=instances,
        workers=work.workers,
        wall_h=wall_h,
        usd=usd,
        gpu_h=work.gpu_h(pricer.needs.gpus_per_trial),
        meets_deadline=deadline_h is None or wall_h <= deadline_h,
        within_budget=usd <= budget_usd,
        trials_bought=bought,
        trial_epochs_bought=bought_epochs,
    )


# Machine counts tried one by one before the search doubles them (--max-instances is 8).
_SCAN = 32


def _at(pricer: _Pricer, instances: int, trials: int) -> tuple[int, WorkEstimate, float, float]:
    """The campaign on ``instances`` machines: the count, its work, hours and dollars."""
    work = pricer.work(instances, trials)
    return (instances, work, *pricer.hours_usd(work, instances))


def _fewest_in_time(
    pricer: _Pricer, trials: int, deadline_h: float, most: int
) -> tuple[int, WorkEstimate, float, float]:
    """The fewest machines, from 2 to ``most``, that finish by the deadline (or ``most``).

    Up to :data:`_SCAN` machines each count is tried in turn (the simulated wall time is
    not strictly falling, so the first count in time is the answer); beyond, counts double
    and then halve: :data:`_SCAN` plus twice log2(most) estimates, not ``most`` of them.
    """
    for k in range(2, min(most, _SCAN) + 1):  # most >= 2: found is set
        found = _at(pricer, k, trials)
        if found[2] <= deadline_h:
            return found
    missed, k = found[0], 2 * found[0]
    while found[2] > deadline_h and missed < most:
        found = _at(pricer, min(k, most), trials)
        if found[2] > deadline_h:
            missed, k = found[0], 2 * found[0]
    if found[2] > deadline_h:
        return found
    while found[0] - missed > 1:
        candidate = _at(pricer, (missed + found[0]) // 2, trials)
        if candidate[2] <= deadline_h:
            found = candidate
        else:
            missed = candidate[0]
    return found


def _pareto(plans: list[OptionPlan]) -> list[OptionPlan]:
    points = [(p.usd, p.wall_h) for p in plans if p.usd is not None and p.wall_h is not None]

    def dominated(p: OptionPlan) -> bool:
        usd, wall_h = p.usd or 0.0, p.wall_h or 0.0
        return any(u <= usd and h <= wall_h and (u < usd or h < wall_h) for u, h in points)

    return [dataclasses.replace(p, pareto=p.fits and not dominated(p)) if p.fits else p
            for p in plans]  # fmt: skip


def recommend(
    options: list[InstanceOption],
    needs: CampaignNeeds,
    *,
    budget_usd: float,
    deadline_h: float | None = None,
    spot: bool = False,
    spot_risk: SpotRisk | None = None,
    max_instances: int = 8,
    runs: int = 200,
    provision_s: float = 0.0,
) -> Recommendation:
    """Plans the campaign on every option and picks the cheapest and the fastest.

    Args:
        options: Instance types with predicted epoch times.
        needs: Campaign geometry, start-up seconds, GPUs and memory per trial.
        budget_usd: Dollars available.
        deadline_h: Wall-clock hours available; None for no deadline.
        spot: Price on spot (options without a spot price do not fit).
        spot_risk: Preemption model for spot.
        max_instances: Most machines of one type to rent to meet the deadline.
        runs: Simulated ASHA runs per estimate.
        provision_s: Billed seconds per machine before its first trial (boot, setup).

    Returns:
        One plan per option (input order), the Pareto front flagged, and the picks:
        cheapest done by the deadline, fastest within the budget (options within 2% of
        the fastest time count as equally fast; the cheaper of them is picked).

    Raises:
        ValueError: The budget, deadline or instance cap is out of range.
    """
    if budget_usd <= 0 or (deadline_h is not None and deadline_h <= 0) or max_instances < 1:
        raise ValueError(
            "`budget_usd > 0`, `deadline_h > 0` and `max_instances >= 1` must hold, but got "
            f"({budget_usd=}, {deadline_h=}, {max_instances=})."
        )
    plans = []
    for option in options:
        reason = _misfit(option, needs, spot)
        if reason:
            plans.append(OptionPlan(option=option, fits=False, reason=reason))
        else:
            pricer = _Pricer(option, needs, spot_risk, spot, runs, provision_s)
            plans.append(_plan(pricer, budget_usd, deadline_h, max_instances))
    plans = _pareto(plans)
    on_time = [p for p in plans if p.fits and p.meets_deadline]
    affordable = [p for p in plans if p.fits and p.within_budget]
    cheapest = min(on_time, key=lambda p: (p.usd, p.wall_h), default=None)
    fastest = min(affordable, key=lambda p: (p.wall_h, p.usd), default=None)
    if fastest is not None and fastest.wall_h is not None:
        # Within 2% of the fastest is a tie (provisioning, a cold start): take the cheaper.
        limit = fastest.wall_h * (1 + _FASTEST_TIE)
        fastest = min(
            (p for p in affordable if p.wall_h is not None and p.wall_h <= limit),
            key=lambda p: (p.usd, p.wall_h),
        )
    reference = estimate_work(needs.geometry, epoch_s=1.0, runs=runs)
    return Recommendation(
        trials=needs.geometry.trials,
        trial_epochs=reference.trial_epochs,
        budget_usd=budget_usd,
        deadline_h=deadline_h,
        spot=spot,
        plans=tuple(plans),
        cheapest_within_deadline=cheapest.option.name if cheapest else None,
        fastest_within_budget=fastest.option.name if fastest else None,
    )
