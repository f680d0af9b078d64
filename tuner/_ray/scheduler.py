"""ASHA whose rungs survive a driver crash.

Ray Tune rebuilds its scheduler empty when an experiment is restored, so every rung record
made before a crash is forgotten and trials that were already stopped run again. This
subclass writes its rungs and the set of finished trials to a small JSON file in the run
folder after every change (atomically), reads it back on restore, and never lets a trial
that already finished run again: such a trial is stopped before it starts.

Both schedulers also see every trial error first (Tune tells the scheduler before the
searcher): they read what the trial raised and record it for the searcher's message
(``tuner._ray.failures``), and a trial that ran out of GPU memory is not retried.

Both stop what the campaign stops (:class:`~tuner._ray.campaign.Campaign`, handed to them):
a trial at ``max_epochs`` or at its first result after the budget is spent, and every trial
left once the budget guard says so (its grace period for running trials is over).

ASHA here also waits for peers. Ray's ASHA judges a trial at a rung against the results
already recorded there, so the first trials of a campaign find no one to compare with and
train to ``max_t`` whatever they score: with 2 workers and rungs at 1, 3 and 9 epochs,
three random start-up configs took 27 of the first 36 epochs of a digits campaign. Here a
trial reaching a rung that holds fewer than ``min_peers`` other results pauses there
(Tune keeps its checkpoint and frees its slot); once the rung has them, each waiting trial
is judged by Ray's own rule against the others and continues from its checkpoint or is
stopped. When nothing else runs or waits to start, waiting trials are judged against what
the rung holds (a budget that ran out stops them instead). Only a result that came with a
checkpoint waits: without one there is nothing to continue from, and the trial is judged
at once as Ray's ASHA would.
"""

from __future__ import annotations

import json
import logging
import os
from typing import TYPE_CHECKING, Any

import numpy as np
from ray.tune.experiment import Trial
from ray.tune.result import SHOULD_CHECKPOINT
from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, TrialScheduler

from tuner import atomic
from tuner._ray.failures import read_trial_error
from tuner.outcome import OOM_REASON

if TYPE_CHECKING:
    from ray.tune.execution.tune_controller import TuneController

    from tuner._ray.campaign import Campaign

logger = logging.getLogger(__name__)

STATE_VERSION = 1


