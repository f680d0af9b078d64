"""How a finished trial is told to Optuna: the fidelity-correct decision, as a pure function.

Ray's stock ``OptunaSearch`` tells Optuna COMPLETE for every trial that has a metric in its
last result, including those ASHA stopped after one epoch, so TPE learns from a mix of
one-epoch and full-length values. Here a trial is COMPLETE only when it trained for the full
``max_epochs``; a trial stopped earlier (by the scheduler, the time limit or its own stop
rule) is PRUNED and keeps its per-epoch values as Optuna intermediate values; an errored
trial is FAIL.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

STOP_REASON_KEY = "tuner_stop_reason"
"""Metric a trainable reports when it ends a trial itself (divergence, plateau)."""


class Outcome(str, Enum):
    """Final state of a trial, named as Optuna names them."""

    COMPLETE = "COMPLETE"
    PRUNED = "PRUNED"
    FAIL = "FAIL"


@dataclass(frozen=True)
class Decision:
    """What to tell Optuna about a finished trial."""

    outcome: Outcome
    value: float | None
    epochs: int
    reason: str


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    as_float = float(value)
    return as_float if math.isfinite(as_float) else None


def decide_outcome(
    result: Mapping[str, Any] | None,
    *,
    error: bool,
    metric: str,
    max_epochs: int,
    epoch_attr: str = "epoch",
) -> Decision:
    """Decides the Optuna state of a finished trial from its last result.

    Args:
        result: The trial's last reported result, or None if it never reported.
        error: Whether the trial ended with an error (after its retries).
        metric: The campaign's objective metric.
        max_epochs: Epochs a trial must reach to count as COMPLETE.
        epoch_attr: The result key holding the epoch count.

    Returns:
        The decision, with a human-readable reason.
    """
    epochs = 0
    if result is not None:
        raw_epoch = result.get(epoch_attr)
        if isinstance(raw_epoch, (int, float)) and not isinstance(raw_epoch, bool):
            epochs = int(raw_epoch)
    if error:
        return Decision(Outcome.FAIL, None, epochs, "error: the trainable raised")
    if result is None or epochs == 0:
        return Decision(Outcome.FAIL, None, 0, "the trainable never reported an epoch")
    value = _finite(result.get(metric))
    own_reason = result.get(STOP_REASON_KEY)
    if isinstance(own_reason, str) and own_reason:
        return Decision(Outcome.PRUNED, value, epochs, own_reason)
    if metric not in result:
        return Decision(Outcome.FAIL, None, epochs, f"the last result has no metric {metric!r}")
    if value is None:
        return Decision(Outcome.PRUNED, None, epochs, f"non-finite {metric} at epoch {epochs}")
    if epochs >= max_epochs:
        return Decision(Outcome.COMPLETE, value, epochs, "completed")
    return Decision(
        Outcome.PRUNED, value, epochs, f"stopped early at epoch {epochs} of {max_epochs}"
    )
