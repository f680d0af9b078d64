"""A fidelity-correct Optuna searcher for Ray Tune.

Subclass of Ray's ``OptunaSearch`` that (1) reports each epoch's metric keyed by the epoch
(not Tune's iteration counter, which a restore can shift), (2) tells Optuna COMPLETE only for
trials that reached ``max_epochs`` and PRUNED for trials stopped earlier (see
:mod:`tuner.outcome`), (3) records the Tune trial id and the stop reason as user attributes,
and (4) after a restore reconciles the SQLite study with Tune's snapshot: trials the dead
driver asked for but never handed to Tune are marked FAIL ("orphaned"), and trials already
finished in the study are never told twice.

A FAIL also gets a ``failure`` kind and a ``failure_message`` naming the trial, its config
and what went wrong (user attributes, so summary.json and ``tuner show`` have them); the
failure watch (``tuner._ray.failures``) prints it and counts it against
``failure.max_failed_trials``, past which no new trial is suggested.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import TrialState
from ray.tune.search import Searcher
from ray.tune.search.optuna import OptunaSearch

from tuner._ray.guard import GATE_CLOSED, GATE_WAIT
from tuner._ray.snapshot import snapshot_trial_ids
from tuner.contract import EPOCH_KEY
from tuner.outcome import (
    Decision,
    ErrorInfo,
    Failure,
    Outcome,
    decide_outcome,
    failure_message,
)
from tuner.study import (
    COST_ATTR,
    EPOCHS_ATTR,
    FAILURE_ATTR,
    FAILURE_MESSAGE_ATTR,
    ORPHAN_REASON,
    STOP_REASON_ATTR,
    TUNE_TRIAL_ID_ATTR,
    campaign_trials,
)
from tuner.warm_start import FIRST_ATTR

if TYPE_CHECKING:
    from tuner._ray.campaign import Campaign

logger = logging.getLogger(__name__)


_OPTUNA_STATE = {
    Outcome.COMPLETE: TrialState.COMPLETE,
    Outcome.PRUNED: TrialState.PRUNED,
    Outcome.FAIL: TrialState.FAIL,
}


class FidelityOptunaSearch(OptunaSearch):
    """``OptunaSearch`` that tells Optuna what really happened to each trial.

    Args:
        max_epochs: Epochs a trial must reach to be COMPLETE.
        epoch_attr: Result key with the epoch count (the ASHA time attribute).
        **kwargs: Passed to ``ray.tune.search.optuna.OptunaSearch``.
    """

    def __init__(
        self,
        *,
        max_epochs: int,
        max_trials: int | None = None,
        epoch_attr: str = EPOCH_KEY,
        nest_under: str | None = None,
        campaign: Campaign | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        # The campaign's live state: the budget guard holds new trials back and names the
        # reason of trials it stopped; the failure watch counts failures; the scheduler
        # names the trials waiting at a rung. Never pickled (see save).
        self._campaign = campaign
        # Ray Train trainers take hyperparameters under "train_loop_config".
        self._nest_under = nest_under
        self._max_epochs = max_epochs
        self._max_trials = max_trials
        self._epoch_attr = epoch_attr
        self._reported: dict[str, set[int]] = {}
        # Trials whose Optuna state was final before a restore: never told again.
        self._already_final: set[str] = set()
        # Non-orphan study trials Tune's restored snapshot does not know (finished after it).
        self._untracked_trials = 0
        self._concurrency_cap: int | None = None

    def suggest(self, trial_id: str) -> dict[Any, Any] | None:
        campaign = self._campaign
        watch = campaign.watch if campaign is not None else None
        if watch is not None and watch.reached and trial_id not in self._ot_trials:
            return Searcher.FINISHED  # type: ignore[return-value]  # the failure limit
        # A trial that finished after Tune's last snapshot is in the study but unknown to the
        # restored Tune run; count it so the campaign asks for exactly max_trials.
        if (
            self._max_trials is not None
            and trial_id not in self._ot_trials
            and len(self._ot_trials) + self._untracked_trials >= self._max_trials
        ):
            return Searcher.FINISHED  # type: ignore[return-value]  # Tune accepts it
        new = trial_id not in self._ot_trials
        if new and self._concurrency_cap and self._live_trials() >= self._concurrency_cap:
            return None
        if campaign is not None and new:
            gate = campaign.gate(self._live_trials())
            if gate == GATE_CLOSED:
                return Searcher.FINISHED  # type: ignore[return-value]
            if gate == GATE_WAIT:
                return None
        config: dict[str, Any] | None = super().suggest(trial_id)
        ot_trial = self._ot_trials.get(trial_id)
        if ot_trial is not None:
            ot_trial.set_user_attr(TUNE_TRIAL_ID_ATTR, trial_id)
        if config is not None and self._nest_under is not None:
            return {self._nest_under: config}
        return config

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        if trial_id in self._completed_trials or trial_id in self._already_final:
            return
        ot_trial = self._ot_trials.get(trial_id)
        value = result.get(self.metric)
        epoch = result.get(self._epoch_attr)
        if ot_trial is None or not isinstance(epoch, (int, float)):
            return
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return
        step = int(epoch)
        seen = self._reported.setdefault(trial_id, set())
        if step in seen or (isinstance(value, float) and math.isnan(value)):
            return
        seen.add(step)
        ot_trial.report(float(value), step)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        if trial_id in self._completed_trials:
            return
        ot_trial = self._ot_trials.get(trial_id)
        if ot_trial is None or trial_id in self._already_final:
            return
        watch = self._campaign.watch if self._campaign is not None else None
        error_info = watch.error_of(trial_id) if watch is not None else None
        if error_info is not None and error_info.oom and not error:
            # Ran out of GPU memory and Tune requeued it; the scheduler stopped it before
            # the retry (tuner._ray.scheduler): it failed.
            error = True
        if result is not None and not error:
            # Tune skips on_trial_result for the result that meets a stop criterion.
            self.on_trial_result(trial_id, result)
        elif result is None:
            # Stopped before it ran again after a restore (its stop was decided just before
            # the crash), or errored: judge it by the epochs already in the study.
            result = self._result_from_study(ot_trial)
        self._completed_trials.add(trial_id)
        decision, metric = self._decide(result, error, error_info if error else None)
        decision = self._budget_reason(trial_id, decision)
        ot_trial.set_user_attr(STOP_REASON_ATTR, decision.reason)
        ot_trial.set_user_attr(EPOCHS_ATTR, decision.epochs)
        cost = self._campaign.trial_usd(trial_id) if self._campaign is not None else None
        if cost is not None:  # to the micro-dollar, the same in the study and the trackers
            cost = round(cost, 6)
            ot_trial.set_user_attr(COST_ATTR, cost)
        if self._campaign is not None:
            self._campaign.ended[trial_id] = {
                "stop_reason": decision.reason,
                "epochs": decision.epochs,
                "cost_usd": cost,
            }
        if decision.failure is not None:
            message = failure_message(
                decision,
                trial_id=trial_id,
                params=ot_trial.params,
                result=result,
                metric=metric,
                epoch_attr=self._epoch_attr,
                error_info=error_info if error else None,
            )
            ot_trial.set_user_attr(FAILURE_ATTR, decision.failure.value)
            ot_trial.set_user_attr(FAILURE_MESSAGE_ATTR, message)
            if watch is not None:
                watch.trial_failed(trial_id, decision.failure, message)
        state = _OPTUNA_STATE[decision.outcome]
        values = self._told_values(decision, result)
        study: optuna.Study = self._ot_study  # type: ignore[assignment]
        try:
            study.tell(ot_trial, values, state=state)
        except RuntimeError as err:
            # GridSampler.after_trial calls study.stop() once the grid is exhausted, which
            # raises outside study.optimize; tell stores the trial's state regardless.
            if "Study.stop" not in str(err):
                raise
        self._reported.pop(trial_id, None)

    def _decide(
        self, result: dict[str, Any] | None, error: bool, error_info: ErrorInfo | None
    ) -> tuple[Decision, str]:
        """The trial's decision, and the metric its failure message names."""
        decision = decide_outcome(
            result,
            error=error,
            metric=self.metric,
            max_epochs=self._max_epochs,
            epoch_attr=self._epoch_attr,
            error_info=error_info,
        )
        return decision, self.metric

    def _told_values(
        self, decision: Decision, result: dict[str, Any] | None
    ) -> float | list[float] | None:
        """What ``study.tell`` gets as the trial's value(s): only a COMPLETE trial has any."""
        return decision.value if decision.outcome is Outcome.COMPLETE else None

    def _reported_epochs(self, frozen: optuna.trial.FrozenTrial) -> set[int]:
        """The epochs whose values the study already has for a trial (after a restore)."""
        return set(frozen.intermediate_values)

    def _budget_reason(self, trial_id: str, decision: Decision) -> Decision:
        """Names the budget as the reason of trials the guard stopped (or never started)."""
        guard = self._campaign.guard if self._campaign is not None else None
        if guard is None or guard.exhausted is None or decision.outcome is Outcome.COMPLETE:
            return decision
        if decision.reason.startswith("budget exhausted"):
            return decision
        if decision.failure in (Failure.OOM, Failure.ERROR, Failure.NO_METRIC):
            return decision  # the trial's own failure, whatever the budget did
        reason = guard.stopped_by_guard.get(trial_id, guard.exhausted)
        # Stopped by the budget: not a failure of the trial (nor counted as one).
        if decision.epochs == 0:
            return dataclasses.replace(decision, reason=f"{reason}; it never started", failure=None)
        return dataclasses.replace(
            decision,
            reason=f"{reason}; stopped at epoch {decision.epochs} of {self._max_epochs}",
            failure=None,
        )

    def _result_from_study(self, ot_trial: Any) -> dict[str, Any] | None:
        study: optuna.Study = self._ot_study  # type: ignore[assignment]
        frozen = study._storage.get_trial(ot_trial._trial_id)
        if not frozen.intermediate_values:
            return None
        last = max(frozen.intermediate_values)
        return {self.metric: frozen.intermediate_values[last], self._epoch_attr: last}

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        """Caps live trials here, so Tune does not wrap us in a ``ConcurrencyLimiter``.

        The limiter keeps its own set of live trials in ``search_gen_state``, which Tune
        writes after ``experiment_state``: a driver killed between the two leaves it out of
        step with the restored trials (finished ones hold slots forever, resumed ones are
        never told to the searcher). Counted here, live trials come from the reconciled
        state below.
        """
        self._concurrency_cap = max_concurrent
        return True

    def _live_trials(self) -> int:
        """Trials asked for and not finished, less those paused at an ASHA rung for peers
        (they hold no slot, and only new trials can bring those peers)."""
        waiting = self._campaign.waiting if self._campaign is not None else frozenset()
        finished = self._completed_trials | self._already_final | waiting
        return sum(1 for tid in self._ot_trials if tid not in finished)

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles the searcher into tuner.pkl; the campaign stays in this driver.
        state = self.__dict__.copy()
        state["_campaign"] = None
        return state

    def save(self, checkpoint_path: str) -> None:
        """Writes the searcher's state (OptunaSearch pickles ``__dict__``) without the
        campaign."""
        campaign, self._campaign = self._campaign, None
        try:
            super().save(checkpoint_path)
        finally:
            self._campaign = campaign

    def restore(self, checkpoint_path: str) -> None:
        cap = self._concurrency_cap  # this run's (Tune sets it before restoring)
        campaign = self._campaign  # this driver's
        super().restore(checkpoint_path)
        self._campaign = campaign
        self._concurrency_cap = cap if cap is not None else self._concurrency_cap
        # Tune writes experiment_state before this pickle: after a crash between the two,
        # the snapshot a restore resumes can know trials this pickle does not.
        self._reconcile(snapshot_trial_ids(Path(checkpoint_path).parent))

    def _reconcile(self, resumed: set[str] | None = None) -> None:
        """Makes the restored searcher agree with the study on disk (the source of truth).

        Args:
            resumed: Tune trial ids in the experiment snapshot being restored (None: not
                known; the searcher's own pickle is then trusted).
        """
        study: optuna.Study = self._ot_study  # type: ignore[assignment]
        storage = study._storage
        # Recounted from the study on every restore (the pickle carries the last count).
        self._untracked_trials = 0
        if resumed is not None:
            for tid in [t for t in self._ot_trials if t not in resumed]:
                # Asked for, but the snapshot Tune resumes never had it: it will not run.
                self._ot_trials.pop(tid)
                self._reported.pop(tid, None)
        known = {t.number: tid for tid, t in self._ot_trials.items()}
        orphans = adopted = 0
        for frozen in campaign_trials(study):  # warm-start seeds are not the campaign's
            tune_id = known.get(frozen.number)
            attr_id = frozen.user_attrs.get(TUNE_TRIAL_ID_ATTR)
            if tune_id is None and resumed is not None and attr_id in resumed:
                # In Tune's snapshot, not in this (older) pickle: Tune resumes it; track it.
                tune_id = str(attr_id)
                self._ot_trials[tune_id] = optuna.Trial(study, frozen._trial_id)
                adopted += 1
            if tune_id is None:
                if frozen.state == TrialState.WAITING and FIRST_ATTR in frozen.user_attrs:
                    continue  # a warm start's best, enqueued: a later trial asks for it
                if frozen.state in (TrialState.RUNNING, TrialState.WAITING):
                    storage.set_trial_user_attr(frozen._trial_id, STOP_REASON_ATTR, ORPHAN_REASON)
                    study.tell(frozen.number, state=TrialState.FAIL)
                    orphans += 1
                elif frozen.user_attrs.get(STOP_REASON_ATTR) != ORPHAN_REASON:
                    self._untracked_trials += 1
                continue
            if frozen.state.is_finished() and tune_id not in self._completed_trials:
                self._already_final.add(tune_id)
            self._reported[tune_id] = self._reported_epochs(frozen)
        if orphans:
            logger.warning("Marked %d orphaned Optuna trial(s) FAIL after restore.", orphans)
        if adopted:
            logger.warning(
                "Tracking %d trial(s) Tune's snapshot knows but the searcher's did not.", adopted
            )
