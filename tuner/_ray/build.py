"""Building a campaign's Ray Tune run: the searcher, the scheduler and Tune's configs.

Everything comes from the frozen :class:`~tuner.spec.CampaignSpec` and the run folder;
:func:`prepare_env` sets the environment Tune reads before the run starts.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, TextIO

import optuna
from ray import tune

from tuner import rundir
from tuner._ray.guard import GuardLink
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
from tuner.rundir import is_uri
from tuner.space import DefineByRun, make_sampler
from tuner.spec import CampaignSpec, Mode, SchedulerType
from tuner.study import study_storage

EPOCH_ATTR = EPOCH_KEY


# Tune snapshots its experiment state every 10 s or more by default; a driver killed in that
# window loses the record of whatever happened since. One second keeps the window small for
# small campaigns. A snapshot serializes every trial (2 MB of JSON at 64 trials) and the
# driver shares the machine with the trials, so the period grows with the campaign to keep
# that cost per second about what 16 trials cost at one snapshot a second.
EXPERIMENT_SNAPSHOT_S = 1.0


_SNAPSHOT_TRIALS_PER_S = 16


# Environment values this module wrote, so a later campaign in the same process may replace
# them while a value the user set is left alone.
_ENV_SET_HERE: dict[str, str] = {}


def _set_env_unless_user_set(key: str, value: str) -> None:
    current = os.environ.get(key)
    if current is None or _ENV_SET_HERE.get(key) == current:
        os.environ[key] = value
        _ENV_SET_HERE[key] = value


def snapshot_period_s(trials: int) -> float:
    """Seconds between Tune experiment snapshots for a campaign of ``trials`` trials."""
    return max(EXPERIMENT_SNAPSHOT_S, trials / _SNAPSHOT_TRIALS_PER_S)


def trial_name(trial: Any) -> str:
    return f"trial_{trial.trial_id}"


def storage_root(run_dir: Path, storage: str | None) -> str:
    """Where Tune keeps the experiment: the run folder's parent, or a storage URI."""
    return storage.rstrip("/") if storage and is_uri(storage) else str(run_dir.parent.resolve())


def build_tuner(
    spec: CampaignSpec,
    run_dir: Path,
    stream: TextIO | None,
    *,
    concurrent: int,
    stop_key: str,
    storage: str | None = None,
) -> tune.Tuner:
    mode = spec.mode.value
    study = study_storage(run_dir)
    searcher = FidelityOptunaSearch(
        space=DefineByRun(spec.space),
        metric=spec.metric,
        mode=mode,
        sampler=make_sampler(spec.sampler, spec.space),
        study_name=spec.name,
        storage=study,
        max_epochs=spec.budget.max_epochs,
        max_trials=spec.budget.trials,
        epoch_attr=EPOCH_ATTR,
        nest_under=TRAIN_LOOP_CONFIG if data_parallel(spec) else None,
        gate_key=stop_key,
    )
    state_path = str(run_dir / rundir.SCHEDULER_STATE_FILE)
    scheduler: PersistentASHA | PersistentFIFO
    if spec.scheduler.type is SchedulerType.ASHA:
        scheduler = PersistentASHA(
            state_path=state_path,
            error_key=stop_key,
            time_attr=EPOCH_ATTR,
            max_t=spec.budget.max_epochs,
            grace_period=spec.scheduler.grace_period,
            reduction_factor=spec.scheduler.reduction_factor,
            # A paused Ray Train trainer restarts its whole worker group: no waiting there.
            min_peers=0 if data_parallel(spec) else spec.scheduler.min_peers,
        )
    else:
        scheduler = PersistentFIFO(state_path=state_path, error_key=stop_key)
    tune_config = tune.TuneConfig(
        metric=spec.metric,
        mode=mode,
        search_alg=searcher,
        scheduler=scheduler,
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
        storage_path=storage_root(run_dir, storage),
        # Stops trials at max_epochs, and all of them when the budget is exhausted.
        stop=GuardLink(stop_key, spec.budget.max_epochs, EPOCH_ATTR),
        # The newest `keep`, not the best scoring: Tune syncs its experiment snapshot every
        # `keep` checkpoints of a trial so that the checkpoint the snapshot names is still on
        # disk, which holds only when checkpoints are dropped oldest first. Ranked by score,
        # the one named could be deleted an epoch later and a resume failed the trial.
        checkpoint_config=tune.CheckpointConfig(num_to_keep=spec.checkpoint.keep),
        failure_config=tune.FailureConfig(max_failures=spec.failure.max_retries),
        callbacks=[
            ProgressCallback(
                metric=spec.metric,
                maximize=spec.mode is Mode.MAX,
                total=spec.budget.trials,
                max_epochs=spec.budget.max_epochs,
                stream=stream,
                failure_key=stop_key,
            ),
            SnapshotGuard(str(run_dir.resolve())),
            KeepTrialLogs(),
            GuardLink(stop_key, spec.budget.max_epochs, EPOCH_ATTR),
        ],
        verbose=0,
    )
    print(
        f"campaign {spec.name}: {spec.budget.trials} trials x <= {spec.budget.max_epochs} "
        f"epochs, {concurrent} at a time, {spec.sampler.type.value} + "
        f"{spec.scheduler.type.value}; run folder {run_dir}",
        file=stream or sys.stdout,
    )
    service = service_config(spec, stop_key)
    return tune.Tuner(
        tune_trainable(spec),
        param_space={TRAIN_LOOP_CONFIG: service} if data_parallel(spec) else service,
        tune_config=tune_config,
        run_config=run_config,
    )


def prepare_env(spec: CampaignSpec) -> None:
    if data_parallel(spec):
        # Before ray.train.torch is imported, and before the local Ray starts (its workers
        # inherit the driver's environment).
        os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "0")
        os.environ.setdefault("RAY_TRAIN_ENABLE_V2_MIGRATION_WARNINGS", "0")
    # The period depends on the campaign, so it is set again for each one in this process.
    _set_env_unless_user_set(
        "TUNE_GLOBAL_CHECKPOINT_S", f"{snapshot_period_s(spec.budget.trials):g}"
    )
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    # Tune raises in the driver (ending the whole run) at a result without the metric; such
    # a trial is FAIL with a message naming what it reported instead (tuner.outcome).
    os.environ.setdefault("TUNE_DISABLE_STRICT_METRIC_CHECKING", "1")
    # Snapshots are frequent on purpose (see EXPERIMENT_SNAPSHOT_S); don't warn about it.
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
