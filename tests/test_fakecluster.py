"""The FakeCluster harness: Ray's real autoscaler (fake_multinode) adds and removes nodes.

Each Ray test prints what it measured (run with ``-s`` to see it): time to the first and
second worker node, the delay from idle to removal, how soon the GCS marks a node dead.
Checks of "nothing left" scan /proc here, independently of the harness's own tracker.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fakecluster import HEAD_NODE_ID, FakeCluster

LABELS = {
    "tuner.io/instance-type": "p4d.24xlarge",
    "tuner.io/cloud": "aws",
    "tuner.io/usd-per-hour": "1.5",
}
GPU_TYPE = {
    "gpu_a100": {
        "resources": {"CPU": 1, "GPU": 1, "accelerator_type:A100": 1},
        "labels": LABELS,
        "min_workers": 0,
        "max_workers": 2,
    }
}
IDLE_S = 6.0
# A raylet's start comes from /proc/PID/stat in clock ticks, against a boot time read from
# /proc/uptime (hundredths of a second): it is known to two ticks, however loaded the
# machine. No other tolerance: ends are bounded by the order of events instead (the
# tracker stamps an exit at the first scan that finds it gone, which is before the scan
# the test waits for).
CLOCK_RES_S = 2.0 / os.sysconf("SC_CLK_TCK") + 0.01


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, session id) of ``pid``, or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text(errors="replace").rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[3])


def _left_behind(session_id: int, cluster_dir: Path) -> list[str]:
    """Live processes in the head's session or naming the cluster's dir."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        stat = _stat(pid)
        if stat is None or stat[0] in ("Z", "X"):
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if stat[1] == session_id or str(cluster_dir) in cmdline:
            out.append(f"{pid} {cmdline[:120]}")
    return out


def _assert_nothing_left(cluster: FakeCluster) -> None:
    assert cluster.head_proc is not None and cluster.dir is not None
    assert cluster.leftovers == []
    assert _left_behind(cluster.head_proc.pid, cluster.dir) == []


def _gcs_alive(ray_nodes: list[dict[str, Any]]) -> dict[str, bool]:
    return {n["NodeID"]: bool(n["Alive"]) for n in ray_nodes}


def _ends_recorded(cluster: FakeCluster, node_ids: set[str], timeout: float = 60) -> float:
    """Waits until the /proc tracker has recorded the exit of every raylet in ``node_ids``;
    returns the time after that (every recorded exit is before it)."""
    deadline = time.monotonic() + timeout
    while True:
        lifetimes = cluster.lifetimes()
        if all(lifetimes.get(i, (0.0, None))[1] is not None for i in node_ids):
            return time.time()
        assert time.monotonic() < deadline, f"raylets still running: {lifetimes}"
        time.sleep(0.1)


