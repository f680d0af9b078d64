"""Processes a test started, and how to stop them: by PID, never by name.

The test servers (:mod:`tests.fakecluster`, :mod:`tests.ray_head`, :mod:`tests.postgres`)
each start one process in a session of its own (:func:`spawn`) and must stop it and
everything it started, and only that. This module holds what they share:

- ``/proc`` readers (:func:`read_stat`, :func:`read_cmdline`, :func:`read_environ`) and
  :class:`ProcInfo`, one process identified by PID *and* start time (clock ticks after
  boot), so a reused PID is never mistaken for ours (:func:`is_alive`);
- finding what a started process started: :func:`processes_with_cwd` and
  :func:`processes_with_env` find processes by working directory or by an environment
  marker (:mod:`tests.process_tracker` records descendants and session members over
  time);
- stopping by PID: :func:`stop_process` (signal steps to one ``Popen``),
  :func:`terminate` (SIGTERM, then SIGKILL), :func:`sweep` (SIGTERM, SIGKILL, SIGKILL to
  whatever is left); a watchdog (:mod:`tests.watchdog`) stops them should the test
  process die first;
- logs: :func:`read_tail`; :class:`Started`, what the servers share: ``with``,
  ``atexit``, stop once, keep the dir of a failed test.

Ports (free ones, who listens) are :mod:`tests.ports`'. Linux only (``/proc``);
standard library only.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

CLK_TCK = os.sysconf("SC_CLK_TCK")
DEAD_STATES = ("Z", "X")  # a zombie has exited; only its parent's wait() is missing

# --------------------------------------------------------------------------- /proc


@dataclass
class ProcInfo:
    """One process a test started (directly or not), as seen in ``/proc``."""

    pid: int
    ppid: int  # when first seen (a process outliving its parent is reparented later)
    start_ticks: int  # /proc/PID/stat field 22: clock ticks after boot
    started_at: float  # epoch seconds, from start_ticks
    first_seen: float
    cmdline: list[str] = field(default_factory=list)
    ended_at: float | None = None  # epoch seconds when first seen gone (or a zombie)
    last_seen: float = 0.0
    tag: str | None = None  # what the tracker's ``tag`` hook said of it, once not None

    @property
    def alive(self) -> bool:
        return self.ended_at is None


def read_stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, ppid, session id, start ticks) of ``pid``, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode(errors="replace")
    except OSError:
        return None
    fields = data.rsplit(")", 1)[1].split()  # comm (field 2) may hold spaces and ')'
    # fields[0] is field 3 (state); field N is fields[N - 3]
    return fields[0], int(fields[1]), int(fields[3]), int(fields[19])


def read_cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            data = f.read()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in data.split(b"\0") if a]


def read_environ(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            data = f.read()
    except OSError:
        return {}
    pairs = (a.decode(errors="replace").partition("=") for a in data.split(b"\0") if a)
    return {k: v for k, _, v in pairs}


def cmdline_str(pid: int) -> str:
    """``pid``'s command line as one string, ``?`` if it is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def boot_epoch() -> float:
    """Epoch seconds at boot, to ~10 ms (``/proc/stat`` btime is whole seconds)."""
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return time.time() - uptime


def all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def start_ticks(pid: int) -> int | None:
    """``pid``'s start time in clock ticks after boot, or None if it is gone."""
    stat = read_stat(pid)
    return None if stat is None else stat[3]


def is_alive(pid: int, start_ticks: int) -> bool:
    """True if ``pid`` still is the process that started at ``start_ticks``, not a zombie."""
    stat = read_stat(pid)
    return stat is not None and stat[3] == start_ticks and stat[0] not in DEAD_STATES


def proc_info(pid: int, now: float | None = None) -> ProcInfo | None:
    """A live process as a :class:`ProcInfo` (``started_at`` is ``now``), or None."""
    stat = read_stat(pid)
    if stat is None or stat[0] in DEAD_STATES:
        return None
    now = time.time() if now is None else now
    return ProcInfo(
        pid=pid,
        ppid=stat[1],
        start_ticks=stat[3],
        started_at=now,
        first_seen=now,
        cmdline=read_cmdline(pid),
        last_seen=now,
    )


def processes_with_env(name: str, value: str) -> list[ProcInfo]:
    """Live processes (this one aside) whose environment has ``name=value``: a marker a
    started process hands down to everything it starts, whatever session that is in."""
    marker = f"{name}={value}".encode()
    own = os.getpid()
    out = []
    for pid in all_pids():
        if pid == own:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if marker not in f.read().split(b"\0"):
                    continue
        except OSError:
            continue
        info = proc_info(pid)
        if info is not None:
            out.append(info)
    return out


def processes_with_cwd(directory: Path, since_ticks: int) -> list[ProcInfo]:
    """The live processes whose working directory is ``directory`` and that started at
    or after ``since_ticks``, in PID order (``started_at``: now)."""
    target = str(directory)
    out = []
    for pid in sorted(all_pids()):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if cwd != target:
            continue
        info = proc_info(pid)
        if info is not None and info.start_ticks >= since_ticks:
            out.append(info)
    return out


def descendants(procs: list[ProcInfo], pids: set[int]) -> list[ProcInfo]:
    """Processes recorded as children (when first seen) of ``pids``, transitively."""
    out: list[ProcInfo] = []
    frontier = set(pids)
    while frontier:
        new = [p for p in procs if p.ppid in frontier and p not in out]
        out.extend(new)
        frontier = {p.pid for p in new}
    return out


