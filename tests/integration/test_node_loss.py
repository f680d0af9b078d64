"""A worker node lost mid-campaign (Ray's multi-node test cluster, ``ray.cluster_utils``).

A head that runs no trials and two one-CPU worker nodes; four FIFO trials, two at a time,
checkpointing every epoch. When both workers are busy and a trial is past its second
epoch, one worker node is killed (SIGKILL, no graceful shutdown: a lost spot instance)
and a fresh node joins, as the autoscaler would replace it. The trials it ran continue
from their latest checkpoint on the other nodes; the campaign completes; every trial ends
at its final epoch; no epoch is missing, and the Optuna study holds each epoch once.

At most one epoch per lost trial runs twice, and that is Tune's design, not ours. A
function trainable's checkpoint is on disk when ``train.report`` returns, but Tune
registers it only after a second round trip to the actor (``save``), and it logs the
result before that. If the node dies between the two, Tune restores the checkpoint
before, and the epoch in flight runs again. The test allows exactly that.
"""

from __future__ import annotations

import io
import itertools
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tuner import rundir
from tuner._ray.cluster import RayOptions
from tuner._ray.driver import run_campaign
from tuner._ray.snapshot import BACKUP_DIR, STAGING_FILE
from tuner.spec import parse_campaign
from tuner.study import open_study

pytestmark = [pytest.mark.ray, pytest.mark.slow]

MAX_EPOCHS = 8

CAMPAIGN: dict[str, Any] = {
    "name": "node-loss",
    "trainable": "tabular_mlp",
    "metric": "val_loss",
    "mode": "min",
    "space": {"lr": {"type": "float", "low": 1e-3, "high": 1e-1, "log": True}},
    "budget": {"trials": 4, "max_epochs": MAX_EPOCHS},
    "scheduler": {"type": "fifo"},
    "sampler": {"type": "random", "seed": 0},
    "resources": {"cpu": 1, "gpu": 0, "max_concurrent": 2},
    "checkpoint": {"every": 1, "keep": 2},
    "failure": {"max_retries": 3},
    # ~0.15 s epochs here: long enough to be killed mid-trial, short enough for CI.
    "fixed": {"batch_size": 4, "hidden": 32, "layers": 2},
}


def _rows(path: Path) -> list[dict[str, Any]]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, json.JSONDecodeError):
        return []


def _runs(rows: list[dict[str, Any]]) -> list[list[int]]:
    """The epochs each run of a trial reported; a restored run restarts the count at 1."""
    runs: list[list[int]] = []
    for row in rows:
        if row["iterations_since_restore"] == 1 or not runs:
            runs.append([])
        runs[-1].append(row["epoch"])
    return runs


def _running_past_epoch_2(run_dir: Path) -> int:
    """Trials with >= 2 epochs reported and not at their last epoch yet.

    Read where the driver's loggers write each result as it arrives (the staging folder the
    snapshot guard records): the run folder gets the logs with Tune's next snapshot, by
    when a trial seen at epoch 3 there may have finished.
    """
    try:
        logs = Path((run_dir / BACKUP_DIR / STAGING_FILE).read_text().strip())
    except FileNotFoundError:
        return 0
    busy = 0
    for path in logs.glob("trial_*/result.json"):
        epochs = [r.get("epoch", 0) for r in _rows(path)]
        if epochs and 2 <= max(epochs) < MAX_EPOCHS:
            busy += 1
    return busy


def test_a_killed_worker_node_costs_no_trial_and_no_epoch(tmp_path: Path) -> None:
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    outcome: dict[str, Any] = {}
    try:
        first = cluster.add_node(num_cpus=1)
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        spec = parse_campaign(CAMPAIGN, "node-loss.yaml")
        run_dir = tmp_path / "runs" / spec.name

        def campaign() -> None:
            # The driver runs here; Ray starts nodes only from the main thread (signals).
            try:
                outcome["result"] = run_campaign(
                    spec, run_dir, RayOptions(address=cluster.address), stream=io.StringIO()
                )
            except BaseException as exc:  # re-raised in the test's thread below
                outcome["error"] = exc

        driver = threading.Thread(target=campaign, daemon=True)
        driver.start()
        deadline = time.time() + 120
        while driver.is_alive() and time.time() < deadline:
            if _running_past_epoch_2(run_dir) >= 2:  # both worker nodes run a trial
                cluster.remove_node(first, allow_graceful=False)
                outcome["killed"] = time.time()
                cluster.add_node(num_cpus=1)  # the replacement, as the autoscaler would
                break
            time.sleep(0.05)
        driver.join(timeout=180)
        assert not driver.is_alive(), "the campaign did not finish after the node loss"
    finally:
        cluster.shutdown()
    if "error" in outcome:
        raise outcome["error"]

    assert "killed" in outcome, "the campaign ended before a node could be killed mid-trial"
    summary = outcome["result"].summary
    assert summary["status"] == "completed"
    assert summary["trials_finished"] == 4
    # Each trial's results: epochs 1..MAX_EPOCHS in order, none missing; a restored run
    # picks up at the epoch after its checkpoint, or redoes the one epoch in flight.
    restored = 0
    for path in sorted(run_dir.glob("trial_*/result.json")):
        rows = _rows(path)
        runs = _runs(rows)
        assert sorted({e for run in runs for e in run}) == list(range(1, MAX_EPOCHS + 1)), path
        for before, after in itertools.pairwise(runs):
            assert after[0] in (before[-1], before[-1] + 1), (path, runs)
        assert all(run == list(range(run[0], run[-1] + 1)) for run in runs), (path, runs)
        restored += len(runs) > 1
    assert restored >= 1, "no trial was restored from a checkpoint after the node loss"
    # The study: four COMPLETE trials, each with one value per epoch.
    study = open_study(run_dir)
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * 4
    for trial in study.trials:
        assert sorted(trial.intermediate_values) == list(range(1, MAX_EPOCHS + 1))
    assert json.loads((run_dir / rundir.SUMMARY_FILE).read_text())["trials_finished"] == 4
