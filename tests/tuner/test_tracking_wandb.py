"""The campaign's W&B run without a campaign: written offline (no network, no API key) into
a run folder, then written again as a resumed campaign's second end does, and read back from
W&B's offline run files (tests/wandb_records.py)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.wandb_records import read_run
from tuner.spec import WandbMode, WandbTracking
from tuner.tracking import TRACKING_FILE
from tuner.tracking_wandb import CAMPAIGN_JOB, write_campaign_run

SETTINGS = WandbTracking(project="tuner-unit", mode=WandbMode.OFFLINE)


def _summary(status: str, params: dict[str, Any], value: float, usd: float) -> dict[str, Any]:
    return {
        "status": status,
        "trials_run": 4,
        "trials_finished": 3,
        "best": {"params": params, "value": value, "tune_trial_id": "t1"},
        "budget": {"usd": usd},
    }


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A run folder with a report and an MLflow record, as a campaign leaves it."""
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    folder = tmp_path / "digits-2"
    folder.mkdir()
    for name in ("report.md", "report.html", "best.yaml"):
        (folder / name).write_text(f"{name} of the first end\n")
    (folder / TRACKING_FILE).write_text(json.dumps({"mlflow": {"run_id": "abc"}}))
    return folder


def _campaign_runs(run_dir: Path) -> list[dict[str, Any]]:
    runs = [read_run(p) for p in sorted(run_dir.glob("wandb/offline-run-*/run-*.wandb"))]
    return [r for r in runs if r["job_type"] == CAMPAIGN_JOB]


def test_a_second_end_rewrites_the_one_campaign_run(run_dir: Path) -> None:
    first = _summary("stopped: tuner stop", {"lr": 0.1, "layers": 2, "dropout": 0.3}, 0.8, 1.5)
    (run_dir / "summary.json").write_text(json.dumps(first))
    write_campaign_run(SETTINGS, run_dir, first)
    [run] = _campaign_runs(run_dir)
    assert (run["project"], run["group"], run["name"]) == ("tuner-unit", "digits-2", "digits-2")
    assert run["config"]["best"] == first["best"]["params"]
    assert run["summary"]["status"] == "stopped: tuner stop"
    record = json.loads((run_dir / TRACKING_FILE).read_text())
    assert record["mlflow"] == {"run_id": "abc"} and record["wandb"]["run_id"] == run["id"]
    run_id = run["id"]

    # The resumed campaign ends again: a better trial without the conditional `dropout`.
    second = _summary("completed", {"lr": 0.05, "layers": 3}, 0.9, 2.25)
    (run_dir / "summary.json").write_text(json.dumps(second))
    (run_dir / "report.md").write_text("report.md of the second end\n")
    write_campaign_run(SETTINGS, run_dir, second)
    [run] = _campaign_runs(run_dir)  # the first end's offline folder is gone
    assert run["id"] == run_id
    assert run["config"]["best"] == {"lr": 0.05, "layers": 3}
    assert {k: run["summary"][k] for k in ("status", "best_value", "cost_usd", "trials_run")} == {
        "status": "completed",
        "best_value": 0.9,
        "cost_usd": 2.25,
        "trials_run": 4,
    }
    [artifact] = run["artifacts"]
    assert artifact["type"] == "report" and artifact["name"] == "digits-2-report"
    assert set(artifact["files"]) == {"report.md", "report.html", "best.yaml", "summary.json"}
    copy = Path(artifact["files"]["report.md"]["local_path"])
    assert copy.read_text() == "report.md of the second end\n"
    assert copy.is_relative_to(run_dir / "wandb")


def test_a_missing_wandb_is_logged_and_the_campaign_goes_on(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "wandb", None)  # what an uninstalled package imports as
    with caplog.at_level(logging.WARNING, logger="tuner.tracking_wandb"):
        write_campaign_run(SETTINGS, run_dir, _summary("completed", {"lr": 0.1}, 0.8, 1.0))
    assert "the campaign's W&B run was not written" in caplog.text
    assert "pip install 'tuner[wandb]'" in caplog.text
    assert not (run_dir / "wandb").exists()
