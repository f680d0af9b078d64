"""PersistentASHA: rungs and finished trials survive a new scheduler (a driver restart)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ray.tune.experiment import Trial
from ray.tune.schedulers import TrialScheduler

from tuner._scheduler import PersistentASHA


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
