"""A real PostgreSQL server for tests, on 127.0.0.1 only, with a password of its own.

:class:`PostgresServer` makes a short temp dir (``/tmp/pg-XXXXXXXX``), runs Debian's
``initdb`` there (the newest ``/usr/lib/postgresql/<version>/bin``) with one superuser,
``tuner``, and a random password (``--auth=scram-sha-256``, for TCP and the unix socket
alike), and starts ``postgres`` itself as a child process in a session of its own,
listening on ``127.0.0.1`` and a free port only (its unix socket in the temp dir). The
password is there so that tests can check that a URL in an error message or a log hides
it; trust auth would have nothing to hide. ``start()`` returns once the postmaster says it
is ready and a connection with the password succeeds: under 1 s on 2 cores, nearly all of
it ``initdb``; ``stop()`` takes under 0.1 s.

``initdb`` and ``postgres`` refuse to run as root: as root they run as the ``postgres``
system user (Debian's package makes it), which owns the temp dir. They are started with
``subprocess.Popen(user=, group=, extra_groups=[])`` rather than ``runuser -u postgres``:
``runuser`` stays the parent of what it runs, so its PID would not be the postmaster's;
this way ``proc.pid`` *is* the postmaster. Not root, they run as the caller. The
server's processes (the postmaster, its backends, checkpointer, autovacuum...) are those
whose working directory is its data dir (:func:`server_processes`): each postmaster child
calls ``setsid()``, so a session or process group would not find them.

Tuned for tests, not for keeping data: ``fsync``, ``full_page_writes`` and
``synchronous_commit`` off; dynamic shared memory as files in the data dir
(``dynamic_shared_memory_type=mmap``), so a killed server leaves nothing in
``/dev/shm``.

Stopped by PID (:meth:`PostgresServer.stop`): SIGINT to the postmaster, PostgreSQL's
"fast" shutdown (it ends open sessions, checkpoints and exits; SIGTERM would be the
"smart" one, which waits for every client to disconnect and so hangs on a test that left
a connection open), then SIGQUIT ("immediate") and SIGKILL if it does not exit in time;
then any process of the server's still alive gets SIGKILL; a last scan of ``/proc`` must
find none, and the temp dir is removed. A killed postmaster's System V shared memory
segment (its start-up interlock, named in ``postmaster.pid``) is removed with ``ipcrm``.
Also stopped by an ``atexit`` hook, and by a watchdog process of its own (standard
library only) if the process that started it dies without stopping it (SIGKILL,
``os._exit``).

Usage (``running_postgres`` is the same as a context manager that skips the test, with the
reason, where PostgreSQL or psycopg is missing; under ``CI=true`` a skip fails)::

    from tests.postgres import PostgresServer, running_postgres

    @pytest.fixture(scope="module")
    def postgres() -> Iterator[PostgresServer]:
        with running_postgres() as server:
            yield server

    def test_x(postgres: PostgresServer) -> None:
        url = postgres.create_database("x")  # postgresql+psycopg://tuner:PW@127.0.0.1:P/x
        storage = optuna.storages.RDBStorage(url)

The driver is psycopg 3 (the ``postgres`` extra, and so the ``dev`` extra);
``.ci/run`` installs Debian's ``postgresql`` package when no ``initdb`` is there.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import secrets
import signal
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.ports import free_port as _free_port  # a module global: a test replaces it
from tests.processes import (
    ProcInfo,
    Started,
    cmdline_str,
    processes_with_cwd,
    read_tail,
    reap,
    spawn,
    start_ticks,
    stop_process,
    sweep,
    wait_gone,
)
from tests.watchdog import start_watchdog

PG_LIB = Path("/usr/lib/postgresql")  # Debian's: /usr/lib/postgresql/<version>/bin
SYSTEM_USER = "postgres"  # who runs initdb and postgres when the caller is root
SUPERUSER = "tuner"  # the database superuser initdb makes, with the random password
_INITDB_TIMEOUT_S = 60

# Settings for a throwaway test server (each a `postgres -c` option).
SETTINGS = {
    "fsync": "off",
    "full_page_writes": "off",
    "synchronous_commit": "off",
    "dynamic_shared_memory_type": "mmap",  # files in the data dir, not in /dev/shm
    "shared_buffers": "32MB",
    "max_connections": "100",
    "unix_socket_permissions": "0700",
}


def find_bindir() -> Path | None:
    """The newest Debian PostgreSQL's bin folder with ``initdb`` and ``postgres``, or None."""
    found = []
    for initdb in PG_LIB.glob("*/bin/initdb"):
        bindir = initdb.parent
        version = bindir.parent.name
        if (bindir / "postgres").is_file() and re.fullmatch(r"\d+(\.\d+)?", version):
            found.append((tuple(int(p) for p in version.split(".")), bindir))
    return max(found)[1] if found else None


