"""The multi-objective searcher and MO-ASHA, driven by hand with fake trials (no Ray running):
per-epoch vectors in user attributes, COMPLETE with the whole vector, PRUNED keeping its
vectors, rung decisions by non-dominated sorting, persisted and read back on a restart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState
from ray.tune.experiment import Trial
from ray.tune.schedulers import TrialScheduler

from tuner._ray.mo_scheduler import MultiObjectiveASHA
from tuner._ray.mo_searcher import MultiObjectiveOptunaSearch
from tuner.front import epoch_values, front_rows
from tuner.summary import load_rows

SPACE = {"lr": FloatDistribution(1e-4, 1e-1, log=True)}
METRICS = ["val_acc", "param_count"]


@pytest.fixture(autouse=True)
def _quiet_optuna() -> None:
    optuna.logging.set_verbosity(optuna.logging.ERROR)


def _searcher(storage: Any = None) -> MultiObjectiveOptunaSearch:
    return MultiObjectiveOptunaSearch(
        space=SPACE,
        metric=METRICS,
        mode=["max", "min"],
        seed=0,
        max_epochs=3,
        study_name="s",
        storage=storage,
    )


def _epochs(searcher: Any, trial_id: str, accs: list[float], size: float) -> dict[str, Any]:
    last: dict[str, Any] = {}
    for epoch, acc in enumerate(accs, start=1):
        last = {"val_acc": acc, "param_count": size, "epoch": epoch}
        searcher.on_trial_result(trial_id, last)
    return last


def test_vectors_per_epoch_complete_pruned_and_failed() -> None:
    searcher = _searcher()
    for tid in ("full", "stopped", "nan", "missing"):
        assert searcher.suggest(tid) is not None
    last = _epochs(searcher, "full", [0.5, 0.8, 0.9], 1000)
    searcher.on_trial_complete("full", last)
    last = _epochs(searcher, "stopped", [0.4], 300)
    searcher.on_trial_complete("stopped", last)
    last = _epochs(searcher, "nan", [0.4, 0.5], 300)
    searcher.on_trial_complete("nan", {**last, "val_acc": float("nan"), "epoch": 3})
    searcher.on_trial_complete("missing", {"val_acc": 0.9, "epoch": 3})
    study: optuna.Study = searcher._ot_study
    assert [d.name for d in study.directions] == ["MAXIMIZE", "MINIMIZE"]
    full, stopped, nan, missing = study.trials
    assert full.state is TrialState.COMPLETE and full.values == [0.9, 1000.0]
    assert epoch_values(full.user_attrs) == {1: [0.5, 1000.0], 2: [0.8, 1000.0], 3: [0.9, 1000.0]}
    assert stopped.state is TrialState.PRUNED
    assert stopped.user_attrs["stop_reason"] == "stopped early at epoch 1 of 3"
    assert epoch_values(stopped.user_attrs) == {1: [0.4, 300.0]}
    assert nan.state is TrialState.PRUNED
    assert nan.user_attrs["stop_reason"] == "non-finite val_acc at epoch 3"
    assert missing.state is TrialState.FAIL
    assert "reported no 'param_count' at epoch 3" in missing.user_attrs["failure_message"]
    # Summaries read the primary objective from the vectors.
    rows = {r.tune_id: r for r in load_rows(study)}
    assert rows["full"].value == 0.9 and rows["full"].intermediate == {1: 0.5, 2: 0.8, 3: 0.9}
    assert rows["stopped"].value == 0.4


def test_pareto_front_of_complete_trials() -> None:
    searcher = _searcher()
    sizes = {"big": (0.95, 9000), "mid": (0.9, 2000), "small": (0.7, 100), "bad": (0.6, 5000)}
    for tid, (acc, size) in sizes.items():
        searcher.suggest(tid)
        searcher.on_trial_complete(tid, _epochs(searcher, tid, [acc] * 3, size))
    searcher.suggest("pruned")  # smallest of all, but stopped at epoch 1: not compared
    searcher.on_trial_complete("pruned", _epochs(searcher, "pruned", [0.99], 10))
    front = front_rows(searcher._ot_study, METRICS, [True, False])
    assert [r["tune_trial_id"] for r in front] == ["big", "mid", "small"]
    assert front[0]["values"] == {"val_acc": 0.95, "param_count": 9000.0}
    assert front[0]["epochs"] == 3 and "lr" in front[0]["params"]


def test_a_trial_stopped_without_a_result_is_judged_by_its_vectors_and_a_restore_reads_them(
    tmp_path: Path,
) -> None:
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path}/study.db")
    searcher = _searcher(storage)
    searcher.suggest("x")
    snapshot = tmp_path / "searcher.pkl"
    searcher.save(str(snapshot))
    _epochs(searcher, "x", [0.5, 0.6], 400)
    restored = _searcher(storage)
    restored.restore(str(snapshot))
    assert restored._reported["x"] == {1, 2}
    restored.on_trial_complete("x")  # stopped before it ran again: judged by epoch 2
    study = optuna.load_study(study_name="s", storage=storage)
    (x,) = study.trials
    assert x.state is TrialState.PRUNED
    assert x.user_attrs["stop_reason"] == "stopped early at epoch 2 of 3"


class _Controller:
    def __init__(self, trials: list[Trial]) -> None:
        self.trials = trials
        self.stopped: list[str] = []

    def get_trials(self) -> list[Trial]:
        return self.trials

    def stop_trial(self, trial: Trial) -> None:
        self.stopped.append(trial.trial_id)
        trial.set_status(Trial.TERMINATED)


def _asha(path: Path, min_peers: int = 0) -> MultiObjectiveASHA:
    sched = MultiObjectiveASHA(
        metrics=METRICS,
        maximize=[True, False],
        state_path=str(path),
        time_attr="epoch",
        max_t=9,
        grace_period=1,
        reduction_factor=3,
        min_peers=min_peers,
    )
    sched.set_search_properties("val_acc", "max")  # what Tune passes: the primary
    return sched


def _trial(trial_id: str) -> Trial:
    return Trial("__fake", trial_id=trial_id, stub=True)


def test_rung_decisions_rank_vectors_and_survive_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "scheduler_state.json"
    first = _asha(state)
    trials = [_trial(f"t{i}") for i in range(5)]
    ctl: Any = _Controller(trials)
    for t in trials:
        first.on_trial_add(ctl, t)
    vectors = [(0.9, 5000), (0.5, 6000), (0.6, 100), (0.85, 5500), (0.95, 9000)]
    actions = [
        first.on_trial_result(ctl, t, {"epoch": 1, "val_acc": acc, "param_count": size})
        for t, (acc, size) in zip(trials, vectors, strict=True)
    ]
    # t0: first, continues. t1: dominated by t0. t2: smaller than all, on the front.
    # t3: dominated by t0 (4 results: one continues). t4: most accurate, a new extreme.
    assert actions == ["CONTINUE", "STOP", "CONTINUE", "STOP", "CONTINUE"]
    saved = json.loads(state.read_text())
    rung1 = next(r for r in saved["rungs"] if r["milestone"] == 1.0)
    assert rung1["recorded"]["t2"] == [0.6, 100.0]
    assert saved["finished"] == {
        "t1": "stopped by ASHA at epoch 1",
        "t3": "stopped by ASHA at epoch 1",
    }
    second = _asha(state)
    restored = [_trial(f"t{i}") for i in range(6)]
    ctl2: Any = _Controller(restored)
    for t in restored:
        second.on_trial_add(ctl2, t)
    assert second.state()["rungs"] == saved["rungs"]
    second.choose_trial_to_run(ctl2)
    assert ctl2.stopped == ["t1", "t3"]
    # The restored rung judges a newcomer against the vectors read back.
    dominated = {"epoch": 1, "val_acc": 0.55, "param_count": 7000}
    assert second.on_trial_result(ctl2, restored[5], dominated) == TrialScheduler.STOP
    # At max_t a trial stops (it is done).
    assert (
        second.on_trial_result(ctl2, restored[0], {"epoch": 9, "val_acc": 1, "param_count": 1})
        == TrialScheduler.STOP
    )


def test_first_trials_wait_for_peers_then_are_judged_by_the_vector_rule(tmp_path: Path) -> None:
    sched = _asha(tmp_path / "state.json", min_peers=2)
    trials = [_trial(f"t{i}") for i in range(3)]
    ctl: Any = _Controller(trials)
    for t in trials:
        sched.on_trial_add(ctl, t)
        t.set_status(Trial.RUNNING)

    def result(acc: float, size: float) -> dict[str, Any]:
        return {"epoch": 1, "val_acc": acc, "param_count": size, "should_checkpoint": True}

    assert sched.on_trial_result(ctl, trials[0], result(0.5, 9000)) == TrialScheduler.PAUSE
    trials[0].set_status(Trial.PAUSED)
    assert sched.on_trial_result(ctl, trials[1], result(0.9, 1000)) == TrialScheduler.PAUSE
    trials[1].set_status(Trial.PAUSED)
    # The third has two peers: judged at once (it dominates t0, t1 dominates it: front 1 of
    # 3 results, one continues), and the waiting ones are judged now too.
    assert sched.on_trial_result(ctl, trials[2], result(0.8, 2000)) == TrialScheduler.STOP
    assert ctl.stopped == ["t0"]
    assert sched._promoted == ["t1"]
    assert not sched._waiting
