"""A watchdog for processes a test started: it stops them if the test process dies first.

:func:`start_watchdog` runs this file as a script (``python -I watchdog.py CONFIG``), in a
session of its own so that nothing it watches takes it down. While the owner (the process
that started the leader) lives, it polls; it exits by itself once its job is done
(``until``: the leader gone, or no member left). Once the owner is gone first (SIGKILL,
``os._exit``, a pytest-timeout thread kill), it signals the leader or the members step
by step, by PID, removes a dir if nothing is left, and exits (1 if anything is left).

Members are the live processes that started at or after the leader and are in the
leader's session, or (``cwd`` given) have that working directory. Processes are
identified by PID and start time (``/proc/PID/stat``), so a reused PID is never signalled.

Standard library only, and nothing of ``tests`` (``-I``: the script's folder is not on
``sys.path``), so it runs whatever the test process had imported.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import IO, Any

DEFAULT_STEPS = (
    (signal.SIGTERM, "members", 5.0),
    (signal.SIGKILL, "members", 5.0),
    (signal.SIGKILL, "members", 5.0),
)


def start_watchdog(
    leader_pid: int,
    leader_ticks: int,
    *,
    name: str,
    log: IO[bytes] | int | None = None,
    cwd: str | os.PathLike[str] | None = None,
    until: str = "members",
    steps: Sequence[tuple[int, str, float]] = DEFAULT_STEPS,
    remove: str | os.PathLike[str] | None = None,
    poll_s: float = 0.5,
) -> subprocess.Popen[bytes]:
    """Starts a watchdog for the leader ``leader_pid`` (started at ``leader_ticks``, clock
    ticks after boot), which this process started.

    ``until``: ``"members"`` (it exits once no member is left) or ``"leader"`` (once the
    leader is gone). ``steps``: (signal, ``"leader"`` or ``"members"``, seconds to wait)
    sent in turn once this process is gone, until no member is left; then ``remove`` (a
    dir) is removed if none is. ``log`` takes its two lines of output. The caller stops
    it (SIGKILL: it has no children) once it has stopped the leader itself.
    """
    own = os.getpid()
    own_stat = _stat(own)
    assert own_stat is not None
    config = {
        "owner": [own, own_stat[2]],
        "leader": [leader_pid, leader_ticks],
        "session": None if cwd is not None else leader_pid,
        "cwd": None if cwd is None else str(cwd),
        "name": name,
        "until": until,
        "steps": [[int(sig), target, wait_s] for sig, target, wait_s in steps],
        "remove": None if remove is None else str(remove),
        "poll_s": poll_s,
    }
    return subprocess.Popen(
        [sys.executable, "-I", os.path.abspath(__file__), json.dumps(config)],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # not in the leader's session; outlives this process
    )


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, session id, start ticks) of ``pid``, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().decode(errors="replace").rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[3]), int(fields[19])


def _alive(pid: int, ticks: int) -> bool:
    st = _stat(pid)
    return st is not None and st[2] == ticks and st[0] not in ("Z", "X")


def _members(cfg: dict[str, Any]) -> list[tuple[int, int]]:
    sid, cwd, leader_ticks = cfg["session"], cfg["cwd"], cfg["leader"][1]
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        if cwd is not None:
            try:
                if os.readlink(f"/proc/{entry}/cwd") != cwd:
                    continue
            except OSError:
                continue
        st = _stat(int(entry))
        if st is None or st[0] in ("Z", "X") or st[2] < leader_ticks:
            continue
        if sid is None or st[1] == sid:
            out.append((int(entry), st[2]))
    return out


def main(cfg: dict[str, Any]) -> int:
    owner, leader = tuple(cfg["owner"]), tuple(cfg["leader"])
    while _alive(*owner):
        if not (_alive(*leader) if cfg["until"] == "leader" else _members(cfg)):
            return 0
        time.sleep(cfg["poll_s"])
    name = cfg["name"]
    print(f"{name} watchdog: owner {owner[0]} gone; stopping {leader[0]}", flush=True)
    for sig, target, wait_s in cfg["steps"]:
        procs = [leader] if target == "leader" else _members(cfg)
        procs = [p for p in procs if _alive(*p)]
        for pid, _ in procs:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        deadline = time.time() + wait_s
        while time.time() < deadline and any(_alive(*p) for p in procs):
            time.sleep(0.05)
        if not _members(cfg):
            break
    left = _members(cfg)
    if cfg["remove"] and not left:
        shutil.rmtree(cfg["remove"], ignore_errors=True)
    print(f"{name} watchdog: left {left!r}", flush=True)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
