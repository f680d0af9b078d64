"""Fractional-GPU trials: two 0.5-GPU trials share one (logical) GPU at the same time.

Ray's GPUs are logical here: `num_gpus=1` on this CPU-only machine makes Ray schedule GPU
trials as if the GPU existed. What is checked is the scheduling: with one GPU and 0.5 GPU per
trial, two trials run at once (their wall-clock spans overlap).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from tuner import rundir
from tuner._ray.cluster import RayOptions, max_concurrent_trials
from tuner._ray.driver import run_campaign
from tuner.spec import parse_campaign

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[2]


def test_half_gpu_trials_share_one_gpu(tmp_path: Path) -> None:
    data = {
        "name": "half-gpu",
        "trainable": "tests.integration.timed_trainable:train",
        "metric": "val_acc",
        "mode": "max",
        "space": {"x": {"type": "float", "low": 0.0, "high": 1.0}},
        "budget": {"trials": 4, "max_epochs": 2},
        "scheduler": {"type": "fifo"},
        "resources": {"cpu": 0.5, "gpu": 0.5},
    }
    rundir.add_code_dirs([str(ROOT)])  # the driver and the local Ray workers import it
    spec = parse_campaign(data, "half.yaml")
    assert max_concurrent_trials(spec, {"CPU": 2.0, "GPU": 1.0}) == 2  # the GPU is the limit
    run_dir = tmp_path / "runs" / spec.name
    result = run_campaign(spec, run_dir, RayOptions(num_cpus=2, num_gpus=1))
    assert result.summary["trials_run"] == 4

    spans = []
    for trial_dir in run_dir.glob("trial_*"):
        last = json.loads((trial_dir / "result.json").read_text().splitlines()[-1])
        spans.append((last["t_start"], last["t_end"]))
    spans.sort()
    overlaps = [b[0] < a[1] for a, b in itertools.pairwise(spans)]
    assert any(overlaps), f"no two 0.5-GPU trials ran at once: {spans}"
