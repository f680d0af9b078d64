"""Ray's real autoscaler on one machine: the ``fake_multinode`` provider, logical GPUs.

:class:`FakeCluster` writes an autoscaling config, starts a head with
``RAY_FAKE_CLUSTER=1 ray start --head --autoscaling-config=... --block`` as a subprocess
on ports of its own and a temp dir of its own (so it never meets another Ray on the
machine: a test's ``ray.init(address="local")``, someone else's ``ray start``), and
lets Ray's autoscaler (v1 monitor) add and remove worker nodes. Each "node" the
autoscaler launches is a raylet with its own workers, started in the monitor process
through ``ray._private.node.Node`` with the node type's resources and labels; its node
id is ``fff...0000N`` (``RAY_OVERRIDE_NODE_ID_FOR_TESTING``).

Ground truth of node lifetimes, independent of Ray's GCS: a background thread polls
``/proc`` every ``poll_s`` seconds, follows every process descended from the head's
``ray start`` (or in its session), records each one's start time (``/proc/PID/stat``
start ticks, converted to epoch seconds) and the time it was first seen gone, and
takes each fake node's raylet (``--node_id=...`` on its command line) as the node.

Shut down by PID only (:meth:`FakeCluster.stop`): the monitor, then the fake nodes'
processes while the GCS is still up, then the head's ``ray start`` (it stops its GCS,
raylet, ...), then a sweep of every process ever recorded that is still alive; then a
check that nothing is left. Fake nodes are children of the monitor, not of the head's
``ray start``, and outlive both: killed by SIGKILL, the head leaves each fake node's
raylet running ~60 s (until its GCS reconnect timeout) and its log monitor, dashboard
agent and runtime-env agent running indefinitely. ``with FakeCluster() as c:`` stops it
whatever the body raises; an ``atexit`` hook covers a forgotten ``stop()``; and a
watchdog process of its own (standard library only) kills the head's whole session by
PID if the process that made the cluster dies without stopping it (SIGKILL, os._exit).

Usage::

    from tests.fakecluster import FakeCluster

    with FakeCluster(node_types={"gpu": {"resources": {"CPU": 1, "GPU": 1},
                                         "labels": {"tuner.io/cloud": "aws"},
                                         "max_workers": 2}}) as cluster:
        ray.init(address=cluster.address)
        ...
        cluster.wait_for_nodes(2, timeout=60)
        ray.shutdown()
    print(cluster.lifetimes())

A bench script run from the repo root imports it as ``tests.fakecluster`` with the
repo root on ``sys.path`` (``python -m bench.x``, ``PYTHONPATH=.``, or
``sys.path.insert(0, repo_root)``).
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HEAD_NODE_TYPE = "ray.head.default"  # the fake provider tags its head with this type
HEAD_NODE_ID = "fffffffffffffffffffffffffffffffffffffffffffffffffff00000"

DEFAULT_NODE_TYPES: dict[str, dict[str, Any]] = {
    "gpu_worker": {
        "resources": {"CPU": 1, "GPU": 1, "accelerator_type:A100": 1},
        "labels": {},
        "min_workers": 0,
        "max_workers": 2,
    }
}

_CLK_TCK = os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------- /proc


@dataclass
class ProcInfo:
    """One process this cluster started (directly or not), as seen in ``/proc``."""

    pid: int
    ppid: int  # when first seen (a process outliving its parent is reparented later)
    start_ticks: int  # /proc/PID/stat field 22: clock ticks after boot
    started_at: float  # epoch seconds, from start_ticks
    first_seen: float
    cmdline: list[str] = field(default_factory=list)
    ended_at: float | None = None  # epoch seconds when first seen gone (or a zombie)
    last_seen: float = 0.0
    node_type: str | None = None  # a raylet's RAY_NODE_TYPE_NAME env ("" for the head)

    @property
    def alive(self) -> bool:
        return self.ended_at is None

    @property
    def node_id(self) -> str | None:
        """The Ray node id if this process is a raylet, else None."""
        if not self.cmdline or not self.cmdline[0].endswith("raylet"):
            return None
        for arg in self.cmdline:
            if arg.startswith("--node_id="):
                return arg.split("=", 1)[1]
        return None


def _read_stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, ppid, session id, start ticks) of ``pid``, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode(errors="replace")
    except OSError:
        return None
    fields = data.rsplit(")", 1)[1].split()  # comm (field 2) may hold spaces and ')'
    # fields[0] is field 3 (state); field N is fields[N - 3]
    return fields[0], int(fields[1]), int(fields[3]), int(fields[19])


def _read_cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            data = f.read()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in data.split(b"\0") if a]


def _read_environ(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            data = f.read()
    except OSError:
        return {}
    pairs = (a.decode(errors="replace").partition("=") for a in data.split(b"\0") if a)
    return {k: v for k, _, v in pairs}


def _boot_epoch() -> float:
    """Epoch seconds at boot, to ~10 ms (``/proc/stat`` btime is whole seconds)."""
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return time.time() - uptime


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _is_alive(pid: int, start_ticks: int) -> bool:
    """True if ``pid`` still is the process that started at ``start_ticks``, not a zombie."""
    stat = _read_stat(pid)
    return stat is not None and stat[3] == start_ticks and stat[0] not in ("Z", "X")


class _ProcessTracker(threading.Thread):
    """Polls /proc: records every descendant of ``root_pid`` (or process in its session)."""

    def __init__(self, root_pid: int, poll_s: float, extra_match: Callable[[list[str]], bool]):
        super().__init__(name=f"fakecluster-tracker-{root_pid}", daemon=True)
        self.root_pid = root_pid
        self.poll_s = poll_s
        self.extra_match = extra_match
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
                print(f"fakecluster tracker: {exc!r}", file=sys.stderr)

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout=5)

    def scan(self) -> None:
        now = time.time()
        boot = _boot_epoch()
        stats: dict[int, tuple[str, int, int, int]] = {}
        for pid in _all_pids():
            stat = _read_stat(pid)
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
                    if pid in alive_pids or state in ("Z", "X"):
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
                        cmdline = _read_cmdline(pid)
                        ours = bool(cmdline) and self.extra_match(cmdline)
                        if not ours:
                            self._not_ours.setdefault(key, now)
                    if not ours:
                        continue
                    self.procs[key] = ProcInfo(
                        pid=pid,
                        ppid=ppid,
                        start_ticks=ticks,
                        started_at=boot + ticks / _CLK_TCK,
                        first_seen=now,
                        cmdline=cmdline if cmdline is not None else _read_cmdline(pid),
                        last_seen=now,
                    )
                    alive_pids.add(pid)
                    changed = True
            self._not_ours = {k: v for k, v in self._not_ours.items() if k[0] in stats}
            for (pid, ticks), info in self.procs.items():
                if not info.alive:
                    continue
                stat = stats.get(pid)
                if stat is None or stat[3] != ticks or stat[0] in ("Z", "X"):
                    info.ended_at = read_end
                    continue
                info.last_seen = now
                if now - info.first_seen < 5.0:  # forked, maybe not exec'd yet: re-read
                    cmdline = _read_cmdline(pid)
                    if cmdline:
                        info.cmdline = cmdline
                if info.node_type is None and info.node_id is not None:  # once, "" if none
                    info.node_type = _read_environ(pid).get("RAY_NODE_TYPE_NAME", "")

    def snapshot(self) -> list[ProcInfo]:
        with self.lock:
            return [copy.copy(p) for p in self.procs.values()]


# --------------------------------------------------------------------------- watchdog

# Run as ``python -c _WATCHDOG_SRC OWNER_PID OWNER_TICKS SID SID_TICKS POLL_S`` in a
# session of its own: when the owner (the process that made the FakeCluster) dies without
# stopping it (SIGKILL, os._exit, a pytest-timeout thread kill), it kills by PID every
# process in session SID (the head's ``ray start`` is its leader; everything Ray starts
# under it, fake nodes included, inherits the session) that started after the leader.
# Standard library only; it exits once the session is empty.
_WATCHDOG_SRC = r"""
import os, signal, sys, time
owner, owner_ticks, sid, sid_ticks, poll_s = sys.argv[1:6]
owner, owner_ticks, sid, sid_ticks = int(owner), int(owner_ticks), int(sid), int(sid_ticks)
poll_s = float(poll_s)

