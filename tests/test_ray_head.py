"""The real Ray head of tests/ray_head.py: dashboard, Job Submission API, token auth.

A job submitted with the head's token runs (with this checkout and .venv's packages on
its path); a client without the token, or with a wrong one, is refused; everything the
head starts listens on 127.0.0.1 only; stop() leaves no process behind, job drivers (in
sessions of their own) included. Checks of "nothing left" scan /proc here, independently
of the harness's own tracker. Run with ``-s`` to see the start and stop times.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ray_head import (
    MARKER_ENV,
    RayHead,
    default_head_site,
    head_site_problem,
    running_head,
)

pytestmark = [pytest.mark.ray, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
SITE_PACKAGES = Path(sysconfig.get_paths()["purelib"])  # .venv's
JOB_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def head() -> Iterator[RayHead]:
    with running_head() as h:
        print(f"\nray head: started in {h.start_s:.1f} s {h.start_report}")
        yield h
    print(f"\nray head: stopped {h.stop_report}")


def _wait_terminal(client: Any, job_id: str, timeout: float = JOB_TIMEOUT_S) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        status = client.get_job_status(job_id)
        if status.is_terminal():
            return status
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id} still {status} after {timeout} s")
        time.sleep(0.1)


def _wait_status(client: Any, job_id: str, want: str, timeout: float = JOB_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while (status := client.get_job_status(job_id)) != want:
        assert not status.is_terminal(), (status, client.get_job_logs(job_id))
        assert time.monotonic() < deadline, f"job {job_id} still {status} after {timeout} s"
        time.sleep(0.1)


def _http_status(url: str, headers: dict[str, str]) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10):
            return 200
    except urllib.error.HTTPError as exc:
        return exc.code


def _clean_env(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment without Ray's variables, HOME an empty folder (so no
    ``~/.ray/auth_token`` is found), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    return {**env, "HOME": str(home), "PYTHONPATH": str(ROOT), **extra}


def _run_client(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


# --------------------------------------------------------------------------- packages


def test_head_site_shadows_nothing_of_the_venv() -> None:
    """The head's packages are on its PYTHONPATH, ahead of .venv's site-packages: none
    of them may be a package .venv has too. A namespace package both share (``google``,
    ``opentelemetry``: no ``__init__.py`` on either side) is fine down to the subpackages
    they do not share."""
    site = default_head_site()
    problem = head_site_problem(site)
    if problem is not None:
        pytest.skip(problem)
    names = {
        p.name
        for p in site.iterdir()
        if not p.name.endswith((".dist-info", ".installed"))
        and p.name not in ("__pycache__", "bin")
    }
    assert _shadowed(site, SITE_PACKAGES, names) == []


def _shadowed(ours: Path, theirs: Path, names: set[str]) -> list[str]:
    """The modules under ``ours`` (of ``names``) that a module under ``theirs`` of the same
    dotted name would be hidden by, descending into namespace packages both have."""
    shadowed = []
    for name in sorted(names):
        mine, other = ours / name, theirs / name
        stem = name.removesuffix(".py")
        if not (other.exists() or (theirs / f"{stem}.py").exists() or (theirs / stem).exists()):
            continue
        namespace = (
            mine.is_dir()
            and other.is_dir()
            and not (mine / "__init__.py").exists()
            and not (other / "__init__.py").exists()
        )
        if not namespace:
            shadowed.append(str(mine))
            continue
        inner = {p.name for p in mine.iterdir() if p.name != "__pycache__"}
        shadowed += _shadowed(mine, other, inner)
    return shadowed


def test_shadowed_descends_into_namespace_packages(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for folder in ("ns/a", "ns/b/x", "pkg"):
        (ours / folder).mkdir(parents=True)
    for folder in ("ns/c", "ns/b/y", "pkg"):
        (theirs / folder).mkdir(parents=True)
    (ours / "pkg" / "__init__.py").touch()
    (ours / "mod.py").touch()
    (theirs / "mod.py").touch()
    found = _shadowed(ours, theirs, {"ns", "pkg", "mod.py"})
    assert found == [str(ours / "mod.py"), str(ours / "pkg")]
    (ours / "ns" / "b" / "z.py").touch()
    (theirs / "ns" / "b" / "z.py").touch()
    assert _shadowed(ours, theirs, {"ns"}) == [str(ours / "ns" / "b" / "z.py")]


# --------------------------------------------------------------------------- stop


def _stat(pid: int) -> tuple[str, int] | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text(errors="replace").rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[3])


def _left_behind(session_id: int, head_dir: Path) -> list[str]:
    """Live processes in the head's session, naming its dir, or carrying its marker."""
    marker = f"{MARKER_ENV}={head_dir}".encode()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        pid = int(name)
        stat = _stat(pid)
        if stat is None or stat[0] in ("Z", "X"):
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if stat[1] == session_id or str(head_dir) in cmdline or marker in environ:
            out.append(f"{pid} {cmdline[:120]}")
    return out


