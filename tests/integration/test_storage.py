"""Tune's experiment in a storage URI (here file://, the same pyarrow path as s3:// or gs://)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import tiny_digits_campaign
from tuner._ray.cluster import RayOptions
from tuner._ray.driver import resume_campaign, run_campaign
from tuner.spec import parse_campaign

pytestmark = pytest.mark.ray


def test_checkpoints_and_run_files_land_in_the_storage_uri(tmp_path: Path) -> None:
    spec = parse_campaign(
        tiny_digits_campaign(budget={"trials": 3, "max_epochs": 2}), "storage.yaml"
    )
    run_dir = tmp_path / "runs" / spec.name
    store = tmp_path / "bucket" / "tuner"
    result = run_campaign(spec, run_dir, RayOptions(num_cpus=2), storage=f"file://{store}")
    assert result.summary["status"] == "completed"
    remote = store / spec.name
    # Tune wrote its state and the trials' checkpoints there, not in the run folder...
    assert list(remote.glob("experiment_state-*.json"))
    checkpoints = list(remote.glob("trial_*/checkpoint_*"))
    assert checkpoints, "no checkpoint in the storage URI"
    assert not list(run_dir.glob("trial_*/checkpoint_*"))
    # ...and the run folder's own files were copied next to them.
    for name in ("study.db", "ledger.json", "summary.json", "campaign.yaml", "best.yaml"):
        assert (remote / name).is_file(), name
    # A resume finds the experiment in the storage URI (nothing left to run).
    again = resume_campaign(run_dir, RayOptions(num_cpus=2))
    assert again.summary["trials_finished"] == 3
