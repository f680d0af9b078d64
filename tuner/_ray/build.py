"""Building a campaign's Ray Tune run: the searcher, the scheduler and Tune's configs.

Everything comes from the frozen :class:`~tuner.spec.CampaignSpec` and the run folder;
:func:`campaign_environment` sets the environment Tune reads while the run lasts.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import optuna
from ray import tune

from tuner import rundir
from tuner._ray.campaign import Campaign, CampaignCallback
from tuner._ray.mo_scheduler import MultiObjectiveASHA
from tuner._ray.mo_searcher import MultiObjectiveOptunaSearch
from tuner._ray.progress import ProgressCallback
from tuner._ray.scheduler import PersistentASHA, PersistentFIFO
from tuner._ray.searcher import (
    FidelityOptunaSearch,
)
from tuner._ray.snapshot import (
    KeepTrialLogs,
    SnapshotGuard,
)
from tuner._ray.trial import data_parallel, service_config, tune_trainable
from tuner.contract import (
    EPOCH_KEY,
    TRAIN_LOOP_CONFIG,
)
from tuner.errors import RunFolderError
from tuner.rundir import is_uri
from tuner.space import DefineByRun, make_sampler
from tuner.spec import CampaignSpec, Mode, SchedulerType
from tuner.terminal import fit
from tuner.tracking import wandb_environment

# Tune snapshots its experiment state every 10 s or more by default; a driver killed in that
# window loses the record of whatever happened since. One second keeps the window small for
# small campaigns. A snapshot serializes every trial (2 MB of JSON at 64 trials) and the
# driver shares the machine with the trials, so the period grows with the campaign to keep
# that cost per second about what 16 trials cost at one snapshot a second.
EXPERIMENT_SNAPSHOT_S = 1.0
_SNAPSHOT_TRIALS_PER_S = 16


def snapshot_period_s(trials: int) -> float:
    """Seconds between Tune experiment snapshots for a campaign of ``trials`` trials."""
    return max(EXPERIMENT_SNAPSHOT_S, trials / _SNAPSHOT_TRIALS_PER_S)


def trial_name(trial: Any) -> str:
    """A trial's name and folder: ``trial_<id>``."""
    return f"trial_{trial.trial_id}"


def storage_root(run_dir: Path, storage: str | None) -> str:
    """Where Tune keeps the experiment: the run folder's parent, or a storage URI."""
    return storage.rstrip("/") if storage and is_uri(storage) else str(run_dir.parent.resolve())


def _searcher(campaign: Campaign) -> FidelityOptunaSearch:
    spec = campaign.spec
    common: dict[str, Any] = {
        "space": DefineByRun(spec.space),
        "sampler": make_sampler(spec.sampler, spec.space),
        "study_name": campaign.name_of_study,
        "storage": campaign.study_storage(),
        "max_epochs": spec.budget.max_epochs,
        "max_trials": spec.budget.trials,
        "epoch_attr": EPOCH_KEY,
        "nest_under": TRAIN_LOOP_CONFIG if data_parallel(spec) else None,
        "campaign": campaign,
    }
    if spec.multi_objective:
        # metric and mode lists: Optuna's study gets one direction per objective.
        modes = [o.mode.value for o in spec.objectives]
        return MultiObjectiveOptunaSearch(metric=list(spec.metrics), mode=modes, **common)
    return FidelityOptunaSearch(metric=spec.metric, mode=spec.mode.value, **common)


def _scheduler(campaign: Campaign) -> PersistentASHA | PersistentFIFO:
    spec = campaign.spec
    state_path = str(campaign.run_dir / rundir.SCHEDULER_STATE_FILE)
    if spec.scheduler.type is SchedulerType.ASHA:
        asha: dict[str, Any] = {
            "state_path": state_path,
            "campaign": campaign,
            "time_attr": EPOCH_KEY,
            "max_t": spec.budget.max_epochs,
            "grace_period": spec.scheduler.grace_period,
            "reduction_factor": spec.scheduler.reduction_factor,
            # A paused Ray Train trainer restarts its whole worker group: no waiting there.
            "min_peers": 0 if data_parallel(spec) else spec.scheduler.min_peers,
        }
        if spec.multi_objective:
            maximize = [o.maximize for o in spec.objectives]
            return MultiObjectiveASHA(metrics=spec.metrics, maximize=maximize, **asha)
        return PersistentASHA(**asha)
    return PersistentFIFO(state_path=state_path, campaign=campaign)


