"""How a command's outcome becomes the exit status: errors are 2, an interrupt is 130."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tuner.errors import TunerError

__all__ = ["handled"]


def handled(handler: Any, args: argparse.Namespace) -> int:
    """Runs a command's handler; its exit status, with errors printed as one line.

    Args:
        handler: The command's function of the parsed flags, returning its exit status.
        args: The parsed flags.

    Returns:
        The handler's status; 2 after a :class:`~tuner.errors.TunerError` (bad input,
        printed as ``error: ...``), 130 after Ctrl-C.
    """
    try:
        return int(handler(args))
    except TunerError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted; `tuner resume <run folder>` continues the campaign.", file=sys.stderr)
        return 130
