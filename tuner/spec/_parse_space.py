"""Validation of the ``space:`` section into a :class:`Space`."""

from __future__ import annotations

import dataclasses
import datetime
import math
import re
from collections.abc import Mapping
from typing import Any

from tuner.errors import closest
from tuner.spec._checks import RESERVED_PREFIX, Checker, Skipped, join
from tuner.spec._fields import PARAM_KEYS
from tuner.spec._frozen import freeze
from tuner.spec._limits import CAMPAIGN, SIZES
from tuner.spec._params import (
    CategoricalParam,
    Condition,
    FixedParam,
    FloatParam,
    IntParam,
    Param,
    Space,
)

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SCALAR_TYPES = (str, int, float, bool, type(None))

_KEYS = PARAM_KEYS
# Range ends and steps of int and float parameters.
_BOUND = CAMPAIGN["space.*.low"]
_STEP = CAMPAIGN["space.*.step"]
_PARAM_FIX = (
    "write {type: float, low: ..., high: ...}, {type: int, low: ..., high: ...}, "
    "{choices: [...]} or {value: ...}"
)


def check_key_name(ck: Checker, name: Any, path: str, what: str) -> str:
    """A parameter or fixed-config name: an identifier without the reserved prefix."""
    if not isinstance(name, str) or not IDENTIFIER.fullmatch(name):
        ck.fail(
            path,
            f"{what} names must be identifiers (letters, digits, '_'; not starting with a digit)",
            got=name,
        )
    if name.startswith(RESERVED_PREFIX):
        ck.fail(
            path,
            f"{what} names must not start with the reserved prefix {RESERVED_PREFIX!r}",
            got=name,
            fix=f"rename it; keys starting with {RESERVED_PREFIX!r} are added by the service "
            "itself",
        )
    ck.size(len(name), path, SIZES["name"], "characters")
    return name


def parse_space(ck: Checker, value: Any, path: str = "space") -> Space:
    """Validate the ``space:`` mapping; returns parameters in topological order.

    Each parameter is checked even after another failed; a condition on a parameter that
    failed its own checks is skipped.
    """
    with ck.collecting():
        space = _parse_space(ck, value, path)
    return space


def _parse_space(ck: Checker, value: Any, path: str) -> Space:
    data = ck.mapping(value, path, fix=_PARAM_FIX)
    if not data:
        ck.fail(path, "must define at least one parameter", fix=_PARAM_FIX)
    ck.size(len(data), path, SIZES["space"], "parameters")
    params: dict[str, Param] = {}
    raw_when: dict[str, Any] = {}
    each = ck.group()
    for name, spec in data.items():
        ppath = join(path, name)
        with each:
            check_key_name(ck, name, ppath, "parameter")
            params[name] = _parse_param(ck, name, spec, ppath)
            if spec.get("when") is not None:
                raw_when[name] = spec["when"]
    for name, when in raw_when.items():
        with each:
            conditions = _parse_when(
                ck,
                name,
                when,
                join(join(path, name), "when"),
                params,
                failed=set(data) - set(params),
            )
            params[name] = dataclasses.replace(params[name], when=conditions)
    each.close()
    return Space(_topological(ck, path, list(params.values())))


def _param_kind(ck: Checker, spec: Mapping[str, Any], path: str) -> str:
    if "type" in spec:
        kind = spec["type"]
        if not isinstance(kind, str) or kind not in _KEYS:
            ck.fail(
                join(path, "type"),
                "unknown parameter type",
                got=kind,
                allowed=list(_KEYS),
                suggestion=closest(kind, _KEYS) if isinstance(kind, str) else None,
            )
        return str(kind)
    if "value" in spec:
        return "fixed"
    if "choices" in spec:
        return "categorical"
    if "low" in spec or "high" in spec:
        ck.fail(
            join(path, "type"),
            "a range needs an explicit type",
            allowed="float, int",
            fix="add type: float or type: int",
        )
    ck.fail(path, "cannot tell the parameter type", fix=_PARAM_FIX)


def _parse_param(ck: Checker, name: str, spec: Any, path: str) -> Param:
    spec = ck.mapping(spec, path, fix=f"{_PARAM_FIX}; constants may also go under fixed:")
    kind = _param_kind(ck, spec, path)
    allowed = _KEYS[kind]
    for key in spec:
        if key not in allowed:
            applies = any(key in keys for keys in _KEYS.values())
            ck.fail(
                join(path, key),
                f"does not apply to a {kind} parameter" if applies else "unknown key",
                allowed=allowed,
                suggestion=None if applies else closest(key, allowed),
            )
    if kind == "fixed":
        if "value" not in spec:
            ck.fail(join(path, "value"), "required key is missing")
        return FixedParam(name, freeze(check_plain(ck, spec["value"], join(path, "value"))))
    if kind == "categorical":
        return CategoricalParam(name, _parse_choices(ck, spec, join(path, "choices")))
    for key in ("low", "high"):
        if key not in spec:
            ck.fail(join(path, key), "required key is missing")
    log = ck.boolean(spec["log"], join(path, "log")) if "log" in spec else False
    if kind == "float":
        return _parse_float(ck, name, spec, path, log)
    return _parse_int(ck, name, spec, path, log)


