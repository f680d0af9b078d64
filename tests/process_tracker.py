"""Records, over time, every process that a process a test started has started.

:class:`ProcessTracker` polls ``/proc`` in a thread of its own and records each
descendant of a root process, each member of its session, and each process whose
command line a matcher accepts, with its start time (``/proc/PID/stat`` start ticks) and
the time it was first seen gone: the ground truth of what to stop, and of when each
process lived. :func:`spawn_tracked` starts a process in a session of its own with a
tracker and a watchdog (:mod:`tests.watchdog`).
"""

from __future__ import annotations

import copy
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

from tests.processes import (
    CLK_TCK,
    DEAD_STATES,
    ProcInfo,
    all_pids,
    boot_epoch,
    read_cmdline,
    read_stat,
    spawn,
    start_ticks,
)
from tests.watchdog import start_watchdog


class ProcessTracker(threading.Thread):
    """Polls /proc: records every descendant of ``root_pid`` (or process in its session,
    or whose command line ``extra_match`` accepts), alive or ended.

    ``tag``, if given, is called with each live record whose ``tag`` is still None
    (after its command line is re-read: a fork may not have exec'd yet); what it returns
    is stored, and a None asks again at the next scan.
    """

    def __init__(
        self,
        root_pid: int,
        poll_s: float,
        extra_match: Callable[[list[str]], bool] = lambda argv: False,
        tag: Callable[[ProcInfo], str | None] | None = None,
    ):
        super().__init__(name=f"process-tracker-{root_pid}", daemon=True)
        self.root_pid = root_pid
        self.poll_s = poll_s
        self.extra_match = extra_match
        self.tag = tag
        self.procs: dict[tuple[int, int], ProcInfo] = {}
        self.lock = threading.Lock()
        self._not_ours: dict[tuple[int, int], float] = {}
        self._stop_event = threading.Event()
        self.scan()  # the root itself, before start() returns to the caller

    def run(self) -> None:
        while not self._stop_event.wait(self.poll_s):
            try:
                self.scan()
            except Exception as exc:  # never die silently: the record would go stale
                print(f"process tracker: {exc!r}", file=sys.stderr)

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout=5)

    def scan(self) -> None:
        now = time.time()
        boot = boot_epoch()
        stats: dict[int, tuple[str, int, int, int]] = {}
        for pid in all_pids():
            stat = read_stat(pid)
            if stat is not None:
                stats[pid] = stat
        # A process found gone died before this read of /proc ended (a kill during the
        # read would otherwise be stamped before it happened).
        read_end = time.time()
        with self.lock:
            alive_pids = {
                key[0]
                for key, info in self.procs.items()
                if info.alive and stats.get(key[0], ("", 0, 0, -1))[3] == key[1]
            }
            root = stats.get(self.root_pid)
            root_sid = self.root_pid if root is not None and root[2] == self.root_pid else None
            # transitive closure: a child of a child found in this very scan counts
            checked: set[tuple[int, int]] = set()  # command lines read in this scan
            changed = True
            while changed:
                changed = False
                for pid, (state, ppid, sid, ticks) in stats.items():
                    if pid in alive_pids or state in DEAD_STATES:
                        continue
                    key = (pid, ticks)
                    if key in self.procs:  # already recorded and ended: a stale entry
                        continue
                    ours = (
                        pid == self.root_pid
                        or ppid in alive_pids
                        or (root_sid is not None and sid == root_sid)
                    )
                    cmdline: list[str] | None = None
                    if not ours and key not in checked and self._not_ours.get(key, now) > now - 2.0:
                        # not (yet) known as ours: match its command line; a process
                        # seen for 2 s without a match is not re-read
                        checked.add(key)
                        cmdline = read_cmdline(pid)
                        ours = bool(cmdline) and self.extra_match(cmdline)
                        if not ours:
                            self._not_ours.setdefault(key, now)
                    if not ours:
                        continue
                    self.procs[key] = ProcInfo(
                        pid=pid,
                        ppid=ppid,
                        start_ticks=ticks,
                        started_at=boot + ticks / CLK_TCK,
                        first_seen=now,
                        cmdline=cmdline if cmdline is not None else read_cmdline(pid),
                        last_seen=now,
                    )
                    alive_pids.add(pid)
                    changed = True
            self._not_ours = {k: v for k, v in self._not_ours.items() if k[0] in stats}
            for (pid, ticks), info in self.procs.items():
                if not info.alive:
                    continue
                stat = stats.get(pid)
                if stat is None or stat[3] != ticks or stat[0] in DEAD_STATES:
                    info.ended_at = read_end
                    continue
                info.last_seen = now
                if now - info.first_seen < 5.0:  # forked, maybe not exec'd yet: re-read
                    cmdline = read_cmdline(pid)
                    if cmdline:
                        info.cmdline = cmdline
                if info.tag is None and self.tag is not None:
                    info.tag = self.tag(info)

    def snapshot(self) -> list[ProcInfo]:
        with self.lock:
            return [copy.copy(p) for p in self.procs.values()]

    def alive(self) -> list[ProcInfo]:
        """A fresh scan's live records."""
        self.scan()
        return [p for p in self.snapshot() if p.alive]


def spawn_tracked(
    cmd: Sequence[str],
    log: IO[bytes],
    *,
    name: str,
    poll_s: float,
    extra_match: Callable[[list[str]], bool] = lambda argv: False,
    tag: Callable[[ProcInfo], str | None] | None = None,
    **popen_kwargs: Any,
) -> tuple[subprocess.Popen[bytes], subprocess.Popen[bytes], ProcessTracker]:
    """:func:`spawn` ``cmd``, then a watchdog for its session (:func:`start_watchdog`:
    SIGTERM, SIGKILL, SIGKILL to every member should this process die first) and a
    started :class:`ProcessTracker` of what it starts. Returns (process, watchdog,
    tracker); the caller stops the tracker and reaps the watchdog (:func:`reap`)."""
    proc = spawn(cmd, log, **popen_kwargs)
    ticks = start_ticks(proc.pid)
    assert ticks is not None
    watchdog = start_watchdog(proc.pid, ticks, name=name, log=log)
    tracker = ProcessTracker(proc.pid, poll_s, extra_match=extra_match, tag=tag)
    tracker.start()
    return proc, watchdog, tracker
