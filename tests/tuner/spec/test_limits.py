"""Every number of a campaign has an upper bound, with the reason in the message; so do
sizes (strings, lists, nesting) and the command-line flags. Generated from the table."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.tuner.spec.test_spec_validation import edited
from tuner.errors import SpecError
from tuner.spec import format_duration, load_campaign, parse_campaign
from tuner.spec._limits import CAMPAIGN, FLAGS, SIZES, Limit

pytestmark = pytest.mark.usefixtures("pinned_builtins")

FIELDS = [key for key in CAMPAIGN if not key.startswith("space.")]


def _nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def _largest(key: str, limit: Limit) -> dict[str, Any]:
    """Edits that set ``key`` to its largest value, with what that needs elsewhere."""
    edits: dict[str, Any] = {"pricing": {}} if key.startswith("pricing.") else {}
    edits[key] = limit.high if limit.kind != "int" else int(limit.high)
    if key in ("scheduler.grace_period", "checkpoint.every"):
        edits["budget.max_epochs"] = int(CAMPAIGN["budget.max_epochs"].high)
    if key == "resources.workers":
        edits["resources.gpu"] = 1
    return edits


def _error(edits: dict[str, Any]) -> SpecError:
    with pytest.raises(SpecError) as info:
        parse_campaign(edited(edits), "c.yaml", check_trainable=False)
    return info.value


@pytest.mark.parametrize("key", FIELDS)
def test_the_largest_value_of_each_field_is_accepted(key: str) -> None:
    spec = parse_campaign(edited(_largest(key, CAMPAIGN[key])), check_trainable=False)
    assert parse_campaign(spec.to_dict(), check_trainable=False) == spec


@pytest.mark.parametrize("key", FIELDS)
def test_a_value_above_each_bound_names_the_bound_and_its_reason(key: str) -> None:
    limit = CAMPAIGN[key]
    edits = _largest(key, limit)
    above = limit.high + 1 if limit.kind == "int" else limit.high * 1.5
    edits[key] = int(above) if limit.kind == "int" else above
    err = _error(edits)
    assert err.path == key
    high = format_duration(limit.high) if limit.kind == "duration" else limit.show(limit.high)
    if key == "sampler.seed":  # its message predates the table
        assert err.problem == f"must be an integer <= {high}"
    else:
        assert err.problem == f"must be at most {high}"
    assert err.fix is not None and limit.reason in err.fix
    assert str(err).startswith(f"c.yaml: {key}: ")


@pytest.mark.parametrize("value", [10**400, 2**63, float("inf")])
def test_absurd_trial_counts_and_budgets_are_refused_at_once(value: float) -> None:
    err = _error({"budget.trials": value, "budget.usd": value})
    assert [e.path for e in err.errors] == ["budget.trials", "budget.usd"]


@pytest.mark.parametrize(
    ("edits", "path", "problem"),
    [
        ({"space.channels.high": 2**53 + 8}, "space.channels.high", "must be at most"),
        ({"space.channels.low": -(2**53) - 8}, "space.channels.low", "must be at least"),
        ({"space.momentum.high": 1e300}, "space.momentum.high", "must be at most"),
        ({"space.channels.step": 2**54}, "space.channels.step", "must be at most"),
        (
            {"space.momentum.step": 1e-17, "space.momentum.high": 0.5},
            "space.momentum.step",
            "is too small",
        ),
        (
            {"space.optimizer.choices": [f"c{i}" for i in range(10_001)]},
            "space.optimizer.choices",
            "has 10001 choices",
        ),
        (
            {"space.optimizer.choices": ["sgd", "x" * 10_001]},
            "space.optimizer.choices[1]",
            "has 10001 characters",
        ),
        ({"name": "n" * 101}, "name", "has 101 characters"),
        ({"metric": "m" * 101}, "metric", "has 101 characters"),
        ({"description": "d" * 10_001}, "description", "has 10001 characters"),
        ({"fixed.note": "x" * 10_001}, "fixed.note", "has 10001 characters"),
        (
            {"fixed.deep": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]},
            "fixed.deep",
            "is nested more than 32 levels deep",
        ),
        ({"resources.cpu": 0.00001}, "resources.cpu", "must be 0 or at least 0.0001"),
        ({"resources.gpu": 0.00001}, "resources.gpu", "must be 0 or at least 0.0001"),
        ({"scheduler.reduction_factor": 1.001}, "scheduler.reduction_factor", "must be at least"),
        ({"failure.max_failed_trials": 100_001}, "failure.max_failed_trials", "must be at most"),
    ],
)
def test_sizes_and_ranges(edits: dict[str, Any], path: str, problem: str) -> None:
    err = _error(edits)
    assert [e.path for e in err.errors][-1:] == [path] or err.path == path, str(err)
    assert any(e.path == path and e.problem.startswith(problem) for e in err.errors), str(err)


def test_values_at_the_size_limits_are_accepted() -> None:
    edits = {
        "fixed.deep": {"a": _nested(31)},  # 32 levels
        "fixed.note": "x" * 10_000,
        "name": "n" * 100,
        "space.optimizer.choices": ["sgd", *(f"c{i}" for i in range(9_999))],
        "space.channels.low": -(2**53),
        "space.channels.high": 2**53,
    }
    parse_campaign(edited(edits), check_trainable=False)


def test_many_parameters_are_refused() -> None:
    space = {f"p{i}": {"type": "int", "low": 0, "high": 1} for i in range(1001)}
    err = _error({"space": space})
    assert (err.path, err.problem) == ("space", "has 1001 parameters; at most 1000 are allowed")


def test_the_grid_sampler_refuses_a_grid_it_would_have_to_list() -> None:
    space = {
        "a": {"type": "int", "low": 0, "high": 999},
        "b": {"type": "int", "low": 0, "high": 999},
        "c": {"type": "int", "low": 0, "high": 1},
    }
    err = _error({"space": space, "sampler": "grid", "fixed": {}})
    assert err.path == "sampler.type"
    assert err.problem.startswith("the grid has 2000000 points; at most 1000000")
    ok = {**space, "c": {"value": 1}}
    parse_campaign(edited({"space": ok, "sampler": "grid", "fixed": {}}), check_trainable=False)


def test_the_gp_sampler_refuses_int_ranges_it_would_have_to_list() -> None:
    # Optuna's GP sampler makes np.arange(low, high + 1, step) of each int and stepped
    # parameter: 2**53 values were a MemoryError inside the first trial's sampling.
    space = {
        "n": {"type": "int", "low": 0, "high": 2**53},
        "x": {"type": "float", "low": 0, "high": 1},
    }
    err = _error({"space": space, "sampler": "gp", "fixed": {}})
    assert err.path == "sampler.type"
    assert err.problem.startswith("the GP sampler would list 9007199254740993 values")
    # (the continuous float is not listed)
    ok = {**space, "n": {"type": "int", "low": 0, "high": 999_998}}
    parse_campaign(edited({"space": ok, "sampler": "gp", "fixed": {}}), check_trainable=False)
    parse_campaign(edited({"space": space, "sampler": "tpe", "fixed": {}}), check_trainable=False)


def test_a_huge_campaign_file_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(edited({})) + "#" * int(SIZES["file"].high))
    with pytest.raises(SpecError) as info:
        load_campaign(path, check_trainable=False)
    assert info.value.path == "top level"
    assert info.value.problem.startswith("is ")


def test_every_flag_limit_has_a_reason_and_a_finite_range() -> None:
    for name, limit in [*CAMPAIGN.items(), *FLAGS.items(), *SIZES.items()]:
        assert limit.reason, name
        assert math.isfinite(limit.high) and limit.low <= limit.high, name


def test_the_docs_give_every_bound() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "campaign-files.md").read_text()
    rows = {line.split("|")[1].strip(): line for line in doc.splitlines() if line.startswith("| `")}
    for key, limit in CAMPAIGN.items():
        if key.startswith("space."):
            continue
        row = next(line for name, line in rows.items() if f"`{key}`" in name)
        assert f"to {limit.show(limit.high)} " in row, key
    for flag, limit in FLAGS.items():
        row = next(line for name, line in rows.items() if f"{flag}`" in name)
        high = limit.show(limit.high)
        assert f"to {high} " in row or f"to below {high}" in row or "below 1" in row, flag
