"""How a command's outcome becomes the exit status (errors are 2, an interrupt is 130), and
how the API's warnings reach the terminal (``warning: ...``)."""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any

from tuner.errors import TunerError, TunerWarning

__all__ = ["handled"]


def handled(handler: Any, args: argparse.Namespace) -> int:
    """Runs a command's handler; its exit status, with errors printed as one line.

    Args:
        handler: The command's function of the parsed flags, returning its exit status.
        args: The parsed flags.

    Returns:
        The handler's status; 2 after a :class:`~tuner.errors.TunerError` (bad input,
        printed as ``error: ...``, once per error it reports), 130 after Ctrl-C. Each
        :class:`~tuner.errors.TunerWarning` on the way is printed as ``warning: ...``.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("always", TunerWarning)
        warnings.showwarning = _printer(warnings.showwarning)
        try:
            return int(handler(args))
        except TunerError as err:
            for message in err.messages():  # a file with several errors: one line each
                print(f"error: {message}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print(
                "\ninterrupted; `tuner resume <run folder>` continues the campaign.",
                file=sys.stderr,
            )
            return 130


def _printer(show: Any) -> Any:
    """``warnings.showwarning`` that prints a TunerWarning as one ``warning: ...`` line
    and hands every other warning to ``show``."""

    def print_or_show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: Any = None,
        line: str | None = None,
    ) -> None:
        if issubclass(category, TunerWarning):
            print(f"warning: {message}", file=sys.stderr)
        else:
            show(message, category, filename, lineno, file, line)

    return print_or_show