def postgres_problem(bindir: Path | None = None) -> str | None:
    """Why a server could not start here (a reason to skip), or None."""
    found = bindir or find_bindir()
    if found is None or not (found / "initdb").is_file():
        return (
            f"PostgreSQL's server is not installed (no {found or PG_LIB / '*/bin'}/initdb): "
            "apt-get install postgresql (.ci/run does)"
        )
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SYSTEM_USER)
        except KeyError:
            return (
                f"running as root and there is no {SYSTEM_USER!r} user to run PostgreSQL "
                "(Debian's postgresql package makes it)"
            )
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed: pip install 'psycopg[binary]' (the postgres extra)"
    return None


# --------------------------------------------------------------------------- processes


def server_processes(data_dir: Path, since_ticks: int) -> list[tuple[int, int]]:
    """(pid, start ticks) of the live processes whose working directory is ``data_dir``
    and that started at or after ``since_ticks``: a postmaster and every process it forks.

    Not by session or parent: each postmaster child calls ``setsid()`` (so signals to the
    postmaster's group do not reach it), and one orphaned by a killed postmaster has init
    for a parent; its environment is no marker either (the ps-title code writes over it).
    The postmaster ``chdir``s to its data dir and its children inherit that."""
    return [(p.pid, p.start_ticks) for p in processes_with_cwd(data_dir, since_ticks)]


def _remove_shm(shmid: int) -> bool:
    """Removes System V shared memory segment ``shmid`` if nothing is attached to it."""
    try:
        with open("/proc/sysvipc/shm") as f:
            next(f)
            for line in f:
                fields = line.split()
                if int(fields[1]) == shmid and int(fields[6]) == 0:  # shmid, nattch
                    result = subprocess.run(["ipcrm", "-m", str(shmid)], capture_output=True)
                    return result.returncode == 0
    except (OSError, ValueError, IndexError, StopIteration):
        pass
    return False


# --------------------------------------------------------------------------- server