def _parse_float(
    ck: Checker, name: str, spec: Mapping[str, Any], path: str, log: bool
) -> FloatParam:
    low = ck.number(spec["low"], join(path, "low"))
    high = ck.number(spec["high"], join(path, "high"))
    for key, value in (("low", low), ("high", high)):
        ck.at_most(value, join(path, key), _BOUND)
        if value < _BOUND.low:
            _below(ck, join(path, key), spec[key])
    if high <= low:
        ck.fail(join(path, "high"), f"must be greater than low={low:g}", got=spec["high"])
    if log and low <= 0:
        ck.fail(
            join(path, "low"),
            "must be > 0 with log: true",
            got=spec["low"],
            fix="use a positive low such as 1.0e-5, or drop log: true",
        )
    step = None
    if spec.get("step") is not None:
        step = ck.number(spec["step"], join(path, "step"), gt=0, limit=_STEP)
        if log:
            ck.fail(join(path, "step"), "cannot be combined with log: true", got=spec["step"])
        ratio = (high - low) / step
        if not math.isfinite(ratio) or ratio > SIZES["steps"].high:
            ck.fail(
                join(path, "step"),
                f"is too small for high - low = {high - low:g} (more than 2**53 grid points)",
                got=spec["step"],
                fix="use a larger step, or drop step for a continuous range: "
                + SIZES["steps"].reason,
            )
        if abs(ratio - round(ratio)) > 1e-9 * max(1.0, ratio):
            ck.fail(
                join(path, "step"),
                f"must divide high - low = {high - low:g} evenly",
                got=spec["step"],
                fix=f"set high to {low + math.floor(ratio) * step:g} or change step",
            )
    return FloatParam(name, low, high, log=log, step=step)


def _below(ck: Checker, path: str, value: Any) -> None:
    """Fails for a range end below -2**53 (the bound's low), with the reason."""
    ck.fail(
        path,
        f"must be at least {_BOUND.show(_BOUND.low)}",
        got=value,
        fix=f"use at least {_BOUND.show(_BOUND.low)}: {_BOUND.reason}",
    )


def _parse_int(ck: Checker, name: str, spec: Mapping[str, Any], path: str, log: bool) -> IntParam:
    low = ck.integer(spec["low"], join(path, "low"))
    high = ck.integer(spec["high"], join(path, "high"))
    for key, value in (("low", low), ("high", high)):
        ck.at_most(value, join(path, key), _BOUND)
        if value < _BOUND.low:
            _below(ck, join(path, key), value)
    if high <= low:
        ck.fail(join(path, "high"), f"must be greater than low={low}", got=high)
    if log and low < 1:
        ck.fail(join(path, "low"), "must be >= 1 with log: true", got=low)
    step = 1
    if spec.get("step") is not None:
        step = ck.integer(spec["step"], join(path, "step"), ge=1, limit=_STEP)
        if log and step != 1:
            ck.fail(join(path, "step"), "must be 1 with log: true", got=step)
        if (high - low) % step:
            ck.fail(
                join(path, "step"),
                f"must divide high - low = {high - low} evenly",
                got=step,
                fix=f"set high to {low + (high - low) // step * step} or change step",
            )
    return IntParam(name, low, high, log=log, step=step)


def _parse_choices(ck: Checker, spec: Mapping[str, Any], path: str) -> tuple[Any, ...]:
    choices = spec.get("choices")
    if not isinstance(choices, list | tuple) or not choices:
        ck.fail(path, "must be a non-empty list", got=choices)
    ck.size(len(choices), path, SIZES["space.*.choices"], "choices")
    seen: set[Any] = set()
    for i, choice in enumerate(choices):
        if not isinstance(choice, SCALAR_TYPES) or (
            isinstance(choice, float) and math.isnan(choice)
        ):
            ck.fail(f"{path}[{i}]", "must be a string, number, boolean or null", got=choice)
        if isinstance(choice, str):
            ck.size(len(choice), f"{path}[{i}]", SIZES["text"], "characters", got=choice)
        # Optuna finds a choice by ==, where True == 1 == 1.0: such choices collide (a set
        # finds them by == too, in one pass over the list).
        if choice in seen:
            earlier = next(e for e in choices[:i] if e == choice)
            ck.fail(f"{path}[{i}]", f"duplicates the choice {earlier!r}", got=choice)
        seen.add(choice)
    return tuple(choices)


