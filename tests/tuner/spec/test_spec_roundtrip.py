"""Specs round-trip through plain dicts, YAML text and pickle."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
import yaml

from tuner.spec import (
    CampaignSpec,
    CategoricalParam,
    FixedParam,
    FloatParam,
    IntParam,
    Mode,
    SamplerType,
    SchedulerType,
    load_campaign,
    parse_campaign,
)
from tuner.spec._yaml import load_yaml

REPO = Path(__file__).resolve().parents[3]
CAMPAIGN_FILES = sorted((REPO / "search_spaces").glob("*.yaml"))


def full() -> dict[str, Any]:
    """Every feature at once, including nested fixed values and conditions."""
    return {
        "name": "full.v2",
        "description": "everything",
        "trainable": "pkg.mod:train",
        "metric": "val_loss",
        "mode": "min",
        "space": {
            "optimizer": {"choices": ["sgd", "adam", None, 3, 2.5, True]},
            "lr": {"type": "float", "low": 1e-5, "high": 1.0, "log": True},
            "drop": {"type": "float", "low": 0.0, "high": 0.5, "step": 0.1},
            "layers": {"type": "int", "low": 1, "high": 8, "log": True},
            "width": {"type": "int", "low": 16, "high": 128, "step": 16},
            "momentum": {
                "type": "float",
                "low": 0.5,
                "high": 0.99,
                "when": {"optimizer": ["sgd", 3], "layers": [1, 2]},
            },
            "shape": {"value": {"kernel": [3, 3], "pad": "same"}, "when": {"optimizer": None}},
            "nested": {"type": "fixed", "value": [1, [2, 3]]},
        },
        "budget": {"trials": 50, "max_epochs": 27, "time_limit": 5400.5},
        "scheduler": {"type": "asha", "grace_period": 3, "reduction_factor": 2.5},
        "sampler": {"type": "tpe", "seed": 7, "startup_trials": 0},
        "resources": {"cpu": 0.5, "gpu": 2, "max_concurrent": 4},
        "checkpoint": {"every": 3, "keep": 1},
        "failure": {"max_retries": 0, "max_failed_trials": 3},
        "fixed": {"batch_size": 64, "augment": {"flip": True, "crops": [8, 16]}},
    }


def minimal() -> dict[str, Any]:
    return {
        "name": "m",
        "trainable": "digits_cnn",
        "metric": "acc",
        "mode": "max",
        "space": {"a": {"type": "int", "low": 0, "high": 1}},
        "budget": {"trials": 1, "max_epochs": 1},
    }


SYNTHETIC = {
    "full": full(),
    "minimal": minimal(),
    "fifo_grid": {
        **minimal(),
        "scheduler": "fifo",
        "sampler": {"type": "grid", "seed": 1},
        "space": {"d": {"type": "float", "low": 0.0, "high": 1.0, "step": 0.25}},
    },
}


def check_round_trip(spec: CampaignSpec) -> None:
    data = spec.to_dict()
    assert parse_campaign(data, check_trainable=False) == spec
    text = yaml.safe_dump(data, sort_keys=False)  # plain types only
    assert parse_campaign(load_yaml(text, "x"), check_trainable=False) == spec
    again = pickle.loads(pickle.dumps(spec))
    assert again == spec and again.source == spec.source


@pytest.mark.parametrize("path", CAMPAIGN_FILES, ids=[p.name for p in CAMPAIGN_FILES])
def test_every_campaign_file_round_trips(path: Path) -> None:
    check_round_trip(load_campaign(path, check_trainable=False))


def test_every_campaign_file_resolves_its_trainable() -> None:
    """Imports the built-in trainables (and so torch): a couple of seconds, once."""
    for path in CAMPAIGN_FILES:
        assert load_campaign(path).source == str(path)


@pytest.mark.parametrize("name", list(SYNTHETIC))
def test_synthetic_specs_round_trip(name: str) -> None:
    check_round_trip(parse_campaign(SYNTHETIC[name], check_trainable=False))


def test_full_spec_fields() -> None:
    spec = parse_campaign(full(), check_trainable=False)
    assert spec.mode is Mode.MIN and spec.sampler.type is SamplerType.TPE
    assert spec.scheduler.type is SchedulerType.ASHA and spec.scheduler.reduction_factor == 2.5
    assert spec.space.names[:3] == ("optimizer", "lr", "drop")
    assert isinstance(spec.space["optimizer"], CategoricalParam)
    assert isinstance(spec.space["lr"], FloatParam) and spec.space["lr"].log
    assert isinstance(spec.space["width"], IntParam) and spec.space["width"].step == 16
    shape = spec.space["shape"]
    assert isinstance(shape, FixedParam)
    assert shape.when[0].values == (None,)
    assert spec.resources.gpu == 2.0 and spec.resources.cpu == 0.5
    assert spec.budget.time_limit_s == 5400.5
    assert spec.failure.max_retries == 0 and spec.failure.max_failed_trials == 3


def test_fixed_is_read_only_and_hands_out_plain_copies() -> None:
    spec = parse_campaign(full(), check_trainable=False)
    fixed = dict(spec.fixed)
    assert fixed == {"batch_size": 64, "augment": {"flip": True, "crops": [8, 16]}}
    fixed["augment"]["crops"].append(32)
    assert spec.fixed["augment"]["crops"] == [8, 16]
    with pytest.raises(TypeError):
        spec.fixed["batch_size"] = 1  # type: ignore[index]


def test_spec_is_frozen() -> None:
    spec = parse_campaign(minimal(), check_trainable=False)
    with pytest.raises(AttributeError):
        spec.name = "other"  # type: ignore[misc]


def test_defaults_are_explicit_in_to_dict() -> None:
    data = parse_campaign(minimal(), check_trainable=False).to_dict()
    assert data["scheduler"] == {
        "type": "asha",
        "grace_period": 1,
        "reduction_factor": 3,
        "min_peers": 2,
    }
    assert data["sampler"] == {"type": "tpe"}
    assert data["resources"] == {"cpu": 1, "gpu": 0}
    assert data["checkpoint"] == {"every": 1, "keep": 2}
    assert data["failure"] == {"max_retries": 2}
    assert "fixed" not in data and "description" not in data
