"""The fidelity-correct decision: COMPLETE only at max_epochs, PRUNED when stopped early."""

from __future__ import annotations

import math

import pytest

from tuner.outcome import STOP_REASON_KEY, Outcome, decide_outcome


def _decide(result: dict[str, object] | None, error: bool = False) -> tuple[Outcome, object, str]:
    d = decide_outcome(result, error=error, metric="val_acc", max_epochs=10)
    return d.outcome, d.value, d.reason


def test_full_length_trial_is_complete_with_its_last_value() -> None:
    assert _decide({"epoch": 10, "val_acc": 0.97}) == (Outcome.COMPLETE, 0.97, "completed")


def test_trial_stopped_by_scheduler_is_pruned_with_epoch_in_reason() -> None:
    outcome, value, reason = _decide({"epoch": 3, "val_acc": 0.8})
    assert outcome is Outcome.PRUNED
    assert value == 0.8
    assert reason == "stopped early at epoch 3 of 10"


def test_errored_trial_is_fail_even_with_a_value() -> None:
    assert _decide({"epoch": 4, "val_acc": 0.9}, error=True)[0] is Outcome.FAIL


def test_trial_that_never_reported_is_fail() -> None:
    outcome, _, reason = _decide(None)
    assert outcome is Outcome.FAIL
    assert "never reported" in reason


def test_missing_metric_is_fail_naming_the_metric() -> None:
    outcome, _, reason = _decide({"epoch": 10, "accuracy": 0.9})
    assert outcome is Outcome.FAIL
    assert "'val_acc'" in reason


def test_trainable_stop_reason_wins_and_prunes() -> None:
    result = {"epoch": 2, "val_acc": math.nan, STOP_REASON_KEY: "diverged: train loss is nan"}
    outcome, value, reason = _decide(result)
    assert (outcome, value, reason) == (Outcome.PRUNED, None, "diverged: train loss is nan")


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_metric_is_pruned_without_value(bad: float) -> None:
    outcome, value, _ = _decide({"epoch": 10, "val_acc": bad})
    assert outcome is Outcome.PRUNED
    assert value is None