# --------------------------------------------------------------------------- start, stop


def spawn(
    cmd: Sequence[str], log: IO[bytes] | int | None, **popen_kwargs: Any
) -> subprocess.Popen[bytes]:
    """``Popen(cmd)`` in a session and process group of its own (sid == pgid == pid),
    stdin from /dev/null, stdout and stderr to ``log``."""
    return subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        **popen_kwargs,
    )


def stop_process(proc: subprocess.Popen[bytes], steps: Iterable[tuple[int, float]]) -> list[str]:
    """For each (signal, seconds) of ``steps``, until ``proc`` has exited: sends it the
    signal and waits up to that long. Returns the names of the signals sent."""
    sent: list[str] = []
    for sig, wait_s in steps:
        if proc.poll() is not None:
            break
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        sent.append(signal.Signals(sig).name)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait_s)
    return sent


def wait_gone(procs: Iterable[ProcInfo], timeout: float) -> list[ProcInfo]:
    """Waits up to ``timeout`` for ``procs`` to end; returns those still alive."""
    pending = list(procs)
    deadline = time.monotonic() + timeout
    while pending:
        pending = [p for p in pending if is_alive(p.pid, p.start_ticks)]
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    return pending


def signal_all(procs: Iterable[ProcInfo], sig: int) -> list[ProcInfo]:
    """Sends ``sig`` to each of ``procs`` that is still that process; returns those."""
    sent = []
    for p in procs:
        if is_alive(p.pid, p.start_ticks):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p.pid, sig)
                sent.append(p)
    return sent


def terminate(procs: list[ProcInfo], timeout: float) -> None:
    """SIGTERM, wait up to ``timeout``, SIGKILL what is left, wait briefly."""
    for sig, wait_s in ((signal.SIGTERM, timeout), (signal.SIGKILL, 2.0)):
        pending = [p for p in procs if is_alive(p.pid, p.start_ticks)]
        if not pending:
            return
        signal_all(pending, sig)
        wait_gone(pending, wait_s)


SWEEP_STEPS = ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0), (signal.SIGKILL, 5.0))


def sweep(
    find_alive: Callable[[], list[ProcInfo]],
    steps: Iterable[tuple[int, float]] = SWEEP_STEPS,
) -> list[tuple[str, ProcInfo]]:
    """Signals whatever ``find_alive`` still finds, step by step (by default SIGTERM,
    then SIGKILL twice, up to 5 s each), until it finds nothing. Returns (signal name,
    process) for each signal sent: empty when there was nothing left to stop."""
    swept: list[tuple[str, ProcInfo]] = []
    for sig, wait_s in steps:
        alive = find_alive()
        if not alive:
            break
        swept += [(signal.Signals(sig).name, p) for p in signal_all(alive, sig)]
        wait_gone(alive, wait_s)
    return swept


def reap(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGKILLs and waits for a plain child with no children of its own (a watchdog)."""
    if proc is None:
        return
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


# --------------------------------------------------------------------------- logs, dirs


def read_tail(path: Path, n: int) -> str:
    """The last ``n`` bytes of ``path`` as text; empty if it cannot be read."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - n))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def leftovers_error(what: str, leftovers: Iterable[tuple[int, str]]) -> RuntimeError:
    """The error a stop raises when processes are left: ``WHAT left after stop: PID CMD; ...``."""
    return RuntimeError(
        f"{what} left after stop: " + "; ".join(f"{pid} {cmd[:120]}" for pid, cmd in leftovers)
    )


_S = TypeVar("_S", bound="Started")


class Started:
    """What a test server shares with the others: ``with`` starts it and stops it whatever
    the body raises (keeping its dir if the body raised), an ``atexit`` hook stops it if
    a test forgot, ``stop()`` runs once; its dir (``dir``) is removed after the stop unless
    ``keep_dir``, the body raised or processes were left.

    A subclass sets ``name`` (for messages), ``dir``, ``keep_dir`` and implements
    ``start()`` (calling :meth:`_register`) and ``stop()`` (beginning with
    :meth:`_begin_stop` and ending with :meth:`_end_stop`).
    """

    name = "server"
    dir: Path | None = None
    keep_dir = False
    _stopped = False
    _failed = False

    def start(self) -> Started:
        raise NotImplementedError

    def stop(self, raise_on_leftovers: bool = True) -> None:
        raise NotImplementedError

    def __enter__(self: _S) -> _S:
        self.start()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self._failed = True
        self.stop(raise_on_leftovers=exc_type is None)

    def _register(self) -> None:
        atexit.register(self._atexit)

    def _atexit(self) -> None:
        if not self._stopped:
            self.stop(raise_on_leftovers=False)

    def _begin_stop(self) -> bool:
        """True the first time (the caller goes on stopping), False after."""
        if self._stopped:
            return False
        self._stopped = True
        with contextlib.suppress(Exception):
            atexit.unregister(self._atexit)
        return True

    def _end_stop(
        self,
        log: IO[bytes] | None,
        leftovers: list[tuple[int, str]],
        raise_on_leftovers: bool,
        what: str = "processes",
    ) -> None:
        """Closes ``log``; removes or keeps the dir; raises if ``leftovers`` (pid, command)."""
        if log is not None:
            log.close()
        if leftovers:
            self._failed = True
        if self.dir is not None and (self.keep_dir or self._failed):
            print(f"{self.name}: kept {self.dir}", file=sys.stderr)
        elif self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
        if leftovers and raise_on_leftovers:
            raise leftovers_error(what, leftovers)
