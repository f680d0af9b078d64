"""Warm starts without Ray: source trials mapped onto a new space and fidelity, the plan's
errors, and what seeding does to a real (SQLite / journal) Optuna study."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from tests.conftest import tiny_digits_campaign
from tuner import rundir
from tuner.errors import SpecError
from tuner.spec import CampaignSpec, WarmStart, parse_campaign
from tuner.study import SEED_ATTR, campaign_trials, name_metrics
from tuner.warm_start import FIRST_ATTR, map_trial, plan_warm_start, seed_study

optuna.logging.set_verbosity(optuna.logging.WARNING)

SOURCE_DISTS = {
    "lr": FloatDistribution(1e-4, 1e-1, log=True),
    "optimizer": CategoricalDistribution(["adam", "sgd"]),
    "momentum": FloatDistribution(0.5, 0.95),
    "channels": IntDistribution(8, 16, step=8),
    "dropout": FloatDistribution(0.0, 0.5),
}


def _target(**overrides: Any) -> CampaignSpec:
    """The tiny digits campaign: lr in [1e-3, 3e-2], optimizer, momentum when sgd,
    channels 8 or 16; 8 trials of 4 epochs."""
    return parse_campaign(tiny_digits_campaign(**overrides), "t.yaml", check_trainable=False)


def _frozen(
    params: dict[str, Any], values: dict[int, float], state: TrialState = TrialState.PRUNED
) -> optuna.trial.FrozenTrial:
    last = values[max(values)] if values else None
    return optuna.trial.create_trial(
        state=state,
        value=last if state == TrialState.COMPLETE else None,
        params=params,
        distributions={k: SOURCE_DISTS[k] for k in params},
        intermediate_values=values,
    )


def _source_run(
    tmp_path: Path,
    trials: list[optuna.trial.FrozenTrial],
    *,
    metric: str | None = "val_acc",
    direction: str = "maximize",
) -> Path:
    run_dir = tmp_path / "runs" / "source"
    run_dir.mkdir(parents=True)
    study = optuna.create_study(
        study_name="source", storage=rundir.study_url(run_dir), direction=direction
    )
    if metric is not None:
        name_metrics(study, [metric])
    study.add_trials(trials)
    return run_dir


def test_a_trial_in_range_keeps_its_values_at_the_new_fidelity() -> None:
    spec = _target()  # max_epochs 4
    source = _frozen(
        {"lr": 0.01, "optimizer": "adam", "channels": 16},
        {1: 0.5, 2: 0.7, 3: 0.8, 4: 0.85, 5: 0.9},
        TrialState.COMPLETE,
    )
    seed, why, dropped = map_trial(source, spec)
    assert why is None and dropped == set()
    assert seed is not None
    assert seed.state == TrialState.COMPLETE and seed.value == 0.85, "the value at epoch 4"
    assert seed.intermediate == {1: 0.5, 2: 0.7, 3: 0.8, 4: 0.85}
    assert seed.params == {"lr": 0.01, "optimizer": "adam", "channels": 16}
    assert seed.distributions["lr"] == FloatDistribution(1e-3, 3e-2, log=True), "the new space's"


def test_a_complete_trial_of_a_shorter_campaign_seeds_as_pruned() -> None:
    source = _frozen({"lr": 0.01, "optimizer": "adam"}, {1: 0.5, 2: 0.7}, TrialState.COMPLETE)
    seed, _, _ = map_trial(source, _target())
    assert seed is not None
    assert seed.state == TrialState.PRUNED and seed.value is None and seed.epochs == 2


def test_parameters_outside_the_new_space_are_dropped() -> None:
    source = _frozen({"lr": 0.01, "optimizer": "adam", "dropout": 0.2, "momentum": 0.9}, {1: 0.5})
    seed, why, dropped = map_trial(source, _target())
    assert why is None and seed is not None
    # dropout is not in the space; momentum is, but inactive under adam.
    assert dropped == {"dropout", "momentum"}
    assert set(seed.params) == {"lr", "optimizer"}, "channels: new, left to the sampler"


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"lr": 0.05}, "lr=0.05 is outside this campaign's space (a number in [0.001, 0.03])"),
        ({"lr": 0.01, "channels": 12}, "channels=12 is outside"),
        ({"lr": 0.01, "optimizer": "rmsprop"}, "optimizer='rmsprop' is outside"),
        ({"lr": 0.01, "optimizer": "sgd", "momentum": 0.99}, "momentum=0.99 is outside"),
    ],
)
def test_a_value_outside_the_new_range_refuses_the_trial(
    params: dict[str, Any], words: str
) -> None:
    dists = {**SOURCE_DISTS, "optimizer": CategoricalDistribution(["adam", "sgd", "rmsprop"])}
    dists["channels"] = IntDistribution(8, 16, step=4)
    dists["momentum"] = FloatDistribution(0.5, 0.99)
    frozen = optuna.trial.create_trial(
        state=TrialState.PRUNED,
        params=params,
        distributions={k: dists[k] for k in params},
        intermediate_values={1: 0.5},
    )
    seed, why, _ = map_trial(frozen, _target())
    assert seed is None and why is not None
    assert words in why, why


def test_a_plan_ranks_the_best_first_and_counts_what_it_refused(tmp_path: Path) -> None:
    run_dir = _source_run(
        tmp_path,
        [
            _frozen({"lr": 0.002, "optimizer": "adam"}, {1: 0.6}),
            _frozen(
                {"lr": 0.01, "optimizer": "adam"},
                {1: 0.7, 2: 0.8, 3: 0.85, 4: 0.9},
                TrialState.COMPLETE,
            ),
            _frozen({"lr": 0.05, "optimizer": "adam"}, {1: 0.99}),  # outside: refused
            _frozen({"lr": 0.003, "optimizer": "sgd", "momentum": 0.9}, {1: 0.65, 2: 0.7}),
            _frozen({"lr": 0.004, "optimizer": "adam", "dropout": 0.1}, {1: 0.95}),
        ],
    )
    spec = _target(warm_start={"from": str(run_dir), "top": 3})
    plan = plan_warm_start(spec)
    assert plan is not None
    assert plan.source_trials == 5 and len(plan.seeds) == 4 and len(plan.refused) == 1
    assert plan.dropped == ["dropout"]
    # Complete first, then more epochs, then the value.
    assert plan.first == [
        {"lr": 0.01, "optimizer": "adam"},
        {"lr": 0.003, "optimizer": "sgd", "momentum": 0.9},
        {"lr": 0.004, "optimizer": "adam"},
    ]
    record = plan.to_dict()
    assert record["seeded"] == 4 and record["seeded_complete"] == 1 and record["tried_first"] == 3
    assert "lr=0.05" in record["refused_reasons"][0]
    assert "4 of 5 trials seed the sampler" in plan.line()


def test_seeding_adds_trials_the_campaign_does_not_count_and_enqueues_the_best(
    tmp_path: Path,
) -> None:
    run_dir = _source_run(
        tmp_path,
        [
            _frozen({"lr": 0.002, "optimizer": "adam"}, {1: 0.6}),
            _frozen({"lr": 0.01, "optimizer": "adam"}, {1: 0.7, 2: 0.9}),
        ],
    )
    plan = plan_warm_start(_target(warm_start={"from": str(run_dir), "top": 1}))
    assert plan is not None
    study = optuna.create_study(direction="maximize")
    seed_study(study, plan)
    seeds = study.get_trials(states=(TrialState.PRUNED,))
    assert [t.intermediate_values for t in seeds] == [{1: 0.6}, {1: 0.7, 2: 0.9}]
    assert all(t.user_attrs[SEED_ATTR].startswith(f"{run_dir}#") for t in seeds)
    assert campaign_trials(study) == [t for t in study.trials if t.state == TrialState.WAITING]

    first = study.ask()  # what Ray's OptunaSearch does for the campaign's first trial
    assert first.suggest_float("lr", 1e-3, 3e-2, log=True) == 0.01
    assert first.suggest_categorical("optimizer", ["adam", "sgd"]) == "adam"
    assert first.user_attrs[FIRST_ATTR] == 1
    assert [t.number for t in campaign_trials(study)] == [first.number]


def test_a_study_in_a_journal_store(tmp_path: Path) -> None:
    url = f"journal:///{tmp_path / 'store.log'}"
    from tuner.study import storage_for

    study = optuna.create_study(
        study_name="digits-1a2b", storage=storage_for(url), direction="maximize"
    )
    study.add_trial(_frozen({"lr": 0.01}, {1: 0.5}))
    spec = _target(warm_start={"from": {"storage": url, "study": "digits-1a2b"}})
    plan = plan_warm_start(spec)
    assert plan is not None and len(plan.seeds) == 1

    typo = _target(warm_start={"from": {"storage": url, "study": "digits-1a2c"}})
    with pytest.raises(SpecError) as err:
        plan_warm_start(typo)
    assert err.value.path == "warm_start.from.study"
    assert "Did you mean 'digits-1a2b'" in str(err.value)


def test_no_warm_start_no_plan() -> None:
    assert plan_warm_start(_target()) is None


@pytest.mark.parametrize(
    ("setup", "words"),
    [
        ("missing", "no such run folder"),
        ("empty", "has no study to start from"),
        ("metric", "the source campaign optimized 'val_loss', this one 'val_acc'"),
        ("direction", "the source campaign minimized its metric, this one has mode max"),
        ("nothing_fits", "none of the source's 1 finished trials fits this campaign"),
    ],
)
def test_a_source_that_cannot_seed_is_an_error(tmp_path: Path, setup: str, words: str) -> None:
    run_dir = tmp_path / "runs" / "source"
    if setup == "empty":
        run_dir.mkdir(parents=True)
    elif setup == "metric":
        _source_run(tmp_path, [_frozen({"lr": 0.01}, {1: 0.5})], metric="val_loss")
    elif setup == "direction":
        _source_run(tmp_path, [_frozen({"lr": 0.01}, {1: 0.5})], metric=None, direction="minimize")
    elif setup == "nothing_fits":
        _source_run(tmp_path, [_frozen({"lr": 0.09}, {1: 0.5})])
    with pytest.raises(SpecError) as err:
        plan_warm_start(_target(warm_start={"from": str(run_dir)}))
    assert err.value.path == "warm_start.from" and err.value.source == "t.yaml"
    assert words in str(err.value), str(err.value)
    assert "To fix" in str(err.value)


def test_seeds_of_the_source_do_not_seed_again(tmp_path: Path) -> None:
    seeded = optuna.trial.create_trial(
        state=TrialState.PRUNED,
        params={"lr": 0.01},
        distributions={"lr": SOURCE_DISTS["lr"]},
        intermediate_values={1: 0.9},
        user_attrs={SEED_ATTR: "runs/older#0"},
    )
    run_dir = _source_run(tmp_path, [seeded, _frozen({"lr": 0.02}, {1: 0.5})])
    plan = plan_warm_start(_target(warm_start={"from": str(run_dir), "top": 1}))
    assert plan is not None and plan.source_trials == 1
    assert plan.first == [{"lr": 0.02}]


def test_the_label_names_the_source() -> None:
    assert WarmStart(run="runs/a").label == "runs/a"
