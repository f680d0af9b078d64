"""The live view of a running campaign on a terminal, drawn with rich from a snapshot.

:class:`LiveState` is what the view shows, taken by the progress callback
(:mod:`tuner._ray.progress`) from Tune's trials, the standings and the budget guard;
:func:`render` turns it into one rich renderable that fits a ``width`` x ``height`` terminal:
every line is cut (with an ellipsis) rather than wrapped, and the running trials' table shows
as many rows as the height leaves, then ``+N more``. Pure: no Ray; tests render it into a
``rich.console.Console(width=80)`` and read the lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

__all__ = [
    "LiveState",
    "LiveView",
    "TrialRow",
    "compact_counts",
    "format_duration",
    "gpu_text",
    "render",
    "rung_label",
]

# Lines the view draws besides the table's rows: title, counts, epochs bar, money bar,
# best, table header, "+N more", PENDING.
_FIXED_LINES = 8


@dataclass(frozen=True, slots=True)
class TrialRow:
    """One running trial in the table.

    Attributes:
        trial: Tune's trial id.
        epoch: Epochs it reported (0 before its first).
        value: Its last value of the campaign's metric (None before its first report).
        rung: Where it stands on ASHA's rungs (:func:`rung_label`).
        gpu: Its GPU use at its last epoch, e.g. ``87% 3.1G`` ("-" without telemetry).
    """

    trial: str
    epoch: int
    value: float | None
    rung: str
    gpu: str = "-"


@dataclass(frozen=True, slots=True)
class LiveState:
    """What the live view shows at one moment.

    Attributes:
        name: The campaign's name.
        elapsed_s: Seconds since this driver started.
        metric: The campaign's metric.
        counts: The status line's counts, e.g. ``"12/40 trials done | 2 running | ..."``.
        epochs_done: Trial-epochs reported so far.
        epochs_total: Predicted trial-epochs of the whole campaign (None: unknown).
        eta_s: Predicted seconds to finish (None: unknown).
        usd_to_finish: Predicted dollars to finish (None: unknown).
        money: The budget guard's live figures (:meth:`BudgetGuard.live`), or None.
        best: ``(value, trial)`` of the best finished trial, or None.
        running: The running (and rung-waiting) trials.
    """

    name: str
    elapsed_s: float
    metric: str
    counts: str
    epochs_done: int
    epochs_total: float | None = None
    eta_s: float | None = None
    usd_to_finish: float | None = None
    money: dict[str, Any] | None = None
    best: tuple[float, str] | None = None
    running: tuple[TrialRow, ...] = field(default_factory=tuple)


def format_duration(seconds: float | None) -> str:
    """``1:02:03``, ``2:03`` or ``-`` (unknown)."""
    if seconds is None:
        return "-"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def rung_label(epoch: int, marks: tuple[int, ...], *, waiting: bool = False) -> str:
    """Where a trial at ``epoch`` stands on ASHA's rungs ``marks`` (the decision epochs and
    max_epochs): ``1/3 next 3`` (rung reached of all, the next one's epoch), ``waits 3``
    for a trial paused at a rung until it has peers, ``-`` without rungs (FIFO)."""
    if not marks:
        return "-"
    reached = sum(1 for m in marks if m <= epoch)
    if waiting:
        return f"waits {marks[reached - 1]}" if reached else "waits"
    upcoming = [m for m in marks if m > epoch]
    return f"{reached}/{len(marks)} next {upcoming[0]}" if upcoming else f"{reached}/{len(marks)}"


def compact_counts(
    *,
    done: int,
    total: int,
    running: int,
    pending: int,
    waiting: int,
    stopped_early: int,
    failed: int,
) -> str:
    """The trials by state, short enough for 80 columns: ``12/40 done | 2 running | ...``."""
    parts = [f"{done}/{total} done", f"{running} running", f"{pending} pending"]
    if waiting:
        parts.append(f"{waiting} at a rung")
    parts += [f"{stopped_early} stopped early", f"{failed} failed"]
    return " | ".join(parts)


def gpu_text(result: dict[str, Any]) -> str:
    """A trial's GPU use from its last report's NVML telemetry (``trainables._telemetry``):
    ``87% 3.1G`` (mean utilisation, peak memory in GiB), ``-`` without it (CPU trials)."""
    util, mem = result.get("gpu_util_pct"), result.get("gpu_mem_used_gib")
    parts = []
    if isinstance(util, (int, float)):
        parts.append(f"{util:.0f}%")
    if isinstance(mem, (int, float)):
        parts.append(f"{mem:.1f}G")
    return " ".join(parts) or "-"


def _line(*parts: str | tuple[str, str]) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    for part in parts:
        if isinstance(part, tuple):
            text.append(*part)
        else:
            text.append(part)
    return text


def _bar_row(label: str, done: float, total: float | None, tail: str, width: int) -> Table:
    """``label [bar] tail`` on one line, the bar taking what the tail leaves."""
    bar_width = max(10, min(30, width - len(label) - len(tail) - 4))
    row = Table.grid(padding=(0, 1))
    row.add_column(no_wrap=True, width=len(label))
    row.add_column(no_wrap=True, width=bar_width)
    row.add_column(no_wrap=True, overflow="ellipsis", ratio=1)
    bar = ProgressBar(total=total if total else None, completed=done, width=bar_width)
    row.add_row(label, bar, Text(tail, no_wrap=True, overflow="ellipsis"))
    return row


def _value(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _table(state: LiveState, rows: int) -> Table:
    table = Table(box=None, padding=(0, 1), show_edge=False, expand=False, header_style="bold")
    table.add_column("trial", no_wrap=True, overflow="ellipsis", max_width=28, ratio=3)
    table.add_column("epoch", no_wrap=True, justify="right")
    table.add_column(state.metric, no_wrap=True, overflow="ellipsis", justify="right", max_width=12)
    table.add_column("rung", no_wrap=True, overflow="ellipsis", max_width=14)
    table.add_column("GPU", no_wrap=True, overflow="ellipsis", max_width=12)
    shown = state.running if len(state.running) <= rows else state.running[: max(0, rows - 1)]
    for r in shown:
        table.add_row(r.trial, str(r.epoch), _value(r.value), r.rung, r.gpu)
    return table


def render(state: LiveState, *, width: int = 80, height: int = 24) -> RenderableType:
    """The live view of ``state``, no line wider than ``width`` and at most ``height`` lines
    (at least the fixed lines: a terminal lower than that crops the bottom)."""
    lines: list[RenderableType] = []
    elapsed = format_duration(state.elapsed_s)
    lines.append(_line((state.name, "bold"), f"  {elapsed} elapsed"))
    lines.append(_line(state.counts))
    total = state.epochs_total
    total_text = "-" if total is None else f"~{max(total, state.epochs_done):.0f}"
    usd = "-" if state.usd_to_finish is None else f"${state.usd_to_finish:.2f}"
    tail = f"{state.epochs_done}/{total_text} trial-epochs  ETA {format_duration(state.eta_s)}"
    tail += f"  {usd} to finish"
    lines.append(_bar_row("epochs", state.epochs_done, total, tail, width))
    money = state.money
    if money is not None:
        limit = money.get("limit_usd")
        if limit:
            lines.append(_bar_row("money ", money["usd"], limit, _money_text(money), width))
        else:  # no dollar limit to fill
            lines.append(_line(f"money  {_money_text(money)} (no dollar limit)"))
    if state.best is not None:
        value, trial = state.best
        lines.append(_line("best ", (f"{state.metric}={value:.4f}", "bold green"), f" ({trial})"))
    else:
        lines.append(_line(f"best {state.metric}: - (no trial finished yet)"))
    used = len(lines) + 1 + (1 if money and money.get("last_pending") else 0)  # +1: header
    room = max(1, height - used)
    if state.running:
        lines.append(_table(state, room))
        if len(state.running) > room:
            lines.append(_line(f"+{len(state.running) - max(0, room - 1)} more running"))
    else:
        lines.append(_line("no trial running"))
    if money is not None and money.get("last_pending"):
        lines.append(_line(("PENDING: ", "yellow"), str(money["last_pending"])))
    return Group(*lines)


def _money_text(money: dict[str, Any]) -> str:
    text = f"${money['usd']:.2f}"
    if money.get("limit_usd"):
        text += f" of ${money['limit_usd']:.2f}"
    if money.get("limit_gpu_hours"):
        text += f", {money['gpu_hours']:.3g}/{money['limit_gpu_hours']:g} GPU-h"
    return text + f" at ${money['usd_per_hour']:.2f}/h"


class LiveView:
    """A renderable that draws :func:`render` at the console's size when it is drawn (so a
    resized terminal gets a view that fits)."""

    def __init__(self, state: LiveState) -> None:
        self.state = state

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        # One line short of the terminal: the cursor's line after the view, which would
        # scroll the view's first line away if the view filled the screen.
        height = (options.height or console.size.height) - 1
        yield render(self.state, width=options.max_width, height=height)