def _listening_ports() -> set[int]:
    """Ports with a TCP socket in LISTEN state, any process's (/proc/net/tcp, tcp6)."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def test_stop_leaves_nothing_running(tmp_path: Path) -> None:
    """A head started with check_job (a trial job run and deleted: the job list is empty
    after start); a job whose driver has a child process is running when stop() comes.
    Afterwards no process of the head's is alive (session, dir, marker: scanned here),
    its dir is gone and nothing listens on its ports. First in the file: it runs before
    the module's shared head starts, so two heads never share the 2 cores."""
    script = tmp_path / "driver.py"
    script.write_text(
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "print('CHILD', child.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    with running_head(check_job=True) as h:
        print(f"\nray head (check_job): started in {h.start_s:.1f} s {h.start_report}")
        client = h.client()
        assert client.list_jobs() == []
        job_id = client.submit_job(entrypoint=f"python {script}")
        _wait_status(client, job_id, "RUNNING")
        deadline = time.monotonic() + JOB_TIMEOUT_S
        while "CHILD" not in (logs := client.get_job_logs(job_id)):
            assert time.monotonic() < deadline, logs
            time.sleep(0.1)
        child_pid = int(logs.split("CHILD", 1)[1].split()[0])
        assert h.head_proc is not None and h.dir is not None
        session, head_dir, ports = h.head_proc.pid, h.dir, dict(h.ports)
        child = _stat(child_pid)
        # Ray runs a job's driver in a session of its own: the environment marker, not
        # the head's session, is what finds it
        assert child is not None and child[1] != session
        assert child_pid in {p.pid for p in h.marked_processes()}
        assert _left_behind(session, head_dir) != []
    print(f"\nray head: stopped {h.stop_report}")
    assert h.leftovers == []
    assert _left_behind(session, head_dir) == []
    child = _stat(child_pid)
    assert child is None or child[0] in ("Z", "X")
    assert not head_dir.exists()
    assert _listening_ports() & set(ports.values()) == set()


# --------------------------------------------------------------------------- jobs


def test_job_with_the_token_runs_and_logs(head: RayHead) -> None:
    """The first submit right after start() succeeds; its logs come back."""
    client = head.client()
    t0 = time.monotonic()
    job_id = client.submit_job(entrypoint="python -c \"print('hello')\"")
    submit_s = time.monotonic() - t0
    assert _wait_terminal(client, job_id) == "SUCCEEDED", client.get_job_logs(job_id)
    print(f"\nsubmit {submit_s:.2f} s, submit to SUCCEEDED {time.monotonic() - t0:.1f} s")
    assert "hello" in client.get_job_logs(job_id).splitlines()
    info = client.get_job_info(job_id)
    assert info.driver_exit_code == 0
    assert job_id in {job.submission_id for job in client.list_jobs()}


def test_job_driver_runs_this_checkout_on_the_venv(head: RayHead) -> None:
    """A job's ``python`` is .venv's; it imports this checkout's tuner and .venv's ray
    and protobuf (the head's packages shadow none of them)."""
    probe = (
        "import json, sys, google.protobuf, ray, tuner; "
        "print('PROBE=' + json.dumps({'python': sys.executable, 'tuner': tuner.__file__, "
        "'ray': ray.__file__, 'protobuf': google.protobuf.__file__}))"
    )
    client = head.client()
    entrypoint = f"python -c {shlex.quote(probe)} && python -m tuner --version"
    job_id = client.submit_job(entrypoint=entrypoint)
    assert _wait_terminal(client, job_id) == "SUCCEEDED", client.get_job_logs(job_id)
    logs = client.get_job_logs(job_id)
    line = next(x for x in logs.splitlines() if x.startswith("PROBE="))
    probe_out = json.loads(line.removeprefix("PROBE="))
    assert Path(probe_out["python"]) == Path(sys.executable)
    assert Path(probe_out["tuner"]) == ROOT / "tuner" / "__init__.py"
    assert Path(probe_out["ray"]).is_relative_to(SITE_PACKAGES)
    assert Path(probe_out["protobuf"]).is_relative_to(SITE_PACKAGES)
    assert any(re.fullmatch(r"tuner \d+\.\d+\S*", x) for x in logs.splitlines()), logs


# --------------------------------------------------------------------------- auth


def test_the_authentication_mode_is_token_and_unauthenticated(head: RayHead) -> None:
    with urllib.request.urlopen(f"{head.address}/api/authentication_mode", timeout=10) as r:
        assert json.loads(r.read()) == {"authentication_mode": "token"}
    assert head.token_path is not None and head.token_path.read_text() == head.token
    assert head.token_path.stat().st_mode & 0o077 == 0


def test_a_client_without_a_token_is_refused(head: RayHead, tmp_path: Path) -> None:
    """HTTP 401; JobSubmissionClient raises AuthenticationError from its constructor.
    In a subprocess with no Ray variables and an empty HOME: no token to find anywhere."""
    assert _http_status(f"{head.address}/api/jobs/", {}) == 401
    result = _run_client(
        f"""
        from ray.exceptions import AuthenticationError
        from ray.job_submission import JobSubmissionClient
        try:
            JobSubmissionClient({head.address!r})
        except AuthenticationError as exc:
            print("REFUSED", repr(exc))
        else:
            print("ACCEPTED")
        """,
        _clean_env(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    assert "REFUSED" in result.stdout, result.stdout + result.stderr
    assert "Missing authentication token" in result.stdout


def test_a_client_with_a_wrong_token_is_refused(head: RayHead) -> None:
    from ray.exceptions import AuthenticationError
    from ray.job_submission import JobSubmissionClient

    wrong = {"Authorization": "Bearer " + "0" * len(head.token)}
    assert _http_status(f"{head.address}/api/jobs/", wrong) == 403
    with pytest.raises(AuthenticationError, match="Invalid authentication token"):
        JobSubmissionClient(head.address, headers=wrong)
    assert _http_status(f"{head.address}/api/jobs/", head.auth_headers()) == 200


def test_client_env_is_all_a_client_subprocess_needs(head: RayHead, tmp_path: Path) -> None:
    """``JobSubmissionClient()`` with no arguments, in a subprocess whose environment is
    ``client_env()`` (and nothing else of Ray's): the address and the token from there."""
    result = _run_client(
        """
        from ray.job_submission import JobSubmissionClient
        client = JobSubmissionClient()
        print("ADDRESS", client.get_address())
        print("JOBS", len(client.list_jobs()))
        """,
        _clean_env(tmp_path, **head.client_env()),
    )
    assert result.returncode == 0, result.stderr
    assert f"ADDRESS {head.address}" in result.stdout
    assert "JOBS " in result.stdout


# --------------------------------------------------------------------------- network


def test_everything_listens_on_loopback_only(head: RayHead) -> None:
    """With a job running (driver, supervisor actor, workers up): every TCP socket in
    LISTEN state of every process of the head is on 127.0.0.1; the head's named ports
    are among them (so the scan does see them)."""
    client = head.client()
    job_id = client.submit_job(entrypoint='python -c "import time; time.sleep(60)"')
    try:
        _wait_status(client, job_id, "RUNNING")
        sockets = head.listening()
    finally:
        client.stop_job(job_id)
    assert _wait_terminal(client, job_id) == "STOPPED"
    print("\n" + "\n".join(f"{s['ip']}:{s['port']} {s['cmd'][:70]}" for s in sockets))
    outward = [s for s in sockets if not ipaddress.ip_address(s["ip"]).is_loopback]
    assert outward == []
    assert {s["ip"] for s in sockets} == {"127.0.0.1"}
    named = {n: p for n, p in head.ports.items() if n not in ("min_worker", "max_worker")}
    listening = {s["port"] for s in sockets}
    assert {n: p for n, p in named.items() if p not in listening} == {}
    lo, hi = head.ports["min_worker"], head.ports["max_worker"]
    others = {s["port"] for s in sockets} - set(head.ports.values())
    assert all(lo <= p <= hi for p in others), sorted(others)
