"""Live progress of a campaign on the terminal: trials by state, the best value so far and,
with a money or GPU-hour budget, spend against it, the spend rate and PENDING warnings.

On a terminal a compact block (progress bars for trials and money, the status line, the
latest PENDING warning) is redrawn in place twice a second; elsewhere (CI logs, pipes) one
plain line is printed at most every ``log_every_s`` seconds and whenever a trial finishes.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, TextIO

from ray.tune import Callback
from ray.tune.experiment import Trial

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


def bar(fraction: float, width: int = 20) -> str:
    """``[#####---------------]``: ``fraction`` (clipped to 0..1) of ``width``."""
    filled = round(max(0.0, min(1.0, fraction)) * width)
    return "[" + "#" * filled + "-" * (width - filled) + "]"


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


def format_block(line: str, *, done: int, total: int, money: dict[str, Any] | None) -> list[str]:
    """The live view's lines on a terminal."""
    lines = [f"trials {bar(done / total if total else 0.0)} {done}/{total}"]
    if money is not None:
        limit = money.get("limit_usd")
        lines.append(f"money  {bar(money['usd'] / limit if limit else 0.0)} {format_money(money)}")
    lines.append(line)
    if money is not None and money.get("last_pending"):
        lines.append(f"PENDING: {money['last_pending']}")
    return lines


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
        self._drawn = 0  # lines of the live block on the terminal now

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_stream"] = None
        state["_campaign"] = None
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
        if self._out.isatty():
            self._out.write("\n")
            self._out.flush()

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
            done = counts.get(Trial.TERMINATED, 0) + counts.get(Trial.ERROR, 0) + self._untracked
            lines = format_block(line, done=done, total=self._total, money=money)
            drawn = getattr(self, "_drawn", 0)
            up = f"\x1b[{drawn - 1}F" if drawn > 1 else ""
            self._out.write("\r" + up + "\x1b[J" + "\n".join(lines))
            self._drawn = len(lines)
        else:
            if money is not None:
                line += " | " + format_money(money)
            self._out.write(line + "\n")
        self._out.flush()
