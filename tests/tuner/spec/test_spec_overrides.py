"""Command-line overrides and durations."""

from __future__ import annotations

from typing import Any

import pytest

from tuner.errors import SpecError
from tuner.spec import CampaignSpec, format_duration, parse_campaign, parse_duration


def spec(**changes: Any) -> CampaignSpec:
    data: dict[str, Any] = {
        "name": "demo",
        "trainable": "digits_cnn",
        "metric": "acc",
        "mode": "max",
        "space": {"a": {"type": "int", "low": 0, "high": 3}},
        "budget": {"trials": 8, "max_epochs": 9},
        "scheduler": {"grace_period": 2},
        "sampler": {"seed": 1},
    }
    data.update(changes)
    return parse_campaign(data, "c.yaml", check_trainable=False)


def test_overrides_apply_and_leave_original_alone() -> None:
    base = spec()
    new = base.with_overrides(trials=3, max_epochs=2, time_limit_s="1h30m", seed=5, name="x-1")
    assert (new.budget.trials, new.budget.max_epochs, new.budget.time_limit_s) == (3, 2, 5400.0)
    assert (new.sampler.seed, new.name) == (5, "x-1")
    assert base.budget.trials == 8 and base.sampler.seed == 1
    assert base.with_overrides() == base
    assert base.with_overrides(time_limit_s=90).budget.time_limit_s == 90.0


def test_max_epochs_below_grace_period() -> None:
    with pytest.raises(SpecError) as info:
        spec().with_overrides(max_epochs=1)
    err = info.value
    assert (err.source, err.path) == ("<cli>", "--max-epochs")
    assert str(err) == (
        "<cli>: --max-epochs: is below scheduler.grace_period=2 (got 1)\n"
        "  To fix: pass --max-epochs 2 or more, or lower scheduler.grace_period in c.yaml"
    )


def test_max_epochs_below_grace_is_fine_with_fifo() -> None:
    fifo = spec(scheduler="fifo")
    assert fifo.with_overrides(max_epochs=1).budget.max_epochs == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"trials": 0}, "<cli>: --trials: must be an integer >= 1 (got 0)"),
        ({"trials": True}, "<cli>: --trials: must be an integer >= 1 (got True)"),
        ({"max_epochs": "3"}, "<cli>: --max-epochs: must be an integer >= 1 (got '3')"),
        ({"seed": -2}, "<cli>: --seed: must be an integer >= 0 (got -2)"),
        (
            {"seed": 2**32},
            "<cli>: --seed: must be an integer <= 4294967295 (got 4294967296)\n"
            "  To fix: numpy, and so every Optuna sampler, takes seeds below 2**32",
        ),
        ({"time_limit_s": -5}, "<cli>: --time-limit: must be a positive duration (got -5)"),
        (
            {"time_limit_s": "soon"},
            "<cli>: --time-limit: must be a duration (got 'soon'; allowed seconds as a number, "
            "or a string like '90s', '10m', '2h', '1h30m', '1.5h')",
        ),
    ],
)
def test_bad_overrides(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError) as info:
        spec().with_overrides(**kwargs)
    assert str(info.value) == message


def test_bad_name_override() -> None:
    with pytest.raises(SpecError, match=r"^<cli>: --name: must start with a letter or digit"):
        spec().with_overrides(name="a b")


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("90s", 90.0),
        ("10m", 600.0),
        ("2h", 7200.0),
        ("1h30m", 5400.0),
        ("1.5h", 5400.0),
        ("1h 30m 15s", 5415.0),
        ("1d", 86400.0),
        (" 45 ", 45.0),
        ("120", 120.0),
        (120, 120.0),
        (0.5, 0.5),
        ("2H", 7200.0),
    ],
)
def test_parse_duration(value: object, seconds: float) -> None:
    assert parse_duration(value) == seconds


@pytest.mark.parametrize(
    "value", ["", "m", "10 minutes", "1x", "30m1h", "1h1h", "h1", "1.2.3s", True, None, [1], "nan"]
)
def test_parse_duration_rejects_junk(value: object) -> None:
    with pytest.raises(SpecError, match=r"^<value>: duration: must be a (positive )?duration"):
        parse_duration(value)


@pytest.mark.parametrize("value", [0, -1, "0s", "-5", "inf"])
def test_parse_duration_rejects_non_positive(value: object) -> None:
    with pytest.raises(SpecError, match="must be a positive duration"):
        parse_duration(value, source="<cli>", path="--time-limit")


@pytest.mark.parametrize(("seconds", "text"), [(5400, "1h30m"), (90, "1m30s"), (1.5, "1.5s")])
def test_format_duration_inverts_parse(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == seconds
