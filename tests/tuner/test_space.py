"""Translating spaces into Optuna: define-by-run, sampling validity, grids, samplers."""

from __future__ import annotations

import itertools
import logging
import math
import pickle
import warnings
from typing import Any

import optuna
import pytest

from tuner.space import DefineByRun, grid_space, make_sampler, sample_configs, suggest
from tuner.spec import (
    CategoricalParam,
    FixedParam,
    FloatParam,
    IntParam,
    SamplerSpec,
    SamplerType,
    Space,
    parse_campaign,
)

optuna.logging.set_verbosity(optuna.logging.WARNING)


def campaign_space(space: dict[str, Any], sampler: Any = "tpe") -> Space:
    data = {
        "name": "s",
        "trainable": "digits_cnn",
        "metric": "m",
        "mode": "min",
        "space": space,
        "budget": {"trials": 1, "max_epochs": 1},
        "sampler": sampler,
    }
    return parse_campaign(data, check_trainable=False).space


CONDITIONAL = {
    "lr": {"type": "float", "low": 1e-4, "high": 1e-1, "log": True},
    "drop": {"type": "float", "low": 0.0, "high": 0.5, "step": 0.1},
    "width": {"type": "int", "low": 16, "high": 128, "step": 16},
    "depth": {"type": "int", "low": 1, "high": 16, "log": True},
    "optimizer": {"choices": ["sgd", "adam", "adamw"]},
    # momentum appears before its parent in the file: order is topological anyway
    "nesterov": {"choices": [True, False], "when": {"momentum_on": True}},
    "momentum_on": {"choices": [True, False], "when": {"optimizer": "sgd"}},
    "beta2": {"type": "float", "low": 0.9, "high": 0.999, "when": {"optimizer": ["adam", "adamw"]}},
    "wd": {
        "type": "float",
        "low": 0.0,
        "high": 0.1,
        "when": {"optimizer": "adamw", "depth": [1, 2]},
    },
    "kind": {"value": "cnn"},
    "stem": {"value": [3, 3], "when": {"optimizer": "sgd"}},
}


def assert_valid(space: Space, config: dict[str, Any]) -> None:
    """Every active param present with a legal value; every inactive one absent."""
    chosen: dict[str, Any] = {}
    for param in space:
        active = param.is_active(chosen)
        assert (param.name in config) == active, (param.name, config)
        if not active:
            continue
        value = config[param.name]
        assert param.contains(value), (param.name, value)
        if isinstance(param, FloatParam):
            assert isinstance(value, float)
            assert param.low <= value <= param.high
        if isinstance(param, IntParam):
            assert type(value) is int
        chosen[param.name] = value
    assert set(config) <= set(space.names)


def test_sampled_configs_respect_bounds_steps_and_conditions() -> None:
    space = campaign_space(CONDITIONAL)
    assert space.names.index("momentum_on") < space.names.index("nesterov")
    configs = sample_configs(space, 400, seed=0)
    assert len(configs) == 400
    for config in configs:
        assert_valid(space, config)
        assert config["kind"] == "cnn"
        assert ("stem" in config) == (config["optimizer"] == "sgd")
        if "stem" in config:
            assert config["stem"] == [3, 3]
        assert ("nesterov" in config) == (config.get("momentum_on") is True)
        assert round(config["drop"] * 10) == pytest.approx(config["drop"] * 10)
        assert (config["width"] - 16) % 16 == 0
    # Every branch is visited, log params cover several decades.
    assert {c["optimizer"] for c in configs} == {"sgd", "adam", "adamw"}
    assert any("nesterov" in c for c in configs) and any("wd" in c for c in configs)
    lrs = [c["lr"] for c in configs]
    assert math.log10(max(lrs)) - math.log10(min(lrs)) > 2


def test_sample_configs_is_reproducible() -> None:
    space = campaign_space(CONDITIONAL)
    assert sample_configs(space, 20, seed=3) == sample_configs(space, 20, seed=3)


class RecordingTrial:
    """Mimics Ray's suggest captor: records suggestions, delegates to an Optuna trial."""

    def __init__(self, trial: optuna.Trial) -> None:
        self.trial = trial
        self.captured: dict[str, Any] = {}

    def suggest_float(self, name: str, low: float, high: float, **kw: Any) -> float:
        value = self.captured[name] = self.trial.suggest_float(name, low, high, **kw)
        return value

    def suggest_int(self, name: str, low: int, high: int, **kw: Any) -> int:
        value = self.captured[name] = self.trial.suggest_int(name, low, high, **kw)
        return value

    def suggest_categorical(self, name: str, choices: Any) -> Any:
        self.captured[name] = self.trial.suggest_categorical(name, choices)
        return self.captured[name]


def test_define_by_run_returns_only_active_fixed_values_and_pickles() -> None:
    space = campaign_space(CONDITIONAL)
    fn = pickle.loads(pickle.dumps(DefineByRun(space)))
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    for _ in range(30):
        recorder = RecordingTrial(study.ask())
        constants = fn(recorder)
        assert set(constants) <= {"kind", "stem"}
        assert all(isinstance(space[n], FixedParam) for n in constants)
        merged = {**recorder.captured, **constants}  # what Ray does
        assert_valid(space, merged)
        assert merged == suggest(_Replay(recorder.captured), space)


