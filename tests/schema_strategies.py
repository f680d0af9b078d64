"""Hypothesis strategies that build inputs from tuner's own field definitions.

Campaigns come from the bounds table (:mod:`tuner.spec._limits`: each numeric field's range)
and the spec's enums (:class:`Mode`, :class:`SchedulerType`, :class:`SamplerType`); catalogs
and profiles from the table's ``CATALOG`` and ``PROFILE`` parts; flags from ``FLAGS``. Each
strategy draws a valid input together with its leaves (the fields it holds, with their
kind and limit), and :func:`mutate` changes one leaf: a wrong type, a number beyond the
bound or below the range, a non-finite number, a huge string, a deep nesting, or an unknown
key next to it. Every such mutation makes the input invalid, and the error must name the
leaf's key path.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from hypothesis import strategies as st

from tuner.cost._predict import PRECISIONS
from tuner.spec import Mode, SamplerType, SchedulerType
from tuner.spec._limits import (
    CAMPAIGN,
    CATALOG,
    FLAGS,
    MIN_REDUCTION_FACTOR,
    PROFILE,
    RESOURCE_UNIT,
    SIZES,
    Limit,
)

HUGE = "x" * (int(SIZES["text"].high) * 2)  # above every string's bound, under the file's
DEEP: Any = 1
for _ in range(int(SIZES["depth"].high) + 8):
    DEEP = [DEEP]
UNKNOWN = "zzz_unknown_key"
MUTATIONS = ("wrong_type", "extreme", "non_finite", "huge_string", "deep_nesting", "unknown_key")
STARTUP_SAMPLERS = ("tpe", "gp", "cmaes")
# Plain names and words: what YAML and CSV carry without quoting questions.
WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=12).filter(
    lambda s: s[0].isalnum()
)
IDENT = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True).filter(
    lambda s: not s.startswith("tuner_")
)


@dataclass(frozen=True)
class Leaf:
    """One field of a drawn input.

    Attributes:
        path: Its keys (and list indexes) from the top of the input.
        kind: ``int``, ``number``, ``duration``, ``bool``, ``enum``, ``string``, ``choice``
            (an element of a categorical's choices), ``plain`` (a fixed value: any YAML),
            or ``section`` (a mapping with a closed set of keys: only ``unknown_key``).
        limit: Its range, for numbers and durations.
    """

    path: tuple[Any, ...]
    kind: str
    limit: Limit | None = None

    @property
    def key_path(self) -> str:
        """The path as tuner's messages write it: ``space.lr.low``, ``choices[1]``."""
        out = ""
        for key in self.path:
            if isinstance(key, int):
                out += f"[{key}]"
            else:
                out = f"{out}.{key}" if out else str(key)
        return out


# ---- numbers from the table ----


def ints(limit: Limit) -> st.SearchStrategy[int]:
    """Whole numbers in ``limit``'s range (hypothesis favours the ends)."""
    low = int(limit.low) + (1 if limit.low_open else 0)
    return st.integers(low, int(limit.high))


def floats(limit: Limit) -> st.SearchStrategy[float]:
    """Finite floats in ``limit``'s range."""
    return st.floats(limit.low, limit.high, exclude_min=limit.low_open, allow_nan=False)


def durations(limit: Limit) -> st.SearchStrategy[Any]:
    """Seconds in ``limit``'s range, as a number or as ``"90m"``-style text."""
    as_text = st.tuples(st.sampled_from([("d", 86400), ("h", 3600), ("m", 60), ("s", 1)])).flatmap(
        lambda unit: st.integers(1, max(1, int(limit.high // unit[0][1]))).map(
            lambda n: f"{n}{unit[0][0]}"
        )
    )
    return st.one_of(floats(limit), as_text)


def numbers(limit: Limit) -> st.SearchStrategy[Any]:
    if limit.kind == "int":
        return ints(limit)
    if limit.kind == "duration":
        return durations(limit)
    return floats(limit)


# ---- campaigns ----


@st.composite
def _param(draw: st.DrawFn, name: str, grid: bool) -> tuple[dict[str, Any], list[Leaf]]:
    """One space parameter of any kind; a grid keeps ranges small and floats stepped."""
    path = ("space", name)
    bound = CAMPAIGN["space.*.low"]
    kind = draw(st.sampled_from(["int", "float", "categorical", "fixed"]))
    leaves = [Leaf(path, "section")]
    if kind == "int":
        step = draw(st.integers(1, 4 if grid else 1000))
        count = draw(st.integers(1, 8 if grid else 10**6))
        low = draw(st.integers(int(bound.low), int(bound.high) - step * count))
        spec: dict[str, Any] = {"type": "int", "low": low, "high": low + step * count}
        log = not grid and low >= 1 and draw(st.booleans())
        if log:
            spec["log"] = True
        elif step > 1 or draw(st.booleans()):
            spec["step"] = step
        leaves += [
            Leaf((*path, k), "int", CAMPAIGN[f"space.*.{k}"])
            for k in spec
            if k in ("low", "high", "step")
        ]
    elif kind == "float":
        log = not grid and draw(st.booleans())
        if log:
            low = draw(st.floats(1e-12, 1e6))
            spec = {"type": "float", "low": low, "high": low * draw(st.floats(1.5, 1e6))}
            spec["log"] = True
        else:
            low = float(draw(st.integers(-(10**6), 10**6)))
            step = draw(st.sampled_from([0.25, 0.5, 2.0]))
            spec = {"type": "float", "low": low, "high": low + step * draw(st.integers(1, 8))}
            if grid or draw(st.booleans()):
                spec["step"] = step
        leaves += [
            Leaf((*path, k), "number", CAMPAIGN[f"space.*.{k}"])
            for k in spec
            if k in ("low", "high", "step")
        ]
    elif kind == "categorical":
        choices = draw(
            st.lists(
                st.one_of(WORD, st.integers(-1000, 1000)),
                min_size=1,
                max_size=4,
                unique_by=lambda c: str(c),
            ).filter(lambda cs: len({str(c) for c in cs}) == len(cs))
        )
        spec = {"type": "categorical", "choices": choices}
        leaves.append(Leaf((*path, "choices"), "choice_list"))
        leaves += [Leaf((*path, "choices", i), "choice") for i in range(len(choices))]
    else:
        spec = {"value": draw(st.one_of(WORD, st.integers(-100, 100), st.floats(-1, 1)))}
        leaves.append(Leaf((*path, "value"), "plain"))
    if kind in ("int", "float") and "log" in spec:
        leaves.append(Leaf((*path, "log"), "bool"))
    return spec, leaves


@st.composite
def campaigns(draw: st.DrawFn, trainable: str) -> tuple[dict[str, Any], list[Leaf]]:
    """A valid campaign using every section, and its leaves."""
    leaves: list[Leaf] = [Leaf((), "section")]

    def field(path: tuple[Any, ...], limit: Limit) -> Any:
        leaves.append(Leaf(path, limit.kind, limit))
        return draw(numbers(limit))

    sampler = draw(st.sampled_from([s.value for s in SamplerType]))
    # The grid and GP samplers list values: their spaces stay small (see SIZES).
    grid = sampler in (SamplerType.GRID.value, SamplerType.GP.value)
    names = draw(st.lists(IDENT, min_size=1, max_size=4, unique=True))
    space: dict[str, Any] = {}
    for name in names:
        spec, param_leaves = draw(_param(name, grid))
        space[name] = spec
        leaves += param_leaves
    doc: dict[str, Any] = {
        "name": draw(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,30}", fullmatch=True)),
        "description": draw(st.text(alphabet="abc xyz.,", max_size=40)),
        "trainable": trainable,
        "metric": draw(WORD.filter(lambda s: not s.startswith("tuner_"))),
        "mode": draw(st.sampled_from([m.value for m in Mode])),
        "space": space,
    }
    leaves += [Leaf((k,), "string") for k in ("name", "description", "trainable", "metric")]
    leaves.append(Leaf(("mode",), "enum"))
    budget: dict[str, Any] = {
        "trials": field(("budget", "trials"), CAMPAIGN["budget.trials"]),
        "max_epochs": field(("budget", "max_epochs"), CAMPAIGN["budget.max_epochs"]),
    }
    for key in ("time_limit", "usd", "gpu_hours", "deadline", "goal"):
        if draw(st.booleans()):
            budget[key] = field(("budget", key), CAMPAIGN[f"budget.{key}"])
    doc["budget"] = budget
    scheduler: dict[str, Any] = {"type": draw(st.sampled_from([s.value for s in SchedulerType]))}
    leaves.append(Leaf(("scheduler", "type"), "enum"))
    if scheduler["type"] == SchedulerType.ASHA.value:
        grace = CAMPAIGN["scheduler.grace_period"]
        scheduler["grace_period"] = draw(st.integers(1, budget["max_epochs"]))
        leaves.append(Leaf(("scheduler", "grace_period"), "int", grace))
        factor = CAMPAIGN["scheduler.reduction_factor"]
        scheduler["reduction_factor"] = draw(st.floats(MIN_REDUCTION_FACTOR, factor.high))
        leaves.append(Leaf(("scheduler", "reduction_factor"), "number", factor))
        if draw(st.booleans()):
            scheduler["min_peers"] = field(
                ("scheduler", "min_peers"), CAMPAIGN["scheduler.min_peers"]
            )
    doc["scheduler"] = scheduler
    doc["sampler"] = {"type": sampler, "seed": field(("sampler", "seed"), CAMPAIGN["sampler.seed"])}
    leaves.append(Leaf(("sampler", "type"), "enum"))
    if sampler in STARTUP_SAMPLERS and draw(st.booleans()):
        limit = CAMPAIGN["sampler.startup_trials"]
        doc["sampler"]["startup_trials"] = field(("sampler", "startup_trials"), limit)
    workers = field(("resources", "workers"), CAMPAIGN["resources.workers"])
    whole = workers > 1 or draw(st.booleans())
    gpu_limit = CAMPAIGN["resources.gpu"]
    gpu = draw(
        st.integers(0, int(gpu_limit.high))
        if whole
        else st.one_of(st.just(0), st.floats(RESOURCE_UNIT, 1.0))
    )
    leaves.append(Leaf(("resources", "gpu"), "number", gpu_limit))
    doc["resources"] = {
        "cpu": draw(st.floats(RESOURCE_UNIT, CAMPAIGN["resources.cpu"].high)),
        "gpu": gpu,
        "workers": workers,
        "max_concurrent": field(
            ("resources", "max_concurrent"), CAMPAIGN["resources.max_concurrent"]
        ),
        "pending_warning": field(
            ("resources", "pending_warning"), CAMPAIGN["resources.pending_warning"]
        ),
    }
    leaves.append(Leaf(("resources", "cpu"), "number", CAMPAIGN["resources.cpu"]))
    doc["checkpoint"] = {
        "every": field(("checkpoint", "every"), CAMPAIGN["checkpoint.every"]),
        "keep": field(("checkpoint", "keep"), CAMPAIGN["checkpoint.keep"]),
    }
    doc["failure"] = {
        "max_retries": field(("failure", "max_retries"), CAMPAIGN["failure.max_retries"]),
        "max_failed_trials": field(
            ("failure", "max_failed_trials"), CAMPAIGN["failure.max_failed_trials"]
        ),
    }
    doc["pricing"] = {
        "node_usd_per_hour": field(
            ("pricing", "node_usd_per_hour"), CAMPAIGN["pricing.node_usd_per_hour"]
        ),
        "spot": draw(st.booleans()),
    }
    leaves.append(Leaf(("pricing", "spot"), "bool"))
    fixed_keys = draw(st.lists(IDENT.filter(lambda k: k not in space), max_size=3, unique=True))
    doc["fixed"] = {
        key: draw(st.one_of(WORD, st.integers(), st.lists(WORD, max_size=3))) for key in fixed_keys
    }
    leaves += [Leaf(("fixed", key), "plain") for key in fixed_keys]
    for section in (
        "budget",
        "scheduler",
        "sampler",
        "resources",
        "checkpoint",
        "failure",
        "pricing",
    ):
        leaves.append(Leaf((section,), "section"))
    return doc, leaves


# ---- profiles ----


@st.composite
def profiles(draw: st.DrawFn, trainable: str) -> tuple[dict[str, Any], list[Leaf]]:
    """A valid profile (what ``tuner profile`` writes), and its leaves."""
    leaves: list[Leaf] = [Leaf((), "section")]
    trials = []
    count = draw(st.integers(1, 3))
    metric_keys = [k for k in PROFILE if not k.startswith("trials")]
    for i in range(count):
        path = ("trials", i)
        metrics = {}
        for key in draw(st.lists(st.sampled_from(metric_keys), max_size=4, unique=True)):
            metrics[key] = draw(numbers(PROFILE[key]))
            leaves.append(Leaf((*path, "metrics", key), "number", PROFILE[key]))
        trial = {
            "trial": draw(WORD),
            "config": {"lr": draw(st.floats(0, 1))},
            "epochs": draw(ints(PROFILE["trials[].epochs"])),
            "epoch_s": draw(floats(PROFILE["trials[].epoch_s"])),
            "startup_s": draw(floats(PROFILE["trials[].startup_s"])),
            "cold": draw(st.booleans()),
            "total_s": draw(floats(PROFILE["trials[].total_s"])),
            "metrics": metrics,
        }
        trials.append(trial)
        leaves.append(Leaf(path, "section"))
        leaves.append(Leaf((*path, "metrics"), "section"))
        leaves.append(Leaf((*path, "trial"), "id"))
        leaves.append(Leaf((*path, "cold"), "bool"))
        leaves.append(Leaf((*path, "config", "lr"), "plain"))
        for key in ("epochs", "epoch_s", "startup_s", "total_s"):
            limit = PROFILE[f"trials[].{key}"]
            leaves.append(Leaf((*path, key), limit.kind, limit))
    doc = {
        "format": 1,
        "campaign": draw(WORD),
        "trainable": trainable,
        "source": "tuner profile",
        "device": draw(st.sampled_from(["cpu", "cuda"])),
        "gpu_name": draw(st.sampled_from([None, "NVIDIA A100-SXM4-40GB", "Tesla T4"])),
        "precision": draw(st.sampled_from(PRECISIONS)),
        "trials": trials,
    }
    leaves += [Leaf((k,), "string") for k in ("campaign", "trainable", "device", "precision")]
    return doc, leaves


# ---- catalogs ----

INSTANCE_COLUMNS = (
    *("cloud", "region", "instance_type", "gpu", "gpu_count", "ondemand_usd_per_hour"),
    *("source", "as_of", "vcpus", "memory_gib", "spot_usd_per_hour", "billing", "notes"),
)
_CELL_LIMITS = {
    "gpu_count": CATALOG["gpu_count"],
    "vcpus": CATALOG["vcpus"],
    "memory_gib": CATALOG["memory_gib"],
    "ondemand_usd_per_hour": CATALOG["ondemand_usd_per_hour"],
    "spot_usd_per_hour": CATALOG["spot_usd_per_hour"],
}


@st.composite
def catalogs(draw: st.DrawFn, gpus: Sequence[str]) -> tuple[list[list[str]], list[Leaf]]:
    """A valid instance catalog (header and rows of text), and its cells as leaves.

    A leaf's path is ``(line, column)``; ``(1,)`` is the header.
    """
    optional = draw(st.lists(st.sampled_from(INSTANCE_COLUMNS[8:]), unique=True))
    header = [*INSTANCE_COLUMNS[:8], *optional]
    rows = []
    leaves = [Leaf((1,), "section")]
    for i in range(draw(st.integers(1, 3))):
        row = {
            "cloud": draw(WORD),
            "region": draw(WORD),
            "instance_type": f"type-{i}",
            "gpu": draw(st.sampled_from(sorted(gpus))),
            "source": draw(WORD),
            "as_of": draw(st.dates(date(2000, 1, 1), date(2100, 1, 1))).isoformat(),
            "billing": draw(WORD),
            "notes": draw(WORD),
        }
        for column, limit in _CELL_LIMITS.items():
            value = draw(numbers(limit))
            row[column] = str(value)
        rows.append([row[c] for c in header])
        for column in header:
            kind = "catalog_" + (
                "number" if column in _CELL_LIMITS else "date" if column == "as_of" else "text"
            )
            leaves.append(Leaf((i + 2, column), kind, _CELL_LIMITS.get(column)))
    return [header, *rows], leaves


# ---- mutation ----


def applicable(leaf: Leaf) -> list[str]:
    """The mutations that make ``leaf`` invalid (an unknown key only next to a section's keys;
    a fixed value takes any type)."""
    if leaf.kind == "section":
        return ["unknown_key"]
    if leaf.kind == "plain":
        return ["huge_string", "deep_nesting"]
    if leaf.kind in ("choice", "choice_list", "bool", "enum", "string", "id"):
        return ["wrong_type", "huge_string", "deep_nesting"]
    if leaf.kind.startswith("catalog_"):
        return {
            "catalog_number": ["wrong_type", "extreme", "non_finite", "huge_string"],
            "catalog_date": ["wrong_type", "huge_string"],
            "catalog_text": ["huge_string"],
        }[leaf.kind]
    return ["wrong_type", "extreme", "non_finite", "huge_string", "deep_nesting"]


def bad_value(draw: st.DrawFn, leaf: Leaf, mutation: str) -> Any:
    """A value that breaks ``leaf`` the way ``mutation`` says."""
    limit = leaf.limit
    if mutation == "huge_string":
        return HUGE
    if mutation == "deep_nesting":
        return copy.deepcopy(DEEP)
    if mutation == "non_finite":
        value = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
        return str(value) if leaf.kind.startswith("catalog_") else value
    if mutation == "extreme":
        assert limit is not None
        above = [limit.high + 1 if limit.kind == "int" else limit.high * 2, 10**30]
        if limit.kind == "duration":
            above = [limit.high * 2, f"{int(limit.high // 86400) + 1}d"]
        below = [limit.low - 1 if limit.kind == "int" else limit.low - abs(limit.low) - 1]
        if limit.low_open:
            below.append(limit.low)
        if limit.kind == "duration":
            below += [0, limit.low / 2]
        value = draw(st.sampled_from(above + below))
        if limit.kind == "int" and isinstance(value, float):
            value = int(value)
        return str(value) if leaf.kind.startswith("catalog_") else value
    # wrong type
    if leaf.kind.startswith("catalog_"):
        return draw(st.sampled_from(["abc", "12x", "1,5"]))
    wrong = {
        "int": ["x", [1], {"a": 1}, True, 1.5],
        "number": ["x", [1], {"a": 1}, True],
        "duration": [[1], {"a": 1}, True, "6x"],
        "bool": ["yes", 2, [True]],
        "enum": [3, "zzz", ["x"]],
        "string": [3, ["x"], {"a": "b"}],
        "id": [["x"], {"a": 1}, True],
        "choice": [["x"], {"a": 1}],
        "choice_list": ["x", 3, {"a": 1}],
    }[leaf.kind]
    return draw(st.sampled_from(wrong))


@st.composite
def mutated(
    draw: st.DrawFn, drawn: st.SearchStrategy[tuple[Any, list[Leaf]]] | tuple[Any, list[Leaf]]
) -> tuple[Any, Leaf, str]:
    """An input (drawn from a strategy, or given) with one leaf mutated: the input, the leaf,
    and the expected key path of the error (for an unknown key: the new key's)."""
    data, leaves = draw(drawn) if isinstance(drawn, st.SearchStrategy) else drawn
    data = copy.deepcopy(data)
    leaf = draw(st.sampled_from(leaves))
    mutation = draw(st.sampled_from(applicable(leaf)))
    if leaf.kind.startswith("catalog_") or leaf.path == (1,):
        return _mutate_table(draw, data, leaf, mutation)
    parent = data
    for key in leaf.path[:-1]:
        parent = parent[key]
    if mutation == "unknown_key":
        node = data
        for key in leaf.path:
            node = node[key]
        node[UNKNOWN] = 1
        where = Leaf((*leaf.path, UNKNOWN), "int").key_path
        return data, leaf, where
    parent[leaf.path[-1]] = bad_value(draw, leaf, mutation)
    return data, leaf, leaf.key_path


def _mutate_table(
    draw: st.DrawFn, table: list[list[str]], leaf: Leaf, mutation: str
) -> tuple[Any, Leaf, str]:
    if mutation == "unknown_key":
        table[0].append(UNKNOWN)
        for row in table[1:]:
            row.append("1")
        return table, leaf, UNKNOWN
    line, column = leaf.path
    table[line - 1][table[0].index(column)] = str(bad_value(draw, leaf, mutation))
    return table, leaf, f"line {line}.{column}"


def flags(limits: dict[str, Limit]) -> st.SearchStrategy[dict[str, str]]:
    """Valid values of the given flags, as command-line text."""
    return st.fixed_dictionaries(
        {
            flag: numbers(limit).map(
                lambda v: v if isinstance(v, str) else repr(v) if isinstance(v, float) else str(v)
            )
            for flag, limit in limits.items()
        }
    )


@st.composite
def bad_flag(draw: st.DrawFn, limits: dict[str, Limit]) -> tuple[str, str]:
    """One flag and a value that breaks it: not a number, beyond the bound, not finite."""
    flag = draw(st.sampled_from(sorted(limits)))
    limit = limits[flag]
    leaf = Leaf((flag,), "catalog_number", limit)
    mutation = draw(st.sampled_from(["wrong_type", "extreme", "non_finite", "huge_string"]))
    value = str(bad_value(draw, leaf, mutation))
    if limit.kind == "duration" and mutation == "wrong_type":
        value = "6x"
    return flag, value


ALL_FLAGS = FLAGS
