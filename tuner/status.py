"""A campaign's status as one small JSON document: what ``tuner list`` and ``tuner status``
show, and what a service polls.

The driver writes ``status.json`` in the run folder when it starts, at most every
:data:`PUBLISH_EVERY_S` seconds while it runs, and when it ends. Readers never need Ray:
:func:`read_status` reads that file (or, for a run folder of an older version, its
``summary.json``) and tells a driver that died from one that runs.

The document (``"schema": "tuner.status/1"``; new keys may be added, none is renamed):

- ``id``: the campaign's id (its run folder's name); ``name``: the campaign's name.
- ``state``: ``RUNNING``, ``FINISHED`` (it ended as it asked: every trial, or its own
  budget, deadline or time limit), ``STOPPED`` (ended early by the failure limit or
  ``tuner stop``: resumable), ``DIED`` (the driver stopped without ending it:
  ``tuner resume``) or, for a submitted campaign only, ``FAILED`` (its driver refused it,
  exit status 2, before it published anything).
- ``job``: a submitted campaign's Ray job (submission id; only from ``--address``).
- ``status``: the end's wording (``summary.json``'s ``status``), or ``running``.
- ``trials``: ``total`` asked for, ``done``, ``running``, ``pending``,
  ``stopped_early`` and ``failed``.
- ``best``: ``{"metric", "mode", "value", "trial"}`` by the one meaning of best
  (:mod:`tuner.standings`), or null.
- ``spend``: ``{"usd", "usd_per_hour", "gpu_hours", "limit_usd", "limit_gpu_hours"}`` from
  the ledger, or null for a campaign without a budget guard.
- ``to_finish``: while it runs, what the rest should take, ``{"trial_epochs", "wall_s",
  "usd", "gpu_hours"}``: the cost model's prediction (:func:`tuner.cost.cost_to_finish`)
  corrected by the epochs its trials used so far; null before an epoch is measured and
  once it ended.
- ``line``: while it runs, the live line the driver printed last (null before it
  printed one, and once it ended).
- ``started``, ``updated``, ``ended``: UTC times, ISO 8601 (``ended`` null while it runs).
- ``run_dir``, ``host``, ``pid``: where the driver runs and writes.
- ``campaign_sha256``: the SHA-256 of the run folder's ``campaign.yaml`` (the campaign as
  it runs, overrides applied): two campaigns with the same hash ran the same file.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tuner import atomic, rundir

__all__ = [
    "PUBLISH_EVERY_S",
    "SCHEMA",
    "STATUS_ATTR",
    "STATUS_FILE",
    "State",
    "ended_document",
    "format_list",
    "published_status",
    "read_status",
    "status_document",
    "write_status",
]

SCHEMA = "tuner.status/1"
STATUS_FILE = "status.json"
STATUS_ATTR = "tuner_status"
"""The study user attribute that holds the same document (``tuner list --study-storage``)."""
PUBLISH_EVERY_S = 10.0
# A driver on another host that has not written for this long is taken as dead.
_SILENT_S = 6 * PUBLISH_EVERY_S


class State:
    """The values of ``state`` (plain strings in the JSON)."""

    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    STOPPED = "STOPPED"
    DIED = "DIED"
    FAILED = "FAILED"
    """Only for a submitted campaign whose driver refused it (bad input, exit status 2)
    before publishing anything: nothing ran."""


def _iso(unix_s: float | None) -> str | None:
    if unix_s is None:
        return None
    return datetime.fromtimestamp(unix_s, tz=timezone.utc).isoformat(timespec="seconds")


def status_document(
    *,
    run_dir: Path,
    name: str,
    state: str,
    status: str,
    trials: Mapping[str, int],
    best: Mapping[str, Any] | None,
    spend: Mapping[str, Any] | None,
    started_unix_s: float | None,
    ended_unix_s: float | None = None,
    now_unix_s: float | None = None,
    to_finish: Mapping[str, Any] | None = None,
    line: str | None = None,
) -> dict[str, Any]:
    """The status document of a campaign (see the module's docstring for its keys)."""
    keys = ("usd", "usd_per_hour", "gpu_hours", "limit_usd", "limit_gpu_hours")
    return {
        "schema": SCHEMA,
        "id": run_dir.name,
        "name": name,
        "state": state,
        "status": status,
        "trials": {
            key: int(trials.get(key, 0))
            for key in ("total", "done", "running", "pending", "stopped_early", "failed")
        },
        "best": dict(best) if best is not None else None,
        "spend": {key: spend.get(key) for key in keys} if spend is not None else None,
        "to_finish": dict(to_finish) if to_finish is not None else None,
        "line": line,
        "started": _iso(started_unix_s),
        "updated": _iso(time.time() if now_unix_s is None else now_unix_s),
        "ended": _iso(ended_unix_s),
        "run_dir": str(run_dir.resolve()),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "campaign_sha256": campaign_sha256(run_dir),
    }


def campaign_sha256(run_dir: Path) -> str | None:
    """The SHA-256 of the run folder's campaign.yaml (None before it is written)."""
    try:
        return hashlib.sha256((run_dir / rundir.CAMPAIGN_FILE).read_bytes()).hexdigest()
    except OSError:
        return None


def write_status(run_dir: Path, document: Mapping[str, Any], mirror: Path | None = None) -> None:
    """Writes ``status.json`` atomically (a reader never sees half a document), and the
    same document as one line to ``mirror`` when given (a submitted campaign's copy in the
    Ray session's log folder, which the dashboard serves: :mod:`tuner._ray.jobs`)."""
    atomic.write_json(run_dir / STATUS_FILE, dict(document))
    if mirror is not None:
        atomic.write_json(mirror, dict(document), indent=None, durable=False)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True


def ended_document(
    run_dir: Path,
    summary: Mapping[str, Any],
    *,
    started_unix_s: float | None = None,
    ended_unix_s: float | None = None,
) -> dict[str, Any]:
    """The status document of a campaign from its ``summary.json``: what the driver
    writes at the end, and what a run folder without ``status.json`` reads as."""
    states = summary.get("states") or {}
    best = summary.get("best")
    budget = summary.get("budget") or None
    from tuner.finish import Status  # the summary's wording of the end is its own

    status = str(summary.get("status", ""))
    if status in (Status.FAILURE_LIMIT, Status.STOPPED):
        state = State.STOPPED
    elif status == Status.UNFINISHED:
        state = State.DIED
    else:
        state = State.FINISHED
    ended = ended_unix_s
    if ended is None and (run_dir / rundir.SUMMARY_FILE).is_file():
        ended = (run_dir / rundir.SUMMARY_FILE).stat().st_mtime
    document = status_document(
        run_dir=run_dir,
        name=str(summary.get("campaign", run_dir.name)),
        state=state,
        status=status,
        trials={
            "total": int(summary.get("trials_requested", 0) or 0),
            "done": int(summary.get("trials_finished", 0) or 0),
            "stopped_early": int(states.get("PRUNED", 0)),
            "failed": int(states.get("FAIL", 0)) - int(summary.get("orphans", 0) or 0),
        },
        best=(
            {
                "metric": summary.get("metric"),
                "mode": summary.get("mode"),
                "value": best["value"],
                "trial": best["tune_trial_id"],
            }
            if best
            else None
        ),
        spend=(
            {
                "usd": budget.get("usd"),
                "gpu_hours": budget.get("gpu_hours"),
                "limit_usd": (budget.get("limits") or {}).get("usd"),
                "limit_gpu_hours": (budget.get("limits") or {}).get("gpu_hours"),
            }
            if budget
            else None
        ),
        started_unix_s=started_unix_s,
        ended_unix_s=ended if state != State.DIED else None,
        now_unix_s=ended,
    )
    return document


def read_status(run_dir: Path, *, now_unix_s: float | None = None) -> dict[str, Any] | None:
    """The status of the campaign in ``run_dir``, or None if it holds none.

    A document that says ``RUNNING`` is read as ``DIED`` when its driver is gone: on this
    host, when its process no longer exists; elsewhere, when it has not written for
    a minute (six publishing periods).
    """
    path = run_dir / STATUS_FILE
    if not path.is_file():
        summary = run_dir / rundir.SUMMARY_FILE
        if not summary.is_file():
            return None
        return ended_document(run_dir, json.loads(summary.read_text()))
    try:
        document: dict[str, Any] = json.loads(path.read_text())
    except json.JSONDecodeError:
        return None
    if document.get("state") != State.RUNNING:
        return document
    now = time.time() if now_unix_s is None else now_unix_s
    pid = document.get("pid")
    if document.get("host") == socket.gethostname() and isinstance(pid, int):
        dead = not _alive(pid)
    else:
        dead = now - path.stat().st_mtime > _SILENT_S
    if dead:
        document = {**document, "state": State.DIED, "status": "driver stopped: tuner resume"}
    return document


_COUNTS = (("running", "running"), ("stopped_early", "pruned"), ("failed", "failed"))


def published_status(
    document: Mapping[str, Any], *, now_unix_s: float | None = None
) -> dict[str, Any]:
    """A status document read from elsewhere than its run folder (a study store): one
    that says ``RUNNING`` but was not updated for a minute reads as ``DIED``."""
    doc = dict(document)
    if doc.get("state") != State.RUNNING:
        return doc
    now = time.time() if now_unix_s is None else now_unix_s
    try:
        updated = datetime.fromisoformat(str(doc.get("updated"))).timestamp()
    except ValueError:
        updated = 0.0
    if now - updated > _SILENT_S:
        doc.update(state=State.DIED, status="driver stopped: tuner resume")
    return doc


def format_list(documents: Sequence[Mapping[str, Any]]) -> str:
    """``tuner list``'s table: one line per campaign."""
    header = ("id", "name", "state", "trials", "best", "spend", "eta", "started")
    rows = [header]
    for doc in documents:
        trials = doc["trials"]
        text = f"{trials['done']}/{trials['total']}"
        more = [f"{trials[key]} {word}" for key, word in _COUNTS if trials.get(key)]
        if more:
            text += f" ({', '.join(more)})"
        best = doc.get("best")
        spend = doc.get("spend") or {}
        money = "-"
        if spend.get("usd") is not None:
            money = f"${spend['usd']:.2f}"
            if doc["state"] == State.RUNNING and spend.get("usd_per_hour"):
                money += f" (${spend['usd_per_hour']:.2f}/h)"
        rest = doc.get("to_finish") or {}
        rows.append(
            (
                str(doc["id"]),
                str(doc.get("name") or "-"),
                str(doc["state"]),
                text,
                f"{best['metric']}={best['value']:.4g}" if best else "-",
                money,
                _eta(rest.get("wall_s")) if doc["state"] == State.RUNNING else "-",
                str(doc.get("started") or "-"),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def _eta(seconds: Any) -> str:
    """``~42s``, ``~12m``, ``~3.5h`` (``?`` before an epoch is measured)."""
    if not isinstance(seconds, (int, float)):
        return "?"
    if seconds < 90:
        return f"~{seconds:.0f}s"
    if seconds < 90 * 60:
        return f"~{seconds / 60:.0f}m"
    return f"~{seconds / 3600:.1f}h"
