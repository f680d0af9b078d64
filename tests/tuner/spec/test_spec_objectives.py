"""Multi-objective campaigns in the spec: metric and mode as lists, and what they rule out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import tiny_digits_campaign
from tuner.cli import main
from tuner.errors import SpecError
from tuner.space import make_sampler
from tuner.spec import Mode, Objective, SamplerType, load_campaign, parse_campaign

MO = {"metric": ["val_acc", "param_count"], "mode": ["max", "min"]}


def _parse(**overrides: Any) -> Any:
    return parse_campaign(tiny_digits_campaign(**overrides), "c.yaml", check_trainable=False)


def test_lists_make_a_multi_objective_spec_whose_primary_is_the_first() -> None:
    spec = _parse(**MO)
    assert spec.multi_objective
    assert spec.objectives == (
        Objective("val_acc", Mode.MAX),
        Objective("param_count", Mode.MIN),
    )
    assert (spec.metric, spec.mode) == ("val_acc", Mode.MAX)
    assert spec.metrics == ("val_acc", "param_count")
    assert spec.to_dict()["metric"] == ["val_acc", "param_count"]
    assert spec.to_dict()["mode"] == ["max", "min"]
    assert parse_campaign(spec.to_dict(), check_trainable=False) == spec


def test_a_goal_per_objective_round_trips() -> None:
    spec = _parse(**MO, budget={"trials": 8, "max_epochs": 4, "goal": [0.95, 20000]})
    assert spec.budget.goal == (0.95, 20000)
    assert spec.to_dict()["budget"]["goal"] == [0.95, 20000]
    assert parse_campaign(spec.to_dict(), check_trainable=False) == spec


def test_single_objective_is_unchanged() -> None:
    spec = _parse()
    assert not spec.multi_objective
    assert spec.objectives == (Objective("val_acc", Mode.MAX),)
    assert spec.to_dict()["metric"] == "val_acc" and spec.to_dict()["mode"] == "max"


def test_objectives_must_start_with_metric_and_mode() -> None:
    spec = _parse()
    with pytest.raises(ValueError, match=r"`objectives\[0\]` must be \(metric, mode\)"):
        type(spec)(
            **{
                **{f: getattr(spec, f) for f in ("name", "trainable", "space", "budget")},
                "metric": "val_acc",
                "mode": Mode.MAX,
                "objectives": (Objective("param_count", Mode.MIN),),
            }
        )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"metric": ["val_acc", "param_count"], "mode": "max"},
            "c.yaml: mode: must be a list of 2 modes, one per metric (val_acc, param_count) "
            "(got 'max'; allowed a list of min and max)\n  To fix: e.g. mode: [max, min]",
        ),
        (
            {"metric": "val_acc", "mode": ["max", "min"]},
            "c.yaml: mode: is a list, but metric names one metric (got ['max', 'min']; "
            "allowed min, max)",
        ),
        (
            {"metric": ["val_acc"], "mode": ["max"]},
            "c.yaml: metric: lists 1 metric(s); a multi-objective campaign has 2 to 4 "
            "(got ['val_acc'])\n  To fix: for one objective write metric: <name> (not a list)",
        ),
        (
            {"metric": ["a", "b", "c", "d", "e"], "mode": ["max"] * 5},
            "c.yaml: metric: lists 5 metric(s); a multi-objective campaign has 2 to 4",
        ),
        (
            {"metric": ["val_acc", "val_acc"], "mode": ["max", "min"]},
            "c.yaml: metric[1]: repeats metric[0] (got 'val_acc')",
        ),
        (
            {"metric": ["val_acc", "tuner_cost"], "mode": ["max", "min"]},
            "c.yaml: metric[1]: must not start with the reserved prefix 'tuner_'",
        ),
        (
            {"metric": ["val_acc", 3], "mode": ["max", "min"]},
            "c.yaml: metric[1]: must be a string (got 3)",
        ),
        (
            {"metric": ["val_acc", "param_count"], "mode": ["max"]},
            "c.yaml: mode: lists 1 mode(s) for 2 metrics (val_acc, param_count) (got ['max'])",
        ),
        (
            {"metric": ["val_acc", "param_count"], "mode": ["max", "mni"]},
            "c.yaml: mode[1]: unknown mode (got 'mni'; allowed min, max) Did you mean 'min'?\n"
            "  To fix: min to minimize param_count, max to maximize it",
        ),
        (
            {**MO, "sampler": {"type": "cmaes"}},
            "c.yaml: sampler.type: sampler cmaes optimizes one objective; this campaign has 2 "
            "(got 'cmaes'; allowed tpe, nsga2, random, gp, qmc, grid)\n"
            "  To fix: use tpe (the default) or nsga2 for several objectives",
        ),
        (
            {**MO, "budget": {"trials": 8, "max_epochs": 4, "goal": 0.95}},
            "c.yaml: budget.goal: is one value, but the campaign has 2 objectives "
            "(val_acc, param_count) (got 0.95)\n"
            "  To fix: give one value per objective, in their order (val_acc, param_count), "
            "e.g. goal: [..., ...]: one result must meet them all",
        ),
        (
            {**MO, "budget": {"trials": 8, "max_epochs": 4, "goal": [0.95]}},
            "c.yaml: budget.goal: lists 1 value(s) for 2 objectives (val_acc, param_count)",
        ),
        (
            {"budget": {"trials": 8, "max_epochs": 4, "goal": [0.95, 3]}},
            "c.yaml: budget.goal: is a list, but the campaign has one objective (val_acc)",
        ),
        (
            {**MO, "budget": {"trials": 8, "max_epochs": 4, "goal": [0.95, "small"]}},
            "c.yaml: budget.goal[1]: must be a number",
        ),
        (
            {**MO, "warm_start": "runs/earlier"},
            "c.yaml: warm_start: applies to single-objective campaigns; this one has 2 objectives",
        ),
        (
            {**MO, "sampler": {"type": "nsga2", "startup_trials": 1}},
            "c.yaml: sampler.startup_trials: must be at least 2 for sampler nsga2",
        ),
    ],
    ids=[
        "scalar_mode",
        "list_mode_one_metric",
        "one_metric_list",
        "five_metrics",
        "repeated",
        "reserved",
        "not_a_string",
        "length_mismatch",
        "mode_typo",
        "cmaes",
        "goal",
        "goal_list_length",
        "goal_list_one_objective",
        "goal_list_not_a_number",
        "warm_start",
        "nsga2_population",
    ],
)
def test_bad_objectives_are_refused_with_the_usual_message(
    overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(SpecError) as info:
        _parse(**overrides)
    assert str(info.value).startswith(message)


def test_nsga2_sampler_is_built_with_the_population_from_startup_trials() -> None:
    spec = _parse(**MO, sampler={"type": "nsga2", "seed": 1, "startup_trials": 6})
    assert spec.sampler.type is SamplerType.NSGA2
    sampler = make_sampler(spec.sampler, spec.space)
    assert type(sampler).__name__ == "NSGAIISampler"
    assert sampler._population_size == 6


def test_bad_multi_objective_file_exits_2_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(tiny_digits_campaign(metric=["val_acc", "param_count"])))
    runs = tmp_path / "runs"
    code = main(["run", str(path), "--runs-dir", str(runs)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"error: {path}: mode: must be a list of 2 modes")
    assert "Traceback" not in err
    assert not runs.exists()


def test_shipped_pareto_campaign_is_multi_objective() -> None:
    root = Path(__file__).resolve().parents[3]
    spec = load_campaign(root / "search_spaces" / "digits_pareto.yaml")
    assert spec.multi_objective and spec.metrics == ("val_acc", "param_count")


@pytest.mark.parametrize("kind", ["tpe", "nsga2", "random", "gp", "qmc", "grid"])
def test_every_sampler_allowed_with_several_objectives_samples_a_two_objective_study(
    kind: str,
) -> None:
    import optuna

    from tuner.space import suggest

    space = {
        "lr": {"type": "float", "low": 0.001, "high": 0.1, "step": 0.001},
        "channels": {"type": "int", "low": 8, "high": 16, "step": 8},
    }
    data = {**tiny_digits_campaign(**MO), "space": space, "sampler": {"type": kind, "seed": 0}}
    spec = parse_campaign(data, check_trainable=False)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(
        directions=["maximize", "minimize"], sampler=make_sampler(spec.sampler, spec.space)
    )
    for i in range(14):
        trial = study.ask()
        config = suggest(trial, spec.space)
        if i % 3 == 2:  # as ASHA's stopped trials are told
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        else:
            study.tell(trial, [config["lr"] * 10, float(config["channels"])])
    assert len(study.best_trials) >= 1
