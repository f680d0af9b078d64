"""Asking a running campaign to stop: a request file in its run folder that the driver polls.

``tuner stop ID`` writes :data:`STOP_REQUEST_FILE` in the campaign's run folder; the
driver's budget guard reads it within a second and stops the campaign as it stops one whose
budget is spent: no new trial starts, each running trial checkpoints after its current
epoch and ends (the study records it, with the reason), the ledger is closed and the report
written. The campaign then ends ``stopped: tuner stop`` (exit status 3), and ``tuner resume``
continues it: new trials until the number asked for have ended.

A file rather than a signal: it works the same for a driver on this machine and one on a
cluster's head (where a small Ray job writes it), it needs no PID, and it is still there
if the driver is between two polls. No Ray here.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

from tuner import atomic

__all__ = [
    "STOP_REASON",
    "STOP_REQUEST_FILE",
    "clear_stop_request",
    "read_stop_request",
    "request_stop",
]

STOP_REQUEST_FILE = "stop_request.json"
STOP_REASON = "stopped by tuner stop"


def request_stop(run_dir: Path) -> Path:
    """Writes the stop request of the campaign in ``run_dir``; returns its path."""
    path = run_dir / STOP_REQUEST_FILE
    atomic.write_json(
        path, {"requested_unix_s": time.time(), "host": socket.gethostname()}, indent=None
    )
    return path


def read_stop_request(run_dir: Path) -> dict[str, Any] | None:
    """The stop request of ``run_dir``, or None if there is none."""
    path = run_dir / STOP_REQUEST_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except ValueError:  # being written: a request all the same
        return {}
    return dict(data) if isinstance(data, dict) else {}


def clear_stop_request(run_dir: Path) -> bool:
    """Removes the stop request of ``run_dir`` (a resume does); whether there was one."""
    try:
        (run_dir / STOP_REQUEST_FILE).unlink()
    except FileNotFoundError:
        return False
    return True