class _Replay:
    """A trial that answers every suggestion from recorded values."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values

    def suggest_float(self, name: str, *args: Any, **kw: Any) -> Any:
        return self.values[name]

    suggest_int = suggest_float

    def suggest_categorical(self, name: str, choices: Any) -> Any:
        return self.values[name]


def test_grid_space_enumerates_values() -> None:
    space = campaign_space(
        {
            "drop": {"type": "float", "low": 0.0, "high": 0.5, "step": 0.1},
            "width": {"type": "int", "low": 8, "high": 32, "step": 8},
            "depth": {"type": "int", "low": 1, "high": 3},
            "opt": {"choices": ["sgd", "adam"]},
            "kind": {"value": "cnn"},
        },
        sampler="grid",
    )
    assert grid_space(space) == {
        "drop": [0.0, 0.1, 0.2, 0.3, 0.4, 0.5],
        "width": [8, 16, 24, 32],
        "depth": [1, 2, 3],
        "opt": ["sgd", "adam"],
    }


def test_grid_space_needs_steps() -> None:
    with pytest.raises(ValueError, match="'lr' needs a step"):
        grid_space(campaign_space({"lr": {"type": "float", "low": 0.1, "high": 0.2}}))


def test_grid_sampler_visits_the_full_grid_once() -> None:
    space = campaign_space(
        {
            "drop": {"type": "float", "low": 0.1, "high": 0.3, "step": 0.1},
            "width": {"type": "int", "low": 8, "high": 16, "step": 8},
            "opt": {"choices": ["sgd", "adam", None]},
        },
        sampler={"type": "grid", "seed": 0},
    )
    sampler = make_sampler(SamplerSpec(SamplerType.GRID, seed=0), space)
    study = optuna.create_study(sampler=sampler)
    seen: list[dict[str, Any]] = []

    def objective(trial: optuna.Trial) -> float:
        seen.append(suggest(trial, space))
        return 0.0

    study.optimize(objective, n_trials=100)
    points = sorted((c["drop"], c["width"], str(c["opt"])) for c in seen)
    expected = sorted(
        (d, w, str(o))
        for d, w, o in itertools.product([0.1, 0.2, 0.3], [8, 16], ["sgd", "adam", None])
    )
    assert points == expected  # 18 trials, then the sampler stops the study


@pytest.mark.parametrize("kind", list(SamplerType))
def test_every_sampler_runs_on_a_conditional_space(kind: SamplerType) -> None:
    space_def = dict(CONDITIONAL)
    if kind is SamplerType.GRID:
        space_def["lr"] = {"type": "float", "low": 0.1, "high": 0.3, "step": 0.1}
        space_def["beta2"] = {
            "type": "float",
            "low": 0.9,
            "high": 0.99,
            "step": 0.09,
            "when": {"optimizer": ["adam", "adamw"]},
        }
        space_def["wd"] = {"choices": [0.0, 0.01], "when": {"optimizer": "adamw"}}
    startup = 3 if kind in (SamplerType.TPE, SamplerType.GP, SamplerType.CMAES) else None
    spec = SamplerSpec(kind, seed=0, startup_trials=startup)
    space = campaign_space(space_def, sampler=spec.to_dict())
    with warnings.catch_warnings():
        warnings.simplefilter("error", optuna.exceptions.ExperimentalWarning)
        sampler = make_sampler(spec, space)
    study = optuna.create_study(sampler=sampler)
    configs = []

    def objective(trial: optuna.Trial) -> float:
        config = suggest(trial, space)
        configs.append(config)
        return float(config["lr"]) + (0.5 if config["optimizer"] == "sgd" else 0.0)

    study.optimize(objective, n_trials=8)
    assert len(configs) == 8
    for config in configs:
        assert_valid(space, config)


def test_tpe_settings() -> None:
    space = campaign_space(CONDITIONAL)
    sampler = make_sampler(SamplerSpec(SamplerType.TPE, seed=4), space)
    assert isinstance(sampler, optuna.samplers.TPESampler)
    assert sampler._n_startup_trials == 10
    assert sampler._multivariate and sampler._group and sampler._constant_liar
    sampler = make_sampler(SamplerSpec(SamplerType.TPE, startup_trials=2), space)
    assert isinstance(sampler, optuna.samplers.TPESampler)
    assert sampler._n_startup_trials == 2


def test_partial_support_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    space = campaign_space(CONDITIONAL)
    with caplog.at_level(logging.WARNING, logger="tuner.space"):
        make_sampler(SamplerSpec(SamplerType.CMAES), space)
    assert caplog.messages == [
        "sampler cmaes samples optimizer, momentum_on, nesterov, beta2, wd at random "
        "(conditional or categorical parameters are outside its model)"
    ]


def test_param_types_in_space() -> None:
    space = campaign_space(CONDITIONAL)
    assert isinstance(space["optimizer"], CategoricalParam)
    assert len(space) == len(CONDITIONAL) and "lr" in space and "nope" not in space
    with pytest.raises(KeyError):
        space["nope"]
