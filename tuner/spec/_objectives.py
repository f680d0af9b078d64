"""The campaign's objectives: ``metric``/``mode`` as one name or as lists (multi-objective).

``metric: val_acc`` with ``mode: max`` is one objective. ``metric: [val_acc, param_count]``
with ``mode: [max, min]`` is two: the campaign then looks for the Pareto front (trials no
other trial beats on every metric at once). ``mode`` must then be a list of the same
length, one mode per metric, so that a reader never has to guess which mode goes with which
metric. The checks against the rest of the file (``budget.goal``, ``sampler.type``) live
here too, so the parser only calls them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tuner.spec._campaign import Budget, Mode, Objective, SamplerSpec, SamplerType
from tuner.spec._checks import RESERVED_PREFIX, Checker
from tuner.spec._limits import SIZES

__all__ = ["MO_SAMPLERS", "check_goal", "check_sampler", "check_warm_start", "parse_objectives"]

# Samplers that handle several objectives (CMA-ES raises on a multi-objective study).
MO_SAMPLERS = (
    SamplerType.TPE,
    SamplerType.NSGA2,
    SamplerType.RANDOM,
    SamplerType.GP,
    SamplerType.QMC,
    SamplerType.GRID,
)
_MODE_FIX = "min to minimize {metric}, max to maximize it"


def parse_objectives(ck: Checker, metric: Any, mode: Any) -> tuple[Objective, ...]:
    """``metric`` and ``mode`` as the campaign file gives them, checked: one objective, or
    2 to 4 distinct metrics with a list of as many modes."""
    if not isinstance(metric, list):
        name = _metric_name(ck, metric, "metric")
        if isinstance(mode, list):
            ck.fail(
                "mode",
                "is a list, but metric names one metric",
                got=mode,
                allowed="min, max",
                fix=f"write mode: max (or min) for {name}; for several objectives make metric "
                "a list too, e.g. metric: [val_acc, param_count] with mode: [max, min]",
            )
        return (Objective(name, ck.enum(mode, "mode", Mode, "mode", fix=_mode_fix(name))),)
    limit = SIZES["objectives"]
    if not limit.low <= len(metric) <= limit.high:
        ck.fail(
            "metric",
            f"lists {len(metric)} metric(s); a multi-objective campaign has "
            f"{limit.show(limit.low)} to {limit.show(limit.high)}",
            got=metric,
            fix=limit.reason
            if len(metric) > limit.high
            else "for one objective write metric: <name> (not a list)",
        )
    names: list[str] = []
    each = ck.group()
    for i, item in enumerate(metric):
        with each:
            name = _metric_name(ck, item, f"metric[{i}]")
            if name in names:
                ck.fail(
                    f"metric[{i}]",
                    f"repeats metric[{names.index(name)}]",
                    got=name,
                    fix="list each metric once",
                )
            names.append(name)
    each.close()
    if not isinstance(mode, list):
        ck.fail(
            "mode",
            f"must be a list of {len(names)} modes, one per metric ({', '.join(names)})",
            got=mode,
            allowed="a list of min and max",
            fix=f"e.g. mode: [{', '.join(['max'] + ['min'] * (len(names) - 1))}]",
        )
    if len(mode) != len(names):
        ck.fail(
            "mode",
            f"lists {len(mode)} mode(s) for {len(names)} metrics ({', '.join(names)})",
            got=mode,
            fix="give one mode (min or max) per metric, in the same order",
        )
    modes: list[Mode] = []
    each = ck.group()
    for i, (item, name) in enumerate(zip(mode, names, strict=True)):
        with each:
            modes.append(ck.enum(item, f"mode[{i}]", Mode, "mode", fix=_mode_fix(name)))
    each.close()
    return tuple(Objective(n, m) for n, m in zip(names, modes, strict=True))


def _mode_fix(metric: str) -> str:
    return _MODE_FIX.format(metric=metric)


def _metric_name(ck: Checker, value: Any, path: str) -> str:
    metric = ck.string(value, path, limit=SIZES["name"])
    if metric.startswith(RESERVED_PREFIX):
        ck.fail(
            path,
            f"must not start with the reserved prefix {RESERVED_PREFIX!r}",
            got=metric,
            fix=f"optimize a metric your trainable reports; {RESERVED_PREFIX!r} metrics are the "
            "service's",
        )
    return metric


def check_goal(ck: Checker, budget: Budget, objectives: Sequence[Objective] | None) -> None:
    """``budget.goal``: one value for one objective; a list of one value per objective for
    several (a result must meet them all)."""
    goal = budget.goal
    if goal is None or objectives is None:
        return
    names = ", ".join(o.metric for o in objectives)
    if len(objectives) < 2 and isinstance(goal, tuple):
        ck.fail(
            "budget.goal",
            f"is a list, but the campaign has one objective ({names})",
            got=list(goal),
            fix=f"write one value, e.g. goal: {goal[0]:g}" if goal else "write one value",
        )
    if len(objectives) >= 2 and not isinstance(goal, tuple):
        ck.fail(
            "budget.goal",
            f"is one value, but the campaign has {len(objectives)} objectives ({names})",
            got=goal,
            fix=f"give one value per objective, in their order ({names}), e.g. goal: "
            f"[{', '.join(['...'] * len(objectives))}]: one result must meet them all",
        )
    if isinstance(goal, tuple) and len(goal) != len(objectives):
        ck.fail(
            "budget.goal",
            f"lists {len(goal)} value(s) for {len(objectives)} objectives ({names})",
            got=list(goal),
            fix="give one value per objective, in the same order",
        )


def check_sampler(
    ck: Checker, sampler: SamplerSpec, objectives: Sequence[Objective] | None
) -> None:
    """The sampler must handle the campaign's objectives (CMA-ES takes only one)."""
    if objectives is None or len(objectives) < 2 or sampler.type in MO_SAMPLERS:
        return
    ck.fail(
        "sampler.type",
        f"sampler {sampler.type.value} optimizes one objective; this campaign has "
        f"{len(objectives)}",
        got=sampler.type.value,
        allowed=[s.value for s in MO_SAMPLERS],
        fix="use tpe (the default) or nsga2 for several objectives",
    )


def check_warm_start(ck: Checker, warm: Any, objectives: Sequence[Objective] | None) -> None:
    """Warm starts seed one objective's values: a multi-objective campaign starts cold."""
    if objectives is None or len(objectives) < 2:
        return
    ck.fail(
        "warm_start",
        f"applies to single-objective campaigns; this one has {len(objectives)} objectives",
        got=warm,
        fix="remove warm_start (multi-objective warm starts are not supported yet)",
    )
