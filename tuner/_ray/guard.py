"""The budget guard in the driver: the spend ledger kept live, and the budget enforced.

- A watcher thread reads Ray's alive nodes every ``poll_s`` seconds, prices each new node
  (:class:`tuner.budget.NodePricer`) and feeds the :class:`tuner.budget.Ledger`.
- Every second the guard asks :func:`tuner.budget.assess` whether a new trial may start;
  the searcher holds new trials back while it may not (:meth:`BudgetGuard.gate`).
- At a limit, at ``tuner stop`` or at a result meeting ``budget.goal`` it writes a stop
  reason to Ray's key-value store (trials read it after each epoch, checkpoint and
  stop); the schedulers stop every trial at its next result
  (:meth:`BudgetGuard.should_stop`) and, once they have stopped (or after a grace period),
  every trial left (:meth:`BudgetGuard.stop_all`).
- Trials PENDING longer than ``resources.pending_warning`` are reported with the reason.
- ``ledger.json`` is written every few seconds and at the end; a resume continues it.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from ray.tune.experiment import Trial

from tuner import atomic
from tuner._ray.nodes import NodeWatcher, read_nodes
from tuner._ray.pending import PendingWatch
from tuner.budget import (
    LEDGER_FILE,
    Forecast,
    Goal,
    Goals,
    Ledger,
    Limits,
    NodePricer,
    NodeSeen,
    NodeType,
    Outlook,
    Usage,
    Verdict,
    assess,
    expected_epochs_left,
)
from tuner.budget._capacity import planned_rates
from tuner.contract import EPOCH_KEY, STOP_NAMESPACE
from tuner.cost import AshaGeometry
from tuner.stop import STOP_REASON, read_stop_request

logger = logging.getLogger(__name__)

GATE_OPEN, GATE_WAIT, GATE_CLOSED = "open", "wait", "closed"


class BudgetGuard:
    """Keeps the ledger and enforces ``budget.usd`` / ``gpu_hours`` / ``deadline``.

    Args:
        run_dir: The run folder (``ledger.json`` goes there).
        ledger: The ledger (a fresh one, or read back for a resume).
        pricer: Prices nodes.
        limits: The campaign's limits (none: the ledger is kept, nothing is enforced).
        geometry: The campaign's ASHA geometry (expected epochs left of each trial).
        request: One trial's resource bundle, e.g. ``{"CPU": 1, "GPU": 1}``.
        slots: Trials at once (Tune's ``max_concurrent_trials``).
        node_types: The autoscaler's node types, when known (PENDING reasons, planned
            price of a slot before a node exists).
        max_workers: The autoscaler's global worker cap, when known.
        epoch_s: Expected seconds per epoch before any is measured (from a profile).
        pending_warning_s: Report trials PENDING longer than this.
        max_epochs: Epochs at which a trial stops anyway.
        epoch_attr: Result key of the epoch count.
        stop_key: Key of the stop signal in Ray's key-value store.
        stream: Where messages go.
        poll_s: Seconds between reads of Ray's node table.
        check_s: Seconds between budget checks.
        save_s: Seconds between writes of ``ledger.json``.
        stop_grace_s: Seconds running trials get to checkpoint and stop once the budget is
            exhausted, before the campaign ends without them (None: three epochs).
        goal: The campaign's goal: a result that meets it stops the campaign as a spent
            budget does (``goal_reached`` says why).
    """

    def __init__(
        self,
        *,
        run_dir: Path,
        ledger: Ledger,
        pricer: NodePricer,
        limits: Limits,
        geometry: AshaGeometry,
        request: Mapping[str, float],
        slots: int,
        node_types: Sequence[NodeType] = (),
        max_workers: int | None = None,
        epoch_s: float | None = None,
        pending_warning_s: float = 300.0,
        max_epochs: int,
        epoch_attr: str = EPOCH_KEY,
        stop_key: str,
        stream: TextIO | None = None,
        poll_s: float = 0.5,
        check_s: float = 1.0,
        save_s: float = 5.0,
        stop_grace_s: float | None = None,
        goal: Goal | Goals | None = None,
    ) -> None:
        self._run_dir = run_dir
        self._ledger = ledger
        self._pricer = pricer
        self._limits = limits
        self._geometry = geometry
        self._request = dict(request)
        self.slots = max(1, slots)
        self._node_types = list(node_types)
        self._max_workers = max_workers
        self._prior_epoch_s = epoch_s
        self._max_epochs = max_epochs
        self._epoch_attr = epoch_attr
        self.stop_key = stop_key
        self.stream = stream
        self._check_s = check_s
        self._save_s = save_s
        self._stop_grace_s = stop_grace_s
        self._lock = threading.RLock()
        self._cache: dict[str, NodeSeen] = {}
        self._alive: list[NodeSeen] = []
        self._watcher = NodeWatcher(self.observe_nodes, poll_s)
        # Per trial: epochs done and seconds they took (Tune's time_total_s).
        self._progress: dict[str, tuple[int, float]] = {}
        self._live = 0
        self._gate = GATE_OPEN
        self._verdict = Verdict(True, False, "within budget")
        self._last_check = 0.0
        self._last_save = 0.0
        self._pending = PendingWatch(
            request=self._request,
            node_types=self._node_types,
            max_workers=max_workers,
            warning_s=pending_warning_s,
            say=self._say,
        )
        self.exhausted: str | None = None
        self.closed: str | None = None  # why no further trial was started, if so
        # `tuner stop` asked for the stop (tuner.stop); it ends the campaign as a spent
        # budget does, but a resume is not held to it.
        self.user_stop: str | None = None
        self._goal = goal
        self.goal_reached: str | None = None  # the goal's reason, once a trial reached it
        self._exhausted_at: float | None = None
        self.stopped_by_guard: dict[str, str] = {}
        self._running: set[str] = set()
        self._gate_reason_shown: str | None = None
        self._forecast = Forecast(geometry, workers=self.slots)

    @property
    def pending_warnings(self) -> list[dict[str, Any]]:
        """Trials reported PENDING too long: trial, seconds waited, reason."""
        return self._pending.warnings

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Begins a ledger session, clears the stop signal and starts the node watcher."""
        from ray.experimental import internal_kv

        internal_kv._internal_kv_del(self.stop_key, namespace=STOP_NAMESPACE)
        now = time.time()
        if self.exhausted is not None:  # carried over from the session before (resume)
            self._exhaust(self.exhausted, now)
        with self._lock:
            self._ledger.begin_session(now)
        self.observe_nodes()
        self._check(now, force=True)
        self._watcher.start()

    def close(self) -> None:
        """Stops the watcher, ends the ledger session and writes ``ledger.json``."""
        self._watcher.stopped.set()
        if self._watcher.is_alive():
            self._watcher.join(timeout=5)
        try:
            self.observe_nodes()
        except Exception:
            logger.debug("final read of Ray's nodes failed", exc_info=True)
        with self._lock:
            self._ledger.end_session(time.time())
            self.save()

    def carry_over(self, ledger_file: Mapping[str, Any]) -> None:
        """Takes the outcome of the session before (a resume): a budget exhausted stays
        exhausted, and a campaign held back stays held back. Either way Tune's restored
        searcher asks for no more trials; the budget is the campaign file's, unchanged."""
        exhausted, held_back = ledger_file.get("exhausted"), ledger_file.get("held_back")
        if ledger_file.get("user_stop"):
            exhausted = None  # `tuner stop` ended that session, not the budget
        self.exhausted = str(exhausted) if exhausted else None
        self.closed = str(held_back) if held_back else None

    def save(self) -> None:
        """Writes ``ledger.json`` atomically."""
        with self._lock:
            data = self._ledger.to_dict(time.time())
            data["limits"] = self._limit_values()
            data["exhausted"] = self.exhausted
            data["held_back"] = self.closed
            data["user_stop"], data["goal_reached"] = self.user_stop, self.goal_reached
            data["pending_warnings"] = self.pending_warnings
        atomic.write_json(self._run_dir / LEDGER_FILE, data)

    def _limit_values(self) -> dict[str, float | None]:
        limits = self._limits
        return {"usd": limits.usd, "gpu_hours": limits.gpu_hours, "deadline_s": limits.deadline_s}

    def observe_nodes(self) -> None:
        """Reads Ray's alive nodes into the ledger (the watcher thread calls this)."""
        alive, ended = read_nodes(self._pricer, self._cache)
        with self._lock:
            self._ledger.observe(alive, time.time(), ended)
            self._alive = alive

    # -- the searcher's gate ---------------------------------------------------------------

    def gate(self, live: int | None = None) -> str:
        """``open``: a new trial may start; ``wait``: not now; ``closed``: never again.

        Args:
            live: Trials started and not finished, as the searcher counts them. Tune asks
                the searcher in a loop of its own while no trial is live, where callbacks
                do not run, so the count must come from the asker.
        """
        with self._lock:
            if live is not None:
                self._live = live
                self._running &= set(self._ledger_running())
        self._check(time.time())
        with self._lock:
            return self._gate

    def _ledger_running(self) -> list[str]:
        return [
            t.trial_id
            for t in self._ledger.trials.values()
            if t.intervals and t.intervals[-1][1] is None
        ]

    # -- Tune callback hooks ---------------------------------------------------------------

    def on_step_begin(self, iteration: int, trials: list[Trial], **info: Any) -> None:
        now = time.time()
        with self._lock:
            self._live = sum(t.status in (Trial.PENDING, Trial.RUNNING) for t in trials)
            self._running = {t.trial_id for t in trials if t.status == Trial.RUNNING}
        with self._lock:
            alive = list(self._alive)
        self._pending.watch(trials, now, alive)
        self._check(now)

    def on_trial_start(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        with self._lock:
            self._ledger.trial_started(trial.trial_id, self._request.get("GPU", 0.0), time.time())
            self._pending.started(trial.trial_id)

    def on_trial_result(
        self, iteration: int, trials: list[Trial], trial: Trial, result: dict[str, Any], **info: Any
    ) -> None:
        self._record(trial.trial_id, result)

    def on_trial_complete(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        self._stopped(trial)

    def on_trial_error(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        self._stopped(trial)

    def _stopped(self, trial: Trial) -> None:
        with self._lock:
            self._ledger.trial_stopped(trial.trial_id, time.time())
            self._running.discard(trial.trial_id)
            last = trial.last_result or {}
        if last:
            self._record(trial.trial_id, last)

    def _record(self, trial_id: str, result: Mapping[str, Any]) -> None:
        epoch = result.get(self._epoch_attr)
        spent = result.get("time_total_s")
        with self._lock:
            self._ledger.trial_node(trial_id, str(result.get("node_ip") or ""))
            if isinstance(epoch, (int, float)) and isinstance(spent, (int, float)) and epoch > 0:
                self._progress[trial_id] = (int(epoch), float(spent))
            reached = self._goal.met(trial_id, result) if self._goal is not None else None
            if reached is not None and self.exhausted is None:
                self.goal_reached = reached
                self._exhaust(reached, time.time())

    # -- stopping trials (the schedulers ask; tuner._ray.scheduler) ------------------------

    def should_stop(self, trial_id: str, result: Mapping[str, Any]) -> bool:
        """Whether ``trial_id`` stops at this result: it reached ``max_epochs``, or the
        budget is exhausted (the trial is then recorded as stopped by the guard)."""
        epoch = result.get(self._epoch_attr)
        if isinstance(epoch, (int, float)) and epoch >= self._max_epochs:
            return True
        with self._lock:
            if self.exhausted is not None:
                self.stopped_by_guard.setdefault(trial_id, self.exhausted)
                return True
        return False

    def stop_all(self) -> bool:
        """Whether every trial left stops now: the budget is exhausted and each running
        trial has stopped at a result, or they had the grace period to do so."""
        with self._lock:
            if self.exhausted is None or self._exhausted_at is None:
                return False
            unstopped = self._running - set(self.stopped_by_guard)
            grace = self._stop_grace_s
            if grace is None:
                grace = max(30.0, 3.0 * (self._epoch_s() or 10.0))
            return not unstopped or time.time() - self._exhausted_at > grace

    # -- decisions -------------------------------------------------------------------------

    def _epoch_s(self) -> float | None:
        done = [(e, s) for e, s in self._progress.values() if e > 0]
        if not done:
            return self._prior_epoch_s
        return sum(s for _, s in done) / sum(e for e, _ in done)

    def trial_usd(self, trial_id: str) -> float:
        """The trial's share of the dollars spent so far (:meth:`Ledger.trial_usd`)."""
        with self._lock:
            return self._ledger.trial_usd(trial_id, time.time())

    def planned_rates(self) -> tuple[float, float]:
        """Dollars and GPU-hours per trial-second of the cheapest node that fits a trial."""
        with self._lock:
            return self._planned_rates()

    def _slot_rates(self, now: float) -> tuple[float, float]:
        """Dollars and GPU-hours per trial-second: observed once there is enough, else planned."""
        trial_s = self._ledger.trial_s(now)
        epoch_s = self._epoch_s() or 0.0
        if trial_s >= max(60.0, 2.0 * epoch_s * self.slots):
            return self._ledger.usd(now) / trial_s, self._ledger.gpu_hours(now) / trial_s
        return self._planned_rates()

    def _planned_rates(self) -> tuple[float, float]:
        return planned_rates(self._request, self._alive, self._node_types, self._pricer)

    def _check(self, now: float, *, force: bool = False) -> None:
        with self._lock:
            # Closing for good on a verdict that counted trials since finished would end
            # the campaign on a stale outlook: such a verdict is refreshed first.
            stale_close = self._live == 0 and not self._verdict.launch
        if not force and not stale_close and now - self._last_check < self._check_s:
            # The verdict (spend, outlook) is refreshed once per check period; the gate
            # follows the live count at every call, or a freed slot would wait for the
            # next period while Tune's own loop sleeps a second per refusal.
            with self._lock:
                self._decide_gate()
            return
        self._last_check = now
        with self._lock:
            usage = Usage(
                usd=self._ledger.usd(now),
                gpu_hours=self._ledger.gpu_hours(now),
                running_s=self._ledger.running_s(now),
            )
            epoch_s = self._epoch_s()
            usd_s, gpu_s = self._slot_rates(now)
            running_left = (
                [
                    epoch_s
                    * expected_epochs_left(self._geometry, self._progress.get(t, (0, 0.0))[0])
                    for t in self._running
                ]
                if epoch_s is not None
                else []
            )
            outlook = Outlook(
                usd_per_trial_s=usd_s,
                gpu_h_per_trial_s=gpu_s,
                new_trial_s=None
                if epoch_s is None
                else epoch_s * expected_epochs_left(self._geometry, 0),
                running_left_s=running_left,
                usd_per_s_now=self._ledger.usd_per_hour_now() / 3600.0,
                gpu_h_per_s_now=self._ledger.gpus_now() / 3600.0,
                stop_lead_s=(epoch_s or 0.0) + self._check_s,
            )
            verdict = assess(self._limits, usage, outlook) if self._limits.any else self._verdict
            self._verdict = verdict
            if verdict.exhausted and self.exhausted is None:
                self._exhaust(verdict.reason, now)
            if self.exhausted is None and read_stop_request(self._run_dir) is not None:
                self.user_stop = STOP_REASON
                self._exhaust(STOP_REASON, now)
            self._decide_gate()
            if force or now - self._last_save >= self._save_s:
                self._last_save = now
                self.save()

    def _decide_gate(self) -> None:
        """Sets the gate from the last verdict and the live count (holding the lock)."""
        verdict = self._verdict
        if self.exhausted is not None:
            self._gate = GATE_CLOSED
        elif not verdict.launch:
            # Held back; when nothing runs any more, nothing will free money: done.
            self._gate = GATE_CLOSED if self._live == 0 else GATE_WAIT
            if self._gate == GATE_CLOSED:
                self.closed = verdict.reason
            if verdict.reason != self._gate_reason_shown:
                self._say(verdict.reason)
                self._gate_reason_shown = verdict.reason
        elif self._live >= self.slots:
            self._gate = GATE_WAIT
        else:
            self._gate = GATE_OPEN

    def _exhaust(self, reason: str, now: float) -> None:
        from ray.experimental import internal_kv

        self.exhausted = reason
        self._exhausted_at = now
        internal_kv._internal_kv_put(
            self.stop_key, reason.encode(), overwrite=True, namespace=STOP_NAMESPACE
        )
        running = len(self._running)
        self._say(f"{reason}; {running} running trial(s) checkpoint and stop after this epoch")
        self.save()

    def pending_reason(self) -> str:
        """Why a trial of this campaign would wait for resources now."""
        with self._lock:
            alive = list(self._alive)
        return self._pending.reason(alive)

    def _say(self, message: str) -> None:
        prefix = "stop" if self.user_stop else "goal" if self.goal_reached else "budget"
        print(f"{prefix}: {message}", file=self.stream or sys.stdout, flush=True)

    # -- results ---------------------------------------------------------------------------

    def live(self) -> dict[str, Any]:
        """Spend so far against the limits, the spend rate and the latest PENDING warning,
        for the live view."""
        with self._lock:
            now = time.time()
            return {
                "usd": self._ledger.usd(now),
                "usd_per_hour": self._ledger.usd_per_hour_now(),
                "gpu_hours": self._ledger.gpu_hours(now),
                "limit_usd": self._limits.usd,
                "limit_gpu_hours": self._limits.gpu_hours,
                "pending_warnings": len(self.pending_warnings),
                "last_pending": self.pending_warnings[-1]["reason"]
                if self.pending_warnings
                else None,
                "exhausted": self.exhausted,
            }

    def to_finish(self, *, done: int) -> dict[str, Any] | None:
        """What the rest of the campaign should take (:class:`tuner.budget.Forecast`),
        or None before an epoch is measured. ``done``: trials ended (the live count)."""
        with self._lock:
            epoch_s = self._epoch_s()
            if epoch_s is None or epoch_s <= 0:
                return None
            usd_s, gpu_s = self._slot_rates(time.time())
            progress, running = dict(self._progress), set(self._running)
        rates = {"usd_per_trial_s": usd_s, "gpu_h_per_trial_s": gpu_s}
        return self._forecast.rest(
            epoch_s=epoch_s, progress=progress, running=running, done=done, **rates
        )

    def summary(self) -> dict[str, Any]:
        """The ledger's totals and the guard's outcome, for summary.json."""
        with self._lock:
            now = time.time()
            totals = self._ledger.summary(now)
        return {
            "limits": self._limit_values(),
            **totals,
            "exhausted": self.exhausted,
            "held_back": self.closed,
            "user_stop": self.user_stop,
            "goal_reached": self.goal_reached,
            "stopped_by_budget": sorted(self.stopped_by_guard),
            "pending_warnings": len(self.pending_warnings),
        }
