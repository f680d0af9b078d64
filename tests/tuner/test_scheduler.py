"""PersistentASHA: rungs and finished trials survive a new scheduler (a driver restart), and
the first trials at a rung wait there for peers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ray.tune.experiment import Trial
from ray.tune.schedulers import TrialScheduler

from tests.conftest import live_campaign
from tuner._ray.scheduler import PersistentASHA


class _Controller:
    """The two TuneController methods a scheduler calls here."""

    def __init__(self, trials: list[Trial]) -> None:
        self.trials = trials
        self.stopped: list[str] = []

    def get_trials(self) -> list[Trial]:
        return self.trials

    def stop_trial(self, trial: Trial) -> None:
        self.stopped.append(trial.trial_id)
        trial.set_status(Trial.TERMINATED)


def _asha(path: Path) -> PersistentASHA:
    sched = PersistentASHA(
        state_path=str(path), time_attr="epoch", max_t=9, grace_period=1, reduction_factor=3
    )
    sched.set_search_properties("val_acc", "max")
    return sched


def _trial(trial_id: str) -> Trial:
    return Trial("__fake", trial_id=trial_id, stub=True)


def test_rungs_and_stops_survive_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "scheduler_state.json"
    first = _asha(state)
    trials = [_trial(f"t{i}") for i in range(4)]
    ctl: Any = _Controller(trials)
    for t in trials:
        first.on_trial_add(ctl, t)
    actions = [
        first.on_trial_result(ctl, t, {"epoch": 1, "val_acc": acc})
        for t, acc in zip(trials, [0.9, 0.5, 0.95, 0.4], strict=True)
    ]
    # Each result is ranked against those recorded before it (asynchronous SH): t1 (0.5)
    # falls below t0's 0.9, t3 (0.4) below the top third of {0.9, 0.5, 0.95}.
    assert actions == ["CONTINUE", "STOP", "CONTINUE", "STOP"]
    saved = json.loads(state.read_text())
    rung1 = next(r for r in saved["rungs"] if r["milestone"] == 1.0)
    assert rung1["recorded"] == {"t0": 0.9, "t1": 0.5, "t2": 0.95, "t3": 0.4}
    assert saved["finished"] == {
        "t1": "stopped by ASHA at epoch 1",
        "t3": "stopped by ASHA at epoch 1",
    }

    # A fresh scheduler (what Ray builds on restore) reads the same file on first use.
    second = _asha(state)
    restored = [_trial(f"t{i}") for i in range(4)]
    ctl2: Any = _Controller(restored)
    for t in restored:
        second.on_trial_add(ctl2, t)
    assert second.state()["rungs"] == saved["rungs"]
    # The stopped trials are not run again: stopped before it starts...
    second.choose_trial_to_run(ctl2)
    assert ctl2.stopped == ["t1", "t3"]
    # ...and a trial ASHA already ranked is not ranked twice at the same rung.
    assert second.on_trial_result(ctl2, restored[0], {"epoch": 1, "val_acc": 0.1}) == (
        TrialScheduler.CONTINUE
    )


def test_without_state_path_nothing_is_written(tmp_path: Path) -> None:
    sched = PersistentASHA(state_path=None, time_attr="epoch", max_t=3, grace_period=1)
    sched.set_search_properties("val_acc", "max")
    t = _trial("x")
    ctl: Any = _Controller([t])
    sched.on_trial_add(ctl, t)
    sched.on_trial_result(ctl, t, {"epoch": 1, "val_acc": 0.5})
    assert list(tmp_path.iterdir()) == []


def _waiting_asha(path: Path | None, campaign: Any = None) -> PersistentASHA:
    sched = PersistentASHA(
        state_path=None if path is None else str(path),
        campaign=campaign,
        min_peers=2,
        time_attr="epoch",
        max_t=9,
        grace_period=1,
        reduction_factor=3,
    )
    sched.set_search_properties("val_acc", "max")
    return sched


def _report(
    sched: PersistentASHA,
    ctl: Any,
    trial: Trial,
    epoch: int,
    acc: float,
    *,
    checkpoint: bool = True,
) -> str:
    """One result through the scheduler, with the status change Tune makes on PAUSE."""
    trial.set_status(Trial.RUNNING)
    # Tune marks a result that came with a checkpoint (the built-ins save one every epoch).
    result = {"epoch": epoch, "val_acc": acc, "should_checkpoint": checkpoint}
    action = sched.on_trial_result(ctl, trial, result)
    if action == TrialScheduler.PAUSE:
        trial.set_status(Trial.PAUSED)
    return action


def test_the_first_trials_at_a_rung_wait_for_peers_then_are_judged(tmp_path: Path) -> None:
    campaign = live_campaign(tmp_path)
    sched = _waiting_asha(tmp_path / "state.json", campaign)
    t0, t1, t2, t3 = trials = [_trial(f"t{i}") for i in range(4)]
    ctl: Any = _Controller(trials)
    for t in trials:
        sched.on_trial_add(ctl, t)
    # Ray's ASHA would let t0 through unjudged (nothing to compare it with) and judge t1
    # against t0 alone; here both wait at epoch 1, their slots free for new trials.
    assert _report(sched, ctl, t0, 1, 0.9) == TrialScheduler.PAUSE
    assert _report(sched, ctl, t1, 1, 0.5) == TrialScheduler.PAUSE
    assert campaign.waiting == {"t0", "t1"}
    # t2 finds two peers: judged at once by Ray's rule (top third of {0.9, 0.5}: >= 0.77).
    assert _report(sched, ctl, t2, 1, 0.7) == TrialScheduler.STOP
    # Now the waiting ones have two peers each: t0 (0.9 >= 0.63) goes on, t1 stops.
    assert ctl.stopped == ["t1"]
    assert campaign.waiting == frozenset()
    saved = json.loads((tmp_path / "state.json").read_text())
    assert saved["finished"]["t1"] == "stopped by ASHA at epoch 1"
    assert saved["promoted"] == ["t0"] and saved["waiting"] == {}
    # The trial judged to continue starts again before any new trial.
    assert sched.choose_trial_to_run(ctl) is t0
    t0.set_status(Trial.RUNNING)
    assert sched.choose_trial_to_run(ctl) is t3  # then new trials, as usual
    # Resumed from its checkpoint, t0 reports epoch 2, then reaches rung 3 first: waits.
    assert _report(sched, ctl, t0, 2, 0.93) == TrialScheduler.CONTINUE
    assert _report(sched, ctl, t0, 3, 0.95) == TrialScheduler.PAUSE


def test_waiting_trials_are_judged_with_what_there_is_when_nothing_else_runs() -> None:
    sched = _waiting_asha(None)
    t0, t1 = trials = [_trial("t0"), _trial("t1")]
    ctl: Any = _Controller(trials)
    for t in trials:
        sched.on_trial_add(ctl, t)
    assert _report(sched, ctl, t0, 1, 0.6) == TrialScheduler.PAUSE
    t1.set_status(Trial.RUNNING)  # still running: it may bring a peer
    assert sched.choose_trial_to_run(ctl) is None
    assert _report(sched, ctl, t1, 1, 0.8) == TrialScheduler.PAUSE
    # No trial runs or waits to start (the searcher is done): judged against each other.
    assert sched.choose_trial_to_run(ctl) is t1  # 0.8 above the other's 0.6
    assert ctl.stopped == ["t0"]


@pytest.mark.filterwarnings("error")
def test_a_lone_waiting_trial_continues_without_a_numpy_warning() -> None:
    # Nothing to compare it with: it goes on, and no cutoff is taken over an empty rung
    # (numpy's "Mean of empty slice" warning, seen in campaign logs before).
    sched = _waiting_asha(None)
    (t0,) = trials = [_trial("t0")]
    ctl: Any = _Controller(trials)
    sched.on_trial_add(ctl, t0)
    assert _report(sched, ctl, t0, 1, 0.6) == TrialScheduler.PAUSE
    assert sched.choose_trial_to_run(ctl) is t0
    assert ctl.stopped == []


class _Guard:
    """Stand-in for the campaign's budget guard: within budget until ``exhausted`` is set,
    and trials still running when it is are left to stop at their next result."""

    exhausted: str | None = None

    def should_stop(self, trial_id: str, result: Any) -> bool:
        return False

    def stop_all(self) -> bool:
        return False


def test_a_spent_budget_stops_waiting_trials_instead(tmp_path: Path) -> None:
    guard = _Guard()
    sched = _waiting_asha(None, live_campaign(tmp_path, guard=guard))
    t0 = _trial("t0")
    ctl: Any = _Controller([t0])
    sched.on_trial_add(ctl, t0)
    assert _report(sched, ctl, t0, 1, 0.99) == TrialScheduler.PAUSE
    guard.exhausted = "budget exhausted: $5.00 of $5.00"  # spent while t0 waits
    assert sched.choose_trial_to_run(ctl) is None
    assert ctl.stopped == ["t0"]
    assert sched.state()["finished"]["t0"] == "budget exhausted: $5.00 of $5.00; stopped at a rung"


def test_trials_waiting_before_a_restart_are_judged_when_it_resumes(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    first = _waiting_asha(state)
    trials = [_trial(f"t{i}") for i in range(2)]
    ctl: Any = _Controller(trials)
    for t in trials:
        first.on_trial_add(ctl, t)
    _report(first, ctl, trials[0], 1, 0.4)
    _report(first, ctl, trials[1], 1, 0.8)
    assert json.loads(state.read_text())["waiting"] == {"t0": 1.0, "t1": 1.0}

    # Tune restores paused trials as PENDING and would start them: they are judged first.
    second = _waiting_asha(state)
    restored = [_trial(f"t{i}") for i in range(2)]
    ctl2: Any = _Controller(restored)
    for t in restored:
        second.on_trial_add(ctl2, t)
    assert second.choose_trial_to_run(ctl2) is restored[1]
    assert ctl2.stopped == ["t0"]
    assert second.state()["waiting"] == {}


def test_min_peers_zero_is_rays_asha() -> None:
    sched = PersistentASHA(state_path=None, min_peers=0, time_attr="epoch", max_t=9, grace_period=1)
    sched.set_search_properties("val_acc", "max")
    t0 = _trial("t0")
    ctl: Any = _Controller([t0])
    sched.on_trial_add(ctl, t0)
    assert _report(sched, ctl, t0, 1, 0.1) == TrialScheduler.CONTINUE


def test_a_result_without_a_checkpoint_is_judged_at_once() -> None:
    # Paused, it could only start over: judged as Ray's ASHA would (nothing to compare
    # with, so it continues), and a later result with a checkpoint may wait.
    sched = _waiting_asha(None)
    t0 = _trial("t0")
    ctl: Any = _Controller([t0])
    sched.on_trial_add(ctl, t0)
    assert _report(sched, ctl, t0, 1, 0.5, checkpoint=False) == TrialScheduler.CONTINUE
    assert _report(sched, ctl, t0, 3, 0.7) == TrialScheduler.PAUSE


# -- what the campaign stops (formerly Tune's stopper) -------------------------------------


def _real_guard(tmp_path: Path) -> Any:
    from tuner._ray.guard import BudgetGuard
    from tuner.budget import Ledger, Limits, NodePricer
    from tuner.cost import AshaGeometry

    return BudgetGuard(
        run_dir=tmp_path,
        ledger=Ledger(),
        pricer=NodePricer((), {}),
        limits=Limits(usd=1.0),
        geometry=AshaGeometry(trials=8, max_epochs=9, grace_period=1, reduction_factor=3),
        request={"CPU": 1.0},
        slots=2,
        max_epochs=9,
        stop_key="stop:test",
        stop_grace_s=0.0,
    )


@pytest.mark.parametrize("kind", ["fifo", "asha"])
def test_a_trial_stops_at_max_epochs_and_at_its_first_result_once_the_budget_is_spent(
    kind: str, tmp_path: Path
) -> None:
    from tuner._ray.scheduler import PersistentFIFO

    guard = _real_guard(tmp_path)
    campaign = live_campaign(tmp_path, guard=guard)
    sched: Any = (
        PersistentFIFO(state_path=None, campaign=campaign)
        if kind == "fifo"
        else PersistentASHA(
            state_path=None, campaign=campaign, time_attr="epoch", max_t=9, grace_period=1
        )
    )
    sched.set_search_properties("val_acc", "max")
    t0, t1 = trials = [_trial("t0"), _trial("t1")]
    ctl: Any = _Controller(trials)
    for t in trials:
        sched.on_trial_add(ctl, t)
    ok = {"val_acc": 0.5, "should_checkpoint": False}
    assert sched.on_trial_result(ctl, t0, {"epoch": 9, **ok}) == TrialScheduler.STOP
    assert sched.on_trial_result(ctl, t1, {"epoch": 1, **ok}) == TrialScheduler.CONTINUE
    assert guard.stopped_by_guard == {}  # t0 ended at max_epochs, not by the budget
    guard.exhausted = "budget exhausted: $1.00 of $1.00"
    assert sched.on_trial_result(ctl, t1, {"epoch": 2, **ok}) == TrialScheduler.STOP
    assert guard.stopped_by_guard == {"t1": "budget exhausted: $1.00 of $1.00"}


def test_once_the_grace_is_over_every_trial_left_stops_and_waiting_ones_say_where(
    tmp_path: Path,
) -> None:
    guard = _real_guard(tmp_path)
    sched = _waiting_asha(None, live_campaign(tmp_path, guard=guard))
    waiting, running, _pending, done = trials = [_trial(n) for n in ("w", "r", "p", "d")]
    ctl: Any = _Controller(trials)
    for t in trials:
        sched.on_trial_add(ctl, t)
    assert _report(sched, ctl, waiting, 1, 0.9) == TrialScheduler.PAUSE
    running.set_status(Trial.RUNNING)
    done.set_status(Trial.TERMINATED)
    sched.choose_trial_to_run(ctl)
    assert ctl.stopped == []  # within budget: nothing stops
    guard.exhausted = "budget exhausted: $1.00 of $1.00"
    guard._exhausted_at = 0.0  # long ago: the grace period (0 s here) is over
    assert sched.choose_trial_to_run(ctl) is None
    assert ctl.stopped == ["w", "r", "p"]
    reason = "budget exhausted: $1.00 of $1.00; stopped at a rung"
    assert sched.state()["finished"]["w"] == reason
