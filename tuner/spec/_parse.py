"""Validation of a campaign mapping into a :class:`CampaignSpec`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tuner.rundir import check_study_storage
from tuner.spec._campaign import (
    Budget,
    CampaignSpec,
    CheckpointPolicy,
    FailurePolicy,
    Pricing,
    Resources,
    SamplerSpec,
    SamplerType,
    SchedulerSpec,
    SchedulerType,
    default_min_peers,
)
from tuner.spec._checks import (
    Checker,
    check_campaign_name,
    check_seed,
    join,
)
from tuner.spec._durations import parse_duration
from tuner.spec._fields import SECTIONS
from tuner.spec._frozen import FrozenDict, freeze
from tuner.spec._limits import CAMPAIGN, MIN_REDUCTION_FACTOR, RESOURCE_UNIT, SIZES
from tuner.spec._objectives import (
    check_goal,
    check_sampler,
    check_warm_start,
    parse_objectives,
)
from tuner.spec._params import CategoricalParam, FloatParam, IntParam, Param, Space
from tuner.spec._parse_space import check_key_name, check_plain, parse_space
from tuner.spec._tracking import parse_tracking
from tuner.spec._trainable import check_trainable_ref, resolve_trainable
from tuner.spec._warm_start import parse_warm_start

_TOP_KEYS = SECTIONS[""].allowed
_REQUIRED = SECTIONS[""].required
# Samplers with a random start-up phase before the model kicks in.
_STARTUP_SAMPLERS = (SamplerType.TPE, SamplerType.GP, SamplerType.CMAES, SamplerType.NSGA2)


def parse_campaign(
    data: Mapping[str, Any], source: str = "<dict>", *, check_trainable: bool = True
) -> CampaignSpec:
    """Validate a campaign mapping (the parsed YAML) and build the spec.

    Args:
        data: The campaign in the file schema (see ``search_spaces/*.yaml``).
        source: Where it came from, used in error messages and kept on the spec.
        check_trainable: Also import the trainable to check it exists (for built-ins
            this imports torch); syntax and built-in names are checked regardless.

    Returns:
        The validated, frozen spec.

    Raises:
        SpecError: A rule ``data`` violates, naming the key path; with several,
            :class:`~tuner.errors.SpecErrors` listing each (every section and parameter is
            checked, and a check that needs a failed value is skipped).
    """
    ck = Checker(source)
    with ck.collecting():
        spec = _parse(ck, data)
    if check_trainable:
        # Last, because importing a trainable can take seconds (torch).
        resolve_trainable(spec.trainable, source=source, path="trainable")
    return spec


def _parse(ck: Checker, data: Any) -> CampaignSpec:
    """The spec; every section is checked even after one fails (see :class:`Checker`)."""
    data = ck.mapping(
        data, "", fix="a campaign file is a mapping with keys " + ", ".join(_REQUIRED)
    )
    ck.keys(data, "", _TOP_KEYS, _REQUIRED)
    parts: dict[str, Any] = {}
    each = ck.group()
    with each:
        parts["name"] = check_campaign_name(ck, ck.required(data, "name"), "name")
    with each:
        description = data.get("description")
        parts["description"] = (
            "" if description is None else ck.string(description, "description", nonempty=False)
        )
    with each:
        parts["trainable"] = check_trainable_ref(
            ck.required(data, "trainable"), source=ck.source, path="trainable"
        )
    with each:
        objectives = parse_objectives(ck, ck.required(data, "metric"), ck.required(data, "mode"))
        parts["metric"], parts["mode"] = objectives[0].metric, objectives[0].mode
        parts["objectives"] = objectives
    with each:
        parts["space"] = parse_space(ck, ck.required(data, "space"))
    with each:
        parts["budget"] = _parse_budget(ck, ck.required(data, "budget"))
        check_goal(ck, parts["budget"], parts.get("objectives"))
    with each:
        parts["scheduler"] = _parse_scheduler(ck, data.get("scheduler"), parts.get("budget"))
    with each:
        parts["sampler"] = _parse_sampler(ck, data.get("sampler"), parts.get("space"))
        check_sampler(ck, parts["sampler"], parts.get("objectives"))
    with each:
        parts["resources"] = _parse_resources(ck, data.get("resources"))
    with each:
        parts["checkpoint"] = _parse_checkpoint(ck, data.get("checkpoint"))
    with each:
        parts["failure"] = _parse_failure(ck, data.get("failure"))
    with each:
        parts["pricing"] = _parse_pricing(ck, data.get("pricing"))
    with each:
        store = data.get("study_storage")
        if store is not None:
            url = ck.string(store, "study_storage")
            where = {"source": ck.source, "path": "study_storage"}
            parts["study_storage"] = check_study_storage(url, **where)
    with each:
        if data.get("warm_start") is not None:
            budget = parts.get("budget")
            trials = budget.trials if budget is not None else None
            parts["warm_start"] = parse_warm_start(ck, data["warm_start"], trials)
            check_warm_start(ck, data["warm_start"], parts.get("objectives"))
    with each:
        if data.get("tracking") is not None:
            parts["tracking"] = parse_tracking(ck, data["tracking"])
    with each:
        space = data.get("space")
        names = list(space) if isinstance(space, Mapping) else []
        parts["fixed"] = _parse_fixed(ck, data.get("fixed"), names)
    each.close()
    return CampaignSpec(**parts, source=ck.source)


def _section(ck: Checker, value: Any, path: str) -> Mapping[str, Any]:
    """The section at ``path``, its keys checked against :data:`SECTIONS`; a bare string
    ``x`` is shorthand for ``{type: x}`` where the section allows it."""
    shape = SECTIONS[path]
    if value is None:
        value = {}
    elif isinstance(value, str) and shape.shorthand is not None:
        value = {shape.shorthand: value}
    section = ck.mapping(value, path)
    ck.keys(section, path, shape.allowed, shape.required)
    return section


def _parse_budget(ck: Checker, value: Any) -> Budget:
    section = _section(ck, value, "budget")

    def duration(key: str) -> float | None:
        raw = section.get(key)
        return None if raw is None else parse_duration(raw, source=ck.source, path=f"budget.{key}")

    def bounded(key: str) -> float | None:
        raw = section.get(key)
        path = f"budget.{key}"
        return None if raw is None else ck.number(raw, path, limit=CAMPAIGN[path])

    each = ck.group()
    with each:
        trials = ck.integer(
            ck.required(section, "trials"), "budget.trials", limit=CAMPAIGN["budget.trials"]
        )
    with each:
        max_epochs = ck.integer(
            ck.required(section, "max_epochs"),
            "budget.max_epochs",
            limit=CAMPAIGN["budget.max_epochs"],
        )
    with each:
        time_limit_s = duration("time_limit")
    with each:
        usd = bounded("usd")
    with each:
        gpu_hours = bounded("gpu_hours")
    with each:
        deadline_s = duration("deadline")
    with each:
        raw_goal = section.get("goal")
        if isinstance(raw_goal, list):  # one per objective (checked against them later)
            lim = CAMPAIGN["budget.goal"]
            goal: float | tuple[float, ...] | None = tuple(
                ck.number(v, f"budget.goal[{i}]", limit=lim) for i, v in enumerate(raw_goal)
            )
        else:
            goal = bounded("goal")
    each.close()
    return Budget(
        trials=trials,
        max_epochs=max_epochs,
        time_limit_s=time_limit_s,
        usd=usd,
        gpu_hours=gpu_hours,
        deadline_s=deadline_s,
        goal=goal,
    )


def _parse_pricing(ck: Checker, value: Any) -> Pricing:
    section = _section(ck, value, "pricing")
    each = ck.group()
    with each:
        path = "pricing.node_usd_per_hour"
        rate = ck.number(section.get("node_usd_per_hour", 0), path, limit=CAMPAIGN[path])
    with each:
        catalog = section.get("catalog")
        catalog = None if catalog is None else ck.string(catalog, "pricing.catalog")
    with each:
        spot = ck.boolean(section.get("spot", False), "pricing.spot")
    each.close()
    return Pricing(node_usd_per_hour=rate, catalog=catalog, spot=spot)


def _parse_scheduler(ck: Checker, value: Any, budget: Budget | None) -> SchedulerSpec:
    """The scheduler; ``budget`` None (it failed its own checks) skips the checks against it."""
    path = "scheduler"
    section = _section(ck, value, path)
    kind = ck.enum(section.get("type", "asha"), "scheduler.type", SchedulerType, "scheduler")
    if kind is SchedulerType.FIFO:
        each = ck.group()
        for key in section:
            if key != "type":
                with each:
                    ck.fail(
                        join(path, key),
                        "applies only to scheduler type asha",
                        got=section[key],
                        fix="remove it, or use scheduler type asha",
                    )
        each.close()
        return SchedulerSpec(type=kind)
    each = ck.group()
    with each:
        path = "scheduler.grace_period"
        grace = ck.integer(section.get("grace_period", 1), path, limit=CAMPAIGN[path])
        if budget is not None and grace > budget.max_epochs:
            ck.fail(
                "scheduler.grace_period",
                f"must be <= budget.max_epochs={budget.max_epochs}",
                got=grace,
                fix="ASHA first compares trials after grace_period epochs: "
                "lower it or raise budget.max_epochs",
            )
    with each:
        path = "scheduler.reduction_factor"
        factor = ck.number(section.get("reduction_factor", 3), path, limit=CAMPAIGN[path])
        if factor < MIN_REDUCTION_FACTOR:
            ck.fail(
                path,
                f"must be at least {MIN_REDUCTION_FACTOR:g}",
                got=section["reduction_factor"],
                fix="ASHA (Ray's too) makes log(max_epochs / grace_period) / "
                "log(reduction_factor) rungs: closer to 1 that is thousands",
            )
    with each:
        peers = None
        if "min_peers" in section:
            path = "scheduler.min_peers"
            peers = ck.integer(section["min_peers"], path, limit=CAMPAIGN[path])
    each.close()
    if peers is None:
        peers = default_min_peers(factor)
    return SchedulerSpec(type=kind, grace_period=grace, reduction_factor=factor, min_peers=peers)


def _parse_sampler(ck: Checker, value: Any, space: Space | None) -> SamplerSpec:
    """The sampler; ``space`` None (it failed its own checks) skips the grid's check of it."""
    section = _section(ck, value, "sampler")
    kind = ck.enum(section.get("type", "tpe"), "sampler.type", SamplerType, "sampler")
    each = ck.group()
    with each:
        startup = section.get("startup_trials")
        if startup is not None:
            path = "sampler.startup_trials"
            startup = ck.integer(startup, path, limit=CAMPAIGN[path])
            if kind not in _STARTUP_SAMPLERS:
                ck.fail(
                    "sampler.startup_trials",
                    f"does not apply to sampler {kind.value}",
                    got=startup,
                    allowed="with sampler " + ", ".join(s.value for s in _STARTUP_SAMPLERS),
                )
            if kind is SamplerType.NSGA2 and startup < 2:
                ck.fail(
                    "sampler.startup_trials",
                    "must be at least 2 for sampler nsga2 (it is the population size)",
                    got=startup,
                    fix="NSGA-II breeds each generation from the one before: use 2 or more",
                )
    if kind is SamplerType.GRID and space is not None:
        for param in space:
            if isinstance(param, FloatParam) and param.step is None:
                with each:
                    ck.fail(
                        join("space", param.name),
                        "the grid sampler needs finitely many values, but this float has no step",
                        fix="add a step to it, or use another sampler (tpe, random, qmc, ...)",
                    )
    if kind in (SamplerType.GRID, SamplerType.GP) and space is not None:
        with each:
            _check_listed_values(ck, kind, space)
    with each:
        seed = section.get("seed")
        seed = None if seed is None else check_seed(ck, seed, "sampler.seed")
    each.close()
    return SamplerSpec(type=kind, seed=seed, startup_trials=startup)


def _values(param: Param) -> int:
    """How many values a parameter takes (1 for a continuous float: it is not listed)."""
    if isinstance(param, IntParam):
        return (param.high - param.low) // param.step + 1
    if isinstance(param, FloatParam) and param.step is not None:
        return round((param.high - param.low) / param.step) + 1
    if isinstance(param, CategoricalParam):
        return len(param.choices)
    return 1


def _check_listed_values(ck: Checker, kind: SamplerType, space: Space) -> None:
    """Optuna's grid sampler lists every combination of values, and its GP sampler every
    value of each int and stepped parameter (categoricals aside): both are bounded."""
    if kind is SamplerType.GRID:
        limit, listed = SIZES["grid"], math.prod(_values(p) for p in space)
        what = f"the grid has {listed} points"
    else:
        limit = SIZES["gp_values"]
        listed = sum(
            _values(p)
            for p in space
            if isinstance(p, IntParam) or (isinstance(p, FloatParam) and p.step is not None)
        )
        what = f"the GP sampler would list {listed} values of int and stepped parameters"
    if listed > limit.high:
        ck.fail(
            "sampler.type",
            f"{what}; at most {limit.show(limit.high)} are allowed",
            got=kind.value,
            fix=f"{limit.reason}: use fewer values (a larger step, fewer choices) or another "
            "sampler",
        )


def _parse_resources(ck: Checker, value: Any) -> Resources:
    section = _section(ck, value, "resources")
    each = ck.group()
    with each:
        gpu = ck.number(section.get("gpu", 0), "resources.gpu", limit=CAMPAIGN["resources.gpu"])
        _check_resource_unit(ck, gpu, "resources.gpu")
        if gpu > 1 and not gpu.is_integer():
            ck.fail(
                "resources.gpu",
                "must be a whole number above 1 (fractions share one GPU)",
                got=section["gpu"],
            )
    with each:
        path = "resources.workers"
        workers = ck.integer(section.get("workers", 1), path, limit=CAMPAIGN[path])
    with each:
        if not each.failed and workers > 1 and not gpu.is_integer():
            ck.fail(
                "resources.gpu",
                "must be a whole number when resources.workers > 1 (each DDP worker owns its GPUs)",
                got=section["gpu"],
            )
    with each:
        cpu = ck.number(section.get("cpu", 1), "resources.cpu", limit=CAMPAIGN["resources.cpu"])
        _check_resource_unit(ck, cpu, "resources.cpu")
    with each:
        concurrent = section.get("max_concurrent")
        if concurrent is not None:
            path = "resources.max_concurrent"
            concurrent = ck.integer(concurrent, path, limit=CAMPAIGN[path])
    with each:
        pending = parse_duration(
            section.get("pending_warning", 300), source=ck.source, path="resources.pending_warning"
        )
    each.close()
    return Resources(
        workers=workers, cpu=cpu, gpu=gpu, max_concurrent=concurrent, pending_warning_s=pending
    )


def _check_resource_unit(ck: Checker, value: float, path: str) -> None:
    """Ray counts CPUs and GPUs in units of 0.0001: a smaller request is none at all."""
    if 0 < value < RESOURCE_UNIT:
        ck.fail(
            path,
            f"must be 0 or at least {RESOURCE_UNIT:g}",
            got=value,
            fix=f"Ray counts CPUs and GPUs in units of {RESOURCE_UNIT:g}",
        )


def _parse_checkpoint(ck: Checker, value: Any) -> CheckpointPolicy:
    section = _section(ck, value, "checkpoint")
    each = ck.group()
    with each:
        every = ck.integer(
            section.get("every", 1), "checkpoint.every", limit=CAMPAIGN["checkpoint.every"]
        )
    with each:
        keep = ck.integer(
            section.get("keep", 2), "checkpoint.keep", limit=CAMPAIGN["checkpoint.keep"]
        )
    each.close()
    return CheckpointPolicy(every=every, keep=keep)


def _parse_failure(ck: Checker, value: Any) -> FailurePolicy:
    section = _section(ck, value, "failure")
    each = ck.group()
    with each:
        limit = section.get("max_failed_trials")
        if limit is not None and (type(limit) is not int or limit < 0):
            ck.fail(
                "failure.max_failed_trials",
                "must be an integer >= 0",
                got=limit,
                fix="the number of failed trials the campaign tolerates (0: it stops at the "
                "first); leave it out for no limit",
            )
        if limit is not None:
            ck.at_most(limit, "failure.max_failed_trials", CAMPAIGN["failure.max_failed_trials"])
    with each:
        path = "failure.max_retries"
        retries = ck.integer(section.get("max_retries", 2), path, limit=CAMPAIGN[path])
    each.close()
    return FailurePolicy(max_retries=retries, max_failed_trials=limit)


def _parse_fixed(ck: Checker, value: Any, space_names: list[str]) -> FrozenDict:
    section = ck.mapping({} if value is None else value, "fixed")
    each = ck.group()
    for key, item in section.items():
        path = join("fixed", key)
        with each:
            check_key_name(ck, key, path, "fixed key")
            if key in space_names:
                ck.fail(
                    path,
                    "is also a parameter in space",
                    fix="keep it in one place: remove it from fixed, or from space",
                )
            check_plain(ck, item, path)
    each.close()
    return FrozenDict({key: freeze(item) for key, item in section.items()})
