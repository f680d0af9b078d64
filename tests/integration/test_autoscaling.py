"""Campaigns on Ray's real autoscaler (``fake_multinode`` provider, logical GPUs).

The head has no GPU, so every trial (1 CPU, 1 GPU) needs a GPU worker node that the
autoscaler must add; the campaign asks for its capacity at start and releases it at the
end, so the nodes go away after the idle timeout. The ledger prices each node by its
``tuner.io/usd-per-hour`` label and is checked against the nodes' lifetimes as /proc
saw their raylets (tests/fakecluster.py), independently of Ray.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tests.conftest import tiny_digits_campaign
from tests.fakecluster import FakeCluster
from tuner import rundir
from tuner._ray.cluster import RayOptions
from tuner._ray.driver import run_campaign
from tuner.finish import Status
from tuner.spec import parse_campaign

pytestmark = [pytest.mark.ray, pytest.mark.slow]

RATE = 3.6  # $/h per GPU node: a tenth of a cent a second
NODE_TYPES = {
    "gpu": {
        "resources": {"CPU": 1, "GPU": 1, "accelerator_type:A100": 1},
        "labels": {"tuner.io/usd-per-hour": str(RATE)},
        "min_workers": 0,
        "max_workers": 2,
    }
}
GPU_TRIAL = {"cpu": 1, "gpu": 1}


def _ledger(run_dir: Path) -> dict:
    return json.loads((run_dir / "ledger.json").read_text())


def test_autoscaled_campaign_then_a_budget_that_runs_out(tmp_path: Path) -> None:
    with FakeCluster(node_types=NODE_TYPES, head_resources={"CPU": 1}, idle_timeout_s=6) as cluster:
        options = RayOptions(address=cluster.address, cluster_config=cluster.config_path)
        spec = parse_campaign(
            tiny_digits_campaign(
                name="fake-gpu", budget={"trials": 6, "max_epochs": 3}, resources=GPU_TRIAL
            ),
            "fake-gpu.yaml",
        )
        run_dir = tmp_path / "runs" / spec.name
        result = run_campaign(spec, run_dir, options)
        assert result.summary["status"] == "completed"
        assert result.summary["trials_finished"] == 6

        ledger = _ledger(run_dir)
        gpu_nodes = [n for n in ledger["nodes"] if n["gpus"] > 0]
        assert len(gpu_nodes) == 2, "the autoscaler did not add GPU nodes up to the cap"
        assert {n["rate_source"] for n in gpu_nodes} == {"label tuner.io/usd-per-hour"}
        assert {n["usd_per_hour"] for n in gpu_nodes} == {RATE}
        # Node lifetimes: Ray's GCS stamps a node's start when its raylet registers, ~1-2 s
        # after the raylet process starts (what /proc sees), so the ledger starts a node a
        # few seconds late and never early. The lag is the raylet's start-up and grows
        # under CPU contention: 1.8-2.1 s beside a training bench on 2 cores, 3.03 s in
        # one full-suite run beside it; 5 s bounds it with room.
        truth = cluster.lifetimes()
        session_start = ledger["sessions"][0][0]
        late = {
            n["node_id"]: round(n["start"] - max(truth[n["node_id"]][0], session_start), 2)
            for n in gpu_nodes
        }
        assert all(-0.5 <= s <= 5.0 for s in late.values()), f"ledger start - raylet start: {late}"
        usd = ledger["totals"]["usd"]
        node_s = sum(
            (n["end"] or n["last_seen"]) - n["start"] for n in ledger["nodes"] if n["gpus"] > 0
        )
        assert usd == pytest.approx(node_s * RATE / 3600, rel=0.02)

        # Capacity was released: the idle GPU nodes go away after the idle timeout.
        deadline = time.monotonic() + 60
        while cluster.worker_nodes() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not cluster.worker_nodes(), "idle GPU nodes were not removed"

        # Too small a budget: ends for its budget, with what it finished intact.
        broke = parse_campaign(
            tiny_digits_campaign(
                name="fake-broke",
                # Enough trials that the 2 cents run out first, however fast trials turn
                # over (30 once all finished inside it on a quick CI machine).
                budget={"trials": 300, "max_epochs": 4, "usd": 0.02},
                resources=GPU_TRIAL,
            ),
            "fake-broke.yaml",
        )
        broke_dir = tmp_path / "runs" / broke.name
        summary = run_campaign(broke, broke_dir, options).summary
        assert summary["status"] in (Status.BUDGET_EXHAUSTED, Status.HELD_BACK), summary["status"]
        assert summary["trials_run"] < broke.budget.trials
        spent = _ledger(broke_dir)["totals"]["usd"]
        assert spent <= 0.02 * 1.5, spent
        study = optuna.load_study(study_name=broke.name, storage=rundir.study_url(broke_dir))
        assert TrialState.RUNNING not in {t.state for t in study.trials}
        for trial in study.trials:
            if trial.state is TrialState.COMPLETE:
                assert sorted(trial.intermediate_values) == [1, 2, 3, 4]
            if trial.intermediate_values:
                folder = broke_dir / f"trial_{trial.user_attrs['tune_trial_id']}"
                assert list(folder.glob("checkpoint_*")), f"{folder} has no checkpoint"
