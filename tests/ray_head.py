"""A real local Ray head with the dashboard and the Job Submission API, on loopback only.

:class:`RayHead` starts ``ray start --head --include-dashboard=true --block`` as a
subprocess in a session of its own, on free ports of its own (every port Ray would
otherwise take from its fixed defaults is given), with a short temp dir of its own (Ray's
unix socket paths must stay under 107 bytes) and a token of its own: token authentication
(``RAY_AUTH_MODE=token``, ``RAY_AUTH_TOKEN_PATH`` naming a file in the temp dir with a
random token). Everything it starts listens on 127.0.0.1 only. ``start()`` returns once
the Job Submission API answers an authenticated request and the job agent and the
runtime-env agent accept connections, so a test can submit at once: about 5 s on 2 cores
(``check_job=True``: also runs a trivial job to the end and deletes it, ~3.5 s more).

The dashboard and job server need ``ray[default]``'s server packages, which ``.venv``
does not have (there they would give every embedded ``ray.init()`` a dashboard agent on
0.0.0.0): ``make test`` installs them into ``.venv/head-site``
(``tests/head-requirements.txt``), and only the head's ``PYTHONPATH`` names that folder,
last. ``PYTHONPATH`` comes before site-packages on ``sys.path``, so the folder holds
none of .venv's packages (``test_ray_head.py`` checks). The client side
(``ray.job_submission.JobSubmissionClient``) needs only ``aiohttp`` in .venv.

Job drivers run on the head with the head's environment: ``PATH`` starts with this
Python's ``bin`` folder (so an entrypoint's ``python`` and ``tuner`` are the venv's, not
whatever ``python`` the machine has first), and ``PYTHONPATH`` starts with the repo root
(so ``python -m tuner`` imports this checkout). All ``RAY_*`` variables of the caller are
dropped from the head's environment (a ``RAY_AUTH_TOKEN`` or ``RAY_ADDRESS`` there would
change which token or cluster it uses); ``env=`` adds variables.

Stopped by PID only (:meth:`RayHead.stop`), like :class:`tests.fakecluster.FakeCluster`
(both use the process tracker and watchdog of
:mod:`tests.processes`): SIGTERM to the head's ``ray start``,
which stops the GCS, raylet, dashboard...; then every process ever recorded (descendants
of the ``ray start``, members of its session, processes naming the temp dir, polled every
``poll_s``) or carrying this head's marker in its environment (job drivers run in
sessions of their own) that is still alive gets SIGTERM, then SIGKILL; a last scan must
find none, else ``leftovers`` is set and RuntimeError raised.

Usage (``running_head`` is the same as a context manager that skips a test, with the
reason, where the head's packages are missing; under ``CI=true`` a skip fails)::

    from tests.ray_head import RayHead

    with RayHead() as head:
        client = head.client()  # an authenticated JobSubmissionClient
        job = client.submit_job(entrypoint="python -c \\"print('hello')\\"")
        ...
        subprocess.run([...], env={**os.environ, **head.client_env()})
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.ports import accepts, free_port_block
from tests.ports import listening_sockets as listening_sockets  # tests import it here
from tests.process_tracker import ProcessTracker, spawn_tracked
from tests.processes import (
    ProcInfo,
    Started,
    processes_with_env,
    read_tail,
    reap,
    stop_process,
    sweep,
)

ROOT = Path(__file__).resolve().parents[1]
# Where `make test` installs the head's server packages (tests/head-requirements.txt);
# TUNER_HEAD_SITE names another folder.
HEAD_SITE_ENV = "TUNER_HEAD_SITE"
# In the head's environment and so in every process it starts (job drivers included):
# the head's own dir, the ground truth of "ours" for the leftover check.
MARKER_ENV = "TUNER_RAY_HEAD_DIR"
# The modules ray/dashboard/optional_deps.py imports beyond .venv's: without them the
# dashboard does not start.
HEAD_SITE_MODULES = ("aiohttp_cors", "grpc", "opencensus", "opentelemetry", "prometheus_client")
PORT_NAMES = (
    "gcs",
    "dashboard",
    "dashboard_agent_listen",
    "dashboard_agent_grpc",
    "metrics_export",
    "runtime_env_agent",
    "node_manager",
    "object_manager",
    "ray_client_server",
    "dashboard_metrics",  # DASHBOARD_METRIC_PORT: the dashboard's own Prometheus port
    "autoscaler_metrics",  # AUTOSCALER_METRIC_PORT: the autoscaler monitor's
)
N_WORKER_PORTS = 64  # workers', drivers' and agents' core-worker ports


def default_head_site() -> Path:
    """``$TUNER_HEAD_SITE``, else ``<this Python's venv>/head-site`` (``make head-site``)."""
    configured = os.environ.get(HEAD_SITE_ENV)
    return Path(configured) if configured else Path(sys.prefix) / "head-site"


