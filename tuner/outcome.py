"""How a finished trial is told to Optuna: the fidelity-correct decision, as a pure function.

Ray's stock ``OptunaSearch`` tells Optuna COMPLETE for every trial that has a metric in its
last result, including those ASHA stopped after one epoch, so TPE learns from a mix of
one-epoch and full-length values. Here a trial is COMPLETE only when it trained for the full
``max_epochs``; a trial stopped earlier (by the scheduler, the time limit or its own stop
rule) is PRUNED and keeps its per-epoch values as Optuna intermediate values; an errored
trial is FAIL.

A FAIL names its kind (:class:`Failure`): ``oom`` (CUDA out of memory), ``error`` (the
trainable raised), ``never reported``, ``no epoch`` or ``no metric``; :func:`failure_message`
turns it into one line naming the trial, its config and what was missing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from tuner.contract import EPOCH_KEY, RESERVED_PREFIX, STOP_REASON_KEY


class Outcome(str, Enum):
    """Final state of a trial, named as Optuna names them."""

    COMPLETE = "COMPLETE"
    PRUNED = "PRUNED"
    FAIL = "FAIL"


class Failure(str, Enum):
    """Why a trial FAILED (the trial's fault, not the campaign's: budget and orphans aside)."""

    OOM = "oom"
    ERROR = "error"
    NEVER_REPORTED = "never reported"
    NO_EPOCH = "no epoch"
    NO_METRIC = "no metric"


OOM_REASON = Failure.OOM.value
"""The stop reason of a trial that ran out of GPU memory: exactly ``"oom"``."""


@dataclass(frozen=True)
class ErrorInfo:
    """What a trial raised: the user's exception (Ray's wrappers peeled off).

    Attributes:
        type: Exception class, qualified unless a builtin (``torch.OutOfMemoryError``).
        message: The last non-empty line of its message (may be empty).
        oom: Whether it is a CUDA out-of-memory error (anywhere in the cause chain).
    """

    type: str
    message: str
    oom: bool = False

    def __str__(self) -> str:
        return f"{self.type}: {self.message}" if self.message else self.type


@dataclass(frozen=True)
class Decision:
    """What to tell Optuna about a finished trial.

    ``failure`` is set for trials the campaign counts as failed (outcome FAIL).
    """

    outcome: Outcome
    value: float | None
    epochs: int
    reason: str
    failure: Failure | None = None


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
    epoch_attr: str = EPOCH_KEY,
    error_info: ErrorInfo | None = None,
) -> Decision:
    """Decides the Optuna state of a finished trial from its last result.

    Args:
        result: The trial's last reported result, or None if it never reported.
        error: Whether the trial ended with an error (after its retries).
        metric: The campaign's objective metric.
        max_epochs: Epochs a trial must reach to count as COMPLETE.
        epoch_attr: The result key holding the epoch count.
        error_info: What it raised, when known (with ``error``).

    Returns:
        The decision, with a human-readable reason.
    """
    epochs = 0
    if result is not None:
        raw_epoch = result.get(epoch_attr)
        if isinstance(raw_epoch, (int, float)) and not isinstance(raw_epoch, bool):
            epochs = int(raw_epoch)
    if error:
        if error_info is not None and error_info.oom:
            return Decision(Outcome.FAIL, None, epochs, OOM_REASON, Failure.OOM)
        reason = f"error: {error_info}" if error_info is not None else "error: the trainable raised"
        return Decision(Outcome.FAIL, None, epochs, reason, Failure.ERROR)
    if result is None or not user_keys(result):
        return Decision(
            Outcome.FAIL, None, 0, "the trainable never reported an epoch", Failure.NEVER_REPORTED
        )
    if epochs == 0:
        return Decision(
            Outcome.FAIL, None, 0, f"the results have no {epoch_attr!r}", Failure.NO_EPOCH
        )
    value = _finite(result.get(metric))
    own_reason = result.get(STOP_REASON_KEY)
    if isinstance(own_reason, str) and own_reason:
        return Decision(Outcome.PRUNED, value, epochs, own_reason)
    if metric not in result:
        return Decision(
            Outcome.FAIL,
            None,
            epochs,
            f"the last result has no metric {metric!r}",
            Failure.NO_METRIC,
        )
    if value is None:
        return Decision(Outcome.PRUNED, None, epochs, f"non-finite {metric} at epoch {epochs}")
    if epochs >= max_epochs:
        return Decision(Outcome.COMPLETE, value, epochs, "completed")
    return Decision(
        Outcome.PRUNED, value, epochs, f"stopped early at epoch {epochs} of {max_epochs}"
    )


# Keys Ray Tune adds to every result (ray.tune.result.AUTO_RESULT_KEYS and friends): not
# what the trainable reported.
_TUNE_KEYS = frozenset(
    {
        "checkpoint_dir_name",
        "config",
        "date",
        "done",
        "episodes_total",
        "experiment_tag",
        "hostname",
        "iterations_since_restore",
        "node_ip",
        "pid",
        "should_checkpoint",
        "time_since_restore",
        "time_this_iter_s",
        "time_total_s",
        "timestamp",
        "timesteps_since_restore",
        "timesteps_total",
        "training_iteration",
        "trial_id",
        "__duplicate__",
    }
)


def user_keys(result: Mapping[str, Any]) -> list[str]:
    """The keys the trainable itself reported (Tune's, ``config/...`` and ``tuner_`` left out)."""
    return sorted(
        str(key)
        for key in result
        if key not in _TUNE_KEYS and not str(key).startswith(("config/", RESERVED_PREFIX))
    )


# ---------------------------------------------------------------------------------------
# What a trial raised.

_OOM_TEXT = "CUDA out of memory"
_OOM_TYPE = re.compile(r"\btorch(?:\.cuda)?\.OutOfMemoryError\b")
_MAX_MESSAGE = 300


def _is_oom(exc: BaseException) -> bool:
    for cls in type(exc).__mro__:
        if cls.__name__ == "OutOfMemoryError" and cls.__module__.split(".")[0] == "torch":
            return True
    # Older torch (and some extensions) raise a plain RuntimeError with this text.
    return isinstance(exc, RuntimeError) and _OOM_TEXT in str(exc)


def _oom_in_text(text: str) -> bool:
    return bool(_OOM_TYPE.search(text)) or _OOM_TEXT in text


def _is_wrapper(exc: BaseException) -> bool:
    """Ray's own exceptions around the user's (RayTaskError, TuneError, StartTraceback...)."""
    return type(exc).__module__.split(".")[0] == "ray"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what caused it: Ray's ``.cause``, then ``__cause__``/``__context__``."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo and len(seen) < 32:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        for nxt in (getattr(current, "cause", None), current.__cause__, current.__context__):
            if isinstance(nxt, BaseException):
                todo.append(nxt)


def _type_name(cls: type) -> str:
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return last if len(last) <= _MAX_MESSAGE else last[: _MAX_MESSAGE - 3] + "..."


def describe_exception(exc: BaseException) -> ErrorInfo:
    """The user's exception inside Ray's wrappers, and whether any link is a CUDA OOM.

    Ray hands the driver a ``RayTaskError`` whose ``.cause`` (or ``__cause__``) is what the
    trainable raised; the first exception in the chain that is not Ray's is named.
    """
    chain = list(_chain(exc))
    user = next((e for e in chain if not _is_wrapper(e)), chain[-1])
    # A pickle (Tune's error.pkl) drops __cause__, but a RayTaskError keeps the worker's
    # whole traceback as text: an OOM chained under another exception is found there.
    traces = [getattr(e, "traceback_str", None) for e in chain if _is_wrapper(e)]
    oom = any(_is_oom(e) for e in chain) or any(
        isinstance(t, str) and _oom_in_text(t) for t in traces
    )
    return ErrorInfo(_type_name(type(user)), _last_line(str(user)), oom)


_EXC_LINE = re.compile(
    r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning)\w*)(?::\s*(.*))?$"
)


