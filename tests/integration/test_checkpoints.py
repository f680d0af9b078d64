"""Checkpoint retention: ``checkpoint.keep`` keeps each trial's most recent checkpoints.

The most recent, not the best scoring: a resume continues from the checkpoint Tune's last
experiment snapshot names, and Tune syncs that snapshot every ``keep`` checkpoints of a
trial on the premise that the ``keep`` newest are on disk. Ranked by score, a checkpoint a
snapshot names could be deleted one epoch later, when it ranked below the older best: a
driver killed then resumed the trial from a checkpoint that no longer existed, and the
trial failed (seen in CI as a FAIL in tests/integration/test_resume.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuner import rundir
from tuner._ray.cluster import RayOptions
from tuner._ray.driver import run_campaign
from tuner.spec import parse_campaign

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[2]


def test_keep_holds_the_newest_checkpoints_even_when_older_ones_scored_better(
    tmp_path: Path,
) -> None:
    data = {
        "name": "worsening",
        "trainable": "tests.integration.worsening_trainable:train",
        "metric": "val_acc",
        "mode": "max",
        "space": {"x": {"type": "float", "low": 0.5, "high": 1.0}},
        "budget": {"trials": 2, "max_epochs": 5},
        "scheduler": {"type": "fifo"},
        "resources": {"cpu": 1, "gpu": 0},
        "checkpoint": {"every": 1, "keep": 2},
    }
    rundir.add_code_dirs([str(ROOT)])  # the driver and the local Ray workers import it
    spec = parse_campaign(data, "worsening.yaml")
    run_dir = tmp_path / "runs" / spec.name
    result = run_campaign(spec, run_dir, RayOptions(num_cpus=2))
    assert result.summary["trials_run"] == 2

    trial_dirs = sorted(run_dir.glob("trial_*"))
    assert len(trial_dirs) == 2
    for trial_dir in trial_dirs:
        kept = sorted(
            json.loads((ckpt / "state.json").read_text())["epoch"]
            for ckpt in trial_dir.glob("checkpoint_*")
        )
        assert kept == [4, 5], (trial_dir.name, kept)
