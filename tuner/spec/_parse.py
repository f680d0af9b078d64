"""Validation of a campaign mapping into a :class:`CampaignSpec`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tuner.spec._campaign import (
    Budget,
    CampaignSpec,
    CheckpointPolicy,
    FailurePolicy,
    Mode,
    Pricing,
    Resources,
    SamplerSpec,
    SamplerType,
    SchedulerSpec,
    SchedulerType,
    default_min_peers,
)
from tuner.spec._checks import (
    RESERVED_PREFIX,
    Checker,
    check_campaign_name,
    check_seed,
    join,
)
from tuner.spec._durations import parse_duration
from tuner.spec._frozen import FrozenDict, freeze
from tuner.spec._params import FloatParam, Space
from tuner.spec._parse_space import check_key_name, check_plain, parse_space
from tuner.spec._trainable import check_trainable_ref, resolve_trainable

_TOP_KEYS = (
    "name",
    "description",
    "trainable",
    "metric",
    "mode",
    "space",
    "budget",
    "scheduler",
    "sampler",
    "resources",
    "checkpoint",
    "failure",
    "pricing",
    "fixed",
)
_REQUIRED = ("name", "trainable", "metric", "mode", "space", "budget")
# Samplers with a random start-up phase before the model kicks in.
_STARTUP_SAMPLERS = (SamplerType.TPE, SamplerType.GP, SamplerType.CMAES)


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
        SpecError: The first rule ``data`` violates, naming the key path.
    """
    ck = Checker(source)
    data = ck.mapping(
        data, "", fix="a campaign file is a mapping with keys " + ", ".join(_REQUIRED)
    )
    ck.keys(data, "", _TOP_KEYS, _REQUIRED)
    name = check_campaign_name(ck, data["name"], "name")
    description = data.get("description")
    description = (
        "" if description is None else ck.string(description, "description", nonempty=False)
    )
    trainable = check_trainable_ref(data["trainable"], source=source, path="trainable")
    metric = ck.string(data["metric"], "metric")
    if metric.startswith(RESERVED_PREFIX):
        ck.fail(
            "metric",
            f"must not start with the reserved prefix {RESERVED_PREFIX!r}",
            got=metric,
            fix=f"optimize a metric your trainable reports; {RESERVED_PREFIX!r} metrics are the "
            "service's",
        )
    mode = ck.enum(
        data["mode"], "mode", Mode, "mode", fix=f"min to minimize {metric}, max to maximize it"
    )
    space = parse_space(ck, data["space"])
    budget = _parse_budget(ck, data["budget"])
    spec = CampaignSpec(
        name=name,
        trainable=trainable,
        metric=metric,
        mode=mode,
        space=space,
        budget=budget,
        scheduler=_parse_scheduler(ck, data.get("scheduler"), budget),
        sampler=_parse_sampler(ck, data.get("sampler"), space),
        resources=_parse_resources(ck, data.get("resources")),
        checkpoint=_parse_checkpoint(ck, data.get("checkpoint")),
        failure=_parse_failure(ck, data.get("failure")),
        pricing=_parse_pricing(ck, data.get("pricing")),
        fixed=_parse_fixed(ck, data.get("fixed"), space),
        description=description,
        source=source,
    )
    if check_trainable:
        # Last, because importing a trainable can take seconds (torch).
        resolve_trainable(trainable, source=source, path="trainable")
    return spec


def _section(
    ck: Checker, value: Any, path: str, allowed: tuple[str, ...], required: tuple[str, ...] = ()
) -> Mapping[str, Any]:
    """An optional section; a bare string ``x`` is shorthand for ``{type: x}``."""
    if value is None:
        value = {}
    elif isinstance(value, str) and "type" in allowed:
        value = {"type": value}
    section = ck.mapping(value, path)
    ck.keys(section, path, allowed, required)
    return section


def _parse_budget(ck: Checker, value: Any) -> Budget:
    allowed = ("trials", "max_epochs", "time_limit", "usd", "gpu_hours", "deadline")
    section = _section(ck, value, "budget", allowed, required=("trials", "max_epochs"))

    def duration(key: str) -> float | None:
        raw = section.get(key)
        return None if raw is None else parse_duration(raw, source=ck.source, path=f"budget.{key}")

    def positive(key: str) -> float | None:
        raw = section.get(key)
        return None if raw is None else ck.number(raw, f"budget.{key}", gt=0)

    return Budget(
        trials=ck.integer(section["trials"], "budget.trials", ge=1),
        max_epochs=ck.integer(section["max_epochs"], "budget.max_epochs", ge=1),
        time_limit_s=duration("time_limit"),
        usd=positive("usd"),
        gpu_hours=positive("gpu_hours"),
        deadline_s=duration("deadline"),
    )


def _parse_pricing(ck: Checker, value: Any) -> Pricing:
    section = _section(ck, value, "pricing", ("node_usd_per_hour", "catalog", "spot"))
    catalog = section.get("catalog")
    return Pricing(
        node_usd_per_hour=ck.number(
            section.get("node_usd_per_hour", 0), "pricing.node_usd_per_hour", ge=0
        ),
        catalog=None if catalog is None else ck.string(catalog, "pricing.catalog"),
        spot=ck.boolean(section.get("spot", False), "pricing.spot"),
    )


