"""budget.goal (tuner/budget/_goal.py): which results meet it, in the mode's direction."""

from __future__ import annotations

import math

from tuner.budget import Goal, Goals


def test_a_maximised_goal_is_met_at_or_above_it() -> None:
    goal = Goal("val_acc", 0.9, maximize=True)
    assert goal.met("t1", {"val_acc": 0.89}) is None
    assert goal.met("t1", {"val_acc": 0.9}) == "goal reached: val_acc=0.9 >= 0.9 (trial t1)"
    assert goal.met("t2", {"val_acc": 0.95}) is not None


def test_a_minimised_goal_is_met_at_or_below_it() -> None:
    goal = Goal("val_loss", 0.2, maximize=False)
    assert goal.met("t1", {"val_loss": 0.21}) is None
    assert goal.met("t1", {"val_loss": 0.15}) == "goal reached: val_loss=0.15 <= 0.2 (trial t1)"


def test_results_without_a_usable_value_never_meet_it() -> None:
    goal = Goal("val_acc", 0.0, maximize=True)
    for result in ({}, {"val_acc": math.nan}, {"val_acc": True}, {"val_acc": "1.0"}):
        assert goal.met("t", result) is None, result


def test_goals_of_several_objectives_are_met_only_all_at_once() -> None:
    goals = Goals(
        (Goal("val_acc", 0.95, maximize=True), Goal("param_count", 20000, maximize=False))
    )
    assert goals.met("t1", {"val_acc": 0.97, "param_count": 25000}) is None
    assert goals.met("t1", {"val_acc": 0.90, "param_count": 15000}) is None
    assert goals.met("t1", {"val_acc": 0.97}) is None, "a metric missing: not met"
    assert goals.met("t2", {"val_acc": 0.96, "param_count": 15000}) == (
        "goal reached: val_acc=0.96 >= 0.95 and param_count=15000 <= 20000 (trial t2)"
    )


def test_the_campaign_builds_goals_in_the_objectives_order() -> None:
    from tests.conftest import tiny_digits_campaign
    from tuner._ray.campaign import campaign_goal
    from tuner.spec import parse_campaign

    spec = parse_campaign(
        tiny_digits_campaign(
            metric=["val_acc", "param_count"],
            mode=["max", "min"],
            budget={"trials": 4, "max_epochs": 2, "goal": [0.9, 30000]},
        ),
        check_trainable=False,
    )
    assert campaign_goal(spec) == Goals(
        (Goal("val_acc", 0.9, maximize=True), Goal("param_count", 30000, maximize=False))
    )
    single = parse_campaign(tiny_digits_campaign(budget={"goal": 0.9}), check_trainable=False)
    assert campaign_goal(single) == Goal("val_acc", 0.9, maximize=True)
    assert campaign_goal(parse_campaign(tiny_digits_campaign(), check_trainable=False)) is None