def _callbacks(campaign: Campaign) -> list[tune.Callback]:
    spec = campaign.spec
    callbacks: list[tune.Callback] = [
        ProgressCallback(
            metric=spec.metric,
            maximize=spec.mode is Mode.MAX,
            total=spec.budget.trials,
            max_epochs=spec.budget.max_epochs,
            stream=campaign.stream,
            campaign=campaign,
            standings=campaign.earlier,
        ),
        SnapshotGuard(str(campaign.run_dir.resolve())),
        KeepTrialLogs(),
    ]
    if campaign.guard is not None:
        callbacks.append(CampaignCallback(campaign))
    # After the campaign's own: a trial's cost and stop reason are decided before it is logged.
    if campaign.spec.tracking is not None:
        # Ray's MLflow and W&B integrations import mlflow and wandb (over a second at every
        # start): only for a campaign that tracks.
        from tuner._ray.tracking import tracking_callbacks

        callbacks.extend(tracking_callbacks(campaign, campaign.parent_run))
    callbacks.extend(campaign.watchers)
    return callbacks


def tune_configs(campaign: Campaign, *, concurrent: int) -> tuple[tune.TuneConfig, tune.RunConfig]:
    """Tune's configs for ``campaign``: its searcher, scheduler and callbacks, all holding it.

    No stopper: the schedulers stop trials at ``max_epochs`` and when the budget is spent
    (Tune pickles a stopper into every experiment snapshot and restores that copy, which
    could not hold the campaign).
    """
    spec, run_dir = campaign.spec, campaign.run_dir
    tune_config = tune.TuneConfig(
        metric=spec.metric,
        mode=spec.mode.value,
        search_alg=_searcher(campaign),
        scheduler=_scheduler(campaign),
        num_samples=spec.budget.trials,
        max_concurrent_trials=concurrent,
        # A fresh worker per trial costs ~1 s (importing torch); short ASHA trials are
        # common, so reuse workers between trials (not Ray Train's worker groups).
        reuse_actors=not data_parallel(spec),
        time_budget_s=spec.budget.time_limit_s,
        trial_name_creator=trial_name,
        trial_dirname_creator=trial_name,
    )
    run_config = tune.RunConfig(
        name=run_dir.name,
        storage_path=storage_root(run_dir, campaign.storage),
        # The newest `keep`, not the best scoring: Tune syncs its experiment snapshot every
        # `keep` checkpoints of a trial so that the checkpoint the snapshot names is still on
        # disk, which holds only when checkpoints are dropped oldest first. Ranked by score,
        # the one named could be deleted an epoch later and a resume failed the trial.
        checkpoint_config=tune.CheckpointConfig(num_to_keep=spec.checkpoint.keep),
        failure_config=tune.FailureConfig(max_failures=spec.failure.max_retries),
        callbacks=_callbacks(campaign),
        verbose=0,
    )
    return tune_config, run_config


def build_tuner(campaign: Campaign, *, concurrent: int) -> tune.Tuner:
    """The Tuner of a new campaign, ``concurrent`` trials at a time."""
    spec = campaign.spec
    tune_config, run_config = tune_configs(campaign, concurrent=concurrent)
    start = (
        f"campaign {spec.name}: {spec.budget.trials} trials x <= {spec.budget.max_epochs} "
        f"epochs, {concurrent} at a time, {spec.sampler.type.value} + "
        f"{spec.scheduler.type.value}\nrun folder {campaign.run_dir}"
    )
    print(fit(start, campaign.out), file=campaign.out)
    service = service_config(spec, campaign.stop_key or "")
    return tune.Tuner(
        tune_trainable(spec),
        param_space={TRAIN_LOOP_CONFIG: service} if data_parallel(spec) else service,
        tune_config=tune_config,
        run_config=run_config,
    )


def experiment_path(campaign: Campaign) -> str:
    """Where Tune's experiment of ``campaign`` is: its run folder, or under the storage URI."""
    run_dir, storage = campaign.run_dir, campaign.storage
    return rundir.storage_folder(storage, run_dir) if storage else str(run_dir.resolve())


