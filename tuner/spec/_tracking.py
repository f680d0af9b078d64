"""``tracking:`` in a campaign file: the experiment trackers each trial is logged to.

``tracking: {mlflow: {tracking_uri: URI, experiment: NAME}, wandb: {project: NAME, mode:
offline|online}}``; either tracker may be left out. Only the shape is checked here (pure:
neither MLflow nor W&B is imported); the trackers themselves are reached when the campaign
starts (:mod:`tuner.tracking`), before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from tuner.spec._checks import Checker
from tuner.spec._fields import SECTIONS

__all__ = [
    "MlflowTracking",
    "Tracking",
    "WandbMode",
    "WandbTracking",
    "parse_tracking",
    "tracking_flags",
]

# Tracking URI schemes MLflow itself resolves (plus a plain path, a local file store).
MLFLOW_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql", "http", "https", "file", "databricks")


class WandbMode(str, Enum):
    """Where a W&B run goes: its servers (needs an API key), or files in ``dir`` only."""

    ONLINE = "online"
    OFFLINE = "offline"


@dataclass(frozen=True, slots=True)
class MlflowTracking:
    """An MLflow tracking store: one parent run for the campaign, one child run per trial.

    Attributes:
        tracking_uri: Where MLflow keeps runs (``sqlite:///mlflow.db``, ``http://host:5000``,
            ...). None: ``mlflow.db`` (SQLite) in the run folder, artifacts beside it.
        experiment: The MLflow experiment (None: the campaign's name).
    """

    tracking_uri: str | None = None
    experiment: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``tracking.mlflow`` section."""
        out: dict[str, Any] = {}
        if self.tracking_uri is not None:
            out["tracking_uri"] = self.tracking_uri
        if self.experiment is not None:
            out["experiment"] = self.experiment
        return out


@dataclass(frozen=True, slots=True)
class WandbTracking:
    """A Weights & Biases project: one run per trial, grouped by campaign.

    Attributes:
        project: The W&B project.
        mode: ``online`` (W&B's servers; needs ``WANDB_API_KEY`` or ``wandb login``) or
            ``offline`` (run files only, no network, no key; ``wandb sync`` uploads them).
        group: The runs' group (None: the run folder's name).
        dir: Where W&B writes its run files (None: ``wandb/`` in the run folder).
    """

    project: str
    mode: WandbMode = WandbMode.ONLINE
    group: str | None = None
    dir: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``tracking.wandb`` section."""
        out: dict[str, Any] = {"project": self.project, "mode": self.mode.value}
        if self.group is not None:
            out["group"] = self.group
        if self.dir is not None:
            out["dir"] = self.dir
        return out


@dataclass(frozen=True, slots=True)
class Tracking:
    """The experiment trackers a campaign logs to (None: not that one)."""

    mlflow: MlflowTracking | None = None
    wandb: WandbTracking | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``tracking:`` section."""
        out: dict[str, Any] = {}
        if self.mlflow is not None:
            out["mlflow"] = self.mlflow.to_dict()
        if self.wandb is not None:
            out["wandb"] = self.wandb.to_dict()
        return out


def check_mlflow_uri(ck: Checker, value: Any, path: str) -> str:
    """A tracking URI whose scheme MLflow resolves, or a plain path (a file store)."""
    uri = ck.string(value, path)
    if "://" not in uri and ":" not in uri.split("/", 1)[0]:
        return uri  # a path: MLflow's file store
    scheme = uri.split(":", 1)[0].split("+", 1)[0].lower()
    if scheme not in MLFLOW_SCHEMES:
        from tuner.errors import closest

        ck.fail(
            path,
            "unknown MLflow tracking URI scheme",
            got=uri,
            allowed=[f"{s}://" for s in MLFLOW_SCHEMES],
            suggestion=closest(scheme, MLFLOW_SCHEMES),
            fix="e.g. sqlite:///mlflow.db (a local store) or http://mlflow-server:5000",
        )
    return uri


def _parse_mlflow(ck: Checker, value: Any) -> MlflowTracking:
    path = "tracking.mlflow"
    section = ck.mapping(
        {} if value is None else value,
        path,
        fix="write tracking: {mlflow: {tracking_uri: sqlite:///mlflow.db, experiment: NAME}}",
    )
    ck.keys(section, path, SECTIONS["tracking.mlflow"].allowed)
    each = ck.group()
    with each:
        raw = section.get("tracking_uri")
        uri = None if raw is None else check_mlflow_uri(ck, raw, f"{path}.tracking_uri")
    with each:
        raw = section.get("experiment")
        experiment = None if raw is None else ck.string(raw, f"{path}.experiment")
    each.close()
    return MlflowTracking(tracking_uri=uri, experiment=experiment)


def _parse_wandb(ck: Checker, value: Any) -> WandbTracking:
    path = "tracking.wandb"
    section = ck.mapping(value, path, fix="write tracking: {wandb: {project: NAME, mode: offline}}")
    shape = SECTIONS["tracking.wandb"]
    ck.keys(section, path, shape.allowed, shape.required)
    each = ck.group()
    with each:
        project = ck.string(ck.required(section, "project"), f"{path}.project")
    with each:
        mode = ck.enum(
            section.get("mode", WandbMode.ONLINE.value),
            f"{path}.mode",
            WandbMode,
            "W&B mode",
            fix="online logs to W&B's servers (an API key), offline to local files only",
        )
    with each:
        raw = section.get("group")
        group = None if raw is None else ck.string(raw, f"{path}.group")
    with each:
        raw = section.get("dir")
        folder = None if raw is None else ck.string(raw, f"{path}.dir")
    each.close()
    return WandbTracking(project=project, mode=mode, group=group, dir=folder)


def parse_tracking(ck: Checker, value: Any) -> Tracking:
    """The ``tracking`` section; ``mlflow:`` with no settings (``mlflow: {}`` or a bare
    ``mlflow:``) logs to ``mlflow.db`` in the run folder."""
    section = ck.mapping(
        value,
        "tracking",
        fix="write tracking: {mlflow: {tracking_uri: URI, experiment: NAME}} and/or "
        "{wandb: {project: NAME, mode: offline}}",
    )
    ck.keys(section, "tracking", SECTIONS["tracking"].allowed)
    each = ck.group()
    mlflow = wandb = None
    with each:
        if "mlflow" in section:
            mlflow = _parse_mlflow(ck, section["mlflow"])
    with each:
        if "wandb" in section:
            wandb = _parse_wandb(ck, section["wandb"])
    each.close()
    return Tracking(mlflow=mlflow, wandb=wandb)


def tracking_flags(
    tracking: Tracking | None,
    *,
    mlflow_uri: str | None = None,
    mlflow_experiment: str | None = None,
    wandb_project: str | None = None,
    wandb_mode: str | None = None,
) -> Tracking | None:
    """``tracking`` with the command line's flags applied: a flag turns its tracker on
    and overrides the file's value; flags not given leave the file's section as it is.

    Raises:
        SpecError: A flag's value is invalid, or ``--wandb-mode`` without a project.
    """
    if all(v is None for v in (mlflow_uri, mlflow_experiment, wandb_project, wandb_mode)):
        return tracking
    ck = Checker("<cli>", collect=False)
    base = tracking or Tracking()
    mlflow, wandb = base.mlflow, base.wandb
    if mlflow_uri is not None or mlflow_experiment is not None:
        mlflow = mlflow or MlflowTracking()
        mlflow = MlflowTracking(
            tracking_uri=mlflow.tracking_uri
            if mlflow_uri is None
            else check_mlflow_uri(ck, mlflow_uri, "--mlflow-uri"),
            experiment=mlflow.experiment
            if mlflow_experiment is None
            else ck.string(mlflow_experiment, "--mlflow-experiment"),
        )
    if wandb_project is not None or wandb_mode is not None:
        if wandb_project is None and wandb is None:
            ck.fail(
                "--wandb-mode",
                "needs a W&B project",
                got=wandb_mode,
                fix="add --wandb-project NAME, or tracking: {wandb: {project: NAME}} to the "
                "campaign file",
            )
        project = ck.string(wandb_project, "--wandb-project") if wandb_project else None
        mode = None
        if wandb_mode is not None:
            mode = ck.enum(wandb_mode, "--wandb-mode", WandbMode, "W&B mode")
        wandb = WandbTracking(
            project=project or (wandb.project if wandb else ""),
            mode=mode or (wandb.mode if wandb else WandbMode.ONLINE),
            group=wandb.group if wandb else None,
            dir=wandb.dir if wandb else None,
        )
    return Tracking(mlflow=mlflow, wandb=wandb)
