"""The campaign in the experiment trackers: MLflow's parent run, and the optional extras.

Each trial is a run of its own, logged by Ray Tune's MLflow and W&B callbacks
(:mod:`tuner._ray.tracking`). The campaign is MLflow's parent of those runs: started with the
campaign (its file attached), reopened by a resume (its id is kept in the run folder's
``tracking.json``, so a resume adds to it rather than starting another) and, at the end,
given the best configuration and value, the spend, the status and the report.

Pure of Ray; MLflow is imported only when a campaign tracks to it (``tuner[mlflow]``).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from tuner import atomic, rundir
from tuner.errors import TunerError
from tuner.finish import Status
from tuner.spec import CampaignSpec, MlflowTracking, WandbMode

__all__ = [
    "ATTACHED",
    "MLFLOW_DB",
    "PARENT_TAG",
    "TRACKING_FILE",
    "ParentRun",
    "check_store",
    "close_parent_run",
    "mlflow_uri",
    "open_parent_run",
    "require",
    "wandb_environment",
]

logger = logging.getLogger(__name__)

TRACKING_FILE = "tracking.json"
"""The run folder's record of its tracker runs: MLflow's parent run (uri, experiment and
run ids) and the campaign's W&B run (:mod:`tuner.tracking_wandb`)."""
MLFLOW_DB = "mlflow.db"
"""The run folder's MLflow store when ``tracking.mlflow.tracking_uri`` is not set."""
ARTIFACTS_DIR = "mlartifacts"
"""Artifacts of a SQLite MLflow store, beside its database file."""
PARENT_TAG = "mlflow.parentRunId"
"""MLflow's tag that nests a run under another (its UI shows trials under the campaign)."""
CAMPAIGN_TAG = "tuner.campaign"
ATTACHED = (
    rundir.CAMPAIGN_FILE,
    rundir.SUMMARY_FILE,
    rundir.BEST_FILE,
    "report.html",
    "report.md",
    "report.json",
)
"""Run-folder files attached to the campaign's run at the end, those that exist."""


