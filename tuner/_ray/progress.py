"""Live progress of a campaign on the terminal: trials by state, the best value so far and,
with a money or GPU-hour budget, spend against it, the spend rate and PENDING warnings.

On a terminal the live view of :mod:`tuner.live` (trial-epochs against the predicted total,
ETA and dollars to finish, the running trials, the best so far) is redrawn in place with
rich at most twice a second, fitted to the terminal's width and height; elsewhere (CI logs,
pipes) one plain line is printed at most every ``log_every_s`` seconds and whenever a trial
finishes.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, TextIO

from ray.tune import Callback
from ray.tune.experiment import Trial
from rich.console import Console
from rich.live import Live

from tuner.contract import EPOCH_KEY
from tuner.cost import AshaGeometry
from tuner.cost._reality import read_prediction
from tuner.live import LiveState, LiveView, TrialRow, compact_counts, gpu_text, rung_label
from tuner.outcome import Outcome, decide_outcome
from tuner.standings import Standings
from tuner.status import PUBLISH_EVERY_S, State, status_document

if TYPE_CHECKING:
    from tuner._ray.campaign import Campaign


def format_status(
    *,
    elapsed_s: float,
    total: int,
    counts: dict[str, int],
    stopped_early: int,
    metric: str,
    best: float | None,
    best_trial: str | None,
    failed: int | None = None,
    untracked: int = 0,
) -> str:
    """One status line, e.g. ``[0:42] 12/24 trials | 2 running ...``.

    ``failed``: trials told Optuna FAIL (default: Tune's ERROR trials). ``untracked``:
    trials a resumed campaign's study finished that Tune's last snapshot did not know.
    """
    minutes, seconds = divmod(int(elapsed_s), 60)
    done = counts.get(Trial.TERMINATED, 0) + counts.get(Trial.ERROR, 0) + untracked
    parts = [
        f"[{minutes}:{seconds:02d}] {done}/{total} trials done",
        f"{counts.get(Trial.RUNNING, 0)} running",
        f"{counts.get(Trial.PENDING, 0)} pending",
        *([f"{counts[Trial.PAUSED]} waiting at a rung"] if counts.get(Trial.PAUSED) else []),
        f"{stopped_early} stopped early",
        f"{counts.get(Trial.ERROR, 0) if failed is None else failed} failed",
    ]
    if best is not None:
        parts.append(f"best {metric}={best:.4f} ({best_trial})")
    return " | ".join(parts)


def format_money(money: dict[str, Any]) -> str:
    """Spend against the budget and the rate, e.g. ``$0.42 of $5.00 (8%) at $3.60/h``."""
    text = f"${money['usd']:.2f}"
    if money.get("limit_usd"):
        text += f" of ${money['limit_usd']:.2f} ({money['usd'] / money['limit_usd']:.0%})"
    if money.get("limit_gpu_hours"):
        text += f", {money['gpu_hours']:.3g} of {money['limit_gpu_hours']:g} GPU-h"
    text += f" at ${money['usd_per_hour']:.2f}/h"
    if money.get("pending_warnings"):
        text += f", {money['pending_warnings']} PENDING warning(s)"
    return text


def running_document(
    campaign: Campaign,
    standings: Standings,
    *,
    done: int,
    failed: int,
    money: dict[str, Any] | None,
    running: int = 0,
    pending: int = 0,
    line: str | None = None,
) -> dict[str, Any]:
    """The status document of a running campaign (:mod:`tuner.status`); ``line``: the
    live line the driver printed last."""
    spec = campaign.spec
    best = None
    if standings.best_value is not None:
        best = {
            "metric": spec.metric,
            "mode": spec.mode.value,
            "value": standings.best_value,
            "trial": standings.best_trial,
        }
    to_finish = None
    if campaign.guard is not None:
        to_finish = campaign.guard.to_finish(done=done)
    return status_document(
        run_dir=campaign.run_dir,
        name=spec.name,
        state=State.RUNNING,
        to_finish=to_finish,
        line=line,
        status="running",
        trials={
            "total": spec.budget.trials,
            "done": done,
            "running": running,
            "pending": pending,
            "stopped_early": standings.stopped_early,
            "failed": failed,
        },
        best=best,
        spend=money,
        started_unix_s=campaign.started_unix_s,
    )


class ProgressCallback(Callback):
    """Prints campaign progress; a Ray Tune callback run in the driver."""

    def __init__(
        self,
        *,
        metric: str,
        maximize: bool,
        total: int,
        max_epochs: int,
        stream: TextIO | None = None,
        log_every_s: float = 10.0,
        campaign: Campaign | None = None,
        standings: Standings | None = None,
    ) -> None:
        """``standings``: the trials finished before this driver started (a resume)."""
        self._metric = metric
        self._maximize = maximize
        self._total = total
        self._max_epochs = max_epochs
        self._stream = stream
        self._log_every_s = log_every_s
        self._start = time.monotonic()
        self._last = 0.0
        # The finished trials, judged as the searcher tells the study (tuner.outcome), so
        # the best named here is the one summary.json and best.yaml will name.
        self._standings = standings or Standings(maximize=maximize)
        self._caught_up = False  # trials restored already finished are counted once
        self._untracked = 0  # finished in the study, unknown to Tune's restored snapshot
        self._published = 0.0  # when status.json was last written (monotonic)
        # The campaign's failure watch (failed trials as Optuna was told) and budget guard
        # (spend against the budget).
        self._campaign = campaign
        self._live: Live | None = None  # the live view on a terminal, once drawn
        # The campaign's planned trial-epochs, once read: (None,) when no prediction was written.
        self._planned_epochs: tuple[float | None] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_stream"] = None
        state["_campaign"] = None
        state["_live"] = None
        return state

    @property
    def _out(self) -> TextIO:
        return self._stream or sys.stdout

    def setup(self, *args: Any, **info: Any) -> None:
        self._start = time.monotonic()
        self._note_interrupts()

    def _note_interrupts(self) -> None:
        """Marks the campaign interrupted when SIGINT arrives (Ctrl+C, ``tuner stop
        --now``). Tune's own handler, set by then, ends the run at once and returns from
        ``fit()`` as if the run were over; it is still called, after the mark."""
        campaign = self._campaign
        if campaign is None or threading.current_thread() is not threading.main_thread():
            return
        tune_handler = signal.getsignal(signal.SIGINT)

        def noted(sig: int, frame: Any) -> None:
            campaign.interrupted = True
            if callable(tune_handler):
                tune_handler(sig, frame)

        signal.signal(signal.SIGINT, noted)

    def on_trial_result(
        self,
        iteration: int,
        trials: list[Trial],
        trial: Trial,
        result: dict[Any, Any],
        **info: Any,
    ) -> None:
        self._emit(trials, force=False)

    def on_trial_complete(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        self._judge(trial)
        self._emit(trials, force=True)

    def _judge(self, trial: Trial) -> None:
        """Adds a finished trial to the standings, decided as the searcher decides it."""
        watch = self._campaign.watch if self._campaign is not None else None
        decision = decide_outcome(
            trial.last_result or None,
            error=trial.status == Trial.ERROR,
            metric=self._metric,
            max_epochs=self._max_epochs,
        )
        self._standings.add(
            trial.trial_id,
            decision.value,
            complete=decision.outcome is Outcome.COMPLETE,
            epochs=decision.epochs,
            failed=decision.outcome is Outcome.FAIL
            or (watch is not None and trial.trial_id in watch.failed),
        )

    def on_trial_error(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        self._emit(trials, force=True)

    def _publish(
        self,
        campaign: Campaign,
        counts: dict[str, int],
        money: dict[str, Any] | None,
        line: str | None = None,
    ) -> None:
        """Writes the running campaign's status.json (what ``tuner list`` reads)."""
        watch = campaign.watch
        campaign.publish(
            running_document(
                campaign,
                self._standings,
                done=counts.get(Trial.TERMINATED, 0) + counts.get(Trial.ERROR, 0) + self._untracked,
                running=counts.get(Trial.RUNNING, 0) + counts.get(Trial.PAUSED, 0),
                pending=counts.get(Trial.PENDING, 0),
                failed=watch.count if watch is not None else counts.get(Trial.ERROR, 0),
                money=money,
                line=line,
            ),
        )

    def on_experiment_end(self, trials: list[Trial], **info: Any) -> None:
        self._emit(trials, force=True)
        live, self._live = getattr(self, "_live", None), None
        if live is not None:
            live.stop()  # the last view stays on the terminal

    def _marks(self) -> tuple[int, ...]:
        """ASHA's rungs (its decision epochs and max_epochs); none for FIFO."""
        campaign = self._campaign
        if campaign is None:
            return ()
        geometry = AshaGeometry.from_spec(campaign.spec)
        return (*geometry.decision_epochs(), geometry.max_epochs) if geometry.asha else ()

    def _planned(self) -> float | None:
        """The campaign's expected trial-epochs before any is measured: the cost model's
        replay of ASHA the driver wrote to ``prediction.json`` at the start (read once)."""
        campaign = self._campaign
        if campaign is None:
            return None
        cached = getattr(self, "_planned_epochs", None)
        if cached is None:
            planned = (read_prediction(campaign.run_dir) or {}).get("trial_epochs")
            cached = self._planned_epochs = (None if planned is None else float(planned),)
        return cached[0]

    def live_state(
        self, trials: list[Trial], counts: dict[str, int], money: dict[str, Any] | None, now: float
    ) -> LiveState:
        """What the live view shows now (:class:`tuner.live.LiveState`)."""
        campaign, standings = self._campaign, self._standings
        marks = self._marks()
        waiting = campaign.waiting if campaign is not None else frozenset()
        epochs_done, rows = 0, []
        for t in trials:
            result = t.last_result or {}
            epoch = result.get(EPOCH_KEY)
            epoch = int(epoch) if isinstance(epoch, (int, float)) else 0
            epochs_done += epoch
            if t.status in (Trial.RUNNING, Trial.PAUSED) and t.trial_id not in standings:
                value = result.get(self._metric)
                paused = t.status == Trial.PAUSED or t.trial_id in waiting
                rows.append(
                    TrialRow(
                        trial=t.trial_id,
                        epoch=epoch,
                        value=float(value) if isinstance(value, (int, float)) else None,
                        rung=rung_label(epoch, marks, waiting=paused),
                        gpu=gpu_text(result),
                    )
                )
        done = counts.get(Trial.TERMINATED, 0) + counts.get(Trial.ERROR, 0) + self._untracked
        guard = campaign.guard if campaign is not None else None
        rest = guard.to_finish(done=done) if guard is not None else None
        watch = campaign.watch if campaign is not None else None
        best = None
        if standings.best_value is not None and standings.best_trial is not None:
            best = (standings.best_value, standings.best_trial)
        return LiveState(
            name=campaign.spec.name if campaign is not None else "campaign",
            elapsed_s=now - self._start,
            metric=self._metric,
            counts=compact_counts(
                done=done,
                total=self._total,
                running=counts.get(Trial.RUNNING, 0),
                pending=counts.get(Trial.PENDING, 0),
                waiting=counts.get(Trial.PAUSED, 0),
                stopped_early=standings.stopped_early,
                failed=counts.get(Trial.ERROR, 0) if watch is None else watch.count,
            ),
            epochs_done=epochs_done,
            epochs_total=epochs_done + rest["trial_epochs"] if rest else self._planned(),
            eta_s=rest["wall_s"] if rest else None,
            usd_to_finish=rest["usd"] if rest else None,
            money=money,
            best=best,
            running=tuple(rows),
        )

    def _draw(self, state: LiveState) -> None:
        """Draws ``state`` in place on the terminal (rich's Live: what others print while
        it is up goes above it)."""
        live = getattr(self, "_live", None)
        if live is None:
            console = Console(file=self._out, force_terminal=True)
            live = Live(LiveView(state), console=console, auto_refresh=False)
            live.start()
            self._live = live
        live.update(LiveView(state), refresh=True)

    def _emit(self, trials: list[Trial], *, force: bool) -> None:
        now = time.monotonic()
        tty = self._out.isatty()
        interval = 0.5 if tty else self._log_every_s
        if not force and now - self._last < interval:
            return
        self._last = now
        if not self._caught_up:
            # A resumed experiment's trials that had already finished end no more: count
            # those the study did not (a crash between Tune's snapshot and the study's tell).
            for t in trials:
                if t.status == Trial.TERMINATED:
                    self._judge(t)
            self._untracked = self._standings.count_not_in({t.trial_id for t in trials})
            self._caught_up = True
        counts: dict[str, int] = {}
        for t in trials:
            # Tune marks a trial TERMINATED after its on_trial_complete callbacks: one this
            # callback has judged finished counts as done already.
            status = t.status
            if status != Trial.ERROR and t.trial_id in self._standings:
                status = Trial.TERMINATED
            counts[status] = counts.get(status, 0) + 1
        campaign = self._campaign
        watch = campaign.watch if campaign is not None else None
        standings = self._standings
        line = format_status(
            elapsed_s=now - self._start,
            total=self._total,
            counts=counts,
            stopped_early=standings.stopped_early,
            metric=self._metric,
            best=standings.best_value,
            best_trial=standings.best_trial,
            untracked=self._untracked,
            failed=None if watch is None else watch.count,
        )
        guard = campaign.guard if campaign is not None else None
        money = guard.live() if guard is not None else None
        if campaign is not None and (force or now - self._published >= PUBLISH_EVERY_S):
            self._published = now
            self._publish(campaign, counts, money, line)
        if tty:
            self._draw(self.live_state(trials, counts, money, now))
            return
        if money is not None:
            line += " | " + format_money(money)
        self._out.write(line + "\n")
        self._out.flush()