def restore_tuner(campaign: Campaign) -> tune.Tuner:
    """The Tuner of a stopped campaign, resumed: finished trials kept, unfinished ones
    continued from their checkpoints, errored ones left as they ended.

    Ray restores the searcher, the scheduler and the callbacks from the copies it pickled
    when the campaign started (``tuner.pkl``), which hold no campaign, and offers no public
    way to pass new ones (ray-project/ray#41364). So the restored Tuner gets Tune's configs
    built afresh around this driver's campaign, with the concurrency it was started with;
    Tune then loads the searcher's state into the new searcher as it would have into the
    old (its snapshot, ``searcher-state-*.pkl``), and the schedulers read their own state
    file.

    Raises:
        TunerError: The run folder was written by an earlier version of tuner whose classes
            Tune's pickles name (they moved), so this version cannot resume it.
    """
    try:
        tuner = tune.Tuner.restore(
            experiment_path(campaign),
            trainable=tune_trainable(campaign.spec),
            resume_unfinished=True,
            resume_errored=False,
        )
    except (ModuleNotFoundError, AttributeError) as err:
        raise RunFolderError(
            str(campaign.run_dir),
            f"Ray Tune's saved state names code this version of tuner does not have ({err}); "
            "the run folder was written by an earlier version.",
            fix="resume it with the version that started it, or start the campaign again "
            "with `tuner run` (its study.db keeps the trials it ran).",
        ) from None
    internal = tuner._local_tuner  # None only under Ray Client, which runs Tune remotely
    if internal is not None:
        restored_tune, restored_run = internal._tune_config, internal.get_run_config()
        concurrent = restored_tune.max_concurrent_trials or campaign.spec.budget.trials
        tune_config, run_config = tune_configs(campaign, concurrent=concurrent)
        # Where the experiment is, as Tune.restore worked it out from the path.
        run_config.name = restored_run.name
        run_config.storage_path = restored_run.storage_path
        run_config.storage_filesystem = restored_run.storage_filesystem
        internal._tune_config = tune_config
        internal._run_config = run_config
    return tuner


# The signals Tune's run catches in the main thread (ray.tune.tune._setup_signal_catching).
_TUNE_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGUSR1") if hasattr(signal, name)
)


def _environment(spec: CampaignSpec) -> dict[str, str]:
    """What Tune, Ray Train and the trials' workers are to read while ``spec`` runs."""
    env = {
        "TUNE_GLOBAL_CHECKPOINT_S": f"{snapshot_period_s(spec.budget.trials):g}",
        "RAY_AIR_NEW_OUTPUT": "0",
        # Tune raises in the driver (ending the whole run) at a result without the metric;
        # such a trial is FAIL with a message naming what it reported instead (tuner.outcome).
        "TUNE_DISABLE_STRICT_METRIC_CHECKING": "1",
        # Snapshots are frequent on purpose (see EXPERIMENT_SNAPSHOT_S); no warning about it.
        "TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S": "0",
    }
    if data_parallel(spec):
        # Before ray.train.torch is imported, and before the local Ray starts (its workers
        # inherit the driver's environment).
        env["RAY_TRAIN_V2_ENABLED"] = "0"
        env["RAY_TRAIN_ENABLE_V2_MIGRATION_WARNINGS"] = "0"
    env.update(wandb_environment(spec))
    return env


@contextmanager
def campaign_environment(spec: CampaignSpec) -> Iterator[None]:
    """Sets the environment Tune reads for ``spec`` (a value already set is kept: the
    user's) and Optuna's log level, for the campaign's length; then restores the caller's,
    and the SIGINT and SIGUSR1 handlers Tune replaces in the main thread and leaves behind
    (a caller's next Ctrl+C would only set an event of the finished run)."""
    wanted = _environment(spec)
    saved = {key: os.environ.get(key) for key in wanted}
    for key, value in wanted.items():
        os.environ.setdefault(key, value)
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    main = threading.current_thread() is threading.main_thread()
    handlers = {sig: signal.getsignal(sig) for sig in _TUNE_SIGNALS} if main else {}
    try:
        yield
    finally:
        for sig, handler in handlers.items():
            if handler is not None:  # None: set outside Python, cannot be put back
                signal.signal(sig, handler)
        optuna.logging.set_verbosity(verbosity)
        for key, before in saved.items():
            if before is None:
                os.environ.pop(key, None)
