"""Every validation rule of the campaign schema, with the exact message users see."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest

from tuner.errors import SpecError
from tuner.spec import parse_campaign

pytestmark = pytest.mark.usefixtures("pinned_builtins")

DELETE = object()


def base() -> dict[str, Any]:
    """A valid campaign exercising every section."""
    return {
        "name": "demo",
        "trainable": "digits_cnn",
        "metric": "val_acc",
        "mode": "max",
        "space": {
            "lr": {"type": "float", "low": 1.0e-4, "high": 0.1, "log": True},
            "channels": {"type": "int", "low": 8, "high": 64, "step": 8},
            "optimizer": {"type": "categorical", "choices": ["sgd", "adam", "adamw"]},
            "momentum": {"type": "float", "low": 0.0, "high": 0.99, "when": {"optimizer": ["sgd"]}},
            "hidden": {"value": 64},
        },
        "budget": {"trials": 10, "max_epochs": 5},
        "scheduler": {"type": "asha", "grace_period": 1, "reduction_factor": 3},
        "sampler": {"type": "tpe", "seed": 0},
        "resources": {"cpu": 1, "gpu": 0},
        "checkpoint": {"every": 1, "keep": 2},
        "failure": {"max_retries": 2},
        "fixed": {"batch_size": 64},
    }


def edited(edits: dict[str, Any]) -> dict[str, Any]:
    """``base()`` with dotted-path edits applied (``DELETE`` removes the key)."""
    data = copy.deepcopy(base())
    for path, value in edits.items():
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node[key]
        if value is DELETE:
            del node[last]
        else:
            node[last] = value
    return data


# (id, edits, exact message)
CASES: list[tuple[str, dict[str, Any], str]] = [
    (
        "unknown_top_key",
        {"nmae": "x"},
        (
            "<dict>: nmae: unknown key (allowed name, description, trainable, metric, mode, "
            "space, budget, scheduler, sampler, resources, checkpoint, failure, pricing, fixed, "
            "study_storage, warm_start, tracking) Did you mean 'name'?"
        ),
    ),
    (
        "sampler_key_typo",
        {"sampler.tyep": "tpe", "sampler.type": DELETE},
        (
            "<dict>: sampler.tyep: unknown key (allowed type, seed, startup_trials) Did you "
            "mean 'type'?"
        ),
    ),
    (
        "missing_name",
        {"name": DELETE},
        "<dict>: name: required key is missing",
    ),
    (
        "missing_budget_trials",
        {"budget.trials": DELETE},
        "<dict>: budget.trials: required key is missing",
    ),
    (
        "name_pattern",
        {"name": "-bad name"},
        (
            "<dict>: name: must start with a letter or digit and contain only letters, digits, "
            "'_', '.', '-' (got '-bad name')"
            "\n  To fix: it names the run folder, e.g. 'digits-cnn' or 'mlp_v2'"
        ),
    ),
    (
        "name_not_str",
        {"name": 12},
        "<dict>: name: must be a string (got 12)",
    ),
    (
        "metric_reserved",
        {"metric": "tuner_loss"},
        (
            "<dict>: metric: must not start with the reserved prefix 'tuner_' (got "
            "'tuner_loss')"
            "\n  To fix: optimize a metric your trainable reports; 'tuner_' metrics are the "
            "service's"
        ),
    ),
    (
        "mode_unknown",
        {"mode": "maximize"},
        (
            "<dict>: mode: unknown mode (got 'maximize'; allowed min, max)"
            "\n  To fix: min to minimize val_acc, max to maximize it"
        ),
    ),
    (
        "mode_case",
        {"mode": "MAX"},
        (
            "<dict>: mode: unknown mode (got 'MAX'; allowed min, max) Did you mean 'max'?"
            "\n  To fix: min to minimize val_acc, max to maximize it"
        ),
    ),
    (
        "space_empty",
        {"space": {}},
        (
            "<dict>: space: must define at least one parameter"
            "\n  To fix: write {type: float, low: ..., high: ...}, {type: int, low: ..., high: "
            "...}, {choices: [...]} or {value: ...}"
        ),
    ),
    (
        "space_not_mapping",
        {"space": ["lr"]},
        (
            "<dict>: space: must be a mapping (got ['lr'])"
            "\n  To fix: write {type: float, low: ..., high: ...}, {type: int, low: ..., high: "
            "...}, {choices: [...]} or {value: ...}"
        ),
    ),
    (
        "param_not_mapping",
        {"space.lr": 0.01},
        (
            "<dict>: space.lr: must be a mapping (got 0.01)"
            "\n  To fix: write {type: float, low: ..., high: ...}, {type: int, low: ..., high: "
            "...}, {choices: [...]} or {value: ...}; constants may also go under fixed:"
        ),
    ),
    (
        "param_name_pattern",
        {"space.2lr": {"value": 1}},
        (
            "<dict>: space.2lr: parameter names must be identifiers (letters, digits, '_'; not "
            "starting with a digit) (got '2lr')"
        ),
    ),
    (
        "param_name_reserved",
        {"space.tuner_lr": {"value": 1}},
        (
            "<dict>: space.tuner_lr: parameter names must not start with the reserved prefix "
            "'tuner_' (got 'tuner_lr')"
            "\n  To fix: rename it; keys starting with 'tuner_' are added by the service itself"
        ),
    ),
    (
        "float_low_gt_high",
        {"space.lr.low": 0.5},
        "<dict>: space.lr.high: must be greater than low=0.5 (got 0.1)",
    ),
    (
        "float_low_eq_high",
        {"space.lr.low": 0.1},
        "<dict>: space.lr.high: must be greater than low=0.1 (got 0.1)",
    ),
    (
        "float_log_nonpositive",
        {"space.lr.low": 0.0},
        (
            "<dict>: space.lr.low: must be > 0 with log: true (got 0.0)"
            "\n  To fix: use a positive low such as 1.0e-5, or drop log: true"
        ),
    ),
    (
        "float_step_with_log",
        {"space.lr.step": 0.01},
        "<dict>: space.lr.step: cannot be combined with log: true (got 0.01)",
    ),
    (
        "float_step_not_dividing",
        {"space.momentum.step": 0.2},
        (
            "<dict>: space.momentum.step: must divide high - low = 0.99 evenly (got 0.2)"
            "\n  To fix: set high to 0.8 or change step"
        ),
    ),
    (
        "float_inf",
        {"space.momentum.high": math.inf},
        "<dict>: space.momentum.high: must be a finite number (got inf)",
    ),
    (
        "range_without_type",
        {"space.lr.type": DELETE},
        (
            "<dict>: space.lr.type: a range needs an explicit type (allowed float, int)"
            "\n  To fix: add type: float or type: int"
        ),
    ),
    (
        "unknown_param_type",
        {"space.lr.type": "flaot"},
        (
            "<dict>: space.lr.type: unknown parameter type (got 'flaot'; allowed float, int, "
            "categorical, fixed) Did you mean 'float'?"
        ),
    ),
    (
        "param_key_typo",
        {"space.channels.setp": 2},
        (
            "<dict>: space.channels.setp: unknown key (allowed type, low, high, log, step, "
            "when) Did you mean 'step'?"
        ),
    ),
    (
        "key_of_other_type",
        {"space.lr.choices": [1, 2]},
        (
            "<dict>: space.lr.choices: does not apply to a float parameter (allowed type, low, "
            "high, log, step, when)"
        ),
    ),
    (
        "missing_high",
        {"space.lr.high": DELETE},
        "<dict>: space.lr.high: required key is missing",
    ),
    (
        "int_float_low",
        {"space.channels.low": 1.5},
        "<dict>: space.channels.low: must be an integer (got 1.5)",
    ),
    (
        "int_log_low_zero",
        {"space.channels.low": 0, "space.channels.step": DELETE, "space.channels.log": True},
        "<dict>: space.channels.low: must be >= 1 with log: true (got 0)",
    ),
    (
        "int_log_with_step",
        {"space.channels.log": True},
        "<dict>: space.channels.step: must be 1 with log: true (got 8)",
    ),
    (
        "int_step_zero",
        {"space.channels.step": 0},
        "<dict>: space.channels.step: must be an integer >= 1 (got 0)",
    ),
    (
        "int_step_not_dividing",
        {"space.channels.step": 10},
        (
            "<dict>: space.channels.step: must divide high - low = 56 evenly (got 10)"
            "\n  To fix: set high to 58 or change step"
        ),
    ),
    (
        "log_not_bool",
        {"space.lr.log": "yes"},
        "<dict>: space.lr.log: must be true or false (got 'yes')",
    ),
    (
        "choices_empty",
        {"space.optimizer.choices": []},
        "<dict>: space.optimizer.choices: must be a non-empty list (got [])",
    ),
    (
        "choices_string",
        {"space.optimizer.choices": "sgd"},
        "<dict>: space.optimizer.choices: must be a non-empty list (got 'sgd')",
    ),
    (
        "choices_duplicate",
        {"space.optimizer.choices": ["sgd", "adam", "sgd"]},
        "<dict>: space.optimizer.choices[2]: duplicates the choice 'sgd' (got 'sgd')",
    ),
    (
        "choices_bool_int_collide",
        {"space.optimizer.choices": [1, True]},
        "<dict>: space.optimizer.choices[1]: duplicates the choice 1 (got True)",
    ),
    (
        "choices_nonscalar",
        {"space.optimizer.choices": ["sgd", ["adam"]]},
        (
            "<dict>: space.optimizer.choices[1]: must be a string, number, boolean or null "
            "(got ['adam'])"
        ),
    ),
    (
        "when_unknown_parent",
        {"space.momentum.when": {"optimzer": "sgd"}},
        (
            "<dict>: space.momentum.when.optimzer: unknown parameter 'optimzer' (allowed lr, "
            "channels, optimizer, hidden) Did you mean 'optimizer'?"
        ),
    ),
    (
        "when_value_not_allowed",
        {"space.momentum.when": {"optimizer": "sgdd"}},
        (
            "<dict>: space.momentum.when.optimizer: not a value 'optimizer' can take (got "
            "'sgdd'; allowed 'sgd', 'adam', 'adamw')"
        ),
    ),
    (
        "when_int_value_off_step",
        {"space.momentum.when": {"channels": 12}},
        (
            "<dict>: space.momentum.when.channels: not a value 'channels' can take (got 12; "
            "allowed integers 8..64 in steps of 8)"
        ),
    ),
    (
        "when_bool_vs_str",
        {"space.momentum.when": {"optimizer": True}},
        (
            "<dict>: space.momentum.when.optimizer: not a value 'optimizer' can take (got "
            "True; allowed 'sgd', 'adam', 'adamw')"
        ),
    ),
    (
        "when_float_parent",
        {"space.channels.when": {"lr": 0.01}},
        (
            "<dict>: space.channels.when.lr: cannot depend on float parameter 'lr'"
            "\n  To fix: condition on a categorical, int or fixed parameter"
        ),
    ),
    (
        "when_self",
        {"space.momentum.when": {"momentum": 0.5}},
        "<dict>: space.momentum.when.momentum: a parameter cannot depend on itself",
    ),
    (
        "when_cycle",
        {"space.optimizer.when": {"channels": 8}, "space.channels.when": {"optimizer": "sgd"}},
        (
            "<dict>: space.channels.when: conditions form a cycle: channels -> optimizer -> "
            "channels"
            "\n  To fix: remove one of the when: conditions in the cycle"
        ),
    ),
    (
        "when_empty_list",
        {"space.momentum.when": {"optimizer": []}},
        "<dict>: space.momentum.when.optimizer: must list at least one value (got [])",
    ),
    (
        "fixed_key_in_space",
        {"fixed.lr": 0.1},
        (
            "<dict>: fixed.lr: is also a parameter in space"
            "\n  To fix: keep it in one place: remove it from fixed, or from space"
        ),
    ),
    (
        "fixed_key_reserved",
        {"fixed.tuner_seed": 1},
        (
            "<dict>: fixed.tuner_seed: fixed key names must not start with the reserved prefix "
            "'tuner_' (got 'tuner_seed')"
            "\n  To fix: rename it; keys starting with 'tuner_' are added by the service itself"
        ),
    ),
    (
        "grace_gt_max_epochs",
        {"scheduler.grace_period": 6},
        (
            "<dict>: scheduler.grace_period: must be <= budget.max_epochs=5 (got 6)"
            "\n  To fix: ASHA first compares trials after grace_period epochs: lower it or "
            "raise budget.max_epochs"
        ),
    ),
    (
        "reduction_factor_one",
        {"scheduler.reduction_factor": 1},
        "<dict>: scheduler.reduction_factor: must be a number > 1 (got 1)",
    ),
    (
        "fifo_with_grace",  # the base campaign's reduction_factor is reported too
        {"scheduler.type": "fifo"},
        (
            "<dict>: scheduler.grace_period: applies only to scheduler type asha (got 1)"
            "\n  To fix: remove it, or use scheduler type asha"
            "\n<dict>: scheduler.reduction_factor: applies only to scheduler type asha (got 3)"
            "\n  To fix: remove it, or use scheduler type asha"
        ),
    ),
    (
        "min_peers_negative",
        {"scheduler.min_peers": -1},
        "<dict>: scheduler.min_peers: must be an integer >= 0 (got -1)",
    ),
    (
        "fifo_with_min_peers",
        {"scheduler": {"type": "fifo", "min_peers": 2}},
        (
            "<dict>: scheduler.min_peers: applies only to scheduler type asha (got 2)"
            "\n  To fix: remove it, or use scheduler type asha"
        ),
    ),
    (
        "scheduler_unknown",
        {"scheduler": "hyperband"},
        "<dict>: scheduler.type: unknown scheduler (got 'hyperband'; allowed asha, fifo)",
    ),
    (
        "sampler_unknown",
        {"sampler.type": "tpx"},
        (
            "<dict>: sampler.type: unknown sampler (got 'tpx'; allowed tpe, random, grid, "
            "cmaes, gp, qmc, nsga2) Did you mean 'tpe'?"
        ),
    ),
    (
        "sampler_grid_float_no_step",  # every float without a step is named
        {"sampler": "grid"},
        (
            "<dict>: space.lr: the grid sampler needs finitely many values, but this float has "
            "no step"
            "\n  To fix: add a step to it, or use another sampler (tpe, random, qmc, ...)"
            "\n<dict>: space.momentum: the grid sampler needs finitely many values, but this "
            "float has no step"
            "\n  To fix: add a step to it, or use another sampler (tpe, random, qmc, ...)"
        ),
    ),
    (
        "startup_for_random",
        {"sampler": {"type": "random", "startup_trials": 3}},
        (
            "<dict>: sampler.startup_trials: does not apply to sampler random (got 3; allowed "
            "with sampler tpe, gp, cmaes, nsga2)"
        ),
    ),
    (
        "seed_negative",
        {"sampler.seed": -1},
        "<dict>: sampler.seed: must be an integer >= 0 (got -1)",
    ),
    (
        "trials_string",
        {"budget.trials": "ten"},
        "<dict>: budget.trials: must be an integer >= 1 (got 'ten')",
    ),
    (
        "trials_bool",
        {"budget.trials": True},
        "<dict>: budget.trials: must be an integer >= 1 (got True)",
    ),
    (
        "trials_float",
        {"budget.trials": 10.0},
        "<dict>: budget.trials: must be an integer >= 1 (got 10.0)",
    ),
    (
        "max_epochs_zero",
        {"budget.max_epochs": 0},
        "<dict>: budget.max_epochs: must be an integer >= 1 (got 0)",
    ),
    (
        "time_limit_junk",
        {"budget.time_limit": "10 minutes"},
        (
            "<dict>: budget.time_limit: must be a duration (got '10 minutes'; allowed seconds "
            "as a number, or a string like '90s', '10m', '2h', '1h30m', '1.5h')"
        ),
    ),
    (
        "time_limit_zero",
        {"budget.time_limit": 0},
        "<dict>: budget.time_limit: must be a positive duration (got 0)",
    ),
    (
        "gpu_fraction_above_one",
        {"resources.gpu": 1.5},
        (
            "<dict>: resources.gpu: must be a whole number above 1 (fractions share one GPU) "
            "(got 1.5)"
        ),
    ),
    (
        "cpu_zero",
        {"resources.cpu": 0},
        "<dict>: resources.cpu: must be a number > 0 (got 0)",
    ),
    (
        "cpu_bool",
        {"resources.cpu": True},
        "<dict>: resources.cpu: must be a number > 0 (got True)",
    ),
    (
        "max_concurrent_zero",
        {"resources.max_concurrent": 0},
        "<dict>: resources.max_concurrent: must be an integer >= 1 (got 0)",
    ),
    (
        "workers_zero",
        {"resources.workers": 0},
        "<dict>: resources.workers: must be an integer >= 1 (got 0)",
    ),
    (
        "ddp_fractional_gpu",
        {"resources.workers": 2, "resources.gpu": 0.5},
        "<dict>: resources.gpu: must be a whole number when resources.workers > 1 "
        "(each DDP worker owns its GPUs) (got 0.5)",
    ),
    (
        "keep_zero",
        {"checkpoint.keep": 0},
        "<dict>: checkpoint.keep: must be an integer >= 1 (got 0)",
    ),
    (
        "max_retries_negative",
        {"failure.max_retries": -1},
        "<dict>: failure.max_retries: must be an integer >= 0 (got -1)",
    ),
    (
        "max_failed_trials_negative",
        {"failure.max_failed_trials": -1},
        "<dict>: failure.max_failed_trials: must be an integer >= 0 (got -1)"
        "\n  To fix: the number of failed trials the campaign tolerates (0: it stops at "
        "the first); leave it out for no limit",
    ),
    (
        "max_failed_trials_float",
        {"failure.max_failed_trials": 2.5},
        "<dict>: failure.max_failed_trials: must be an integer >= 0 (got 2.5)"
        "\n  To fix: the number of failed trials the campaign tolerates (0: it stops at "
        "the first); leave it out for no limit",
    ),
    (
        "max_failed_trials_word",
        {"failure.max_failed_trials": "unlimited"},
        "<dict>: failure.max_failed_trials: must be an integer >= 0 (got 'unlimited')"
        "\n  To fix: the number of failed trials the campaign tolerates (0: it stops at "
        "the first); leave it out for no limit",
    ),
    (
        "failure_typo",
        {"failure.max_failures": 2},
        "<dict>: failure.max_failures: unknown key (allowed max_retries, max_failed_trials) "
        "Did you mean 'max_failed_trials'?",
    ),
    (
        "checkpoint_typo",
        {"checkpoint.evrey": 2},
        "<dict>: checkpoint.evrey: unknown key (allowed every, keep) Did you mean 'every'?",
    ),
    (
        "trainable_unknown_builtin",
        {"trainable": "digits_cn"},
        (
            "<dict>: trainable: unknown built-in trainable (got 'digits_cn'; allowed "
            "digits_cnn, tabular_mlp) Did you mean 'digits_cnn'?"
            "\n  To fix: use a built-in name, or 'package.module:function' for your own "
            "trainable"
        ),
    ),
    (
        "trainable_malformed",
        {"trainable": "pkg.mod:"},
        (
            "<dict>: trainable: malformed trainable reference (got 'pkg.mod:'; allowed "
            "'package.module:function')"
        ),
    ),
    (
        "trainable_not_str",
        {"trainable": 3},
        (
            "<dict>: trainable: must be a built-in trainable name or 'package.module:function' "
            "(got 3; allowed digits_cnn, tabular_mlp)"
        ),
    ),
    (
        "goal_not_a_number",
        {"budget.goal": "high"},
        "<dict>: budget.goal: must be a number >= -1e+15 (got 'high')",
    ),
    (
        "goal_too_large",
        {"budget.goal": 1e20},
        "<dict>: budget.goal: must be at most 1000000000000000 (got 1e+20)\n  To fix: use at "
        "most 1000000000000000: a metric is a float the trainable reports; beyond 1e15 it is "
        "no score a run can reach",
    ),
    (
        "study_storage_scheme",
        {"study_storage": "postgress://db/tuner"},
        "<dict>: study_storage: unknown study storage (got 'postgress://...'; allowed "
        "sqlite://, postgresql://, mysql://, journal://) Did you mean 'postgresql'?\n  To fix: "
        "e.g. postgresql+psycopg://user@host:5432/db or journal:///shared/studies.log",
    ),
    (
        "study_storage_password",
        {"study_storage": "postgresql+psycopg://tuner:s3cret@db:5432/tuner"},
        "<dict>: study_storage: the study storage URL carries a password, which would be "
        "written to the run folder and printed (got 'postgresql+psycopg://tuner:***@db:5432/tuner')\n"
        "  To fix: drop it from the URL and set PGPASSWORD or a ~/.pgpass entry (PostgreSQL), "
        "or MYSQL_PWD (MySQL)",
    ),
    (
        "description_not_str",
        {"description": ["x"]},
        "<dict>: description: must be a string (got ['x'])",
    ),
]


@pytest.mark.parametrize(("edits", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rejects_with_exact_message(edits: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_campaign(edited(edits), check_trainable=False)
    assert str(info.value) == message


def test_base_is_valid() -> None:
    spec = parse_campaign(base(), check_trainable=False)
    assert spec.space.names == ("lr", "channels", "optimizer", "momentum", "hidden")


def test_rejects_values_yaml_cannot_hold() -> None:
    with pytest.raises(SpecError, match=r"^<dict>: fixed\.batch_size: must be a YAML scalar"):
        parse_campaign(edited({"fixed.batch_size": object()}), check_trainable=False)


def test_not_a_mapping() -> None:
    with pytest.raises(SpecError, match=r"^<dict>: top level: must be a mapping \(got \['x'\]\)"):
        parse_campaign(["x"], check_trainable=False)  # type: ignore[arg-type]


def test_error_is_a_value_error_with_fields() -> None:
    with pytest.raises(ValueError) as info:
        parse_campaign(edited({"sampler.type": "tpx"}), source="c.yaml", check_trainable=False)
    err = info.value
    assert isinstance(err, SpecError)
    assert (err.source, err.path, err.got, err.suggestion) == (
        "c.yaml",
        "sampler.type",
        "tpx",
        "tpe",
    )
    assert err.allowed == "tpe, random, grid, cmaes, gp, qmc, nsga2"


def test_shorthand_sections_and_nulls() -> None:
    spec = parse_campaign(
        edited(
            {
                "sampler": "random",
                "scheduler": "fifo",
                "resources": None,
                "budget.time_limit": None,
                "description": None,
            }
        ),
        check_trainable=False,
    )
    assert spec.sampler.type.value == "random"
    assert spec.scheduler.type.value == "fifo"
    assert spec.budget.time_limit_s is None
    assert spec.description == ""


def test_conditions_on_int_and_fixed_parents_and_bool_choices() -> None:
    spec = parse_campaign(
        edited(
            {
                "space.nesterov": {"choices": [True, False], "when": {"optimizer": "sgd"}},
                "space.dampening": {
                    "type": "float",
                    "low": 0.0,
                    "high": 0.5,
                    "when": {"nesterov": False, "channels": [8, 16], "hidden": 64},
                },
            }
        ),
        check_trainable=False,
    )
    (nesterov, channels, hidden) = spec.space["dampening"].when
    assert nesterov.parent == "nesterov" and nesterov.values == (False,)
    assert channels.values == (8, 16)
    assert hidden.values == (64,)


def test_topological_order_keeps_file_order_otherwise() -> None:
    data = edited({})
    data["space"] = {
        "b": {"type": "float", "low": 0, "high": 1, "when": {"c": "x"}},
        "a": {"type": "int", "low": 1, "high": 3},
        "d": {"value": 1, "when": {"b2": 2}},
        "c": {"choices": ["x", "y"], "when": {"a": [1, 2]}},
        "b2": {"type": "int", "low": 1, "high": 2},
    }
    spec = parse_campaign(data, check_trainable=False)
    assert spec.space.names == ("a", "c", "b", "b2", "d")


def test_a_goal_is_kept_and_written_back() -> None:
    spec = parse_campaign(edited({"budget.goal": 0.9}), check_trainable=False)
    assert spec.budget.goal == 0.9 and spec.budget.to_dict()["goal"] == 0.9
    assert parse_campaign(edited({"budget.goal": -3}), check_trainable=False).budget.goal == -3
    assert parse_campaign(base(), check_trainable=False).budget.goal is None


def test_a_study_storage_is_kept_and_written_back() -> None:
    url = "postgresql+psycopg://tuner@127.0.0.1:5432/studies"
    spec = parse_campaign(edited({"study_storage": url}), check_trainable=False)
    assert spec.study_storage == url and spec.to_dict()["study_storage"] == url
    assert parse_campaign(spec.to_dict(), check_trainable=False) == spec
    assert spec.with_overrides(study_storage="journal:///tmp/s.log").study_storage == (
        "journal:///tmp/s.log"
    )
