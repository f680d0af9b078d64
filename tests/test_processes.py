"""The process helpers the test servers share (tests/processes.py, process_tracker.py,
watchdog.py, ports.py), on real processes: each test starts its own ``sleep`` or
``python`` processes in a session of their own and stops them by PID."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ports import accepts, free_port, free_port_block, listening_sockets, port_free
from tests.process_tracker import ProcessTracker, spawn_tracked
from tests.processes import (
    ProcInfo,
    Started,
    all_pids,
    is_alive,
    proc_info,
    processes_with_cwd,
    processes_with_env,
    read_cmdline,
    read_stat,
    read_tail,
    reap,
    signal_all,
    spawn,
    start_ticks,
    stop_process,
    sweep,
    terminate,
    wait_gone,
)

# A parent that starts a child in the same session and prints the child's PID.
PARENT = textwrap.dedent(
    """
    import subprocess, sys, time
    child = subprocess.Popen(["sleep", "60"])
    print(child.pid, flush=True)
    time.sleep(60)
    """
)


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Popens a test started, each in a session of its own; afterwards whatever is left
    of each session (started after its leader) is SIGKILLed by PID."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        members = [
            info
            for pid in all_pids()
            if (stat := read_stat(pid)) is not None and stat[2] == p.pid
            if (info := proc_info(pid)) is not None
        ]
        signal_all(members, signal.SIGKILL)
        if p.poll() is None:
            p.kill()
        p.wait(timeout=10)
        wait_gone(members, 5.0)


def _info(pid: int) -> ProcInfo:
    info = proc_info(pid)
    assert info is not None, f"{pid} is not running"
    return info


def _exec_done(pid: int, argv: list[str], timeout_s: float = 10.0) -> None:
    """Waits until ``pid`` runs ``argv``: right after a fork it still shows its parent's
    command line, and a loaded machine can take a while to exec."""
    deadline = time.monotonic() + timeout_s
    while read_cmdline(pid) != argv:
        assert time.monotonic() < deadline, f"{pid} never ran {argv}: {read_cmdline(pid)}"
        time.sleep(0.01)


def _alive_pid(pid: int) -> bool:
    stat = read_stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def _spawn_parent(started: list[subprocess.Popen[bytes]], **kw: object) -> tuple[int, int]:
    """Starts PARENT in a session of its own; returns (parent pid, child pid)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", PARENT],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        start_new_session=True,
        **kw,  # type: ignore[call-overload]
    )
    started.append(proc)
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    _exec_done(child, ["sleep", "60"])
    return proc.pid, child


# --------------------------------------------------------------------------- one process


