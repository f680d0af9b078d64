"""budget.goal (tuner/budget/_goal.py): which results meet it, in the mode's direction."""

from __future__ import annotations

import math

from tuner.budget import Goal


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
