"""Fractional-GPU trials: 0.5-GPU trials are packed two to a (logical) GPU.

Ray's GPUs are logical here: `num_gpus=2` on this CPU-only machine makes Ray schedule GPU
trials as if the GPUs existed. What is checked is the scheduling: with two GPUs and 0.5 GPU
per trial (and CPUs for eight), four trials run at once, two on each GPU, never more; the
count comes from the trials' own start and end times. The trainable holds each trial until
the others of its group of four have started (tests/integration/timed_trainable.py), so
how slowly Ray starts workers on a loaded machine does not decide the overlap; a scheduler
that packed fewer would leave the group waiting out ``wait_s`` and the count short.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tuner import rundir
from tuner._ray.cluster import RayOptions, max_concurrent_trials
from tuner._ray.driver import run_campaign
from tuner.spec import parse_campaign

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[2]
GPUS = 2
GPU_PER_TRIAL = 0.5
PACK = int(GPUS / GPU_PER_TRIAL)  # 4 trials at once: two per GPU
TRIALS = 2 * PACK


def _peak(spans: list[tuple[float, float, str]]) -> tuple[int, list[str]]:
    """Most trials running at one moment, and the GPU ids of those trials then.

    A trial that ends at the very moment another starts does not overlap it."""
    events = sorted(
        [(start, 1, i) for i, (start, _, _) in enumerate(spans)]
        + [(end, 0, i) for i, (_, end, _) in enumerate(spans)]
    )
    running: set[int] = set()
    peak, at_peak = 0, []
    for _, starts, i in events:
        if starts:
            running.add(i)
            if len(running) > peak:
                peak, at_peak = len(running), [spans[j][2] for j in running]
        else:
            running.discard(i)
    return peak, at_peak


def test_half_gpu_trials_pack_two_to_a_gpu(tmp_path: Path) -> None:
    started = tmp_path / "started"
    started.mkdir()
    data = {
        "name": "half-gpu",
        "trainable": "tests.integration.timed_trainable:train",
        "metric": "val_acc",
        "mode": "max",
        "space": {"x": {"type": "float", "low": 0.0, "high": 1.0}},
        "budget": {"trials": TRIALS, "max_epochs": 2},
        "scheduler": {"type": "fifo"},
        "resources": {"cpu": 0.25, "gpu": GPU_PER_TRIAL},
        "fixed": {"started_dir": str(started), "pack": PACK, "trials": TRIALS, "wait_s": 30},
    }
    rundir.add_code_dirs([str(ROOT)])  # the driver and the local Ray workers import it
    spec = parse_campaign(data, "half.yaml")
    # The GPUs are the limit (the CPUs fit 8 trials).
    assert max_concurrent_trials(spec, {"CPU": 2.0, "GPU": float(GPUS)}) == PACK
    run_dir = tmp_path / "runs" / spec.name
    result = run_campaign(spec, run_dir, RayOptions(num_cpus=2, num_gpus=GPUS))
    assert result.summary["trials_run"] == TRIALS

    spans = []
    for trial_dir in run_dir.glob("trial_*"):
        last = json.loads((trial_dir / "result.json").read_text().splitlines()[-1])
        spans.append((last["t_start"], last["t_end"], last["gpu_ids"]))
    assert len(spans) == TRIALS
    # Each trial got one GPU id of the two (half of it).
    assert {gpu for _, _, gpu in spans} == {str(i) for i in range(GPUS)}, spans
    peak, gpus_at_peak = _peak(spans)
    assert peak == PACK, f"{peak} trials at once, expected {PACK}: {sorted(spans)}"
    # At that moment each GPU held two trials.
    assert Counter(gpus_at_peak) == {str(i): PACK // GPUS for i in range(GPUS)}, gpus_at_peak