def _parse_scheduler(ck: Checker, value: Any, budget: Budget) -> SchedulerSpec:
    path = "scheduler"
    section = _section(ck, value, path, ("type", "grace_period", "reduction_factor", "min_peers"))
    kind = ck.enum(section.get("type", "asha"), "scheduler.type", SchedulerType, "scheduler")
    if kind is SchedulerType.FIFO:
        for key in section:
            if key != "type":
                ck.fail(
                    join(path, key),
                    "applies only to scheduler type asha",
                    got=section[key],
                    fix="remove it, or use scheduler type asha",
                )
        return SchedulerSpec(type=kind)
    grace = ck.integer(section.get("grace_period", 1), "scheduler.grace_period", ge=1)
    if grace > budget.max_epochs:
        ck.fail(
            "scheduler.grace_period",
            f"must be <= budget.max_epochs={budget.max_epochs}",
            got=grace,
            fix="ASHA first compares trials after grace_period epochs: "
            "lower it or raise budget.max_epochs",
        )
    factor = ck.number(section.get("reduction_factor", 3), "scheduler.reduction_factor", gt=1)
    peers = ck.integer(
        section.get("min_peers", default_min_peers(factor)), "scheduler.min_peers", ge=0
    )
    return SchedulerSpec(type=kind, grace_period=grace, reduction_factor=factor, min_peers=peers)


def _parse_sampler(ck: Checker, value: Any, space: Space) -> SamplerSpec:
    section = _section(ck, value, "sampler", ("type", "seed", "startup_trials"))
    kind = ck.enum(section.get("type", "tpe"), "sampler.type", SamplerType, "sampler")
    seed = section.get("seed")
    startup = section.get("startup_trials")
    if startup is not None:
        startup = ck.integer(startup, "sampler.startup_trials", ge=0)
        if kind not in _STARTUP_SAMPLERS:
            ck.fail(
                "sampler.startup_trials",
                f"does not apply to sampler {kind.value}",
                got=startup,
                allowed="with sampler " + ", ".join(s.value for s in _STARTUP_SAMPLERS),
            )
    if kind is SamplerType.GRID:
        for param in space:
            if isinstance(param, FloatParam) and param.step is None:
                ck.fail(
                    join("space", param.name),
                    "the grid sampler needs finitely many values, but this float has no step",
                    fix="add a step to it, or use another sampler (tpe, random, qmc, ...)",
                )
    return SamplerSpec(
        type=kind,
        seed=None if seed is None else check_seed(ck, seed, "sampler.seed"),
        startup_trials=startup,
    )


def _parse_resources(ck: Checker, value: Any) -> Resources:
    allowed = ("cpu", "gpu", "max_concurrent", "workers", "pending_warning")
    section = _section(ck, value, "resources", allowed)
    gpu = ck.number(section.get("gpu", 0), "resources.gpu", ge=0)
    if gpu > 1 and not gpu.is_integer():
        ck.fail(
            "resources.gpu",
            "must be a whole number above 1 (fractions share one GPU)",
            got=section["gpu"],
        )
    concurrent = section.get("max_concurrent")
    workers = ck.integer(section.get("workers", 1), "resources.workers", ge=1)
    if workers > 1 and not gpu.is_integer():
        ck.fail(
            "resources.gpu",
            "must be a whole number when resources.workers > 1 (each DDP worker owns its GPUs)",
            got=section["gpu"],
        )
    return Resources(
        workers=workers,
        cpu=ck.number(section.get("cpu", 1), "resources.cpu", gt=0),
        gpu=gpu,
        max_concurrent=None
        if concurrent is None
        else ck.integer(concurrent, "resources.max_concurrent", ge=1),
        pending_warning_s=parse_duration(
            section.get("pending_warning", 300), source=ck.source, path="resources.pending_warning"
        ),
    )


def _parse_checkpoint(ck: Checker, value: Any) -> CheckpointPolicy:
    section = _section(ck, value, "checkpoint", ("every", "keep"))
    return CheckpointPolicy(
        every=ck.integer(section.get("every", 1), "checkpoint.every", ge=1),
        keep=ck.integer(section.get("keep", 2), "checkpoint.keep", ge=1),
    )


def _parse_failure(ck: Checker, value: Any) -> FailurePolicy:
    section = _section(ck, value, "failure", ("max_retries", "max_failed_trials"))
    limit = section.get("max_failed_trials")
    if limit is not None and (type(limit) is not int or limit < 0):
        ck.fail(
            "failure.max_failed_trials",
            "must be an integer >= 0",
            got=limit,
            fix="the number of failed trials the campaign tolerates (0: it stops at the "
            "first); leave it out for no limit",
        )
    return FailurePolicy(
        max_retries=ck.integer(section.get("max_retries", 2), "failure.max_retries", ge=0),
        max_failed_trials=limit,
    )


def _parse_fixed(ck: Checker, value: Any, space: Space) -> FrozenDict:
    section = ck.mapping({} if value is None else value, "fixed")
    for key, item in section.items():
        path = join("fixed", key)
        check_key_name(ck, key, path, "fixed key")
        if key in space:
            ck.fail(
                path,
                "is also a parameter in space",
                fix="keep it in one place: remove it from fixed, or from space",
            )
        check_plain(ck, item, path)
    return FrozenDict({key: freeze(item) for key, item in section.items()})
