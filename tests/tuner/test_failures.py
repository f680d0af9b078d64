"""Failed trials without a Ray cluster: the watch and its limit, the scheduler reading Tune's
error files (OOM not retried), the searcher's FAIL messages, and failures by region.

Ray's classes are used directly (the real searcher and scheduler, Ray's RayTaskError), driven
through Tune's protocol by hand: no Ray is started.
"""

from __future__ import annotations

import io
import json
import pickle
import traceback
from pathlib import Path
from typing import Any

import optuna
import pytest
import torch
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState, create_trial
from ray.exceptions import RayTaskError
from ray.tune.experiment import Trial
from ray.tune.search import Searcher

from tests.conftest import live_campaign
from tuner._ray.campaign import Campaign
from tuner._ray.failures import FailureWatch, read_trial_error
from tuner._ray.progress import format_status
from tuner._ray.scheduler import PersistentASHA, PersistentFIFO
from tuner._ray.searcher import FidelityOptunaSearch
from tuner.outcome import ErrorInfo, Failure
from tuner.study import FAILURE_ATTR, FAILURE_MESSAGE_ATTR
from tuner.summary import TrialRow, failure_regions, format_failures, summarize

SPACE = {
    "width": IntDistribution(8, 128),
    "act": CategoricalDistribution(["relu", "tanh"]),
}


@pytest.fixture(autouse=True)
def _quiet_optuna() -> None:
    optuna.logging.set_verbosity(optuna.logging.ERROR)


@pytest.fixture
def watch() -> FailureWatch:
    return FailureWatch(limit=None, stream=io.StringIO())


@pytest.fixture
def campaign(watch: FailureWatch, tmp_path: Path) -> Campaign:
    """The campaign the searcher and scheduler are handed: it holds the watch."""
    return live_campaign(tmp_path, watch=watch)  # type: ignore[no-any-return]


# -- the watch ----------------------------------------------------------------------------


def test_watch_counts_prints_and_trips_only_past_the_limit() -> None:
    out = io.StringIO()
    w = FailureWatch(limit=2, stream=out, earlier=1)
    w.trial_failed("a", Failure.OOM, "trial a (width=96): ran out of GPU memory")
    assert (w.count, w.reached) == (2, False)  # 2 failed: at the limit, not past it
    w.trial_failed("a", Failure.OOM, "again")  # told twice: counted once
    assert w.count == 2
    w.trial_failed("b", Failure.ERROR, "trial b (width=9): raised ValueError: odd")
    assert (w.count, w.reached) == (3, True)
    lines = out.getvalue().splitlines()
    assert lines[0] == "trial failed (oom): trial a (width=96): ran out of GPU memory"
    assert lines[1] == "trial failed (error): trial b (width=9): raised ValueError: odd"
    assert lines[2].startswith("failure limit reached: 3 trials failed, more than ")
    assert "failure.max_failed_trials=2" in lines[2]
    assert w.summary() == {"max_failed_trials": 2, "failed": 3, "limit_reached": True}


def test_a_resume_past_the_limit_starts_reached() -> None:
    assert FailureWatch(limit=2, earlier=3).reached
    assert not FailureWatch(limit=2, earlier=2).reached


def test_no_limit_never_trips() -> None:
    w = FailureWatch(limit=None, stream=io.StringIO())
    for i in range(50):
        w.trial_failed(str(i), Failure.NO_METRIC, "m")
    assert not w.reached and w.count == 50


# -- reading what a trial raised ----------------------------------------------------------


class FakeTrial:
    """What the scheduler reads of a Tune Trial."""

    def __init__(self, trial_id: str, folder: Path, status: str = Trial.RUNNING) -> None:
        self.trial_id = trial_id
        self.status = status
        self.pickled_error_file: str | None = None
        self.error_file: str | None = None
        self._folder = folder

    def fail_with(self, exc: BaseException, *, pickled: bool = True) -> None:
        """What Trial.handle_error writes: error.pkl (a RayTaskError) and error.txt."""
        try:
            raise exc
        except BaseException as caught:
            text = "".join(traceback.format_exception(caught))
            wrapped = RayTaskError("ImplicitFunc.train", text, caught)
        self.error_file = str(self._folder / "error.txt")
        with open(self.error_file, "a") as handle:
            handle.write(f"Failure # 1 (occurred at now)\n{wrapped}\n")
        if pickled:
            self.pickled_error_file = str(self._folder / "error.pkl")
            Path(self.pickled_error_file).write_bytes(pickle.dumps(wrapped))