def require(module: str, extra: str, what: str) -> ModuleType:
    """``module`` imported, or a TunerError naming the extra that installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise TunerError(
            f"{what} needs the Python package {module!r}, which is not installed",
            fix=f"pip install 'tuner[{extra}]'",
        ) from None


def mlflow_uri(settings: MlflowTracking, run_dir: Path) -> str:
    """The tracking URI trials and the campaign log to: the file's, else the run folder's
    SQLite store (MLflow 3 keeps its plain-file store for existing data only)."""
    if settings.tracking_uri is not None:
        return settings.tracking_uri
    return f"sqlite:///{(run_dir / MLFLOW_DB).resolve()}"


def _artifact_location(uri: str) -> str | None:
    """Where a new experiment in a SQLite store keeps artifacts: beside the database
    (MLflow's default, ``./mlruns``, is relative to whatever folder the driver runs in)."""
    if not uri.startswith("sqlite:///"):
        return None
    db = Path(uri.removeprefix("sqlite:///"))
    return (db.parent / ARTIFACTS_DIR).resolve().as_uri()


@dataclass(frozen=True)
class ParentRun:
    """The campaign's MLflow run, the parent of its trials' runs."""

    tracking_uri: str
    experiment_id: str
    experiment: str
    run_id: str


def open_parent_run(spec: CampaignSpec, run_dir: Path) -> ParentRun | None:
    """The campaign's parent run: started (and recorded in ``tracking.json``) for a new
    campaign, reopened for a resumed one; None when the campaign does not track to MLflow.

    Raises:
        TunerError: MLflow is not installed, or its store refuses the URI (MLflow 3 refuses
            a plain-file store unless ``MLFLOW_ALLOW_FILE_STORE=true``).
    """
    settings = spec.tracking.mlflow if spec.tracking is not None else None
    if settings is None:
        return None
    require("mlflow", "mlflow", "tracking: mlflow")
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    record = _read_record(run_dir)
    uri = mlflow_uri(settings, run_dir)
    name = settings.experiment or spec.name
    try:
        client = MlflowClient(tracking_uri=uri)
        if record is not None:  # a resume: the same parent run, running again
            client.update_run(record["run_id"], status="RUNNING")
            return ParentRun(uri, record["experiment_id"], record["experiment"], record["run_id"])
        experiment = client.get_experiment_by_name(name)
        experiment_id = (
            experiment.experiment_id
            if experiment is not None
            else client.create_experiment(name, artifact_location=_artifact_location(uri))
        )
        run = client.create_run(
            experiment_id,
            run_name=run_dir.name,
            tags={CAMPAIGN_TAG: spec.name, "tuner.run_dir": str(run_dir.resolve())},
        )
        client.log_artifact(run.info.run_id, str(run_dir / rundir.CAMPAIGN_FILE))
    except MlflowException as err:
        raise _store_error(spec, uri, err) from None
    parent = ParentRun(uri, experiment_id, name, run.info.run_id)
    atomic.write_json(
        run_dir / TRACKING_FILE,
        {
            "mlflow": {
                "tracking_uri": uri,
                "experiment": name,
                "experiment_id": experiment_id,
                "run_id": parent.run_id,
            }
        },
    )
    return parent


def check_store(spec: CampaignSpec) -> None:
    """Before anything is written: MLflow is installed and opens the store the campaign
    names (the run folder's own is made with the campaign).

    Raises:
        TunerError: MLflow is missing, or refuses the store.
    """
    settings = spec.tracking.mlflow if spec.tracking is not None else None
    if settings is None:
        return
    require("mlflow", "mlflow", "tracking: mlflow")
    if settings.tracking_uri is None:
        return
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    try:
        MlflowClient(tracking_uri=settings.tracking_uri).search_experiments(max_results=1)
    except MlflowException as err:
        raise _store_error(spec, settings.tracking_uri, err) from None


def _store_error(spec: CampaignSpec, uri: str, err: Any) -> TunerError:
    return TunerError(
        f"MLflow refused the tracking store: {getattr(err, 'message', err)}",
        source=spec.source,
        path="tracking.mlflow.tracking_uri",
        got=uri,
        fix="use a database store (sqlite:///PATH/mlflow.db) or a tracking server "
        "(http://HOST:5000); MLflow 3 opens a plain-file store only with "
        "MLFLOW_ALLOW_FILE_STORE=true",
    )


def _read_record(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / TRACKING_FILE
    if not path.is_file():
        return None
    record: dict[str, Any] | None = json.loads(path.read_text()).get("mlflow")
    return record


def close_parent_run(parent: ParentRun, run_dir: Path, summary: dict[str, Any]) -> None:
    """Ends the parent run with what the campaign found: the best trial's configuration
    (params ``best.<name>``) and value, the trial counts and the spend as metrics, the
    status as a tag and the run folder's summary, best configuration and report as
    artifacts. A campaign interrupted before its end leaves the run KILLED (a resume
    reopens it). A tracker that fails here is logged; the campaign's results are saved."""
    from mlflow.tracking import MlflowClient

    try:
        client = MlflowClient(tracking_uri=parent.tracking_uri)
        run_id = parent.run_id
        best = summary.get("best")
        metrics: dict[str, float] = {
            "trials_run": float(summary.get("trials_run", 0)),
            "trials_finished": float(summary.get("trials_finished", 0)),
        }
        budget = summary.get("budget") or {}
        if isinstance(budget.get("usd"), (int, float)):
            metrics["cost_usd"] = float(budget["usd"])
        ended = summary.get("status") != Status.UNFINISHED.value
        if best is not None:
            metrics["best_value"] = float(best["value"])
            client.set_tag(run_id, "tuner.best_trial", str(best.get("tune_trial_id", "")))
        if best is not None and ended:  # MLflow params are final: only the campaign's best
            for key, value in sorted(best.get("params", {}).items()):
                client.log_param(run_id, f"best.{key}", value)
        for key, value in metrics.items():
            client.log_metric(run_id, key, value)
        client.set_tag(run_id, "tuner.status", str(summary.get("status", "")))
        for name in ATTACHED:
            if (run_dir / name).is_file():
                client.log_artifact(run_id, str(run_dir / name))
        client.set_terminated(run_id, status="FINISHED" if ended else "KILLED")
    except Exception:  # the tracker is a copy; summary.json and the report are the record
        logger.warning("the campaign's MLflow run was not closed", exc_info=True)


def wandb_environment(spec: CampaignSpec) -> dict[str, str]:
    """What W&B is to read while ``spec`` runs: offline mode is W&B's ``WANDB_MODE``
    (Ray's callback asks for an API key unless it is set), and no console banners."""
    wandb = spec.tracking.wandb if spec.tracking is not None else None
    if wandb is None:
        return {}
    env = {"WANDB_SILENT": "true"}
    if wandb.mode is WandbMode.OFFLINE:
        env["WANDB_MODE"] = WandbMode.OFFLINE.value
    return env
