"""The real PostgreSQL server of tests/postgres.py, as an Optuna RDB study store.

It accepts its user with the password and refuses a wrong or missing one; it listens on
127.0.0.1 and its one port only; an Optuna study on it takes trials from two processes at
once; stop() leaves no process, no port, no shared memory and no dir behind, with a client
still connected, with a postmaster that does not answer signals, and when the process that
started it is SIGKILLed (the watchdog). "Nothing left" is checked here by scanning /proc,
apart from the harness's own bookkeeping. Run with ``-s`` to see start and stop times.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest

from tests.postgres import PostgresServer, postgres_problem, running_postgres
from tests.ray_head import listening_sockets

psycopg = pytest.importorskip(
    "psycopg", reason="psycopg is not installed: pip install 'psycopg[binary]' (postgres extra)"
)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
N_TRIALS = 10  # per process


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        print(f"\npostgres {server.version}: start {server.start_s:.2f} s {server.start_report}")
        yield server
    print(f"\npostgres: stopped {server.stop_report}")


def _processes_in(root: Path) -> list[int]:
    """Every live process whose working directory is under ``root`` (independent of the
    harness: the postmaster and each backend chdir to the data dir)."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                cwd = os.readlink(f"/proc/{name}/cwd")
                if cwd == str(root) or cwd.startswith(f"{root}/"):
                    out.append(int(name))
    return out


def _listening_on(port: int) -> bool:
    """Whether any socket on this machine listens on TCP ``port`` (IPv4 or IPv6)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            next(f)
            for line in f:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    return True
    return False


def _refused(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return False
    except ConnectionRefusedError:
        return True


def _shm_ids() -> set[int]:
    with open("/proc/sysvipc/shm") as f:
        next(f)
        return {int(line.split()[1]) for line in f}


def _state(pid: int) -> str | None:
    """A process's state letter (``Z``: a zombie), or None if it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _assert_all_gone(pids: list[int], root: Path, port: int) -> None:
    # a zombie has exited: a killed postmaster's children go to PID 1, which reaps when it will
    alive = [p for p in pids if _state(p) not in (None, "Z", "X")]
    assert not alive, [(p, _state(p), Path(f"/proc/{p}/cmdline").read_bytes()[:80]) for p in alive]
    assert not root.exists(), f"{root} is still there"
    assert not _processes_in(root)
    assert not _listening_on(port)
    assert _refused(port)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # as a new server would
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()


# --------------------------------------------------------------------------- the server


def test_accepts_its_password_and_refuses_others(postgres: PostgresServer) -> None:
    with postgres.connect() as conn:
        row = conn.execute("SELECT current_user, current_setting('server_version')").fetchone()
        assert row is not None
        user, version = row
        assert (user, version.split(".")[0]) == ("tuner", postgres.version)
        row = conn.execute("SELECT current_setting('fsync'), current_setting('listen_addresses')")
        assert row.fetchone() == ("off", "127.0.0.1")
    for password in ("wrong-" + postgres.password, ""):
        with pytest.raises(psycopg.OperationalError) as info:
            psycopg.connect(**postgres.conninfo(password=password))
        text = str(info.value)
        assert "password authentication failed" in text or "no password supplied" in text, text
        assert postgres.password not in text
    # the unix socket (in the server's dir) asks for the password too
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(**postgres.conninfo(host=str(postgres.dir), password="wrong"))
    with postgres.connect(host=str(postgres.dir)) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_listens_on_loopback_only(postgres: PostgresServer) -> None:
    pids = postgres.processes()
    assert postgres.pid in pids and len(pids) >= 3  # postmaster, checkpointer, ...
    sockets = listening_sockets(set(pids))
    assert [(s["pid"], s["ip"], s["port"]) for s in sockets] == [
        (postgres.pid, "127.0.0.1", postgres.port)
    ], sockets


def test_create_database_gives_a_sqlalchemy_url(postgres: PostgresServer) -> None:
    from sqlalchemy.engine import make_url

    url = postgres.create_database("urls")
    assert url == (f"postgresql+psycopg://tuner:{postgres.password}@127.0.0.1:{postgres.port}/urls")
    parsed = make_url(url)
    assert (parsed.password, parsed.database) == (postgres.password, "urls")
    assert postgres.password not in str(parsed)  # SQLAlchemy shows *** in its place
    assert "urls" in postgres.databases()
    assert postgres.url("urls", driver="").startswith("postgresql://tuner:")
    with pytest.raises(psycopg.errors.DuplicateDatabase):
        postgres.create_database("urls")


# Each process: make or load the study both share, say "ready", wait for "go" on stdin,
# then N_TRIALS trials, each recording its process and when it ran.
_WORKER = textwrap.dedent(
    """
    import os, sys, time
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url, name, n = os.environ["STUDY_URL"], sys.argv[1], int(sys.argv[2])
    study = optuna.create_study(
        storage=url, study_name=name, load_if_exists=True,
        sampler=optuna.samplers.RandomSampler(seed=os.getpid()),
    )
    print("ready", flush=True)
    assert sys.stdin.readline() == "go\\n"

    def objective(trial):
        trial.set_user_attr("pid", os.getpid())
        trial.set_user_attr("start", time.time())
        x = trial.suggest_float("x", -10, 10)
        time.sleep(0.05)
        trial.set_user_attr("end", time.time())
        return (x - 2) ** 2

    study.optimize(objective, n_trials=n)
    print(os.getpid())
    """
)