def stat(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            fields = f.read().decode(errors="replace").rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[3]), int(fields[19])  # state, session, start ticks

def alive(pid, ticks):
    st = stat(pid)
    return st is not None and st[2] == ticks and st[0] not in ("Z", "X")

def members():
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = stat(int(name))
            if st and st[1] == sid and st[2] >= sid_ticks and st[0] not in ("Z", "X"):
                out.append((int(name), st[2]))
    return out

while alive(owner, owner_ticks):
    time.sleep(poll_s)
    if not members():
        sys.exit(0)
print("fakecluster watchdog: owner %d gone; killing session %d" % (owner, sid), flush=True)
for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0), (signal.SIGKILL, 5.0)):
    procs = members()
    if not procs:
        break
    for pid, ticks in procs:
        if alive(pid, ticks):
            try:
                os.kill(pid, sig)
            except OSError:
                pass
    deadline = time.time() + wait_s
    while time.time() < deadline and any(alive(p, t) for p, t in procs):
        time.sleep(0.1)
left = members()
print("fakecluster watchdog: left %r" % (left,), flush=True)
sys.exit(1 if left else 0)
"""


# --------------------------------------------------------------------------- ports


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("", port))
        except OSError:
            return False
    return True


def _free_port_block(size: int, rng: random.Random) -> int:
    """First port of ``size`` consecutive free TCP ports below the ephemeral range."""
    try:
        low_ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low_ephemeral = 32768
    # clear of Ray's fixed defaults (6379, 8265, 10001, 52365, ...) and of the range its
    # workers take ports from by default (10002-19999), so another Ray cannot grab one
    hi = max(low_ephemeral, 30000) - size
    for _ in range(200):
        base = rng.randrange(20000, hi)
        if all(_port_free(p) for p in range(base, base + size)):
            return base
    raise RuntimeError(f"no {size} consecutive free ports found")


# --------------------------------------------------------------------------- cluster


class FakeCluster:
    """A Ray head plus Ray's real autoscaler with the ``fake_multinode`` provider.

    Args:
        node_types: worker node types, name -> ``{"resources": {...}, "labels": {...},
            "min_workers": int, "max_workers": int}``; defaults to one GPU type
            (``CPU: 1, GPU: 1, accelerator_type:A100: 1``, up to 2 workers). Label values
            must be strings. ``resources`` may hold ``object_store_memory`` (bytes).
        head_resources: the head's resources (``CPU``, ``GPU``, custom ones).
        idle_timeout_s: the autoscaler's idle timeout (``idle_timeout_minutes``).
        update_interval_s: the autoscaler's loop period (``AUTOSCALER_UPDATE_INTERVAL_S``).
        tmp_dir: where the cluster's own dir (config, logs, Ray temp dir) is made; short,
            since Ray's unix socket paths under it must stay under 107 bytes.
        launch_multiple: let the fake provider start ``count`` nodes per launch request
            (its default, False, starts one node per request, one per autoscaler round).
        head_object_store_memory: the head's object store, bytes.
        worker_object_store_memory: each fake worker's object store, bytes, unless its
            type's resources set ``object_store_memory``.
        poll_s: how often the process tracker polls ``/proc`` (the lifetimes' resolution).
        start_timeout_s: how long to wait for the head.
        env: extra environment for the head (and so for the monitor and fake nodes).
        include_dashboard: start the dashboard (on a port of its own); the autoscaler
            does not need it.
        keep_dir: keep the cluster's dir after stop (it is kept anyway if stop found
            leftovers or the ``with`` body raised).
    """

    def __init__(
        self,
        node_types: dict[str, dict[str, Any]] | None = None,
        head_resources: dict[str, float] | None = None,
        idle_timeout_s: float = 6,
        update_interval_s: float = 1,
        tmp_dir: str | os.PathLike[str] | None = None,
        *,
        launch_multiple: bool = False,
        upscaling_speed: float = 1.0,
        head_object_store_memory: int = 128 * 1024 * 1024,
        worker_object_store_memory: int = 96 * 1024 * 1024,
        poll_s: float = 0.2,
        start_timeout_s: float = 60,
        env: dict[str, str] | None = None,
        keep_dir: bool = False,
        include_dashboard: bool = False,
    ) -> None:
        self.node_types = copy.deepcopy(DEFAULT_NODE_TYPES if node_types is None else node_types)
        self.head_resources = dict(head_resources or {"CPU": 1})
        self.idle_timeout_s = idle_timeout_s
        self.update_interval_s = update_interval_s
        self.launch_multiple = launch_multiple
        self.upscaling_speed = upscaling_speed
        self.head_object_store_memory = head_object_store_memory
        self.worker_object_store_memory = worker_object_store_memory
        self.poll_s = poll_s
        self.start_timeout_s = start_timeout_s
        self.extra_env = dict(env or {})
        self.keep_dir = keep_dir
        self.include_dashboard = include_dashboard
        self._tmp_parent = tmp_dir
        self._validate()

        self.dir: Path | None = None  # the cluster's own dir: config, head logs, Ray temp
        self.ray_temp_dir: Path | None = None
        self.config_path: Path | None = None
        self.config: dict[str, Any] = {}
        self.address: str | None = None  # GCS address, for ray.init(address=...)
        self.ports: dict[str, int] = {}
        self.head_proc: subprocess.Popen[bytes] | None = None
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._tracker: _ProcessTracker | None = None
        self._state: Any = None  # ray._private.state.GlobalState, lazily
        self._stopped = False
        self._failed = False
        self.leftovers: list[ProcInfo] = []  # what stop() found alive after SIGKILL
        self.started_at: float | None = None
        self.stopped_at: float | None = None
        self.stop_report: dict[str, Any] = {}

    # ------------------------------------------------------------------ config

    def _validate(self) -> None:
        if HEAD_NODE_TYPE in self.node_types:
            raise ValueError(f"{HEAD_NODE_TYPE!r} is the head's type name")
        for name, spec in self.node_types.items():
            unknown = set(spec) - {"resources", "labels", "min_workers", "max_workers"}
            if unknown:
                raise ValueError(f"node type {name!r}: unknown keys {sorted(unknown)}")
            for key, value in (spec.get("labels") or {}).items():
                if not isinstance(key, str) or not isinstance(value, str):
                    raise TypeError(f"node type {name!r}: label {key!r}={value!r} not str")

    def _build_config(self) -> dict[str, Any]:
        types: dict[str, Any] = {
            HEAD_NODE_TYPE: {
                "resources": dict(self.head_resources),
                "node_config": {},
                "max_workers": 0,
            }
        }
        for name, spec in self.node_types.items():
            resources = dict(spec.get("resources") or {})
            resources.setdefault("object_store_memory", self.worker_object_store_memory)
            entry: dict[str, Any] = {
                "resources": resources,
                "node_config": {},
                "min_workers": int(spec.get("min_workers", 0)),
                "max_workers": int(spec.get("max_workers", 1)),
            }
            if spec.get("labels"):
                entry["labels"] = dict(spec["labels"])
            types[name] = entry
        return {
            "cluster_name": f"fake-{os.getpid()}-{self.ports['gcs']}",
            "max_workers": sum(t.get("max_workers", 0) for t in types.values()),
            "upscaling_speed": self.upscaling_speed,
            "idle_timeout_minutes": self.idle_timeout_s / 60.0,
            "docker": {},
            "provider": {
                "type": "fake_multinode",
                "use_node_id_as_ip": True,
                "disable_node_updaters": True,
                "disable_launch_config_check": True,
                # the provider's default is <node ip>:6379, someone else's Ray
                "gcs_address": f"{self._node_ip}:{self.ports['gcs']}",
                "launch_multiple": self.launch_multiple,
            },
            "auth": {},
            "available_node_types": types,
            "head_node_type": HEAD_NODE_TYPE,
            "file_mounts": {},
            "cluster_synced_files": [],
            "file_mounts_sync_continuously": False,
            "rsync_exclude": [],
            "rsync_filter": [],
            "initialization_commands": [],
            "setup_commands": [],
            "head_setup_commands": [],
            "worker_setup_commands": [],
            "head_start_ray_commands": [],
            "worker_start_ray_commands": [],
        }

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> FakeCluster:
        self.start()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self._failed = True
        self.stop(raise_on_leftovers=exc_type is None)

    def start(self) -> FakeCluster:
        if self.head_proc is not None:
            raise RuntimeError("already started")
        import ray._private.services as services

        self._node_ip = services.get_node_ip_address()  # type: ignore[no-untyped-call]
        parent = Path(self._tmp_parent) if self._tmp_parent is not None else Path("/tmp")
        self.dir = Path(tempfile.mkdtemp(prefix="fkc-", dir=parent))
        self.ray_temp_dir = self.dir / "ray"
        self.ray_temp_dir.mkdir()
        if len(str(self.ray_temp_dir)) > 40:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise ValueError(f"tmp dir {self.ray_temp_dir} too long for Ray's socket paths")
        names = [
            "gcs",
            "object_manager",
            "node_manager",
            "dashboard_agent_listen",
            "dashboard_agent_grpc",
            "runtime_env_agent",
            "metrics_export",
            "dashboard",
        ]
        n_worker_ports = 64
        base = _free_port_block(len(names) + n_worker_ports, random.Random())
        self.ports = {name: base + i for i, name in enumerate(names)}
        self.ports["min_worker"] = base + len(names)
        self.ports["max_worker"] = base + len(names) + n_worker_ports - 1
        self.config = self._build_config()
        self.config_path = self.dir / "autoscaling.yaml"
        self.config_path.write_text(yaml.safe_dump(self.config, sort_keys=False))

        head_custom = {k: v for k, v in self.head_resources.items() if k not in ("CPU", "GPU")}
        ray_exe = Path(sys.executable).with_name("ray")
        cmd = [
            str(ray_exe) if ray_exe.exists() else "ray",
            "start",
            "--head",
            f"--port={self.ports['gcs']}",
            f"--include-dashboard={str(self.include_dashboard).lower()}",
            f"--dashboard-port={self.ports['dashboard']}",
            f"--object-manager-port={self.ports['object_manager']}",
            f"--node-manager-port={self.ports['node_manager']}",
            f"--min-worker-port={self.ports['min_worker']}",
            f"--max-worker-port={self.ports['max_worker']}",
            f"--dashboard-agent-listen-port={self.ports['dashboard_agent_listen']}",
            f"--dashboard-agent-grpc-port={self.ports['dashboard_agent_grpc']}",
            f"--runtime-env-agent-port={self.ports['runtime_env_agent']}",
            f"--metrics-export-port={self.ports['metrics_export']}",
            f"--temp-dir={self.ray_temp_dir}",
            f"--autoscaling-config={self.config_path}",
            f"--num-cpus={self.head_resources.get('CPU', 0)}",
            f"--num-gpus={self.head_resources.get('GPU', 0)}",
            f"--object-store-memory={self.head_object_store_memory}",
            "--disable-usage-stats",
            "--block",
        ]
        if head_custom:
            cmd.append(f"--resources={json.dumps(head_custom)}")
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        env.update(
            {
                "RAY_FAKE_CLUSTER": "1",
                "AUTOSCALER_UPDATE_INTERVAL_S": str(self.update_interval_s),
                "RAY_USAGE_STATS_ENABLED": "0",
                # (not RAY_AUTOSCALER_FATESHARE_WORKERS=1: in this Ray its kill_workers()
                # raises AttributeError, so the monitor's SIGTERM leaves the nodes running)
                "PYTHONUNBUFFERED": "1",
                # deterministic whether or not ~/.ray/auth_token exists (with one,
                # an unset mode means token auth, which this process's GCS client
                # would not speak until some ray.init() switched it on)
                "RAY_AUTH_MODE": "disabled",
            }
        )
        env.update(self.extra_env)
        self._head_out = open(self.dir / "head.out", "wb")  # noqa: SIM115 - closed in stop()
        atexit.register(self._atexit)
        self.started_at = time.time()
        self.head_proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=self._head_out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # own session and process group: sid == pgid == pid
        )
        head_stat = _read_stat(self.head_proc.pid)
        own_stat = _read_stat(os.getpid())
        assert head_stat is not None and own_stat is not None
        self._watchdog = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _WATCHDOG_SRC,
                str(os.getpid()),
                str(own_stat[3]),
                str(self.head_proc.pid),
                str(head_stat[3]),
                "0.5",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._head_out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # not in the head's session; outlives this process
        )
        temp_dir_str = str(self.ray_temp_dir)
        self._tracker = _ProcessTracker(
            self.head_proc.pid,
            self.poll_s,
            extra_match=lambda argv: any(temp_dir_str in a for a in argv),
        )
        self._tracker.start()
        try:
            self._wait_for_head()
        except BaseException:
            self._failed = True
            self.stop(raise_on_leftovers=False)
            raise
        return self

    def _wait_for_head(self) -> None:
        assert self.head_proc is not None and self.ray_temp_dir is not None
        address_file = self.ray_temp_dir / "ray_current_cluster"
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.head_proc.poll() is not None:
                raise RuntimeError(
                    f"ray start exited with {self.head_proc.returncode}:\n{self.head_log()}"
                )
            if address_file.exists() and address_file.read_text().strip():
                self.address = address_file.read_text().strip()
                break
            time.sleep(0.2)
        else:
            raise TimeoutError(f"head not up in {self.start_timeout_s} s:\n{self.head_log()}")
        while time.monotonic() < deadline:
            if any(n["is_head"] and n["alive"] for n in self.nodes(alive_only=False)):
                return
            time.sleep(0.2)
        raise TimeoutError(f"head node not alive in {self.start_timeout_s} s")

    def _atexit(self) -> None:
        if not self._stopped:
            self.stop(raise_on_leftovers=False)

    def stop(self, raise_on_leftovers: bool = True, term_timeout_s: float = 10.0) -> None:
        """Stops everything this cluster started, by PID; idempotent.

        Order: disconnect this process's driver if it is connected here; SIGTERM the
        autoscaler's monitor (so nothing relaunches), then every process descended from
        it (the fake nodes: raylets stop gracefully while the GCS is up), each step
        SIGKILL after 5 s; SIGTERM the head's ``ray start`` (it stops the GCS, the head
        raylet, ...) and wait; then SIGTERM every recorded process still alive, wait,
        SIGKILL what is left, wait; a last /proc scan must find none (else ``leftovers``
        is set and, if ``raise_on_leftovers``, RuntimeError is raised). ``stop_report``
        says how long each step took and what the sweep had to signal.
        """
        if self._stopped:
            return
        self._stopped = True
        with contextlib.suppress(Exception):
            atexit.unregister(self._atexit)
        self._disconnect_driver()
        if self._state is not None:
            with contextlib.suppress(Exception):
                self._state.disconnect()
            self._state = None
        tracker = self._tracker
        t0 = time.monotonic()
        if tracker is not None and self.head_proc is not None:
            # 1. the monitor, so nothing relaunches; 2. the fake nodes it launched, while
            # the GCS is up (a raylet exits gracefully on SIGTERM then, and stops its
            # workers; with the GCS gone it ignores SIGTERM)
            tracker.scan()
            procs = tracker.snapshot()
            monitors = [p for p in procs if p.alive and _is_autoscaler_monitor(p.cmdline)]
            _terminate(monitors, 5.0)
            monitor_pids = {p.pid for p in monitors}
            nodes = [p for p in _descendants(procs, monitor_pids) if p.alive]
            _terminate(nodes, 5.0)
        t_nodes = time.monotonic()
        if self.head_proc is not None:
            if tracker is not None:
                tracker.scan()
            if self.head_proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    self.head_proc.send_signal(signal.SIGTERM)
                try:
                    self.head_proc.wait(timeout=term_timeout_s)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        self.head_proc.kill()
                    self.head_proc.wait(timeout=10)
        t_head = time.monotonic()
        swept: list[tuple[str, int]] = []
        if tracker is not None:
            for sig, wait_s in (
                (signal.SIGTERM, 5.0),
                (signal.SIGKILL, 5.0),
                (signal.SIGKILL, 5.0),
            ):
                tracker.scan()
                alive = [p for p in tracker.snapshot() if p.alive]
                if not alive:
                    break
                for p in alive:
                    if _is_alive(p.pid, p.start_ticks):
                        with contextlib.suppress(ProcessLookupError, PermissionError):
                            os.kill(p.pid, sig)
                            swept.append((signal.Signals(sig).name, p.pid))
                _wait_gone(alive, wait_s)
            tracker.scan()
            tracker.stop()
            tracker.scan()
            self.leftovers = [p for p in tracker.snapshot() if p.alive]
        if self._watchdog is not None and self._watchdog.poll() is None:
            self._watchdog.kill()  # a plain child: nothing of Ray's, no children
            self._watchdog.wait(timeout=10)
        self.stopped_at = time.time()
        # how the stop went: seconds to stop the monitor and fake nodes, for the head's
        # ray start to exit, for the sweep, and (signal, pid) for each process the sweep
        # had to signal (none when the orderly part did it all)
        self.stop_report = {
            "nodes_s": t_nodes - t0,
            "head_s": t_head - t_nodes,
            "sweep_s": time.monotonic() - t_head,
            "swept": swept,
        }
        if getattr(self, "_head_out", None) is not None:
            self._head_out.close()
        if self.leftovers:
            self._failed = True
        if self.dir is not None and not (self.keep_dir or self._failed):
            shutil.rmtree(self.dir, ignore_errors=True)
        elif self.dir is not None:
            print(f"fakecluster: kept {self.dir}", file=sys.stderr)
        if self.leftovers and raise_on_leftovers:
            raise RuntimeError(
                "processes left after stop: "
                + "; ".join(f"{p.pid} {' '.join(p.cmdline)[:120]}" for p in self.leftovers)
            )

    def _disconnect_driver(self) -> None:
        """ray.shutdown() if this process's driver is connected to this cluster.

        A driver left connected to a dead GCS exits its process after a while.
        """
        try:
            import ray
        except ImportError:
            return
        if not ray.is_initialized() or self.address is None:
            return
        with contextlib.suppress(Exception):
            if ray.get_runtime_context().gcs_address == self.address:
                ray.shutdown()

    # ------------------------------------------------------------------ queries

    def connect(self, **kwargs: Any) -> Any:
        """``ray.init(address=self.address, **kwargs)``; stop() disconnects it."""
        import ray

        if self.address is None:
            raise RuntimeError("not started")
        return ray.init(address=self.address, **kwargs)

    def _global_state(self) -> Any:
        if self._state is None:
            from ray._private.services import _get_gcs_client_options
            from ray._private.state import GlobalState

            state = GlobalState()  # type: ignore[no-untyped-call]
            state._initialize_global_state(_get_gcs_client_options(self.address))  # type: ignore[no-untyped-call]
            self._state = state
        return self._state

    def ray_nodes(self) -> list[dict[str, Any]]:
        """The GCS node table, as ``ray.nodes()`` gives it, without a driver."""
        if self.address is None:
            raise RuntimeError("not started")
        return list(self._global_state().node_table())

    def nodes(self, alive_only: bool = True) -> list[dict[str, Any]]:
        """Ray nodes from the GCS: ``node_id``, ``alive``, ``is_head``, ``resources``,
        ``labels`` (the node type's, plus Ray's own ``ray.io/node-id``), ``node_type``
        (from the raylet's ``RAY_NODE_TYPE_NAME``; the GCS does not record it)."""
        types = (
            {p.node_id: p.node_type for p in self._tracker.snapshot() if p.node_id and p.node_type}
            if self._tracker is not None
            else {}
        )
        out = []
        for n in self.ray_nodes():
            if alive_only and not n["Alive"]:
                continue
            labels = dict(n.get("Labels") or {})
            node_id = n["NodeID"]
            out.append(
                {
                    "node_id": node_id,
                    "alive": bool(n["Alive"]),
                    "is_head": node_id == HEAD_NODE_ID or bool(n.get("IsHeadNode")),
                    "resources": dict(n.get("Resources") or {}),
                    "labels": labels,
                    "node_type": types.get(node_id) or self._node_type_of(node_id, labels),
                }
            )
        return out

    def _node_type_of(self, node_id: str, labels: dict[str, str]) -> str | None:
        if node_id == HEAD_NODE_ID:
            return HEAD_NODE_TYPE
        group = labels.get("ray.io/node-group")
        if group:
            return group
        for name, spec in self.node_types.items():  # fall back to matching the labels
            want = spec.get("labels") or {}
            if want and all(labels.get(k) == v for k, v in want.items()):
                return name
        return None

    def worker_nodes(self) -> list[dict[str, Any]]:
        """Alive non-head nodes."""
        return [n for n in self.nodes() if not n["is_head"]]

    def wait_for_nodes(self, n_workers: int, timeout: float = 60, poll_s: float = 0.2) -> float:
        """Waits until exactly ``n_workers`` non-head nodes are alive; returns the wait (s)."""
        t0 = time.monotonic()
        deadline = t0 + timeout
        while True:
            self._check_head()
            got = len(self.worker_nodes())
            if got == n_workers:
                return time.monotonic() - t0
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"{got} worker nodes after {timeout} s, want {n_workers}\n"
                    f"--- monitor log tail ---\n{self.monitor_log()}"
                )
            time.sleep(poll_s)

    def _check_head(self) -> None:
        if self.head_proc is None or self.head_proc.poll() is not None:
            raise RuntimeError(f"head is not running:\n{self.head_log()}")

    # ------------------------------------------------------------------ ground truth

    def processes(self) -> list[ProcInfo]:
        """Every process recorded so far (alive or ended)."""
        if self._tracker is None:
            return []
        if not self._stopped:
            self._tracker.scan()
        return self._tracker.snapshot()

    def lifetimes(self, include_head: bool = False) -> dict[str, tuple[float, float | None]]:
        """node id -> (raylet start, raylet exit or None), epoch seconds, from /proc.

        The start is the raylet's start time from ``/proc/PID/stat`` (10 ms ticks); the
        exit is when the tracker first saw it gone, so late by up to ``poll_s``.
        """
        return {r["node_id"]: (r["start"], r["end"]) for r in self.node_records(include_head)}

    def node_records(self, include_head: bool = False) -> list[dict[str, Any]]:
        """Per raylet ever seen, in start order: ``node_id``, ``node_type`` (its
        ``RAY_NODE_TYPE_NAME``), ``pid``, ``start``, ``end`` (None while alive)."""
        out = []
        for p in sorted(self.processes(), key=lambda p: p.started_at):
            node_id = p.node_id
            if node_id is None or (node_id == HEAD_NODE_ID and not include_head):
                continue
            out.append(
                {
                    "node_id": node_id,
                    "node_type": p.node_type
                    or (HEAD_NODE_TYPE if node_id == HEAD_NODE_ID else None),
                    "pid": p.pid,
                    "start": p.started_at,
                    "end": p.ended_at,
                }
            )
        return out

    def kill_node(self, node_id: str, sig: int = signal.SIGKILL) -> list[int]:
        """Sends ``sig`` to a fake node's raylet and all its descendants (a node failure,
        behind the autoscaler's back); returns the PIDs signalled."""
        if node_id == HEAD_NODE_ID:
            raise ValueError("kill_node is for worker nodes; stop() stops the head")
        procs = [p for p in self.node_processes(node_id) if p.alive]
        if not procs:
            raise KeyError(f"no live raylet for node {node_id}")
        sent = []
        for p in procs:
            if _is_alive(p.pid, p.start_ticks):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, sig)
                    sent.append(p.pid)
        return sent

    def node_processes(self, node_id: str) -> list[ProcInfo]:
        """The raylet of ``node_id`` and its descendants (workers, agents)."""
        procs = self.processes()
        raylets = [p for p in procs if p.node_id == node_id]
        return raylets + _descendants(procs, {p.pid for p in raylets})

    # ------------------------------------------------------------------ logs

    def head_log(self, tail: int = 4000) -> str:
        if self.dir is None:
            return ""
        return _tail(self.dir / "head.out", tail)

    def monitor_log(self, tail: int = 4000) -> str:
        if self.ray_temp_dir is None:
            return ""
        logs = self.ray_temp_dir / "session_latest" / "logs"
        return "\n".join(
            f"[{name}]\n{_tail(logs / name, tail)}"
            for name in ("monitor.log", "monitor.err", "monitor.out")
            if (logs / name).exists()
        )


