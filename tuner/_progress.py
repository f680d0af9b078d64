"""Live progress of a campaign on the terminal: trials by state and the best value so far.

On a terminal one status line is redrawn in place; elsewhere (CI logs, pipes) a plain line is
printed at most every ``log_every_s`` seconds and whenever a trial finishes.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any, TextIO

from ray.tune import Callback
from ray.tune.experiment import Trial

from tuner._failures import watch_for


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
) -> str:
    """One status line, e.g. ``[0:42] 12/24 trials | 2 running ...``.

    ``failed``: trials told Optuna FAIL (default: Tune's ERROR trials).
    """
    minutes, seconds = divmod(int(elapsed_s), 60)
    done = counts.get(Trial.TERMINATED, 0) + counts.get(Trial.ERROR, 0)
    parts = [
        f"[{minutes}:{seconds:02d}] {done}/{total} trials done",
        f"{counts.get(Trial.RUNNING, 0)} running",
        f"{counts.get(Trial.PENDING, 0)} pending",
        f"{stopped_early} stopped early",
        f"{counts.get(Trial.ERROR, 0) if failed is None else failed} failed",
    ]
    if best is not None:
        parts.append(f"best {metric}={best:.4f} ({best_trial})")
    return " | ".join(parts)


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
        failure_key: str | None = None,
    ) -> None:
        self._metric = metric
        self._maximize = maximize
        self._total = total
        self._max_epochs = max_epochs
        self._stream = stream
        self._log_every_s = log_every_s
        self._start = time.monotonic()
        self._last = 0.0
        self._best: float | None = None
        self._best_trial: str | None = None
        self._stopped_early: set[str] = set()
        # The failure watch's key (tuner._failures): failed trials as Optuna was told.
        self._failure_key = failure_key

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_stream"] = None
        return state

    @property
    def _out(self) -> TextIO:
        return self._stream or sys.stdout

    def setup(self, *args: Any, **info: Any) -> None:
        self._start = time.monotonic()

    def on_trial_result(
        self,
        iteration: int,
        trials: list[Trial],
        trial: Trial,
        result: dict[Any, Any],
        **info: Any,
    ) -> None:
        value = result.get(self._metric)
        if isinstance(value, (int, float)) and math.isfinite(value):
            better = self._best is None or (
                value > self._best if self._maximize else value < self._best
            )
            if better:
                self._best, self._best_trial = float(value), trial.trial_id
        self._emit(trials, force=False)

    def on_trial_complete(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        epoch = (trial.last_result or {}).get("epoch", 0)
        if isinstance(epoch, (int, float)) and epoch < self._max_epochs:
            self._stopped_early.add(trial.trial_id)
        self._emit(trials, force=True)

    def on_trial_error(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        self._emit(trials, force=True)

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
        counts: dict[str, int] = {}
        for t in trials:
            counts[t.status] = counts.get(t.status, 0) + 1
        watch = watch_for(getattr(self, "_failure_key", None))
        failed_ids = set(watch.failed) if watch is not None else set()
        line = format_status(
            elapsed_s=now - self._start,
            total=self._total,
            counts=counts,
            stopped_early=len(self._stopped_early - failed_ids),
            metric=self._metric,
            best=self._best,
            best_trial=self._best_trial,
            failed=None if watch is None else watch.count,
        )
        if tty:
            self._out.write("\r\x1b[2K" + line)
        else:
            self._out.write(line + "\n")
        self._out.flush()