def test_optuna_study_shared_by_two_processes(postgres: PostgresServer) -> None:
    url = postgres.create_database("shared")
    # The schema first, from one process: two processes creating Optuna's tables in an
    # empty database at once can collide (CREATE TYPE studydirection ... UniqueViolation
    # on pg_type, seen here in 3 of 5 tries); a study made by both with load_if_exists is
    # what Optuna itself handles.
    optuna.storages.RDBStorage(url)
    env = {**os.environ, "STUDY_URL": url, "PYTHONPATH": str(ROOT)}  # not on a command line
    cmd = [sys.executable, "-c", _WORKER, "shared-study", str(N_TRIALS)]
    procs = [
        subprocess.Popen(
            cmd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        for p in procs:  # both have the study open...
            assert p.stdout is not None and p.stdout.readline() == "ready\n", p.communicate()
        for p in procs:  # ...and start their trials together
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        outputs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (out, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, err
        assert postgres.password not in out + err
    pids = sorted(int(out.strip()) for out, _ in outputs)

    # read back here, by a third process, through a storage of its own
    study = optuna.load_study(study_name="shared-study", storage=optuna.storages.RDBStorage(url))
    trials = study.get_trials(deepcopy=False)
    assert len(trials) == 2 * N_TRIALS
    assert sorted(t.number for t in trials) == list(range(2 * N_TRIALS))
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    for t in trials:
        assert t.value == pytest.approx((t.params["x"] - 2) ** 2)
    by_pid = {pid: [t for t in trials if t.user_attrs["pid"] == pid] for pid in pids}
    assert [len(ts) for ts in by_pid.values()] == [N_TRIALS, N_TRIALS]
    # at once: each process's trials ran while the other's were running
    spans = [
        (min(t.user_attrs["start"] for t in ts), max(t.user_attrs["end"] for t in ts))
        for ts in by_pid.values()
    ]
    assert spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1], spans
    assert study.best_value == min(v for t in trials if (v := t.value) is not None)
    # and in the database itself
    with postgres.connect("shared") as conn:
        row = conn.execute("SELECT count(*) FROM trials WHERE state = 'COMPLETE'").fetchone()
        assert row == (2 * N_TRIALS,)


# --------------------------------------------------------------------------- stopping


def test_stop_with_a_client_connected_leaves_nothing() -> None:
    with running_postgres() as server:
        conn = server.connect()
        conn.execute("SELECT 1")  # idle in transaction: a smart shutdown would wait on it
        pids, root, port = server.processes(), server.dir, server.port
        assert root is not None and len(pids) >= 4  # with the client's backend
        t0 = time.monotonic()
    stop_s = time.monotonic() - t0
    print(f"\npostgres: start {server.start_s:.2f} s, stop {stop_s:.2f} s {server.stop_report}")
    assert server.stop_report["signals"] == ["SIGINT"]  # fast shutdown was enough
    assert server.stop_report["clean"] and server.stop_report["returncode"] == 0
    assert server.stop_report["swept"] == [] and server.leftovers == []
    assert stop_s < 5
    _assert_all_gone(pids, root, port)
    with pytest.raises(psycopg.OperationalError):
        conn.execute("SELECT 1")
    conn.close()


def test_stop_kills_a_postmaster_that_does_not_answer() -> None:
    server = PostgresServer().start()
    assert server.data_dir is not None and server.dir is not None
    pids, root, port = server.processes(), server.dir, server.port
    shmid = int((server.data_dir / "postmaster.pid").read_text().splitlines()[6].split()[1])
    assert shmid in _shm_ids()
    os.kill(server.pid, signal.SIGSTOP)  # it takes no shutdown request now
    server.stop(term_timeout_s=0.5, quit_timeout_s=0.5)
    assert server.stop_report["signals"] == ["SIGINT", "SIGQUIT", "SIGKILL"]
    assert server.stop_report["returncode"] == -signal.SIGKILL
    assert not server.stop_report["clean"] and server.leftovers == []
    assert shmid not in _shm_ids()  # the killed postmaster's interlock segment, removed
    _assert_all_gone(pids, root, port)


_OWNER = textwrap.dedent(
    """
    import json, time
    from tests.postgres import PostgresServer

    s = PostgresServer().start()
    print(json.dumps({"pids": s.processes(), "dir": str(s.dir), "port": s.port}), flush=True)
    time.sleep(600)
    """
)


def test_watchdog_stops_the_server_of_a_killed_owner() -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdout is not None
        info = json.loads(owner.stdout.readline())
    finally:
        owner.kill()  # no stop(), no atexit
        owner.wait()
    root = Path(info["dir"])
    t0 = time.monotonic()
    while (_processes_in(root) or root.exists()) and time.monotonic() < t0 + 20:
        time.sleep(0.05)
    print(f"\npostgres watchdog: server gone {time.monotonic() - t0:.1f} s after the kill")
    _assert_all_gone(info["pids"], root, info["port"])


def test_says_what_is_missing(tmp_path: Path) -> None:
    problem = postgres_problem(tmp_path)
    assert problem is not None and "apt-get install postgresql" in problem
    assert str(tmp_path) in problem


def test_start_takes_another_port_when_its_pick_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    import tests.postgres

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        picks = iter([taken.getsockname()[1]])
        free_port = tests.postgres._free_port
        monkeypatch.setattr(tests.postgres, "_free_port", lambda: next(picks, None) or free_port())
        with running_postgres() as server:
            assert server.port != taken.getsockname()[1]
            assert "could not bind" in server.log()
            with server.connect() as conn:
                assert conn.execute("SELECT 1").fetchone() == (1,)