def test_spawn_runs_in_a_session_of_its_own_and_stops_by_handle(
    started: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    with open(tmp_path / "out", "wb") as log:
        proc = spawn(["sleep", "60"], log)
    started.append(proc)
    stat = read_stat(proc.pid)
    assert stat is not None and stat[2] == proc.pid  # session id: its own
    ticks = start_ticks(proc.pid)
    assert ticks is not None and is_alive(proc.pid, ticks)
    sent = stop_process(proc, [(signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)])
    assert sent == ["SIGTERM"] and proc.returncode == -signal.SIGTERM
    assert not is_alive(proc.pid, ticks) and read_stat(proc.pid) is None  # reaped


def test_stop_process_goes_on_to_sigkill(started: list[subprocess.Popen[bytes]]) -> None:
    # ignores SIGTERM; says so once the handler is in place
    code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print(1, flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True
    )
    started.append(proc)
    assert proc.stdout is not None and proc.stdout.readline()
    t0 = time.monotonic()
    sent = stop_process(proc, [(signal.SIGTERM, 0.5), (signal.SIGKILL, 5.0)])
    assert sent == ["SIGTERM", "SIGKILL"] and proc.returncode == -signal.SIGKILL
    assert time.monotonic() - t0 < 5


def test_a_pid_is_ours_only_with_its_start_time(started: list[subprocess.Popen[bytes]]) -> None:
    proc = spawn(["sleep", "60"], subprocess.DEVNULL)
    started.append(proc)
    info = _info(proc.pid)
    assert is_alive(proc.pid, info.start_ticks)
    assert not is_alive(proc.pid, info.start_ticks - 1)  # a reused PID: another process
    assert wait_gone([info], 0.1) == [info]
    proc.kill()
    assert wait_gone([info], 5.0) == []  # a zombie counts as gone


# --------------------------------------------------------------------------- what it started


def test_tracker_records_a_child_and_sweep_stops_it(started: list[subprocess.Popen[bytes]]) -> None:
    parent, child = _spawn_parent(started)
    tracker = ProcessTracker(parent, poll_s=0.05)
    try:
        assert {p.pid for p in tracker.alive()} == {parent, child}
        kid = next(p for p in tracker.snapshot() if p.pid == child)
        assert kid.ppid == parent and kid.cmdline == ["sleep", "60"]
        assert abs(kid.started_at - time.time()) < 30
        # the parent goes first, by its handle: the child is orphaned, still running
        started[0].kill()
        started[0].wait(timeout=10)
        assert [p.pid for p in tracker.alive()] == [child]
        swept = sweep(tracker.alive)
        assert [(sig, p.pid) for sig, p in swept] == [("SIGTERM", child)]
        assert tracker.alive() == []
        ended = {p.pid: p.ended_at for p in tracker.snapshot()}
        assert ended[child] is not None and ended[parent] is not None
    finally:
        tracker.stop()
    assert not _alive_pid(child)


def test_tracker_does_not_take_unrelated_processes(started: list[subprocess.Popen[bytes]]) -> None:
    parent, child = _spawn_parent(started)
    other = spawn(["sleep", "60"], subprocess.DEVNULL)
    started.append(other)
    _exec_done(other.pid, ["sleep", "60"])
    tracker = ProcessTracker(parent, poll_s=0.05)
    try:
        assert {p.pid for p in tracker.alive()} == {parent, child}  # not `other`
        # ...unless its command line matches
        matching = ProcessTracker(parent, poll_s=0.05, extra_match=lambda a: a == ["sleep", "60"])
        assert other.pid in {p.pid for p in matching.alive()}
    finally:
        tracker.stop()


def test_terminate_and_processes_found_by_cwd_and_env(
    started: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    marker = f"TEST_PROCESSES_{id(tmp_path)}"
    parent, child = _spawn_parent(started, cwd=tmp_path, env={"PATH": "/usr/bin:/bin", marker: "1"})
    parent_ticks = start_ticks(parent)
    assert parent_ticks is not None
    by_cwd = {p.pid for p in processes_with_cwd(tmp_path, parent_ticks)}
    by_env = {p.pid for p in processes_with_env(marker, "1")}
    assert by_cwd == by_env == {parent, child}
    assert processes_with_env(marker, "2") == []
    terminate([_info(parent), _info(child)], 5.0)
    assert processes_with_cwd(tmp_path, parent_ticks) == []


def test_spawn_tracked_watchdog_stops_the_session_of_a_killed_owner(tmp_path: Path) -> None:
    """The owner (a python process) spawns PARENT with a watchdog and is SIGKILLed:
    the watchdog stops the parent and its child by PID."""
    root = Path(__file__).resolve().parents[1]
    owner_code = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {str(root)!r})
        from tests.process_tracker import spawn_tracked
        log = open({str(tmp_path / "log")!r}, "wb")
        proc, watchdog, tracker = spawn_tracked(
            [sys.executable, "-c", {PARENT!r}], log, name="test", poll_s=0.05,
        )
        while len(tracker.alive()) < 2:
            time.sleep(0.05)
        print(proc.pid, *(p.pid for p in tracker.alive() if p.pid != proc.pid), flush=True)
        time.sleep(60)
        """
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", owner_code], stdout=subprocess.PIPE, start_new_session=True
    )
    pids: list[int] = []
    try:
        assert owner.stdout is not None
        pids = [int(x) for x in owner.stdout.readline().split()]
        assert len(pids) == 2
        ticks = [start_ticks(p) for p in pids]
        owner.kill()  # no stop, no atexit
        owner.wait(timeout=10)
        deadline = time.monotonic() + 15
        while any(_alive_pid(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive_pid(p) for p in pids), read_tail(tmp_path / "log", 2000)
        assert "test watchdog: owner" in read_tail(tmp_path / "log", 2000)
        assert all(t is not None for t in ticks)
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait(timeout=10)
        for p in pids:  # this test's own, by PID, if the watchdog failed
            if _alive_pid(p):
                os.kill(p, signal.SIGKILL)


def test_spawn_tracked_watchdog_exits_when_the_session_is_stopped(tmp_path: Path) -> None:
    with open(tmp_path / "log", "wb") as log:
        proc, watchdog, tracker = spawn_tracked(["sleep", "60"], log, name="test", poll_s=0.05)
    try:
        stop_process(proc, [(signal.SIGTERM, 5.0)])
        assert watchdog.wait(timeout=10) == 0  # its session is empty: nothing to watch
    finally:
        tracker.stop()
        reap(watchdog)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# --------------------------------------------------------------------------- Started


class _Sleeper(Started):
    name = "sleeper"

    def __init__(self, parent: Path) -> None:
        self.parent = parent
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> _Sleeper:
        self.dir = self.parent / "own"
        self.dir.mkdir()
        self._register()
        self.proc = spawn(["sleep", "60"], subprocess.DEVNULL)
        return self

    def stop(self, raise_on_leftovers: bool = True) -> None:
        if not self._begin_stop():
            return
        assert self.proc is not None
        stop_process(self.proc, [(signal.SIGTERM, 5.0)])
        self._end_stop(None, [], raise_on_leftovers)


def test_started_stops_once_and_keeps_the_dir_of_a_failed_body(tmp_path: Path) -> None:
    with _Sleeper(tmp_path) as s:
        assert s.proc is not None and s.proc.poll() is None
    assert s.proc.returncode == -signal.SIGTERM and not (tmp_path / "own").exists()
    s.stop()  # again: nothing
    with pytest.raises(RuntimeError, match="body"), _Sleeper(tmp_path) as t:
        raise RuntimeError("body")
    assert t.proc is not None and t.proc.returncode == -signal.SIGTERM
    assert (tmp_path / "own").is_dir()  # kept, for its logs


# --------------------------------------------------------------------------- ports


def test_free_port_is_free_and_listening_sockets_finds_a_listener(
    started: list[subprocess.Popen[bytes]],
) -> None:
    port = free_port()
    assert port_free(port) and not accepts(port)
    code = (
        "import socket, time; s = socket.socket(); "
        f"s.bind(('127.0.0.1', {port})); s.listen(); print(1, flush=True); time.sleep(60)"
    )
    server = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True
    )
    started.append(server)
    assert server.stdout is not None and server.stdout.readline()
    assert accepts(port) and not port_free(port)
    assert [(s["ip"], s["port"]) for s in listening_sockets({server.pid})] == [("127.0.0.1", port)]


def test_free_port_block_is_consecutive_free_ports() -> None:
    base = free_port_block(16)
    assert base >= 20000 and all(port_free(p) for p in range(base, base + 16))
    with socket.socket() as s:
        s.bind(("127.0.0.1", base))
        s.listen()
        assert not port_free(base)
