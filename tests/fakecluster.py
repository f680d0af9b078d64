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

import contextlib
import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from tests.fakecluster_config import (
    DEFAULT_NODE_TYPES,
    HEAD_NODE_TYPE,
    autoscaling_config,
    validate_node_types,
)
from tests.ports import free_port_block
from tests.process_tracker import ProcessTracker, spawn_tracked
from tests.processes import (
    ProcInfo,
    Started,
    descendants,
    read_environ,
    read_tail,
    reap,
    signal_all,
    stop_process,
    sweep,
    terminate,
)

HEAD_NODE_ID = "fffffffffffffffffffffffffffffffffffffffffffffffffff00000"


class FakeCluster(Started):
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

    name = "fakecluster"

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
        validate_node_types(self.node_types)

        self.dir: Path | None = None  # the cluster's own dir: config, head logs, Ray temp
        self.ray_temp_dir: Path | None = None
        self.config_path: Path | None = None
        self.config: dict[str, Any] = {}
        self.address: str | None = None  # GCS address, for ray.init(address=...)
        self.ports: dict[str, int] = {}
        self.head_proc: subprocess.Popen[bytes] | None = None
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._tracker: ProcessTracker | None = None
        self._state: Any = None  # ray._private.state.GlobalState, lazily
        self.leftovers: list[ProcInfo] = []  # what stop() found alive after SIGKILL
        self.started_at: float | None = None
        self.stopped_at: float | None = None
        self.stop_report: dict[str, Any] = {}

    # ------------------------------------------------------------------ lifecycle

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
        base = free_port_block(len(names) + n_worker_ports)
        self.ports = {name: base + i for i, name in enumerate(names)}
        self.ports["min_worker"] = base + len(names)
        self.ports["max_worker"] = base + len(names) + n_worker_ports - 1
        self.config = autoscaling_config(self, self._node_ip)
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
        self._register()
        self.started_at = time.time()
        temp_dir_str = str(self.ray_temp_dir)
        self.head_proc, self._watchdog, self._tracker = spawn_tracked(
            cmd,
            self._head_out,
            env=env,
            name="fakecluster",
            poll_s=self.poll_s,
            extra_match=lambda argv: any(temp_dir_str in a for a in argv),
            tag=_raylet_node_type,
        )
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
        if not self._begin_stop():
            return
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
            terminate(monitors, 5.0)
            monitor_pids = {p.pid for p in monitors}
            nodes = [p for p in descendants(procs, monitor_pids) if p.alive]
            terminate(nodes, 5.0)
        t_nodes = time.monotonic()
        if self.head_proc is not None:
            if tracker is not None:
                tracker.scan()
            stop_process(self.head_proc, ((signal.SIGTERM, term_timeout_s), (signal.SIGKILL, 10)))
        t_head = time.monotonic()
        swept: list[tuple[str, int]] = []
        if tracker is not None:
            swept = [(sig, p.pid) for sig, p in sweep(tracker.alive)]
            tracker.scan()
            tracker.stop()
            self.leftovers = tracker.alive()
        reap(self._watchdog)  # a plain child: nothing of Ray's, no children
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
        left = [(p.pid, " ".join(p.cmdline)) for p in self.leftovers]
        self._end_stop(getattr(self, "_head_out", None), left, raise_on_leftovers)

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
            {
                node_id: p.tag
                for p in self._tracker.snapshot()
                if (node_id := raylet_node_id(p.cmdline)) and p.tag
            }
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
            node_id = raylet_node_id(p.cmdline)
            if node_id is None or (node_id == HEAD_NODE_ID and not include_head):
                continue
            out.append(
                {
                    "node_id": node_id,
                    "node_type": p.tag or (HEAD_NODE_TYPE if node_id == HEAD_NODE_ID else None),
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
        return [p.pid for p in signal_all(procs, sig)]

    def node_processes(self, node_id: str) -> list[ProcInfo]:
        """The raylet of ``node_id`` and its descendants (workers, agents)."""
        procs = self.processes()
        raylets = [p for p in procs if raylet_node_id(p.cmdline) == node_id]
        return raylets + descendants(procs, {p.pid for p in raylets})

    # ------------------------------------------------------------------ logs

    def head_log(self, tail: int = 4000) -> str:
        if self.dir is None:
            return ""
        return read_tail(self.dir / "head.out", tail)

    def monitor_log(self, tail: int = 4000) -> str:
        if self.ray_temp_dir is None:
            return ""
        logs = self.ray_temp_dir / "session_latest" / "logs"
        return "\n".join(
            f"[{name}]\n{read_tail(logs / name, tail)}"
            for name in ("monitor.log", "monitor.err", "monitor.out")
            if (logs / name).exists()
        )


def _is_autoscaler_monitor(cmdline: list[str]) -> bool:
    return any(a.endswith(("/_private/monitor.py", "/v2/monitor.py")) for a in cmdline)


def raylet_node_id(cmdline: list[str]) -> str | None:
    """The Ray node id if ``cmdline`` is a raylet's, else None."""
    if not cmdline or not cmdline[0].endswith("raylet"):
        return None
    for arg in cmdline:
        if arg.startswith("--node_id="):
            return arg.split("=", 1)[1]
    return None


def _raylet_node_type(info: ProcInfo) -> str | None:
    """The tracker's tag: a raylet's ``RAY_NODE_TYPE_NAME`` ("" if none), else None."""
    if raylet_node_id(info.cmdline) is None:
        return None
    return read_environ(info.pid).get("RAY_NODE_TYPE_NAME", "")