def describe_error_text(text: str) -> ErrorInfo:
    """The same from the text of a traceback (Tune's ``error.txt``, when no pickle exists).

    The last ``Type: message`` line is the exception; OOM is recognized by
    ``torch.OutOfMemoryError`` (or ``torch.cuda.``) or "CUDA out of memory" anywhere in it.
    """
    oom = _oom_in_text(text)
    for line in reversed(text.strip().splitlines()):
        match = _EXC_LINE.match(line.strip())
        if match:
            message = _last_line(match.group(2) or "")
            return ErrorInfo(match.group(1), message, oom)
    return ErrorInfo("error", _last_line(text), oom)


# ---------------------------------------------------------------------------------------
# The message a failed trial gets.


def _fmt_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def trial_label(trial_id: str, params: Mapping[str, Any]) -> str:
    """``trial 3f2a1b (lr=0.01, layers=2)``: the trial and the config it was given."""
    config = ", ".join(f"{k}={_fmt_value(v)}" for k, v in params.items())
    return f"trial {trial_id} ({config})" if config else f"trial {trial_id}"


def failure_message(
    decision: Decision,
    *,
    trial_id: str,
    params: Mapping[str, Any],
    result: Mapping[str, Any] | None,
    metric: str,
    epoch_attr: str = EPOCH_KEY,
    error_info: ErrorInfo | None = None,
    retried: bool = True,
) -> str:
    """One line naming the trial, its config, and what went wrong (or was missing).

    Args:
        decision: The trial's decision; its ``failure`` says which message.
        trial_id: The Tune trial id.
        params: The hyperparameters it was given.
        result: Its last result (for what it did report).
        metric: The campaign's metric.
        epoch_attr: The result key holding the epoch count.
        error_info: What it raised, for ``oom`` and ``error``.
        retried: Whether Tune retried an error before giving up (``failure.max_retries``).

    Returns:
        e.g. ``trial 3f2a1b (lr=0.01, layers=2): reported no 'val_loss' (it reported: acc,
        loss); the campaign's metric is val_loss``.
    """
    who = trial_label(trial_id, params)
    failure = decision.failure
    at = f" at epoch {decision.epochs}" if decision.epochs else ""
    reported = user_keys(result or {})
    if failure is Failure.OOM:
        what = f" ({error_info})" if error_info is not None else ""
        return f"{who}: ran out of GPU memory{at}{what}; not retried (it would run out again)"
    if failure is Failure.ERROR:
        what = f"{error_info}" if error_info is not None else "an exception"
        after = " (after its retries)" if retried else ""
        return f"{who}: raised {what}{at}{after}"
    if failure is Failure.NEVER_REPORTED:
        return (
            f"{who}: never reported a result; the trainable must call "
            f"ray.tune.report({{{epoch_attr!r}: ..., {metric!r}: ...}}) once per epoch"
        )
    if failure is Failure.NO_EPOCH:
        return (
            f"{who}: reported no {epoch_attr!r} (it reported: {', '.join(reported)}); "
            f"every report needs {epoch_attr!r} (1-based) and {metric!r}"
        )
    if failure is Failure.NO_METRIC:
        others = [k for k in reported if k != epoch_attr]
        return (
            f"{who}: reported no {metric!r}{at} (it reported: {', '.join(others) or 'nothing'}"
            f"); the campaign's metric is {metric}"
        )
    return f"{who}: {decision.reason}"
