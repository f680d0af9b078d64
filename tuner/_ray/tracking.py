"""Trials in the experiment trackers, through Ray Tune's own MLflow and W&B callbacks.

Each trial is one run: its configuration (the sampled parameters and the campaign's fixed
settings, not the service's reserved keys), every result it reports (one step per epoch),
and at its end why it stopped, the epochs it trained and its cost (its share of the
campaign's spend, :meth:`tuner.budget.Ledger.trial_usd`), as the searcher decided them
(:attr:`Campaign.ended`). MLflow's trial runs are children of the campaign's parent run
(:mod:`tuner.tracking`); W&B's are grouped by campaign, with the campaign's own run in
the group (:mod:`tuner.tracking_wandb`).

Tune pickles its callbacks into ``tuner.pkl``; the campaign is left out of that pickle, and
a resumed campaign hands Tune new callbacks around its own campaign. A resumed trial's MLflow
run is found again by its trial name under the parent run, not started twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ray.air.integrations.mlflow import MLflowLoggerCallback
from ray.air.integrations.wandb import WandbLoggerCallback, _QueueItem, _WandbLoggingActor
from ray.tune import Callback
from ray.tune.experiment import Trial

from tuner._ray.campaign import Campaign
from tuner.contract import RESERVED_PREFIX
from tuner.spec import WandbTracking
from tuner.tracking import PARENT_TAG, ParentRun
from tuner.tracking_wandb import wandb_folder, wandb_group

__all__ = ["TrialRunsMLflow", "TrialRunsWandb", "tracking_callbacks"]

TRIAL_TAG = "trial_name"
"""The tag Ray's MLflow callback names each trial's run by."""


def _params(trial: Trial) -> dict[str, Any]:
    """The trial's configuration without the service's reserved keys (stop key, seed...)."""
    return {k: v for k, v in trial.config.items() if not str(k).startswith(RESERVED_PREFIX)}


def _ending(campaign: Campaign | None, trial: Trial) -> dict[str, Any]:
    """What the searcher recorded when the trial ended: stop reason, epochs, cost."""
    return dict(campaign.ended.get(trial.trial_id, {})) if campaign is not None else {}


class TrialRunsMLflow(MLflowLoggerCallback):
    """Ray's MLflow callback, each trial's run a child of the campaign's parent run, with
    the trial's end (stop reason, epochs, cost) logged before the run is closed."""

    def __init__(self, parent: ParentRun, campaign: Campaign) -> None:
        super().__init__(
            tracking_uri=parent.tracking_uri,
            experiment_name=parent.experiment,
            tags={PARENT_TAG: parent.run_id},
        )
        self._parent = parent.run_id
        self._campaign: Campaign | None = campaign

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_campaign"] = None
        return state

    def log_trial_start(self, trial: Trial) -> None:
        if trial not in self._trial_runs:
            found = self.mlflow_util._get_client().search_runs(
                [str(self.mlflow_util.experiment_id)],
                filter_string=f"tags.{TRIAL_TAG} = '{trial}' and "
                f"tags.`{PARENT_TAG}` = '{self._parent}'",
                max_results=1,
            )
            if found:  # a resumed trial: its run goes on
                self._trial_runs[trial] = found[0].info.run_id
        if trial not in self._trial_runs:
            tags = {**(self.tags or {}), TRIAL_TAG: str(trial)}
            run = self.mlflow_util.start_run(tags=tags, run_name=str(trial))
            self._trial_runs[trial] = run.info.run_id
        self.mlflow_util.log_params(run_id=self._trial_runs[trial], params_to_log=_params(trial))

    def log_trial_end(self, trial: Trial, failed: bool = False) -> None:
        run_id = self._trial_runs[trial]
        ending = _ending(self._campaign, trial)
        client = self.mlflow_util._get_client()
        if "stop_reason" in ending:
            client.set_tag(run_id, "stop_reason", ending["stop_reason"])
        numbers = {k: ending[k] for k in ("epochs", "cost_usd") if ending.get(k) is not None}
        if numbers:
            self.mlflow_util.log_metrics(run_id=run_id, metrics_to_log=numbers, step=0)
        super().log_trial_end(trial, failed=failed)


class _FlushingWandbActor(_WandbLoggingActor):
    """Ray's W&B logging actor, which then waits for W&B's service to write the run out.

    Ray kills the actor as soon as its ``run`` returns; ``wandb.finish`` can return before
    W&B's service process (wandb-core) has flushed the run file, and a killed actor never
    reaches W&B's own exit hook, so a short trial's offline run was left an empty file.
    """

    def run(self) -> None:
        super().run()
        self._wandb.teardown()


class TrialRunsWandb(WandbLoggerCallback):
    """Ray's W&B callback, each trial's run given its end (stop reason, epochs, cost) in
    its config before it finishes; the service's reserved keys are left out."""

    _logger_actor_cls = _FlushingWandbActor

    def __init__(self, settings: WandbTracking, run_dir: Path, campaign: Campaign) -> None:
        # W&B writes its run files under <dir>/wandb/: the run folder's wandb/ by default.
        folder = wandb_folder(settings, run_dir)
        folder.mkdir(parents=True, exist_ok=True)
        super().__init__(
            project=settings.project,
            group=wandb_group(settings, run_dir),
            mode=settings.mode.value,
            dir=str(folder.resolve()),
        )
        self._campaign: Campaign | None = campaign

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_campaign"] = None
        return state

    def log_trial_start(self, trial: Trial) -> None:
        reserved = {str(k) for k in trial.config if str(k).startswith(RESERVED_PREFIX)}
        self.excludes = sorted({*self.excludes, *reserved})
        super().log_trial_start(trial)

    def log_trial_result(self, iteration: int, trial: Trial, result: dict[str, Any]) -> None:
        # Ray's logging actor copies each result's config into the run's config.
        config = result.get("config")
        if isinstance(config, dict):
            public = {k: v for k, v in config.items() if not str(k).startswith(RESERVED_PREFIX)}
            result = {**result, "config": public}
        super().log_trial_result(iteration, trial, result)

    def log_trial_end(self, trial: Trial, failed: bool = False) -> None:
        ending = _ending(self._campaign, trial)
        if ending and trial in self._trial_queues:
            # A result of config only: W&B's logging actor updates the run's config with it.
            self._trial_queues[trial].put((_QueueItem.RESULT, {"config": ending}))
        super().log_trial_end(trial, failed=failed)


def tracking_callbacks(campaign: Campaign, parent: ParentRun | None) -> list[Callback]:
    """The campaign's tracker callbacks (none without ``tracking:``)."""
    tracking = campaign.spec.tracking
    callbacks: list[Callback] = []
    if tracking is None:
        return callbacks
    if tracking.mlflow is not None and parent is not None:
        callbacks.append(TrialRunsMLflow(parent, campaign))
    if tracking.wandb is not None:
        callbacks.append(TrialRunsWandb(tracking.wandb, campaign.run_dir, campaign))
    return callbacks