class _FinishedTrials:
    """Persisted state shared by both schedulers: the trials that finished.

    Loaded once, when the first trial is added (a fresh run finds no file); a restored trial
    that had already finished is stopped before it can run again.
    """

    def _init_finished(self, state_path: str | None, campaign: Campaign | None = None) -> None:
        self._state_path = state_path
        self._finished: dict[str, str] = {}
        self._loaded = False
        # The campaign's live state: its failure watch, budget guard and waiting trials.
        self._campaign = campaign
        self._no_retry: set[str] = set()

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles the scheduler into tuner.pkl; the campaign stays in this driver.
        state = self.__dict__.copy()
        state["_campaign"] = None
        return state

    def _stops(self, trial: Trial, result: dict[str, Any]) -> bool:
        """Whether the campaign stops ``trial`` at this result (max_epochs, a spent budget)."""
        campaign = self._campaign
        return campaign is not None and campaign.should_stop(trial.trial_id, result)

    def _stop_all(self, tune_controller: TuneController, reason: str) -> None:
        """Stops every trial not ended yet (``reason``: why the budget is spent; its grace
        for running trials is over)."""
        for trial in tune_controller.get_trials():
            if trial.status not in (Trial.ERROR, Trial.TERMINATED):
                tune_controller.stop_trial(trial)

    def state(self) -> dict[str, Any]:
        """The persisted state."""
        return {"version": STATE_VERSION, "rungs": [], "finished": dict(self._finished)}

    def _restore_state(self, data: dict[str, Any]) -> None:
        self._finished.update(data.get("finished", {}))

    def _save(self) -> None:
        if self._state_path is not None:
            atomic.write_json(self._state_path, self.state(), indent=None)

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
            campaign = self._campaign
            watch = campaign.watch if campaign is not None else None
            if watch is not None:
                watch.record_error(trial.trial_id, info)
            if info.oom:
                # Retrying from its checkpoint runs the same config on the same GPU: it runs
                # out of memory again, after redoing the epochs since the checkpoint. If Tune
                # requeued it, it is stopped before it starts (choose_trial_to_run).
                self.__dict__.setdefault("_no_retry", set()).add(trial.trial_id)
        super().on_trial_error(tune_controller, trial)  # type: ignore[misc]

    def choose_trial_to_run(self, tune_controller: TuneController) -> Trial | None:
        campaign = self._campaign
        if campaign is not None and campaign.exhausted is not None and campaign.stop_all():
            self._stop_all(tune_controller, campaign.exhausted)
            return None
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
    """``ASHAScheduler`` (one bracket) that persists its rungs to ``state_path`` and waits
    for peers at a rung (see the module docstring).

    Args:
        state_path: JSON file in the run folder; None keeps state in memory only.
        campaign: The campaign's live state (failure watch, budget guard, waiting trials);
            None: a scheduler of its own (tests).
        min_peers: Other results a rung needs before a trial is judged there; 0 is Ray's
            ASHA (no waiting).
        **kwargs: Passed to ``ray.tune.schedulers.ASHAScheduler``.
    """

    def __init__(
        self,
        *,
        state_path: str | None,
        campaign: Campaign | None = None,
        min_peers: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._init_finished(state_path, campaign)
        self._min_peers = min_peers
        self._waiting: dict[str, float] = {}  # trial id -> milestone it waits at
        self._promoted: list[str] = []  # judged to continue; started before new trials
        self._judge_restored = False

    def state(self) -> dict[str, Any]:
        """The persisted state: rung records, finished and waiting trials."""
        return {
            **super().state(),
            "rungs": [
                {"milestone": float(milestone), "recorded": dict(recorded)}
                for milestone, recorded in self._brackets[0]._rungs
            ],
            "num_stopped": self._num_stopped,
            "waiting": dict(self._waiting),
            "promoted": list(self._promoted),
        }

    def _restore_state(self, data: dict[str, Any]) -> None:
        super()._restore_state(data)
        by_milestone = {float(r["milestone"]): r["recorded"] for r in data["rungs"]}
        for milestone, recorded in self._brackets[0]._rungs:
            recorded.update(by_milestone.get(float(milestone), {}))
        self._num_stopped = int(data.get("num_stopped", 0))
        # Tune restores paused trials as PENDING and starts them: judge them at once.
        self._waiting.update({k: float(v) for k, v in data.get("waiting", {}).items()})
        self._promoted.extend(data.get("promoted", []))
        self._judge_restored = bool(self._waiting)
        self._publish()

    def _recorded(self) -> int:
        return sum(len(recorded) for _, recorded in self._brackets[0]._rungs)

    def _publish(self) -> None:
        # The searcher leaves waiting trials out of its live count, so new trials can come
        # and bring the peers.
        if self._campaign is not None:
            self._campaign.waiting = frozenset(self._waiting)

    def on_trial_result(
        self, tune_controller: TuneController, trial: Trial, result: dict[str, Any]
    ) -> str:
        if self._stops(trial, result) or trial.trial_id in self._finished:
            return str(TrialScheduler.STOP)
        before = self._recorded()
        milestone = self._rung_to_wait_at(trial, result)
        if milestone is not None:
            # Recorded now (a peer for later trials), judged once the rung has peers.
            self._rung(milestone)[trial.trial_id] = self._rung_value(result)
            self._waiting[trial.trial_id] = milestone
            self._publish()
            self._save()
            return str(TrialScheduler.PAUSE)
        action = self._bracket_result(tune_controller, trial, result)
        if action == TrialScheduler.STOP:
            epoch = result.get(self._time_attr)
            self._finished[trial.trial_id] = f"stopped by ASHA at {self._time_attr} {epoch}"
        changed = action == TrialScheduler.STOP or self._recorded() != before
        if changed and self._waiting:
            self._judge_waiting(tune_controller, force=False)
        if changed:
            self._save()  # only rung results, stops and waits change the state
        return action

    def _rung_value(self, result: dict[str, Any]) -> Any:
        """What a rung records of ``result``: the metric, turned so that larger is better."""
        return float(self._metric_op or 1.0) * float(result[str(self._metric)])

    def _has_values(self, result: dict[str, Any]) -> bool:
        """Whether ``result`` has what a rung records."""
        return self._metric in result

    def _continues(self, value: Any, others: list[Any]) -> bool:
        """Ray's ASHA rule: at or above the ``1 - 1 / reduction_factor`` percentile of the
        others' values at the rung (none: it continues)."""
        return not others or bool(
            value >= np.nanpercentile(others, (1 - 1 / self._reduction_factor) * 100)
        )

    def _bracket_result(
        self, tune_controller: TuneController, trial: Trial, result: dict[str, Any]
    ) -> str:
        """Ray's ASHA decision on a result that does not wait (it records it at its rung)."""
        action: str = super().on_trial_result(tune_controller, trial, result)
        return action

    def _bracket_complete(
        self, tune_controller: TuneController, trial: Trial, result: dict[str, Any]
    ) -> None:
        """Ray's ASHA at a trial's end: its last result recorded at its rung, if new."""
        super().on_trial_complete(tune_controller, trial, result)

    def _rung(self, milestone: float) -> dict[str, Any]:
        return next(rec for m, rec in self._brackets[0]._rungs if m == milestone)

    def _rung_to_wait_at(self, trial: Trial, result: dict[str, Any]) -> float | None:
        """The rung ``trial`` reaches with this result, if it must wait there for peers."""
        if self._min_peers <= 0 or not self._has_values(result):
            return None
        if not result.get(SHOULD_CHECKPOINT):
            return None  # nothing to resume it from: judged now, as Ray's ASHA does
        t = result.get(self._time_attr)
        if not isinstance(t, (int, float)) or t >= self._max_t:
            return None
        # As Ray's bracket: the highest milestone reached that has no record of this trial.
        for milestone, recorded in self._brackets[0]._rungs:
            if t < milestone or trial.trial_id in recorded:
                continue
            if len(recorded) >= self._min_peers:
                return None  # enough peers: Ray's rule decides now
            return float(milestone)
        return None

    def _judge_waiting(self, tune_controller: TuneController, *, force: bool) -> None:
        """Judges waiting trials whose rung has ``min_peers`` others (all of them when
        ``force``): Ray's cutoff over the others' results; above it, continue."""
        trials = {t.trial_id: t for t in tune_controller.get_trials()}
        for trial_id, milestone in list(self._waiting.items()):
            recorded = self._rung(milestone)
            others = [v for k, v in recorded.items() if k != trial_id]
            if len(others) < self._min_peers and not force:
                continue
            del self._waiting[trial_id]
            if self._continues(recorded[trial_id], others):
                self._promoted.append(trial_id)
                continue
            self._num_stopped += 1
            self._finished[trial_id] = f"stopped by ASHA at {self._time_attr} {milestone:g}"
            trial = trials.get(trial_id)
            if trial is not None and trial.status in (Trial.PAUSED, Trial.PENDING):
                tune_controller.stop_trial(trial)
        self._publish()
        self._save()

    def _stop_all(self, tune_controller: TuneController, reason: str) -> None:
        # Waiting trials first, so they are told why they stopped where they waited.
        if self._waiting:
            self._stop_waiting(tune_controller, f"{reason}; stopped at a rung")
        super()._stop_all(tune_controller, reason)

    def _stop_waiting(self, tune_controller: TuneController, reason: str) -> None:
        trials = {t.trial_id: t for t in tune_controller.get_trials()}
        for trial_id in list(self._waiting):
            del self._waiting[trial_id]
            self._finished[trial_id] = reason
            trial = trials.get(trial_id)
            if trial is not None and trial.status in (Trial.PAUSED, Trial.PENDING):
                tune_controller.stop_trial(trial)
        self._promoted.clear()
        self._publish()
        self._save()

    def choose_trial_to_run(self, tune_controller: TuneController) -> Trial | None:
        if self._judge_restored:
            self._judge_restored = False
            self._judge_waiting(tune_controller, force=True)
        chosen: Trial | None = super().choose_trial_to_run(tune_controller)
        if not self._waiting and not self._promoted:
            return chosen
        trials = tune_controller.get_trials()
        by_id = {t.trial_id: t for t in trials}
        # Judged to continue: back in the queue before new trials.
        promoted = self._next_promoted(by_id)
        if promoted is not None:
            return promoted
        if chosen is not None and chosen.status == Trial.PENDING:
            return chosen
        busy = any(t.status in (Trial.RUNNING, Trial.PENDING) for t in trials)
        if self._waiting and not busy:
            # Nothing else can bring peers: judge against what the rungs hold, unless the
            # budget is spent (then they stop where they are).
            exhausted = self._campaign.exhausted if self._campaign is not None else None
            if exhausted is not None:
                self._stop_waiting(tune_controller, f"{exhausted}; stopped at a rung")
                return None
            self._judge_waiting(tune_controller, force=True)
            return self._next_promoted(by_id)
        return None

    def _next_promoted(self, by_id: dict[str, Trial]) -> Trial | None:
        while self._promoted:
            trial = by_id.get(self._promoted.pop(0))
            if trial is not None and trial.status in (Trial.PAUSED, Trial.PENDING):
                self._save()
                return trial
        return None

    def on_trial_complete(
        self, tune_controller: TuneController, trial: Trial, result: dict[str, Any]
    ) -> None:
        if trial.trial_id in self._trial_info:
            self._bracket_complete(tune_controller, trial, result)
        self._mark_completed(trial)

    def on_trial_remove(self, tune_controller: TuneController, trial: Trial) -> None:
        self._trial_info.pop(trial.trial_id, None)
        if self._waiting.pop(trial.trial_id, None) is not None:
            self._publish()


class PersistentFIFO(_FinishedTrials, FIFOScheduler):
    """FIFO scheduling that remembers finished trials across a restore."""

    def __init__(self, *, state_path: str | None, campaign: Campaign | None = None) -> None:
        super().__init__()
        self._init_finished(state_path, campaign)

    def on_trial_result(
        self, tune_controller: TuneController, trial: Trial, result: dict[str, Any]
    ) -> str:
        if self._stops(trial, result):
            return str(TrialScheduler.STOP)
        action: str = super().on_trial_result(tune_controller, trial, result)
        return action

    def on_trial_complete(
        self, tune_controller: TuneController, trial: Trial, result: dict[str, Any]
    ) -> None:
        super().on_trial_complete(tune_controller, trial, result)
        self._mark_completed(trial)
