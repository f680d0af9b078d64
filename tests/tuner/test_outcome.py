"""The fidelity-correct decision: COMPLETE only at max_epochs, PRUNED when stopped early.

And for FAILs: the kind (OOM recognized inside Ray's wrappers) and the message naming the
trial, its config and what was missing. Pure: no Ray is started (Ray's exception class is
built directly).
"""

from __future__ import annotations

import math
import pickle

import pytest
import torch

from tuner.outcome import (
    OOM_REASON,
    STOP_REASON_KEY,
    ErrorInfo,
    Failure,
    Outcome,
    decide_outcome,
    describe_error_text,
    describe_exception,
    failure_message,
    trial_label,
    user_keys,
)


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


# -- failures: kinds, OOM classification and messages ----------------------------------


def _raised(exc: BaseException) -> BaseException:
    """``exc`` as raised (with a traceback), the way a trainable raises it."""
    try:
        raise exc
    except BaseException as caught:
        return caught


def _ray_wrapped(exc: BaseException) -> BaseException:
    """What the driver gets: Ray's RayTaskError around the trainable's exception.

    Built directly (no Ray started); the pickle round trip is Tune's error.pkl.
    """
    import traceback

    from ray.exceptions import RayTaskError

    cause = _raised(exc)
    text = "".join(traceback.format_exception(cause))
    wrapped = RayTaskError("ImplicitFunc.train", text, cause)
    loaded: BaseException = pickle.loads(pickle.dumps(wrapped))
    return loaded


@pytest.mark.parametrize(
    "exc",
    [
        torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
        torch.cuda.OutOfMemoryError("CUDA out of memory."),
        RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.79 GiB total)"),
    ],
    ids=["torch.OutOfMemoryError", "torch.cuda.OutOfMemoryError", "RuntimeError text"],
)
def test_cuda_oom_is_recognized_bare_and_inside_ray_wrappers(exc: BaseException) -> None:
    for seen in (_raised(exc), _ray_wrapped(exc)):
        info = describe_exception(seen)
        assert info.oom
        assert info.message.startswith("CUDA out of memory")
    wrapped = _ray_wrapped(exc)
    assert describe_exception(wrapped.as_instanceof_cause()).oom  # type: ignore[attr-defined]
    assert describe_error_text(str(wrapped)).oom  # Tune's error.txt


def test_oom_chained_under_another_exception_is_still_oom() -> None:
    try:
        try:
            raise torch.OutOfMemoryError("CUDA out of memory.")
        except torch.OutOfMemoryError as oom:
            raise RuntimeError("forward pass failed") from oom
    except RuntimeError as outer:
        info = describe_exception(_ray_wrapped(outer))
    assert info.oom and info.type == "RuntimeError" and info.message == "forward pass failed"


@pytest.mark.parametrize(
    "exc",
    [ValueError("width must be even"), RuntimeError("shape mismatch"), MemoryError()],
)
def test_other_errors_are_not_oom_and_name_type_and_last_line(exc: BaseException) -> None:
    info = describe_exception(_ray_wrapped(exc))
    assert not info.oom
    assert info.type == type(exc).__qualname__
    assert info.message == str(exc)
    assert not describe_error_text(str(_ray_wrapped(exc))).oom


class DataError(Exception):
    """A user's own exception class."""


def test_exception_message_is_its_last_line_and_module_qualified() -> None:
    info = describe_exception(_ray_wrapped(DataError("loading shard 3\nfile is truncated")))
    assert info.type == f"{__name__}.DataError"
    assert info.message == "file is truncated"
    text = describe_error_text("Traceback ...\n  File 'x.py'\nValueError: bad width\n")
    assert (text.type, text.message, text.oom) == ("ValueError", "bad width", False)


