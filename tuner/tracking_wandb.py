"""The campaign in W&B: one run in its trials' group, written when the campaign ends.

W&B has no parent runs; a campaign's trials are a run group (:mod:`tuner._ray.tracking`),
and the campaign is one more run in that group, of job type ``campaign``, named after the
run folder. It holds the best trial's configuration (config ``best``), and in its summary
the best value, the trial counts, the spend (``cost_usd``) and the status; the report
(``report.html``, ``report.md``, ``summary.json``, ``best.yaml``...) is attached as an
artifact of type ``report``.

A resumed campaign that ends again writes the same run again: its id is made at the first
end and kept in the run folder's ``tracking.json``, and W&B resumes it (``resume="allow"``),
so W&B has one campaign run, which the last end set. Offline, each write is a folder of
its own (``offline-run-*-<id>``): the earlier one is removed once the new one is written,
so ``wandb sync`` uploads one campaign run, the latest.

Pure of Ray; W&B is imported only when the campaign ends with W&B tracking on
(``tuner[wandb]``).
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

from tuner import atomic
from tuner.spec import WandbMode, WandbTracking
from tuner.tracking import ATTACHED, TRACKING_FILE, require

__all__ = ["CAMPAIGN_JOB", "REPORT_TYPE", "wandb_folder", "wandb_group", "write_campaign_run"]

logger = logging.getLogger(__name__)

CAMPAIGN_JOB = "campaign"
"""The campaign run's W&B job type (its trials' runs have none)."""
REPORT_TYPE = "report"
"""The W&B artifact type of the campaign's report."""
REPORT_DIR = "report"
"""The report's copy inside the campaign's W&B run folder, which the artifact refers to."""


def wandb_folder(settings: WandbTracking, run_dir: Path) -> Path:
    """Where W&B writes its run files (under ``<folder>/wandb/``): ``dir``, else the run
    folder."""
    return Path(settings.dir) if settings.dir else run_dir


def wandb_group(settings: WandbTracking, run_dir: Path) -> str:
    """The campaign's W&B run group: ``group``, else the run folder's name."""
    return settings.group or run_dir.name


def _artifact_name(run_dir: Path) -> str:
    """The report artifact's name: W&B allows letters, digits, ``-``, ``_`` and ``.``."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", f"{run_dir.name}-report")


def _config(summary: dict[str, Any]) -> dict[str, Any]:
    """The campaign run's config: the best trial's parameters under ``best`` (one key, so
    a later end replaces the whole configuration, not key by key)."""
    best = summary.get("best")
    return {"best": dict(best.get("params", {})) if best is not None else {}}


def _summary(summary: dict[str, Any]) -> dict[str, Any]:
    """The campaign run's summary: best value and trial, trial counts, spend and status."""
    out: dict[str, Any] = {
        "trials_run": int(summary.get("trials_run", 0)),
        "trials_finished": int(summary.get("trials_finished", 0)),
        "status": str(summary.get("status", "")),
    }
    best = summary.get("best")
    if best is not None:
        out["best_value"] = float(best["value"])
        out["best_trial"] = str(best.get("tune_trial_id", ""))
    budget = summary.get("budget") or {}
    if isinstance(budget.get("usd"), (int, float)):
        out["cost_usd"] = float(budget["usd"])
    return out


def _record(run_dir: Path) -> dict[str, Any]:
    path = run_dir / TRACKING_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def write_campaign_run(settings: WandbTracking, run_dir: Path, summary: dict[str, Any]) -> None:
    """Writes the campaign's W&B run (see the module's notes) from ``summary`` (the run
    folder's ``summary.json``) and the report files in ``run_dir``. A tracker that fails
    here is logged; the campaign's results are saved."""
    try:
        _write(settings, run_dir, summary)
    except Exception:  # the tracker is a copy; summary.json and the report are the record
        logger.warning("the campaign's W&B run was not written", exc_info=True)


def _write(settings: WandbTracking, run_dir: Path, summary: dict[str, Any]) -> None:
    wandb = require("wandb", "wandb", "tracking: wandb")
    record = _record(run_dir)
    earlier: dict[str, Any] = record.get("wandb") or {}
    run_id = earlier.get("run_id") or uuid.uuid4().hex[:12]
    folder = wandb_folder(settings, run_dir)
    folder.mkdir(parents=True, exist_ok=True)
    run = wandb.init(
        project=settings.project,
        group=wandb_group(settings, run_dir),
        job_type=CAMPAIGN_JOB,
        name=run_dir.name,
        id=run_id,
        resume="allow",
        mode=settings.mode.value,
        dir=str(folder.resolve()),
        config=_config(summary),
        reinit="create_new",
        settings=wandb.Settings(silent=True),
    )
    sync_dir = Path(run.settings.sync_dir)
    run.summary.update(_summary(summary))
    # The artifact's files are copies in the run's own folder (W&B's default stages them
    # in the user's data folder, outside the run folder): `wandb sync` finds them there.
    copies = sync_dir / REPORT_DIR
    copies.mkdir(parents=True, exist_ok=True)
    artifact = wandb.Artifact(_artifact_name(run_dir), type=REPORT_TYPE)
    for name in ATTACHED:
        if (run_dir / name).is_file():
            shutil.copy2(run_dir / name, copies / name)
            artifact.add_file(str(copies / name), name=name, policy="immutable")
    run.log_artifact(artifact)
    run.finish()
    # finish() can return before W&B's service has written the run file out; the
    # campaign's end is the driver's, so the service is shut down here (it flushes).
    wandb.teardown()
    offline = settings.mode is WandbMode.OFFLINE
    mine = {"run_id": run_id, **({"offline_dir": str(sync_dir)} if offline else {})}
    atomic.write_json(run_dir / TRACKING_FILE, {**record, "wandb": mine})
    superseded = earlier.get("offline_dir")
    if offline and superseded and Path(superseded) != sync_dir:
        shutil.rmtree(superseded, ignore_errors=True)