def check_plain(ck: Checker, value: Any, path: str) -> Any:
    """A YAML-able value: scalars, dates, lists and string-keyed mappings of them, nested
    at most ``SIZES["depth"]`` deep, with strings of at most ``SIZES["text"]`` characters."""
    depth = SIZES["depth"]
    if _nesting(value, int(depth.high) + 1) > depth.high:
        ck.fail(
            path,
            f"is nested more than {depth.show(depth.high)} levels deep",
            fix=depth.reason,
        )
    return _check_plain(ck, value, path)


def _nesting(value: Any, cap: int) -> int:
    """How deep lists and mappings nest in ``value`` (counted up to ``cap``), iteratively."""
    deepest, stack = 0, [(value, 0)]
    while stack and deepest < cap:
        item, level = stack.pop()
        children = item.values() if isinstance(item, Mapping) else item
        if isinstance(item, Mapping | list | tuple):
            deepest = max(deepest, level + 1)
            stack.extend((child, level + 1) for child in children)
    return deepest


def _check_plain(ck: Checker, value: Any, path: str) -> Any:
    if isinstance(value, str):
        ck.size(len(value), path, SIZES["text"], "characters", got=value)
    if isinstance(value, (*SCALAR_TYPES, datetime.date)):
        return value
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _check_plain(ck, item, f"{path}[{i}]")
        return value
    if isinstance(value, Mapping):
        for key, item in ck.mapping(value, path).items():
            _check_plain(ck, item, join(path, key))
        return value
    ck.fail(path, "must be a YAML scalar, list or mapping", got=value)


def _describe(param: Param) -> str:
    if isinstance(param, CategoricalParam):
        return ", ".join(repr(c) for c in param.choices)
    if isinstance(param, IntParam):
        steps = f" in steps of {param.step}" if param.step != 1 else ""
        return f"integers {param.low}..{param.high}{steps}"
    if isinstance(param, FixedParam):
        return repr(param.value)
    return "a float range"


def _parse_when(
    ck: Checker,
    name: str,
    when: Any,
    path: str,
    params: Mapping[str, Param],
    *,
    failed: set[Any],
) -> tuple[Condition, ...]:
    """The conditions of ``name``; ``failed`` are parameters that failed their own checks."""
    conditions = []
    for parent_name, raw in ck.mapping(when, path).items():
        cpath = join(path, parent_name)
        if parent_name == name:
            ck.fail(cpath, "a parameter cannot depend on itself")
        if parent_name in failed:
            raise Skipped
        if parent_name not in params:
            others = [n for n in params if n != name]
            ck.fail(
                cpath,
                f"unknown parameter {parent_name!r}",
                allowed=others,
                suggestion=closest(parent_name, others),
            )
        parent = params[parent_name]
        if isinstance(parent, FloatParam):
            ck.fail(
                cpath,
                f"cannot depend on float parameter {parent_name!r}",
                fix="condition on a categorical, int or fixed parameter",
            )
        values = list(raw) if isinstance(raw, list | tuple) else [raw]
        if not values:
            ck.fail(cpath, "must list at least one value", got=raw)
        for value in values:
            if not isinstance(value, SCALAR_TYPES) or not parent.contains(value):
                ck.fail(
                    cpath,
                    f"not a value {parent_name!r} can take",
                    got=value,
                    allowed=_describe(parent),
                )
        conditions.append(Condition(parent_name, tuple(values)))
    return tuple(conditions)


def _topological(ck: Checker, path: str, params: list[Param]) -> tuple[Param, ...]:
    """Parents before children; otherwise file order. Fails on a cycle."""
    placed: list[Param] = []
    placed_names: set[str] = set()
    remaining = list(params)
    while remaining:
        for param in remaining:
            if all(c.parent in placed_names for c in param.when):
                placed.append(param)
                placed_names.add(param.name)
                remaining.remove(param)
                break
        else:
            cycle = _find_cycle({p.name: [c.parent for c in p.when] for p in remaining})
            ck.fail(
                join(join(path, cycle[0]), "when"),
                "conditions form a cycle: " + " -> ".join(cycle),
                fix="remove one of the when: conditions in the cycle",
            )
    return tuple(placed)


def _find_cycle(deps: Mapping[str, list[str]]) -> list[str]:
    """A cycle in ``deps`` (every node has an unplaced parent, so one exists)."""
    node = next(iter(deps))
    seen: list[str] = []
    while node not in seen:
        seen.append(node)
        node = next(parent for parent in deps[node] if parent in deps)
    return [*seen[seen.index(node) :], node]