def _tail(path: Path, n: int) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-n:].decode(errors="replace")


def _is_autoscaler_monitor(cmdline: list[str]) -> bool:
    return any(a.endswith(("/_private/monitor.py", "/v2/monitor.py")) for a in cmdline)


def _descendants(procs: list[ProcInfo], pids: set[int]) -> list[ProcInfo]:
    """Processes recorded as children (when first seen) of ``pids``, transitively."""
    out: list[ProcInfo] = []
    frontier = set(pids)
    while frontier:
        new = [p for p in procs if p.ppid in frontier and p not in out]
        out.extend(new)
        frontier = {p.pid for p in new}
    return out


def _terminate(procs: list[ProcInfo], timeout: float) -> None:
    """SIGTERM, wait up to ``timeout``, SIGKILL what is left, wait briefly."""
    for sig, wait_s in ((signal.SIGTERM, timeout), (signal.SIGKILL, 2.0)):
        pending = [p for p in procs if _is_alive(p.pid, p.start_ticks)]
        if not pending:
            return
        for p in pending:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p.pid, sig)
        _wait_gone(pending, wait_s)


def _wait_gone(procs: Iterable[ProcInfo], timeout: float) -> None:
    pending = list(procs)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        pending = [p for p in pending if _is_alive(p.pid, p.start_ticks)]
        if pending:
            time.sleep(0.05)
