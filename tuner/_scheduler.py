"""ASHA whose rungs survive a driver crash.

Ray Tune rebuilds its scheduler empty when an experiment is restored, so every rung record
made before a crash is forgotten and trials that were already stopped run again. This
subclass writes its rungs and the set of finished trials to a small JSON file in the run
folder after every change (atomically), reads it back on restore, and never lets a trial
that already finished run again: such a trial is stopped before it starts.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ray.tune.experiment import Trial
from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, TrialScheduler

if TYPE_CHECKING:
    from ray.tune.execution.tune_controller import TuneController

logger = logging.getLogger(__name__)

STATE_VERSION = 1


def _write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w") as handle:
        json.dump(data, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


class _FinishedTrials:
    """Remembers which trials finished, and stops them if a restore queues them again."""

    def _init_finished(self, state_path: str | None) -> None:
        self._state_path = state_path
        self._finished: dict[str, str] = {}
        self._loaded = False

    def _skip_finished(self, controller: TuneController) -> None:
        for trial in controller.get_trials():
            if trial.status == Trial.PENDING and trial.trial_id in self._finished:
                logger.info(
                    "Trial %s finished before the restore (%s); not running it again.",
                    trial.trial_id,
                    self._finished[trial.trial_id],
                )
                controller.stop_trial(trial)


class PersistentASHA(_FinishedTrials, ASHAScheduler):
    """``ASHAScheduler`` (one bracket) that persists its rungs to ``state_path``.

    Args:
        state_path: JSON file in the run folder; None keeps state in memory only.
        **kwargs: Passed to ``ray.tune.schedulers.ASHAScheduler``.
    """

    def __init__(self, *, state_path: str | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._init_finished(state_path)

    # -- persistence -------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The persisted state: rung records and finished trials."""
        return {
            "version": STATE_VERSION,
            "rungs": [
                {"milestone": float(milestone), "recorded": dict(recorded)}
                for milestone, recorded in self._brackets[0]._rungs
            ],
            "finished": dict(self._finished),
            "num_stopped": self._num_stopped,
        }

    def _save(self) -> None:
        if self._state_path is not None:
            _write_json_atomic(Path(self._state_path), self.state())

    def _load(self) -> None:
        self._loaded = True
        if self._state_path is None or not os.path.exists(self._state_path):
            return
        with open(self._state_path) as handle:
            data = json.load(handle)
        by_milestone = {float(r["milestone"]): r["recorded"] for r in data["rungs"]}
        for milestone, recorded in self._brackets[0]._rungs:
            recorded.update(by_milestone.get(float(milestone), {}))
        self._finished.update(data.get("finished", {}))
        self._num_stopped = int(data.get("num_stopped", 0))
        logger.info("Restored ASHA rungs from %s.", self._state_path)

    # -- scheduler protocol ------------------------------------------------------------
    def on_trial_add(self, tune_controller: TuneController, trial: Trial) -> None:
        if not self._loaded:
            self._load()
        super().on_trial_add(tune_controller, trial)

    def on_trial_result(
        self, tune_controller: TuneController, trial: Trial, result: dict[str, Any]
    ) -> str:
        if trial.trial_id in self._finished:
            return str(TrialScheduler.STOP)
        action: str = super().on_trial_result(tune_controller, trial, result)
        if action == TrialScheduler.STOP:
            epoch = result.get(self._time_attr)
            self._finished[trial.trial_id] = f"stopped by ASHA at {self._time_attr} {epoch}"
        self._save()
        return action

    def on_trial_complete(
        self, tune_controller: TuneController, trial: Trial, result: dict[str, Any]
    ) -> None:
        if trial.trial_id in self._trial_info:
            super().on_trial_complete(tune_controller, trial, result)
        self._finished.setdefault(trial.trial_id, "completed")
        self._save()

    def on_trial_remove(self, tune_controller: TuneController, trial: Trial) -> None:
        self._trial_info.pop(trial.trial_id, None)

    def choose_trial_to_run(self, tune_controller: TuneController) -> Trial | None:
        self._skip_finished(tune_controller)
        chosen: Trial | None = super().choose_trial_to_run(tune_controller)
        return chosen

    def stopped_by_asha(self) -> dict[str, str]:
        """Trial id -> reason for every trial ASHA stopped."""
        return {k: v for k, v in self._finished.items() if v.startswith("stopped by ASHA")}


class PersistentFIFO(_FinishedTrials, FIFOScheduler):
    """FIFO scheduling that remembers finished trials across a restore."""

    def __init__(self, *, state_path: str | None) -> None:
        super().__init__()
        self._init_finished(state_path)

    def _save(self) -> None:
        if self._state_path is not None:
            data = {"version": STATE_VERSION, "rungs": [], "finished": self._finished}
            _write_json_atomic(Path(self._state_path), data)

    def on_trial_add(self, tune_controller: TuneController, trial: Trial) -> None:
        if not self._loaded:
            self._loaded = True
            if self._state_path is not None and os.path.exists(self._state_path):
                with open(self._state_path) as handle:
                    self._finished.update(json.load(handle).get("finished", {}))
        super().on_trial_add(tune_controller, trial)

    def on_trial_complete(
        self, tune_controller: TuneController, trial: Trial, result: dict[str, Any]
    ) -> None:
        super().on_trial_complete(tune_controller, trial, result)
        self._finished.setdefault(trial.trial_id, "completed")
        self._save()

    def choose_trial_to_run(self, tune_controller: TuneController) -> Trial | None:
        self._skip_finished(tune_controller)
        chosen: Trial | None = super().choose_trial_to_run(tune_controller)
        return chosen