def test_node_types_are_validated() -> None:
    with pytest.raises(TypeError, match="not str"):
        FakeCluster(node_types={"gpu": {"resources": {"GPU": 1}, "labels": {"price": 1.5}}})
    with pytest.raises(ValueError, match="unknown keys"):
        FakeCluster(node_types={"gpu": {"resources": {"GPU": 1}, "max_worker": 2}})
    with pytest.raises(ValueError, match="head"):
        FakeCluster(node_types={"ray.head.default": {"resources": {"CPU": 1}}})


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(150)
def test_gpu_tasks_add_two_nodes_then_idle_removes_them() -> None:
    import ray

    t_test = time.monotonic()
    with FakeCluster(node_types=GPU_TYPE, idle_timeout_s=IDLE_S) as cluster:
        assert cluster.config["available_node_types"]["gpu_a100"]["labels"] == LABELS
        assert cluster.config_path is not None and cluster.config_path.exists()
        assert [n["node_id"] for n in cluster.nodes()] == [HEAD_NODE_ID]
        ray.init(address=cluster.address)
        try:

            @ray.remote(num_gpus=1, num_cpus=1)
            def gpu_task() -> tuple[str, list[str], float]:
                time.sleep(5)
                ctx = ray.get_runtime_context()
                return ctx.get_node_id(), ctx.get_accelerator_ids()["GPU"], time.time()

            t_submit = time.time()
            refs = [gpu_task.remote() for _ in range(2)]
            seen: dict[str, float] = {}  # node id -> when the GCS first showed it alive
            while len(seen) < 2 and time.time() - t_submit < 60:
                for n in cluster.worker_nodes():
                    seen.setdefault(n["node_id"], time.time())
                time.sleep(0.1)
            assert len(seen) == 2, cluster.monitor_log()
            results = ray.get(refs, timeout=60)
            t_done = time.time()

            finished = {node_id: t for node_id, _, t in results}  # when its task ended
            assert set(finished) == set(seen)  # each task on its own new node
            assert all(len(gpus) == 1 for _, gpus, _ in results)
            workers = cluster.worker_nodes()
            assert len(workers) == 2
            for n in workers:
                assert n["labels"].items() >= LABELS.items()
                assert n["resources"]["GPU"] == 1
                assert n["resources"]["accelerator_type:A100"] == 1
                assert n["node_type"] == "gpu_a100"
            by_driver = {n["NodeID"]: n for n in ray.nodes()}
            for node_id in seen:  # the driver's ray.nodes() shows the same labels
                assert by_driver[node_id]["Labels"].items() >= LABELS.items()
                assert by_driver[node_id]["Resources"]["accelerator_type:A100"] == 1

            # idle removal: poll the GCS and note when each node turns dead
            dead_at: dict[str, float] = {}
            while len(dead_at) < 2 and time.time() - t_done < IDLE_S + 30:
                for node_id, alive in _gcs_alive(ray.nodes()).items():
                    if node_id in seen and not alive:
                        dead_at.setdefault(node_id, time.time())
                time.sleep(0.1)
            assert len(dead_at) == 2, cluster.monitor_log()
            cluster.wait_for_nodes(0, timeout=60)  # raises if a worker is still alive
            deaths = {n["NodeID"]: n for n in ray.nodes() if not n["Alive"]}
            reasons = {deaths[i]["DeathReasonMessage"] for i in seen}
            # which one the GCS keeps is a race: the raylet's own graceful exit or the
            # autoscaler's termination; never a missed heartbeat
            assert reasons <= {"Terminated by autoscaler.", "received SIGTERM"}, reasons
        finally:
            ray.shutdown()

        # ground truth from /proc, independent of the GCS
        t_ended = _ends_recorded(cluster, set(seen))
        lifetimes = cluster.lifetimes()
        assert set(lifetimes) == set(seen)
        records = {r["node_id"]: r for r in cluster.node_records()}
        for node_id, (start, end) in lifetimes.items():
            assert end is not None
            # started for the tasks: after they were submitted, before the GCS saw it
            assert t_submit - CLOCK_RES_S <= start < seen[node_id]
            # GCS and /proc agree on the end: the raylet exited and the GCS marked the
            # node dead each after its idle timeout ran out (from when its task ended),
            # and before the test saw both nodes gone
            assert finished[node_id] + IDLE_S - 1 < end <= t_ended
            assert finished[node_id] + IDLE_S - 1 < dead_at[node_id] <= t_ended
            assert records[node_id]["node_type"] == "gpu_a100"

        first = min(seen.values()) - t_submit
        second = max(seen.values()) - t_submit
        removal = [dead_at[i] - finished[i] for i in sorted(seen)]
        lag = [dead_at[i] - lifetimes[i][1] for i in sorted(seen)]  # type: ignore[operator]
        print(
            f"\n[fakecluster] first node {first:.1f} s, second {second:.1f} s after submit; "
            f"tasks done {t_done - t_submit:.1f} s; removed {removal[0]:.1f} / "
            f"{removal[1]:.1f} s after each node's task ended (idle timeout {IDLE_S} s); "
            f"GCS Alive=False vs raylet exit {lag[0]:+.2f} / {lag[1]:+.2f} s; "
            f"death reasons {sorted(reasons)}"
        )
    _assert_nothing_left(cluster)
    print(f"[fakecluster] test wall {time.monotonic() - t_test:.1f} s")


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(150)
def test_request_resources_holds_nodes_until_released() -> None:
    import ray
    from ray.autoscaler.sdk import request_resources

    t_test = time.monotonic()
    with FakeCluster(node_types=GPU_TYPE, idle_timeout_s=IDLE_S) as cluster:
        cluster.connect()
        try:
            t0 = time.time()
            request_resources(bundles=[{"CPU": 1, "GPU": 1}] * 2)  # no task exists
            up = cluster.wait_for_nodes(2, timeout=60)
            t_up = time.time()
            # the request holds them past the idle timeout
            time.sleep(IDLE_S + 2)
            assert len(cluster.worker_nodes()) == 2
            held = {n["node_id"] for n in cluster.worker_nodes()}
            t_release = time.time()
            request_resources(bundles=[])
            gone = cluster.wait_for_nodes(0, timeout=IDLE_S + 30)
        finally:
            ray.shutdown()
        t_ended = _ends_recorded(cluster, held)
        lifetimes = cluster.lifetimes()
        assert set(lifetimes) == held
        for start, end in lifetimes.values():
            assert t0 - CLOCK_RES_S <= start < t_up  # started for the request
            assert end is not None and t_release < end <= t_ended  # removed once released
        print(
            f"\n[fakecluster] request_resources: 2 nodes up in {up:.1f} s, none before; "
            f"held {IDLE_S + 2:.0f} s idle; bundles=[] -> removed in {gone:.1f} s"
        )
    _assert_nothing_left(cluster)
    print(f"[fakecluster] test wall {time.monotonic() - t_test:.1f} s")


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_killed_node_ends_its_lifetime_and_the_gcs_marks_it_dead() -> None:
    import ray
    from ray.autoscaler.sdk import request_resources

    with FakeCluster(node_types=GPU_TYPE, idle_timeout_s=IDLE_S) as cluster:
        cluster.connect()
        try:
            request_resources(bundles=[{"CPU": 1, "GPU": 1}])
            cluster.wait_for_nodes(1, timeout=60)
            request_resources(bundles=[])  # so the autoscaler does not replace it
            (node,) = cluster.worker_nodes()
            node_id = node["node_id"]
            t_kill = time.time()
            assert cluster.kill_node(node_id)
            while _gcs_alive(ray.nodes()).get(node_id) and time.time() - t_kill < 60:
                time.sleep(0.1)
            t_dead = time.time()
            death = next(n for n in ray.nodes() if n["NodeID"] == node_id)
        finally:
            ray.shutdown()
        assert not death["Alive"]
        assert "heartbeat" in death["DeathReasonMessage"]
        t_ended = _ends_recorded(cluster, {node_id})
        _, end = cluster.lifetimes()[node_id]
        assert end is not None and t_kill <= end <= t_ended  # ended by the kill
        print(f"\n[fakecluster] SIGKILLed raylet: GCS Alive=False after {t_dead - t_kill:.1f} s")
    _assert_nothing_left(cluster)


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_body_raising_midway_still_stops_everything() -> None:
    import ray
    from ray.autoscaler.sdk import request_resources

    cluster = FakeCluster(node_types=GPU_TYPE, idle_timeout_s=IDLE_S)
    with pytest.raises(RuntimeError, match="midway"), cluster:
        cluster.connect()
        request_resources(bundles=[{"CPU": 1, "GPU": 1}])
        cluster.wait_for_nodes(1, timeout=60)
        raise RuntimeError("midway")  # the driver is still connected, a node is up
    assert not ray.is_initialized()  # stop() disconnected the driver
    _assert_nothing_left(cluster)
    assert cluster.stop_report["swept"] == []  # the orderly steps stopped it all
    assert cluster.dir is not None and cluster.dir.exists()  # kept, for its logs
    shutil.rmtree(cluster.dir)