def test_oom_decision_is_fail_with_reason_exactly_oom() -> None:
    info = ErrorInfo("torch.OutOfMemoryError", "CUDA out of memory.", oom=True)
    d = decide_outcome({"epoch": 2}, error=True, metric="val_acc", max_epochs=10, error_info=info)
    assert (d.outcome, d.reason, d.failure, d.epochs) == (Outcome.FAIL, "oom", Failure.OOM, 2)
    assert OOM_REASON == "oom"


def test_error_decision_names_the_exception() -> None:
    info = ErrorInfo("ValueError", "width must be even")
    d = decide_outcome(None, error=True, metric="val_acc", max_epochs=10, error_info=info)
    assert (d.outcome, d.failure) == (Outcome.FAIL, Failure.ERROR)
    assert d.reason == "error: ValueError: width must be even"
    plain = decide_outcome(None, error=True, metric="val_acc", max_epochs=10)
    assert plain.reason == "error: the trainable raised" and plain.failure is Failure.ERROR


TUNE_ONLY = {"trial_id": "t1", "done": True, "hostname": "h", "pid": 3, "config/lr": 0.1}


def test_failure_kinds_of_results() -> None:
    def kind(result: dict[str, object] | None) -> Failure | None:
        return decide_outcome(result, error=False, metric="val_acc", max_epochs=10).failure

    assert kind(None) is Failure.NEVER_REPORTED
    assert kind(TUNE_ONLY) is Failure.NEVER_REPORTED  # only Tune's own keys
    assert kind({**TUNE_ONLY, "loss": 0.3}) is Failure.NO_EPOCH
    assert kind({**TUNE_ONLY, "epoch": 3, "loss": 0.3}) is Failure.NO_METRIC
    assert kind({"epoch": 3, "val_acc": 0.3}) is None
    assert kind({"epoch": 10, "val_acc": 0.3}) is None
    assert user_keys({**TUNE_ONLY, "epoch": 1, "acc": 1, "tuner_stop_reason": "x"}) == [
        "acc",
        "epoch",
    ]


def _message(result: dict[str, object] | None, error_info: ErrorInfo | None = None) -> str:
    d = decide_outcome(
        result,
        error=error_info is not None,
        metric="val_loss",
        max_epochs=10,
        error_info=error_info,
    )
    return failure_message(
        d,
        trial_id="3f2a1b",
        params={"lr": 0.01, "layers": 2},
        result=result,
        metric="val_loss",
        error_info=error_info,
    )


def test_messages_name_trial_config_and_what_was_missing() -> None:
    assert _message({**TUNE_ONLY, "epoch": 3, "loss": 0.5, "acc": 0.9}) == (
        "trial 3f2a1b (lr=0.01, layers=2): reported no 'val_loss' at epoch 3 "
        "(it reported: acc, loss); the campaign's metric is val_loss"
    )
    assert _message(TUNE_ONLY) == (
        "trial 3f2a1b (lr=0.01, layers=2): never reported a result; the trainable must "
        "call ray.tune.report({'epoch': ..., 'val_loss': ...}) once per epoch"
    )
    assert _message({**TUNE_ONLY, "val_loss": 0.5}) == (
        "trial 3f2a1b (lr=0.01, layers=2): reported no 'epoch' (it reported: val_loss); "
        "every report needs 'epoch' (1-based) and 'val_loss'"
    )
    raised = _message(None, ErrorInfo("ValueError", "width must be even"))
    assert raised == (
        "trial 3f2a1b (lr=0.01, layers=2): raised ValueError: width must be even "
        "(after its retries)"
    )
    oom = _message({"epoch": 1}, ErrorInfo("torch.OutOfMemoryError", "CUDA out of memory.", True))
    assert oom.startswith(
        "trial 3f2a1b (lr=0.01, layers=2): ran out of GPU memory at epoch 1 "
        "(torch.OutOfMemoryError: CUDA out of memory.); not retried"
    )


def test_trial_label_without_params() -> None:
    assert trial_label("ab12", {}) == "trial ab12"
    assert (
        trial_label("ab12", {"lr": 1.23456e-4, "act": "relu"})
        == "trial ab12 (lr=0.0001235, act=relu)"
    )