def test_read_trial_error_from_the_pickle_and_from_the_text(tmp_path: Path) -> None:
    trial = FakeTrial("t", tmp_path)
    assert read_trial_error(trial) is None
    trial.fail_with(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB"))
    info = read_trial_error(trial)
    assert info == ErrorInfo(
        "torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 8.00 GiB", oom=True
    )
    text_only = FakeTrial("u", tmp_path / "u")
    (tmp_path / "u").mkdir()
    text_only.fail_with(ValueError("first"), pickled=False)
    text_only.fail_with(KeyError("second"), pickled=False)  # error.txt is appended
    assert read_trial_error(text_only) == ErrorInfo("KeyError", "'second'", oom=False)
    Path(trial.pickled_error_file or "").write_bytes(b"not a pickle")
    info = read_trial_error(trial)  # falls back to error.txt
    assert info is not None and info.oom and info.type == "torch.OutOfMemoryError"


# -- the scheduler: records errors, does not retry an OOM ---------------------------------


class FakeController:
    """The two TuneController calls the schedulers make here."""

    def __init__(self, trials: list[FakeTrial]) -> None:
        self.trials = trials
        self.stopped: list[str] = []

    def get_trials(self) -> list[FakeTrial]:
        return self.trials

    def stop_trial(self, trial: FakeTrial) -> None:
        self.stopped.append(trial.trial_id)
        trial.status = Trial.TERMINATED


@pytest.mark.parametrize("kind", ["fifo", "asha"])
def test_scheduler_records_errors_and_stops_a_requeued_oom_trial(
    kind: str, tmp_path: Path, watch: FailureWatch, campaign: Campaign
) -> None:
    state = tmp_path / "scheduler_state.json"
    scheduler: Any
    if kind == "fifo":
        scheduler = PersistentFIFO(state_path=str(state), campaign=campaign)
    else:
        scheduler = PersistentASHA(
            state_path=str(state),
            campaign=campaign,
            time_attr="epoch",
            max_t=4,
            metric="v",
            mode="min",
        )
    oom, bad = FakeTrial("oom1", tmp_path / "a"), FakeTrial("bad1", tmp_path / "b")
    for trial in (oom, bad):
        Path(trial._folder).mkdir()
    controller = FakeController([oom, bad])
    oom.fail_with(torch.OutOfMemoryError("CUDA out of memory."))
    bad.fail_with(ValueError("width must be even"))
    scheduler.on_trial_error(controller, oom)
    scheduler.on_trial_error(controller, bad)
    error_of_oom, error_of_bad = watch.error_of("oom1"), watch.error_of("bad1")
    assert error_of_oom is not None and error_of_oom.oom
    assert error_of_bad == ErrorInfo("ValueError", "width must be even")
    # Tune requeued both for a retry (failure.max_retries): only the OOM one is stopped.
    oom.status = bad.status = Trial.PENDING
    scheduler.choose_trial_to_run(controller)
    assert controller.stopped == ["oom1"]
    assert json.loads(state.read_text())["finished"]["oom1"] == "oom; not retried"
    scheduler.choose_trial_to_run(controller)
    assert controller.stopped == ["oom1"]


# -- the searcher: FAIL with kind and message, and the limit -------------------------------


def _searcher(campaign: Campaign) -> FidelityOptunaSearch:
    return FidelityOptunaSearch(
        space=SPACE, metric="val_loss", mode="min", seed=0, max_epochs=3, campaign=campaign
    )


def test_searcher_tells_fail_with_kind_and_message(watch: FailureWatch, campaign: Campaign) -> None:
    searcher = _searcher(campaign)
    for tid in ("oom", "requeued", "raised", "silent", "nometric", "good"):
        assert searcher.suggest(tid) is not None
    oom_info = ErrorInfo("torch.OutOfMemoryError", "CUDA out of memory.", oom=True)
    searcher.on_trial_result("oom", {"val_loss": 0.5, "epoch": 1})
    watch.record_error("oom", oom_info)
    searcher.on_trial_complete("oom", error=True)
    # An OOM Tune requeued and the scheduler stopped before its retry: no result, no error.
    watch.record_error("requeued", oom_info)
    searcher.on_trial_complete("requeued")
    watch.record_error("raised", ErrorInfo("ValueError", "width must be even"))
    searcher.on_trial_complete("raised", error=True)
    searcher.on_trial_complete("silent", result={"trial_id": "silent", "done": True})
    searcher.on_trial_result("nometric", {"loss": 0.5, "acc": 0.1, "epoch": 1})
    searcher.on_trial_complete("nometric", result={"loss": 0.4, "acc": 0.2, "epoch": 3})
    for epoch in (1, 2, 3):
        searcher.on_trial_result("good", {"val_loss": 0.3, "epoch": epoch})
    searcher.on_trial_complete("good", result={"val_loss": 0.3, "epoch": 3})

    study: optuna.Study = searcher._ot_study
    by_id = {t.user_attrs["tune_trial_id"]: t for t in study.trials}
    failed = {tid: t for tid, t in by_id.items() if t.state is TrialState.FAIL}
    assert set(failed) == {"oom", "requeued", "raised", "silent", "nometric"}
    assert (
        by_id["good"].state is TrialState.COMPLETE and FAILURE_ATTR not in by_id["good"].user_attrs
    )
    attrs = {tid: t.user_attrs for tid, t in failed.items()}
    assert attrs["oom"]["stop_reason"] == "oom" and attrs["oom"][FAILURE_ATTR] == "oom"
    assert attrs["oom"]["epochs"] == 1  # from the study: errors come without a result
    assert attrs["requeued"]["stop_reason"] == "oom"
    assert attrs["raised"]["stop_reason"] == "error: ValueError: width must be even"
    assert attrs["silent"][FAILURE_ATTR] == "never reported"
    assert attrs["nometric"][FAILURE_ATTR] == "no metric"
    params = by_id["nometric"].params
    label = f"trial nometric (width={params['width']}, act={params['act']})"
    assert attrs["nometric"][FAILURE_MESSAGE_ATTR] == (
        f"{label}: reported no 'val_loss' at epoch 3 (it reported: acc, loss); "
        "the campaign's metric is val_loss"
    )
    assert attrs["raised"][FAILURE_MESSAGE_ATTR].endswith(
        ": raised ValueError: width must be even (after its retries)"
    )
    assert watch.count == 5
    printed = watch.stream.getvalue()  # type: ignore[union-attr]
    assert printed.count("trial failed (") == 5 and label in printed


def test_searcher_stops_suggesting_past_the_limit_and_lets_running_trials_finish(
    watch: FailureWatch, campaign: Campaign
) -> None:
    watch.limit = 1
    searcher = _searcher(campaign)
    for tid in ("a", "b", "c"):
        assert searcher.suggest(tid) is not None
    searcher.on_trial_complete("a", error=True)
    assert not watch.reached and searcher.suggest("d") is not None
    searcher.on_trial_complete("b", error=True)
    assert watch.reached
    assert searcher.suggest("e") == Searcher.FINISHED
    # "c" was running: it finishes and is told as usual.
    for epoch in (1, 2, 3):
        searcher.on_trial_result("c", {"val_loss": 0.2, "epoch": epoch})
    searcher.on_trial_complete("c", result={"val_loss": 0.2, "epoch": 3})
    states = {t.user_attrs["tune_trial_id"]: t.state for t in searcher._ot_study.trials}
    assert states == {
        "a": TrialState.FAIL,
        "b": TrialState.FAIL,
        "c": TrialState.COMPLETE,
        "d": TrialState.RUNNING,
    }


def test_progress_line_counts_failed_trials_as_optuna_was_told() -> None:
    line = format_status(
        elapsed_s=5,
        total=8,
        counts={Trial.TERMINATED: 3, Trial.ERROR: 1},
        stopped_early=0,
        metric="val_loss",
        best=None,
        best_trial=None,
        failed=3,
    )
    assert "3 failed" in line and "4/8 trials done" in line


# -- failures by region -------------------------------------------------------------------


def _row(number: int, width: int, act: str, failure: str = "", state: str = "") -> TrialRow:
    return TrialRow(
        number=number,
        tune_id=f"t{number}",
        state=state or ("FAIL" if failure else "COMPLETE"),
        value=None if failure else 0.5,
        epochs=1,
        reason=failure or "completed",
        params={"width": width, "act": act},
        failure=failure,
        message=f"trial t{number} (width={width}, act={act}): {failure}" if failure else "",
    )


ROWS = [
    _row(0, 16, "relu"),
    _row(1, 24, "tanh"),
    _row(2, 40, "relu"),
    _row(3, 100, "relu", "oom"),
    _row(4, 120, "tanh", "oom"),
    _row(5, 90, "tanh", "oom"),
    _row(6, 30, "tanh", "error"),
    _row(7, 20, "relu"),
    # Not run: an orphan and a trial the budget stopped before it started.
    TrialRow(8, "t8", "FAIL", None, 0, "orphaned: ...", {"width": 99, "act": "relu"}),
    TrialRow(9, "t9", "FAIL", None, 0, "budget exhausted", {"width": 99, "act": "relu"}),
]


def test_regions_show_where_failures_cluster() -> None:
    regions = failure_regions(ROWS, SPACE)
    assert [r["param"] for r in regions] == ["width", "act"]  # the most uneven first
    width, act = regions
    # IntDistribution(8, 128): halves at 68.
    assert width["kind"] == "numeric"
    assert width["groups"] == [
        {"group": "< 68", "failed": 1, "total": 5},
        {"group": ">= 68", "failed": 3, "total": 3},
    ]
    assert width["spread"] == pytest.approx(0.8)
    assert act["kind"] == "categorical"
    assert act["groups"] == [
        {"group": "relu", "failed": 1, "total": 4},
        {"group": "tanh", "failed": 3, "total": 4},
    ]


def test_log_range_is_halved_at_its_geometric_middle() -> None:
    rows = [
        TrialRow(
            i,
            str(i),
            "FAIL" if lr > 0.01 else "COMPLETE",
            None,
            1,
            "",
            {"lr": lr},
            failure="error" if lr > 0.01 else "",
        )
        for i, lr in enumerate([1e-4, 5e-4, 2e-3, 0.05, 0.5])
    ]
    (lr,) = failure_regions(rows, {"lr": FloatDistribution(1e-4, 1.0, log=True)})
    assert [g["group"] for g in lr["groups"]] == ["< 0.01", ">= 0.01"]
    assert [(g["failed"], g["total"]) for g in lr["groups"]] == [(0, 3), (2, 2)]


def _study_with_failures() -> optuna.Study:
    study = optuna.create_study(direction="minimize")
    for row in ROWS[:8]:
        attrs: dict[str, Any] = {"tune_trial_id": row.tune_id, "epochs": 1}
        if row.failure:
            attrs |= {
                "stop_reason": row.failure,
                "failure": row.failure,
                "failure_message": row.message,
            }
        study.add_trial(
            create_trial(
                state=TrialState.FAIL if row.failure else TrialState.COMPLETE,
                value=None if row.failure else 0.5,
                params=row.params,
                distributions=SPACE,
                intermediate_values={} if row.failure else {1: 0.5},
                user_attrs=attrs,
            )
        )
    return study


def test_summary_and_report_list_failures_by_reason_and_region() -> None:
    summary = summarize(_study_with_failures(), metric="val_loss", maximize=False, max_epochs=1)
    failures = summary["failures"]
    assert failures["count"] == 4 and failures["of"] == 8
    assert failures["by_reason"] == {"oom": 3, "error": 1}
    assert [t["tune_trial_id"] for t in failures["trials"]] == ["t3", "t4", "t5", "t6"]
    assert failures["trials"][0]["message"] == "trial t3 (width=100, act=relu): oom"
    json.dumps(summary)  # summary.json
    report = format_failures(summary).splitlines()
    assert report[0] == "failed trials: 4 of 8 (oom 3, error 1)"
    assert report[1] == "  #3 trial t3 (width=100, act=relu): oom"
    assert report[5] == "where they failed (failed/total):"
    assert report[6] == "  width: < 68: 1/5, >= 68: 3/3"
    assert report[7] == "  act: relu: 1/4, tanh: 3/4"


def test_no_failures_no_section() -> None:
    study = optuna.create_study()
    study.add_trial(
        create_trial(
            state=TrialState.COMPLETE,
            value=0.1,
            params={"width": 10, "act": "relu"},
            distributions=SPACE,
            user_attrs={"tune_trial_id": "a", "epochs": 1},
        )
    )
    summary = summarize(study, metric="val_loss", maximize=False, max_epochs=1)
    assert summary["failures"] == {
        "count": 0,
        "of": 1,
        "by_reason": {},
        "trials": [],
        "regions": [],
    }
    assert format_failures(summary) == ""


def test_the_last_grid_trial_is_told_without_error() -> None:
    # GridSampler stops the study when its grid is exhausted; outside study.optimize that
    # raises from study.tell (the state is stored regardless).
    searcher = FidelityOptunaSearch(
        space={"act": CategoricalDistribution(["relu", "tanh"])},
        metric="val_loss",
        mode="min",
        max_epochs=1,
        sampler=optuna.samplers.GridSampler({"act": ["relu", "tanh"]}, seed=0),
    )
    for tid in ("a", "b"):
        assert searcher.suggest(tid) is not None
        searcher.on_trial_result(tid, {"val_loss": 0.1, "epoch": 1})
        searcher.on_trial_complete(tid, result={"val_loss": 0.1, "epoch": 1})
    assert [t.state for t in searcher._ot_study.trials] == [TrialState.COMPLETE] * 2
