"""Text fitted to a terminal's width: prose wrapped at word boundaries, tables cut to the
columns that fit.

What ``tuner run`` prints around its live view goes through here when stdout is a terminal,
so an 80-column pane shows no line the terminal wrapped by itself; off a terminal (pipes, CI
logs) the width is None and the text is left exactly as it was. Pure: no Ray.
"""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Sequence
from typing import TextIO

__all__ = ["fit", "fit_table", "left_out", "terminal_width", "wrap"]

_GAP = "  "  # between table columns


def terminal_width(stream: TextIO) -> int | None:
    """The terminal's columns when ``stream`` is a terminal (``COLUMNS`` overrides, as for
    :func:`shutil.get_terminal_size`), else None: text for a pipe or a log is not cut."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):  # closed, or not a real stream
        return None
    if not tty:
        return None
    return max(20, shutil.get_terminal_size().columns)


def wrap(text: str, width: int | None) -> str:
    """Each line of ``text`` longer than ``width`` wrapped at word boundaries, the rest
    indented as the line is plus two spaces; a word longer than a line is cut (a path).
    ``width`` None: ``text`` unchanged."""
    if width is None:
        return text
    out: list[str] = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip(" "))]
        if len(indent) + 2 >= width // 2:  # an indent that leaves no room: do not keep it
            indent = ""
        out.extend(
            textwrap.wrap(
                line.strip(),
                width=width,
                initial_indent=indent,
                subsequent_indent=indent + "  ",
                break_on_hyphens=False,
            )
        )
    return "\n".join(out)


def fit(text: str, stream: TextIO) -> str:
    """``text`` wrapped for ``stream``'s terminal (unchanged off a terminal)."""
    return wrap(text, terminal_width(stream))


def fit_table(
    rows: Sequence[Sequence[str]], *, keep: int, width: int | None
) -> tuple[list[str], list[str]]:
    """A plain-text table (the first row its header, a rule under it) in ``width`` columns.

    The first ``keep`` columns are always shown; the others, left to right, while they fit.
    The cells of a kept column that would still overflow are cut with ``…``.

    Args:
        rows: The header, then one row of cells each.
        keep: Leading columns that are always shown.
        width: The terminal's columns; None: every column, as wide as its widest cell.

    Returns:
        The table's lines, and the headers of the columns left out.
    """
    head = list(rows[0])
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    shown = list(range(len(head)))
    if width is not None:
        shown = list(range(min(keep, len(head))))
        used = sum(widths[i] for i in shown) + len(_GAP) * (len(shown) - 1)
        for i in range(len(shown), len(head)):
            if used + len(_GAP) + widths[i] > width:
                break
            shown.append(i)
            used += len(_GAP) + widths[i]
    dropped = [head[i] for i in range(len(head)) if i not in shown]
    lines = [_GAP.join(row[i].ljust(widths[i]) for i in shown) for row in rows]
    lines.insert(1, _GAP.join("-" * widths[i] for i in shown))
    if width is not None:  # the padding of the last column is not worth a wrapped line
        lines = [line.rstrip() for line in lines]
        lines = [line if len(line) <= width else line[: width - 1] + "…" for line in lines]
    return lines, dropped


def left_out(dropped: Sequence[str], show_all: str, width: int | None) -> list[str]:
    """The line(s) under a table naming the parameter columns it left out ([]: none), with
    ``show_all`` (e.g. ``tuner show RUN``) to see them."""
    if not dropped:
        return []
    noun = "parameter" if len(dropped) == 1 else "parameters"
    line = f"+{len(dropped)} {noun} not shown: {', '.join(dropped)}"
    return wrap(line + (f" (all: {show_all})" if show_all else ""), width).split("\n")
