"""ASHA whose rungs survive a driver crash.

Ray Tune rebuilds its scheduler empty when an experiment is restored, so every rung record
made before a crash is forgotten and trials that were already stopped run again. This
subclass writes its rungs and the set of finished trials to a small JSON file in the run
folder after every change (atomically), reads it back on restore, and never lets a trial
that already finished run again: such a trial is stopped before it starts.

Both schedulers also see every trial error first (Tune tells the scheduler before the
searcher): they read what the trial raised and record it for the searcher's message
(``tuner._failures``), and a trial that ran out of GPU memory is not retried.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ray.tune.experiment import Trial
from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, TrialScheduler

from tuner._failures import read_trial_error, watch_for
from tuner.outcome import OOM_REASON

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
    """Persisted state shared by both schedulers: the trials that finished.

    Loaded once, when the first trial is added (a fresh run finds no file); a restored trial
    that had already finished is stopped before it can run again.
    """

    def _init_finished(self, state_path: str | None, error_key: str | None = None) -> None:
        self._state_path = state_path
        self._finished: dict[str, str] = {}
        self._loaded = False
        # The campaign's stop key: where the failure watch is registered (tuner._failures).
        self._error_key = error_key
        self._no_retry: set[str] = set()

    def state(self) -> dict[str, Any]:
        """The persisted state."""
        return {"version": STATE_VERSION, "rungs": [], "finished": dict(self._finished)}

    def _restore_state(self, data: dict[str, Any]) -> None:
        self._finished.update(data.get("finished", {}))

    def _save(self) -> None:
        if self._state_path is not None:
            _write_json_atomic(Path(self._state_path), self.state())

    def on_trial_add(self, tune_controller: TuneController, trial: Trial) -> None:
        if not self._loaded:
            self._loaded = True
            if self._state_path is not None and os.path.exists(self._state_path):
                with open(self._state_path) as handle:
                    self._restore_state(json.load(handle))
                logger.info("Restored scheduler state from %s.", self._state_path)
        super().on_trial_add(tune_controller, trial)  # type: ignore[misc]

    def _mark_completed(self, trial: Trial) -> None:
        self._finished.setdefault(trial.trial_id, "completed")
        self._save()

    def on_trial_error(self, tune_controller: TuneController, trial: Trial) -> None:
        # Called for the trial's last error and for each one Tune retries (requeues), after
        # Tune wrote the error files and before it tells the searcher.
        info = read_trial_error(trial)
        if info is not None:
            watch = watch_for(getattr(self, "_error_key", None))
            if watch is not None:
                watch.record_error(trial.trial_id, info)
            if info.oom:
                # Retrying from its checkpoint runs the same config on the same GPU: it runs
                # out of memory again, after redoing the epochs since the checkpoint. If Tune
                # requeued it, it is stopped before it starts (choose_trial_to_run).
                self.__dict__.setdefault("_no_retry", set()).add(trial.trial_id)
        super().on_trial_error(tune_controller, trial)  # type: ignore[misc]

    def choose_trial_to_run(self, tune_controller: TuneController) -> Trial | None:
        no_retry: set[str] = self.__dict__.get("_no_retry", set())
        for trial in tune_controller.get_trials():
            if trial.status == Trial.PENDING and trial.trial_id in no_retry:
                logger.info("Trial %s ran out of GPU memory; not retrying it.", trial.trial_id)
                no_retry.discard(trial.trial_id)
                self._finished[trial.trial_id] = f"{OOM_REASON}; not retried"
                self._save()
                tune_controller.stop_trial(trial)
                continue
            if trial.status == Trial.PENDING and trial.trial_id in self._finished:
                logger.info(
                    "Trial %s finished before the restore (%s); not running it again.",
                    trial.trial_id,
                    self._finished[trial.trial_id],
                )
                tune_controller.stop_trial(trial)
        chosen: Trial | None = super().choose_trial_to_run(tune_controller)  # type: ignore[misc]
        return chosen


class PersistentASHA(_FinishedTrials, ASHAScheduler):
    """``ASHAScheduler`` (one bracket) that persists its rungs to ``state_path``.

    Args:
        state_path: JSON file in the run folder; None keeps state in memory only.
        **kwargs: Passed to ``ray.tune.schedulers.ASHAScheduler``.
    """

    def __init__(
        self, *, state_path: str | None, error_key: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self._init_finished(state_path, error_key)

    def state(self) -> dict[str, Any]:
        """The persisted state: rung records and finished trials."""
        return {
            **super().state(),
            "rungs": [
                {"milestone": float(milestone), "recorded": dict(recorded)}
                for milestone, recorded in self._brackets[0]._rungs
            ],
            "num_stopped": self._num_stopped,
        }

    def _restore_state(self, data: dict[str, Any]) -> None:
        super()._restore_state(data)
        by_milestone = {float(r["milestone"]): r["recorded"] for r in data["rungs"]}
        for milestone, recorded in self._brackets[0]._rungs:
            recorded.update(by_milestone.get(float(milestone), {}))
        self._num_stopped = int(data.get("num_stopped", 0))

    def _recorded(self) -> int:
        return sum(len(recorded) for _, recorded in self._brackets[0]._rungs)

    def on_trial_result(
        self, tune_controller: TuneController, trial: Trial, result: dict[str, Any]
    ) -> str:
        if trial.trial_id in self._finished:
            return str(TrialScheduler.STOP)
        before = self._recorded()
        action: str = super().on_trial_result(tune_controller, trial, result)
        if action == TrialScheduler.STOP:
            epoch = result.get(self._time_attr)
            self._finished[trial.trial_id] = f"stopped by ASHA at {self._time_attr} {epoch}"
        if action == TrialScheduler.STOP or self._recorded() != before:
            self._save()  # only rung results and stops change the state
        return action

    def on_trial_complete(
        self, tune_controller: TuneController, trial: Trial, result: dict[str, Any]
    ) -> None:
        if trial.trial_id in self._trial_info:
            super().on_trial_complete(tune_controller, trial, result)
        self._mark_completed(trial)

    def on_trial_remove(self, tune_controller: TuneController, trial: Trial) -> None:
        self._trial_info.pop(trial.trial_id, None)


class PersistentFIFO(_FinishedTrials, FIFOScheduler):
    """FIFO scheduling that remembers finished trials across a restore."""

    def __init__(self, *, state_path: str | None, error_key: str | None = None) -> None:
        super().__init__()
        self._init_finished(state_path, error_key)

    def on_trial_complete(
        self, tune_controller: TuneController, trial: Trial, result: dict[str, Any]
    ) -> None:
        super().on_trial_complete(tune_controller, trial, result)
        self._mark_completed(trial)