class PostgresServer(Started):
    """A PostgreSQL server on 127.0.0.1, superuser ``tuner`` with a random password.

    Args:
        tmp_dir: where the server's own dir is made (its unix socket path must stay
            under 107 bytes; as root, the ``postgres`` user must be able to reach it).
        bindir: PostgreSQL's bin folder (:func:`find_bindir` when None).
        start_timeout_s: how long ``start()`` waits for the server to accept a connection.
        keep_dir: keep the server's dir (data, log) after stop (kept anyway if stop found
            leftovers or the ``with`` body raised).
        settings: more ``postgres -c`` settings, over :data:`SETTINGS`.

    After ``start()``: ``port``, ``password``, ``pid`` (the postmaster's), ``dir``,
    ``data_dir``, ``version``, ``start_s`` and ``start_report`` (``initdb_s``,
    ``ready_s``: seconds from the postmaster's start to a connection); after ``stop()``:
    ``stop_report`` (``shutdown_s``, ``signals`` sent to the postmaster, ``swept``
    processes that needed a SIGKILL after it, ``clean``: the postmaster removed its
    ``postmaster.pid``) and ``leftovers``.
    """

    name = "postgres"

    def __init__(
        self,
        *,
        tmp_dir: str | os.PathLike[str] = "/tmp",
        bindir: str | os.PathLike[str] | None = None,
        start_timeout_s: float = 30.0,
        keep_dir: bool = False,
        settings: dict[str, str] | None = None,
    ) -> None:
        self._tmp_parent = Path(tmp_dir)
        self.bindir = Path(bindir) if bindir is not None else find_bindir()
        self.start_timeout_s = start_timeout_s
        self.keep_dir = keep_dir
        self.settings = {**SETTINGS, **(settings or {})}
        self.user = SUPERUSER
        self.host = "127.0.0.1"
        # URL-safe, so it stands in a URL as it is (url() quotes it all the same)
        self.password = secrets.token_urlsafe(24)
        self.dir: Path | None = None
        self.data_dir: Path | None = None
        self.version: str | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self._port: int | None = None
        self._pm_ticks: int | None = None
        self.start_s: float | None = None
        self.start_report: dict[str, float] = {}
        self.stop_report: dict[str, Any] = {}
        self.leftovers: list[tuple[int, str]] = []
        self._run_as: dict[str, Any] = {}  # Popen's user, group, extra_groups when root
        self._env: dict[str, str] = {}
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    # ------------------------------------------------------------------ addresses

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("not started")
        return self._port

    @property
    def pid(self) -> int:
        """The postmaster's PID (:meth:`processes`: all of the server's)."""
        if self.proc is None:
            raise RuntimeError("not started")
        return self.proc.pid

    def url(self, dbname: str = "postgres", *, driver: str = "psycopg") -> str:
        """``postgresql+psycopg://tuner:PASSWORD@127.0.0.1:PORT/DBNAME``, the SQLAlchemy URL
        that ``optuna.storages.RDBStorage`` takes (``driver=""``: plain ``postgresql://``,
        a libpq URI)."""
        scheme = f"postgresql+{driver}" if driver else "postgresql"
        user = urllib.parse.quote(self.user, safe="")
        password = urllib.parse.quote(self.password, safe="")
        return f"{scheme}://{user}:{password}@{self.host}:{self.port}/{dbname}"

    def conninfo(self, dbname: str = "postgres", **overrides: Any) -> dict[str, Any]:
        """Keyword arguments for ``psycopg.connect`` (password included)."""
        return {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": self.password,
            "dbname": dbname,
            "connect_timeout": 5,
            **overrides,
        }

    def connect(self, dbname: str = "postgres", **overrides: Any) -> Any:
        """A new ``psycopg.Connection`` to ``dbname`` (``autocommit=True`` and the like
        go in ``overrides``); the caller closes it."""
        import psycopg

        return psycopg.connect(**self.conninfo(dbname, **overrides))

    def create_database(self, name: str) -> str:
        """Creates database ``name`` (owned by ``tuner``) and returns its :meth:`url`."""
        from psycopg import sql

        with self.connect(autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)

    def databases(self) -> list[str]:
        with self.connect() as conn:
            rows = conn.execute("SELECT datname FROM pg_database WHERE NOT datistemplate")
            return sorted(r[0] for r in rows)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> PostgresServer:
        if self.proc is not None or self._stopped:
            raise RuntimeError("a PostgresServer starts once")
        problem = postgres_problem(self.bindir)
        if problem is not None:
            raise RuntimeError(problem)
        assert self.bindir is not None
        t0 = time.monotonic()
        self.dir = Path(tempfile.mkdtemp(prefix="pg-", dir=self._tmp_parent))
        self._register()
        try:
            self._initdb()
            self.start_report["initdb_s"] = time.monotonic() - t0
            self._start_postmaster()
        except BaseException:
            self._failed = True
            self.stop(raise_on_leftovers=False)
            raise
        self.start_s = time.monotonic() - t0
        return self

    def _initdb(self) -> None:
        assert self.dir is not None and self.bindir is not None
        if len(str(self.dir)) > 60:
            raise ValueError(f"tmp dir {self.dir} too long for the unix socket's path")
        env = {
            "PATH": os.defpath,
            "LC_ALL": "C",
            "TZ": "UTC",
            "HOME": str(self.dir),
        }
        if os.geteuid() == 0:
            entry = pwd.getpwnam(SYSTEM_USER)
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
            self._run_as = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
        self._env = env
        pwfile = self.dir / "pwfile"
        fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self.password + "\n")
        if self._run_as:
            os.chown(pwfile, self._run_as["user"], self._run_as["group"])
        self.data_dir = self.dir / "data"
        try:
            result = subprocess.run(
                [
                    str(self.bindir / "initdb"),
                    "--pgdata",
                    str(self.data_dir),
                    "--username",
                    self.user,
                    "--auth=scram-sha-256",
                    f"--pwfile={pwfile}",
                    "--encoding=UTF8",
                    "--locale=C",
                    "--no-sync",
                ],
                cwd=self.dir,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=_INITDB_TIMEOUT_S,
                **self._run_as,
            )
        finally:
            pwfile.unlink()
        if result.returncode != 0:
            raise RuntimeError(
                f"initdb exited with {result.returncode}:\n"
                f"{result.stdout.decode(errors='replace')}{result.stderr.decode(errors='replace')}"
            )
        self.version = (self.data_dir / "PG_VERSION").read_text().strip()

    def _start_postmaster(self, attempts: int = 3) -> None:
        """Starts ``postgres`` on a free port; another port if that one was taken meanwhile."""
        assert self.dir is not None and self.data_dir is not None and self.bindir is not None
        self._log = open(self.dir / "postgres.log", "ab")  # noqa: SIM115 - closed in stop()
        for attempt in range(attempts):
            self._port = _free_port()
            cmd = [
                str(self.bindir / "postgres"),
                "-D",
                str(self.data_dir),
                "-h",
                self.host,  # listen_addresses: loopback IPv4 only
                "-p",
                str(self._port),
                "-k",
                str(self.dir),  # unix_socket_directories
            ]
            for key, value in self.settings.items():
                cmd += ["-c", f"{key}={value}"]
            t0 = time.monotonic()
            # not in the caller's process group or session
            self.proc = spawn(cmd, self._log, cwd=self.dir, env=self._env, **self._run_as)
            self._pm_ticks = start_ticks(self.proc.pid)
            self._start_watchdog()
            if self._wait_ready():
                self.start_report["ready_s"] = time.monotonic() - t0
                return
            # it exited: a port taken between _free_port() and its bind is worth a retry
            reap(self._watchdog)
            self._watchdog = None
            log = self.log()
            if "could not bind" not in log or attempt == attempts - 1:
                raise RuntimeError(
                    f"postgres exited with {self.proc.returncode} on port {self._port}:\n{log}"
                )

    def _wait_ready(self) -> bool:
        """Waits until the postmaster says it is ready, then connects with the password
        over TCP (True); False if the postmaster exits first; TimeoutError after
        ``start_timeout_s``.

        Ready is the status line of ``postmaster.pid`` (8th line, ``ready``), not a
        connection retried until one succeeds: where another program had taken the port
        first, a connection attempt would talk to that program (and maybe hang until its
        timeout) while the postmaster has already exited."""
        import psycopg

        assert self.proc is not None and self.data_dir is not None
        pidfile = self.data_dir / "postmaster.pid"
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            if self.proc.poll() is not None:
                return False
            with contextlib.suppress(OSError):
                lines = [line.strip() for line in pidfile.read_text().splitlines()]
                if len(lines) >= 8 and lines[0] == str(self.proc.pid) and lines[7] == "ready":
                    break
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"postgres on port {self._port} not ready {self.start_timeout_s} s "
                    f"after start:\n{self.log()}"
                )
            time.sleep(0.01)
        with psycopg.connect(**self.conninfo()) as conn:
            conn.execute("SELECT 1")
        return True

    def _start_watchdog(self) -> None:
        """Should this process die without stopping the server: SIGQUIT (immediate
        shutdown) to the postmaster, SIGKILL to what is left of the server (working
        directory its data dir), then its dir removed. It exits once the postmaster has."""
        assert self.proc is not None and self.dir is not None and self.data_dir is not None
        if self._pm_ticks is None:
            return
        self._watchdog = start_watchdog(
            self.proc.pid,
            self._pm_ticks,
            name="postgres",
            log=self._log,
            cwd=self.data_dir,
            until="leader",
            steps=(
                (signal.SIGQUIT, "leader", 5.0),
                (signal.SIGKILL, "members", 5.0),
                (signal.SIGKILL, "members", 5.0),
            ),
            remove=self.dir,
        )

    def stop(
        self,
        raise_on_leftovers: bool = True,
        term_timeout_s: float = 10.0,
        quit_timeout_s: float = 5.0,
    ) -> None:
        """Stops the server by PID and removes its dir; idempotent. SIGINT (fast
        shutdown), up to ``term_timeout_s`` for the postmaster to exit; SIGQUIT
        (immediate shutdown), up to ``quit_timeout_s``; SIGKILL. Then SIGKILL to any
        process of the server's still there 2 s later, and a last scan: ``leftovers``,
        and RuntimeError with ``raise_on_leftovers``."""
        if not self._begin_stop():
            return
        t0 = time.monotonic()
        signals: list[str] = []
        swept: list[tuple[int, str]] = []
        pm = self.proc
        if pm is not None and self._pm_ticks is not None:
            assert self.data_dir is not None
            data_dir, since = self.data_dir, self._pm_ticks
            steps = (
                (signal.SIGINT, term_timeout_s),  # fast shutdown
                (signal.SIGQUIT, quit_timeout_s),  # immediate shutdown
                (signal.SIGKILL, 5.0),
            )
            signals = stop_process(pm, steps)

            def server() -> list[ProcInfo]:
                return processes_with_cwd(data_dir, since)

            # backends notice a dead postmaster and exit; any that have not in 2 s, SIGKILL
            wait_gone(server(), 2.0)
            swept = [(p.pid, cmdline_str(p.pid)) for _, p in sweep(server, [(signal.SIGKILL, 5.0)])]
            self.leftovers = [(p.pid, cmdline_str(p.pid)) for p in server()]
        elif pm is not None and pm.poll() is None:  # no start ticks: it died at once
            pm.kill()
            pm.wait(timeout=10)
        pidfile = None if self.data_dir is None else self.data_dir / "postmaster.pid"
        clean = pidfile is None or not pidfile.exists()
        if not clean and pidfile is not None:
            # killed: its System V interlock segment outlives it ("KEY ID" on line 7)
            with contextlib.suppress(OSError, ValueError, IndexError):
                _remove_shm(int(pidfile.read_text().splitlines()[6].split()[1]))
        reap(self._watchdog)
        self._watchdog = None
        self.stop_report = {
            "shutdown_s": time.monotonic() - t0,
            "signals": signals,
            "swept": swept,
            "clean": clean,
            "returncode": None if pm is None else pm.returncode,
        }
        self._end_stop(self._log, self.leftovers, raise_on_leftovers, "postgres processes")

    # ------------------------------------------------------------------ processes, log

    def processes(self) -> list[int]:
        """PIDs of the server's live processes: the postmaster and every process it forked
        (backends, checkpointer, autovacuum, ...), by :func:`server_processes`."""
        if self.data_dir is None or self._pm_ticks is None:
            return []
        return [pid for pid, _ in server_processes(self.data_dir, self._pm_ticks)]

    def log(self, tail: int = 4000) -> str:
        """The tail of the server's log (``postgres.log`` in its dir)."""
        return "" if self.dir is None else read_tail(self.dir / "postgres.log", tail)


@contextlib.contextmanager
def running_postgres(**kwargs: Any) -> Iterator[PostgresServer]:
    """``with PostgresServer(**kwargs) as server: yield server`` for a pytest fixture;
    skips the test (with the reason) where PostgreSQL, its system user or psycopg is
    missing (under ``CI=true`` that skip fails: tests/no_silent_skips.py)."""
    import pytest

    bindir = kwargs.get("bindir")
    problem = postgres_problem(None if bindir is None else Path(bindir))
    if problem is not None:
        pytest.skip(problem)
    with PostgresServer(**kwargs) as server:
        yield server
