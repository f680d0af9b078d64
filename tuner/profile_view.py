"""``tuner profile``'s progress: the phase, the trial and epoch it measures of how many, and the
time it has taken.

:class:`ProfileProgress` is told what happens (a phase begins, a trial starts, a trial
reports an epoch: the Ray glue's :class:`~tuner._ray.profile_watch.ProfileWatch` tells it)
and shows it on a stream: on a terminal a rich view redrawn in place (a bar of trial-epochs
done of all, the trial and epoch now, the elapsed time, fitted to the width); elsewhere (a
pipe, a CI log) one plain line per phase, trial and epoch. Pure: no Ray.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TextIO

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from tuner.live import format_duration

__all__ = ["ProfileProgress", "ProfileState", "format_line", "render"]


@dataclass(frozen=True, slots=True)
class ProfileState:
    """Where a profile's measurement stands.

    Attributes:
        campaign: The campaign measured.
        trials: Trials to measure.
        epochs: Epochs per trial.
        phase: What it does now ("starting Ray", "measuring", "reading results", "done").
        trial: The trial running, 1-based (0: none started yet).
        epoch: Epochs the running trial reported.
        epochs_done: Epochs all trials reported.
        elapsed_s: Seconds since the measurement began.
    """

    campaign: str
    trials: int
    epochs: int
    phase: str = "starting Ray"
    trial: int = 0
    epoch: int = 0
    epochs_done: int = 0
    elapsed_s: float = 0.0

    @property
    def epochs_total(self) -> int:
        return self.trials * self.epochs

    def doing(self) -> str:
        """The phase in words: ``trial 2/3, epoch 1/3`` while trials run."""
        if self.phase != "measuring" or not self.trial:
            return self.phase
        text = f"trial {self.trial}/{self.trials}"
        return text + (f", epoch {self.epoch}/{self.epochs}" if self.epoch else ", starting")


def format_line(state: ProfileState) -> str:
    """One plain line, e.g. ``[0:12] profile digits-cnn: trial 2/3, epoch 1/3 (4/9 epochs)``."""
    line = f"[{format_duration(state.elapsed_s)}] profile {state.campaign}: {state.doing()}"
    if state.phase == "measuring" and state.trial:
        line += f" ({state.epochs_done}/{state.epochs_total} epochs)"
    return line


def render(state: ProfileState, *, width: int = 80) -> RenderableType:
    """The terminal view of ``state``: no line wider than ``width`` (cut, never wrapped)."""
    title = Text(no_wrap=True, overflow="ellipsis")
    title.append(f"profile {state.campaign}", "bold")
    title.append(f"  {format_duration(state.elapsed_s)} elapsed")
    tail = f"{state.epochs_done}/{state.epochs_total} trial-epochs"
    bar_width = max(10, min(30, width - len("epochs") - len(tail) - 4))
    row = Table.grid(padding=(0, 1))
    row.add_column(no_wrap=True, width=len("epochs"))
    row.add_column(no_wrap=True, width=bar_width)
    row.add_column(no_wrap=True, overflow="ellipsis", ratio=1)
    bar = ProgressBar(total=state.epochs_total, completed=state.epochs_done, width=bar_width)
    row.add_row("epochs", bar, Text(tail, no_wrap=True, overflow="ellipsis"))
    doing = Text(state.doing(), no_wrap=True, overflow="ellipsis")
    return Group(title, row, doing)


class _View:
    """Draws the progress's state at the moment it is drawn (the elapsed time ticks)."""

    def __init__(self, progress: ProfileProgress) -> None:
        self._progress = progress

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield render(self._progress.state(), width=options.max_width)


class ProfileProgress:
    """Shows a profile's progress on ``stream`` (a rich view on a terminal, plain lines
    elsewhere); a context manager that takes the view down at the end.

    Args:
        stream: Where to show it (``tuner profile``: stderr, apart from its results).
        campaign: The campaign measured.
        trials: Trials to measure.
        epochs: Epochs per trial.
        clock: Seconds, monotonic (tests pass their own).
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        campaign: str,
        trials: int,
        epochs: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream
        self._clock = clock
        self._start = clock()
        self._state = ProfileState(campaign=campaign, trials=trials, epochs=epochs)
        self._live: Live | None = None
        try:
            self._tty = stream.isatty()
        except ValueError:  # closed
            self._tty = False

    def state(self) -> ProfileState:
        """The state now (its elapsed time read from the clock)."""
        return replace(self._state, elapsed_s=self._clock() - self._start)

    def phase(self, name: str) -> None:
        """A phase begins ("starting Ray", "measuring", "reading results", "done")."""
        self._change(phase=name)

    def trial_started(self) -> None:
        """The next trial started."""
        self._change(
            phase="measuring", trial=min(self._state.trial + 1, self._state.trials), epoch=0
        )

    def epoch_reported(self, epoch: int) -> None:
        """The running trial reported its epoch ``epoch`` (1-based)."""
        self._change(
            phase="measuring",
            trial=max(1, self._state.trial),
            epoch=epoch,
            epochs_done=min(self._state.epochs_done + 1, self._state.epochs_total),
        )

    def _change(self, **changes: object) -> None:
        self._state = replace(self._state, **changes)  # type: ignore[arg-type]
        if not self._tty:
            self._stream.write(format_line(self.state()) + "\n")
            self._stream.flush()
            return
        if self._live is None:
            console = Console(file=self._stream, force_terminal=True)
            self._live = Live(_View(self), console=console, refresh_per_second=2, transient=True)
            self._live.start()
        self._live.refresh()

    def close(self) -> None:
        """Takes the terminal view down (the results printed next replace it)."""
        live, self._live = self._live, None
        if live is not None:
            live.stop()

    def __enter__(self) -> ProfileProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