_OWNER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {root!r})
    import ray
    from ray.autoscaler.sdk import request_resources
    from tests.fakecluster import FakeCluster
    cluster = FakeCluster(node_types={types!r}, idle_timeout_s=60).start()
    cluster.connect()
    request_resources(bundles=[{{"CPU": 1, "GPU": 1}}])
    cluster.wait_for_nodes(1, timeout=60)
    print("READY", cluster.head_proc.pid, cluster.dir, flush=True)
    time.sleep(300)
    """
)


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(150)
def test_owner_killed_leaves_nothing_behind() -> None:
    """SIGKILL the process that owns a cluster with a worker node: its watchdog cleans up."""
    root = str(Path(__file__).resolve().parents[1])
    code = _OWNER.format(root=root, types=GPU_TYPE)
    owner = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    session_id, cluster_dir = 0, Path("/nonexistent")
    try:
        assert owner.stdout is not None
        for line in owner.stdout:
            if line.startswith("READY"):
                _, sid, d = line.split()
                session_id, cluster_dir = int(sid), Path(d)
                break
        assert session_id, "the owner never got its node up"
        assert len(_left_behind(session_id, cluster_dir)) > 5  # head + a fake node
        t_kill = time.monotonic()
        owner.kill()
        owner.wait(timeout=10)
        left = _left_behind(session_id, cluster_dir)
        while left and time.monotonic() - t_kill < 30:
            time.sleep(0.2)
            left = _left_behind(session_id, cluster_dir)
        assert left == []
        print(f"\n[fakecluster] owner SIGKILLed: all gone in {time.monotonic() - t_kill:.1f} s")
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait(timeout=10)
        for entry in _left_behind(session_id, cluster_dir) if session_id else []:
            os.kill(int(entry.split()[0]), signal.SIGKILL)  # by PID: this test's own
        if cluster_dir.name.startswith("fkc-"):
            shutil.rmtree(cluster_dir, ignore_errors=True)