def head_site_problem(site: Path | None = None) -> str | None:
    """Why a head could not start here (a reason to skip), or None."""
    site = default_head_site() if site is None else site
    missing = [m for m in HEAD_SITE_MODULES if not (site / m).exists()]
    if missing:
        return (
            f"the Ray head's dashboard packages are not in {site} (missing "
            f"{', '.join(missing)}): `make head-site` installs tests/head-requirements.txt "
            f"there (or set {HEAD_SITE_ENV})"
        )
    try:
        import aiohttp  # noqa: F401 - the job-submission client's one extra dependency
    except ImportError:
        return "aiohttp is not installed: ray.job_submission.JobSubmissionClient needs it"
    return None


class RayHead(Started):
    """A Ray head with dashboard and Job Submission API on 127.0.0.1, token auth.

    Args:
        num_cpus: the head's CPUs (job drivers take none; what they run takes these).
        env: extra environment for the head, and so for its job drivers.
        head_site: the folder of the head's server packages (:func:`default_head_site`).
        tmp_dir: where the head's own dir is made; short (socket paths).
        object_store_memory: the head's object store, bytes.
        poll_s: how often the process tracker polls ``/proc``.
        start_timeout_s: how long ``start()`` waits for the head, and for the trial job.
        check_job: make ``start()`` also run a trivial job to the end (and delete it
            again): proof that submits, the job agent, the supervisor actor and a driver
            work, for ~3.5 s more. Without it ``start()`` returns once the dashboard
            answers an authenticated ``GET /api/jobs/`` and the dashboard agent (the job
            agent) and the runtime-env agent accept connections.
        keep_dir: keep the head's dir (logs) after stop (kept anyway if stop found
            leftovers or the ``with`` body raised).
    """

    name = "ray_head"

    def __init__(
        self,
        *,
        num_cpus: int = 1,
        env: dict[str, str] | None = None,
        head_site: str | os.PathLike[str] | None = None,
        tmp_dir: str | os.PathLike[str] = "/tmp",
        object_store_memory: int = 128 * 1024 * 1024,
        poll_s: float = 0.25,
        start_timeout_s: float = 60,
        check_job: bool = False,
        keep_dir: bool = False,
    ) -> None:
        self.num_cpus = num_cpus
        self.extra_env = dict(env or {})
        self.head_site = Path(head_site) if head_site is not None else default_head_site()
        self._tmp_parent = Path(tmp_dir)
        self.object_store_memory = object_store_memory
        self.poll_s = poll_s
        self.start_timeout_s = start_timeout_s
        self.check_job = check_job
        self.keep_dir = keep_dir

        self.dir: Path | None = None  # the head's own dir: token, head.out, Ray temp dir
        self.ray_temp_dir: Path | None = None
        self.token = secrets.token_hex(32)
        self.token_path: Path | None = None
        self.ports: dict[str, int] = {}
        self.head_proc: subprocess.Popen[bytes] | None = None
        self.started_at: float | None = None
        self.start_s: float | None = None  # seconds start() took
        # seconds from start() until: dashboard_s, the Job Submission API answers;
        # agents_s, the job and runtime-env agents accept; job_s, the trial job is done
        self.start_report: dict[str, float] = {}
        self.stop_report: dict[str, Any] = {}
        self.leftovers: list[ProcInfo] = []
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._tracker: ProcessTracker | None = None
        self._head_out: Any = None

    # ------------------------------------------------------------------ addresses

    @property
    def address(self) -> str:
        """The dashboard's (and Job Submission API's) URL, ``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self._port('dashboard')}"

    @property
    def gcs_address(self) -> str:
        """``127.0.0.1:PORT`` of the GCS (what ``ray.init(address=...)`` takes)."""
        return f"127.0.0.1:{self._port('gcs')}"

    def _port(self, name: str) -> int:
        if name not in self.ports:
            raise RuntimeError("not started")
        return self.ports[name]

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def client_env(self) -> dict[str, str]:
        """What a client subprocess (``ray job ...``, ``tuner submit``) needs in its
        environment to reach this head with its token."""
        if self.token_path is None:
            raise RuntimeError("not started")
        return {
            "RAY_ADDRESS": self.address,
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN_PATH": str(self.token_path),
        }

    def client(self, **kwargs: Any) -> Any:
        """An authenticated ``ray.job_submission.JobSubmissionClient`` for this head.

        The token goes in an explicit ``Authorization`` header, so the client does not
        depend on this process's own Ray auth settings (env, ``~/.ray/auth_token``).
        """
        from ray.job_submission import JobSubmissionClient

        headers = {**self.auth_headers(), **kwargs.pop("headers", {})}
        return JobSubmissionClient(self.address, headers=headers, **kwargs)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> RayHead:
        if self.head_proc is not None:
            raise RuntimeError("already started")
        problem = head_site_problem(self.head_site)
        if problem is not None:
            raise RuntimeError(problem)
        t0 = time.monotonic()
        self.dir = Path(tempfile.mkdtemp(prefix="rh-", dir=self._tmp_parent))
        self.ray_temp_dir = self.dir / "ray"
        self.ray_temp_dir.mkdir()
        if len(str(self.ray_temp_dir)) > 40:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise ValueError(f"tmp dir {self.ray_temp_dir} too long for Ray's socket paths")
        self.token_path = self.dir / "token"
        fd = os.open(self.token_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self.token)

        base = free_port_block(len(PORT_NAMES) + N_WORKER_PORTS)
        self.ports = {name: base + i for i, name in enumerate(PORT_NAMES)}
        self.ports["min_worker"] = base + len(PORT_NAMES)
        self.ports["max_worker"] = base + len(PORT_NAMES) + N_WORKER_PORTS - 1

        bin_dir = Path(sys.executable).parent
        ray_exe = bin_dir / "ray"
        p = self.ports
        cmd = [
            str(ray_exe) if ray_exe.exists() else "ray",
            "start",
            "--head",
            "--node-ip-address=127.0.0.1",
            "--include-dashboard=true",
            "--dashboard-host=127.0.0.1",
            f"--port={p['gcs']}",
            f"--dashboard-port={p['dashboard']}",
            f"--dashboard-agent-listen-port={p['dashboard_agent_listen']}",
            f"--dashboard-agent-grpc-port={p['dashboard_agent_grpc']}",
            f"--metrics-export-port={p['metrics_export']}",
            f"--runtime-env-agent-port={p['runtime_env_agent']}",
            f"--node-manager-port={p['node_manager']}",
            f"--object-manager-port={p['object_manager']}",
            f"--ray-client-server-port={p['ray_client_server']}",
            f"--min-worker-port={p['min_worker']}",
            f"--max-worker-port={p['max_worker']}",
            f"--temp-dir={self.ray_temp_dir}",
            f"--num-cpus={self.num_cpus}",
            "--num-gpus=0",
            f"--object-store-memory={self.object_store_memory}",
            "--disable-usage-stats",
            "--block",
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        pythonpath = [str(ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
        pythonpath = [e for e in dict.fromkeys(pythonpath) if e != str(self.head_site)]
        env.update(
            {
                # last, so it cannot shadow .venv's packages (it holds none of them)
                "PYTHONPATH": os.pathsep.join([*pythonpath, str(self.head_site)]),
                "PATH": os.pathsep.join([str(bin_dir), env.get("PATH", os.defpath)]),
                # else Ray rewrites the node IP to the machine's outward address
                "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
                "RAY_AUTH_MODE": "token",
                "RAY_AUTH_TOKEN_PATH": str(self.token_path),
                "RAY_USAGE_STATS_ENABLED": "0",
                # On SIGTERM `ray start` first drains its node, waiting up to 30 s while
                # any worker lease is held (a running job's supervisor actor holds one);
                # stop() wants the teardown at once.
                "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
                "DASHBOARD_METRIC_PORT": str(p["dashboard_metrics"]),
                "AUTOSCALER_METRIC_PORT": str(p["autoscaler_metrics"]),
                "PYTHONUNBUFFERED": "1",
                MARKER_ENV: str(self.dir),
            }
        )
        env.update(self.extra_env)
        self._head_out = open(self.dir / "head.out", "wb")  # noqa: SIM115 - closed in stop()
        self._register()
        self.started_at = time.time()
        temp_dir_str = str(self.ray_temp_dir)
        self.head_proc, self._watchdog, self._tracker = spawn_tracked(
            cmd,
            self._head_out,
            env=env,
            name="ray_head",
            poll_s=self.poll_s,
            extra_match=lambda argv: any(temp_dir_str in a for a in argv),
        )
        try:
            self._wait_ready(t0)
        except BaseException:
            self._failed = True
            self.stop(raise_on_leftovers=False)
            raise
        self.start_s = time.monotonic() - t0
        return self

    def _wait_ready(self, t0: float) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        # the dashboard's one unauthenticated route (it starts after the GCS, before the
        # raylet and its agents), then an authenticated one
        while True:
            mode = self._get_json("/api/authentication_mode", auth=False)
            if mode is not None:
                break
            self._check_time(deadline, "the dashboard")
        if mode.get("authentication_mode") != "token":
            raise RuntimeError(f"the head's authentication mode is {mode}, not token")
        while self._get_json("/api/jobs/") is None:
            self._check_time(deadline, "the Job Submission API")
        self.start_report["dashboard_s"] = time.monotonic() - t0  # seconds after start()
        # The dashboard answers before the job agent (in the dashboard agent) is up; a
        # submit then waits inside the dashboard for the agent to register its address
        # in the GCS, which it does right after its HTTP server starts listening. The
        # runtime-env agent must be up too before a job's supervisor actor can start.
        for name in ("dashboard_agent_listen", "runtime_env_agent"):
            while not accepts(self.ports[name]):
                self._check_time(deadline, f"the {name.replace('_', ' ')}")
        self.start_report["agents_s"] = time.monotonic() - t0
        if self.check_job:
            self._run_trial_job(deadline)
            self.start_report["job_s"] = time.monotonic() - t0

    def _run_trial_job(self, deadline: float) -> None:
        """Submits ``python -c pass``, waits for it to succeed, then deletes it.

        Deleted only once Ray's job monitor has seen it end (its "Completed a ray job"
        event): deleted earlier, the monitor finds no status when the supervisor actor
        exits and writes the job back as FAILED ("Entrypoint not found."). That wait is
        ~1.5 s (the monitor's 1 s period).
        """
        from ray.job_submission import JobStatus

        assert self.ray_temp_dir is not None
        client = self.client()
        job_id = client.submit_job(entrypoint="python -c pass")
        while True:
            status = client.get_job_status(job_id)
            if status.is_terminal():
                break
            self._check_time(deadline, f"the trial job {job_id} ({status})", sleep_s=0.1)
        if status != JobStatus.SUCCEEDED:
            info = client.get_job_info(job_id)
            raise RuntimeError(f"the trial job ended {status}: {info.message}")
        events = self.ray_temp_dir / "session_latest" / "logs" / "events" / "event_JOBS.log"
        done = f"Completed a ray job {job_id} "
        while done not in read_tail(events, 1 << 20):
            self._check_time(deadline, f"Ray's job monitor to see {job_id} end", sleep_s=0.1)
        client.delete_job(job_id)

    def _check_time(self, deadline: float, what: str, sleep_s: float = 0.05) -> None:
        self._check_head()
        if time.monotonic() >= deadline:
            raise TimeoutError(
                f"{what} not ready {self.start_timeout_s} s after start\n"
                f"--- head.out ---\n{self.head_log()}\n--- dashboard.log ---\n"
                f"{self.log('dashboard.log')}"
            )
        time.sleep(sleep_s)

    def _get_json(self, path: str, auth: bool = True) -> Any:
        """GET ``path`` from the dashboard; its JSON, or None if it does not answer 200."""
        request = urllib.request.Request(
            self.address + path, headers=self.auth_headers() if auth else {}
        )
        try:
            with urllib.request.urlopen(request, timeout=2) as response:
                return json.loads(response.read())
        except (OSError, ValueError):  # URLError, HTTPError, a refused or reset connection
            return None

    def _check_head(self) -> None:
        if self.head_proc is None or self.head_proc.poll() is not None:
            code = None if self.head_proc is None else self.head_proc.returncode
            raise RuntimeError(f"ray start exited with {code}:\n{self.head_log()}")

    def stop(self, raise_on_leftovers: bool = True, term_timeout_s: float = 10.0) -> None:
        """Stops everything this head started, by PID; idempotent.

        SIGTERM to the head's ``ray start`` (it stops the GCS, raylet, dashboard, ...),
        wait up to ``term_timeout_s``, SIGKILL it if need be; then SIGTERM to every
        process still alive that the tracker recorded or whose environment carries this
        head's marker (job drivers, in sessions of their own), wait, SIGKILL, wait; a
        last scan must find none, else ``leftovers`` is set and, with
        ``raise_on_leftovers``, RuntimeError raised. ``stop_report``: ``head_s`` (for
        ``ray start`` to exit), ``sweep_s``, ``swept`` ((signal, pid, command) the sweep
        had to send; none when the orderly part did it all).
        """
        if not self._begin_stop():
            return
        t0 = time.monotonic()
        tracker = self._tracker
        if self.head_proc is not None:
            if tracker is not None:
                tracker.scan()
            stop_process(self.head_proc, ((signal.SIGTERM, term_timeout_s), (signal.SIGKILL, 10)))
        t_head = time.monotonic()
        swept = [(sig, p.pid, " ".join(p.cmdline)[:80]) for sig, p in sweep(self._alive_processes)]
        if tracker is not None:
            tracker.stop()
        self.leftovers = self._alive_processes()
        reap(self._watchdog)  # a plain child: nothing of Ray's, no children
        self.stop_report = {
            "head_s": t_head - t0,
            "sweep_s": time.monotonic() - t_head,
            "swept": swept,
        }
        left = [(p.pid, " ".join(p.cmdline)) for p in self.leftovers]
        self._end_stop(self._head_out, left, raise_on_leftovers)

    # ------------------------------------------------------------------ processes

    def _alive_processes(self) -> list[ProcInfo]:
        """Recorded processes still alive, plus any live process marked as this head's."""
        alive: list[ProcInfo] = []
        if self._tracker is not None:
            alive = self._tracker.alive()
        known = {p.pid for p in alive}
        for info in self.marked_processes():
            if info.pid not in known:
                alive.append(info)
        return alive

    def marked_processes(self) -> list[ProcInfo]:
        """Live processes whose environment carries this head's marker (``MARKER_ENV``):
        every process the head started, job drivers in sessions of their own included;
        independent of the tracker."""
        if self.dir is None:
            return []
        return processes_with_env(MARKER_ENV, str(self.dir))

    def processes(self) -> list[ProcInfo]:
        """Every process recorded so far (alive or ended)."""
        if self._tracker is None:
            return []
        if not self._stopped:
            self._tracker.scan()
        return self._tracker.snapshot()

    def pids(self) -> set[int]:
        """PIDs of the head's live processes (recorded or marked)."""
        return {p.pid for p in self._alive_processes()}

    def listening(self) -> list[dict[str, Any]]:
        """The TCP listening sockets of the head's live processes (:func:`listening_sockets`)."""
        return listening_sockets(self.pids())

    # ------------------------------------------------------------------ logs

    def head_log(self, tail: int = 4000) -> str:
        return "" if self.dir is None else read_tail(self.dir / "head.out", tail)

    def log(self, name: str, tail: int = 4000) -> str:
        """The tail of one of Ray's session logs (``dashboard.log``, ``raylet.out``...)."""
        if self.ray_temp_dir is None:
            return ""
        return read_tail(self.ray_temp_dir / "session_latest" / "logs" / name, tail)


@contextlib.contextmanager
def running_head(**kwargs: Any) -> Iterator[RayHead]:
    """``with RayHead(**kwargs) as head: yield head`` for a pytest fixture; skips the test
    (with the reason) where the head's packages or aiohttp are missing."""
    import pytest

    site = kwargs.get("head_site")
    problem = head_site_problem(None if site is None else Path(site))
    if problem is not None:
        pytest.skip(problem)
    with RayHead(**kwargs) as head:
        yield head
