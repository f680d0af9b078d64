"""The Ray glue: turns a validated campaign into a Ray Tune run, and resumes one.

This is the one module (with its private helpers ``_bridge``, ``_scheduler``, ``_trial`` and
``_progress``) that imports Ray. Everything it needs arrives as a frozen
:class:`~tuner.spec.CampaignSpec`; everything it writes lands in the run folder.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import optuna
import ray
from ray import tune

from tuner import rundir
from tuner._bridge import FidelityOptunaSearch
from tuner._progress import ProgressCallback
from tuner._scheduler import PersistentASHA, PersistentFIFO
from tuner._snapshot import SnapshotGuard, repair_snapshot
from tuner._trial import TRAINABLE_KEY, run_trial
from tuner.cost import AshaGeometry, Profile, profile_from_run
from tuner.cost._reality import (
    PREDICTION_FILE,
    actual_cost,
    compare,
    format_comparison,
    predict_cost,
    read_prediction,
)
from tuner.errors import TunerError
from tuner.space import DefineByRun, make_sampler
from tuner.spec import CampaignSpec, Mode, SchedulerType, load_campaign
from tuner.summary import format_table, open_study, summarize

logger = logging.getLogger(__name__)

EPOCH_ATTR = "epoch"
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


@dataclass(frozen=True)
class RayOptions:
    """Where the campaign runs.

    Attributes:
        address: None for an embedded local Ray; "auto", "host:port" or "ray://..." to join
            an existing cluster (RAY_ADDRESS is honoured when this is None).
        num_cpus: CPUs of the embedded local Ray (default: all of this machine's).
        num_gpus: GPUs of the embedded local Ray (default: detected). Logical GPUs work on a
            CPU-only machine: trials are scheduled as if they had one and train on the CPU.
        worker_logs: Stream the trials' own output to this terminal (Ray keeps it in its
            session logs either way).
    """

    address: str | None = None
    num_cpus: int | None = None
    num_gpus: float | None = None
    worker_logs: bool = False


@dataclass(frozen=True)
class CampaignResult:
    """What a finished (or stopped) campaign produced."""

    run_dir: Path
    summary: dict[str, Any]


def _init_ray(options: RayOptions) -> bool:
    """Starts or joins Ray; returns True when this call started it (so we shut it down)."""
    if ray.is_initialized():
        return False
    address = options.address or os.environ.get("RAY_ADDRESS")
    common: dict[str, Any] = {
        "logging_level": logging.WARNING,
        "log_to_driver": options.worker_logs,
    }
    if address and address != "local":
        ray.init(address=address, **common)
    else:
        ray.init(
            address="local",
            num_cpus=options.num_cpus,
            num_gpus=options.num_gpus,  # type: ignore[arg-type]  # fractional is fine
            include_dashboard=False,
            dashboard_host="127.0.0.1",
            **common,
        )
    return True


def max_concurrent_trials(spec: CampaignSpec, cluster: dict[str, float]) -> int:
    """Trials that can run at once: the campaign's cap, else what the cluster fits."""
    if spec.resources.max_concurrent is not None:
        return min(spec.resources.max_concurrent, spec.budget.trials)
    workers = spec.resources.workers
    fits = cluster.get("CPU", 0.0) / (spec.resources.cpu * workers)
    if spec.resources.gpu > 0:
        fits = min(fits, cluster.get("GPU", 0.0) / (spec.resources.gpu * workers))
    return max(1, min(spec.budget.trials, math.floor(fits + 1e-9)))


def _trial_name(trial: Any) -> str:
    return f"trial_{trial.trial_id}"


TRAIN_LOOP_CONFIG = "train_loop_config"


def _data_parallel(spec: CampaignSpec) -> bool:
    return spec.resources.workers > 1


def _trainable(spec: CampaignSpec) -> Any:
    if _data_parallel(spec):
        # Ray Train V1's TorchTrainer is itself a Tune trainable: rank 0's reports and
        # checkpoints are Tune's, so ASHA stops, retries and resumes work as for one worker.
        # (V2 inside a Tune trial hangs on every stop here: its cleanup needs the dashboard.)
        from ray.train import ScalingConfig
        from ray.train.torch import TorchTrainer

        gpu = spec.resources.gpu
        per_worker = {"CPU": spec.resources.cpu, **({"GPU": gpu} if gpu > 0 else {})}
        return TorchTrainer(
            run_trial,
            scaling_config=ScalingConfig(
                num_workers=spec.resources.workers,
                use_gpu=gpu > 0,
                resources_per_worker=per_worker,
            ),
        )
    resources = {"cpu": spec.resources.cpu, "gpu": spec.resources.gpu}
    return tune.with_resources(run_trial, resources)


def _service_config(spec: CampaignSpec) -> dict[str, Any]:
    """The constant part of every trial's config: fixed settings and reserved keys."""
    return {
        **dict(spec.fixed),
        **({"tuner_workers": spec.resources.workers} if _data_parallel(spec) else {}),
        TRAINABLE_KEY: spec.trainable,
        "tuner_max_epochs": spec.budget.max_epochs,
        "tuner_seed": spec.sampler.seed if spec.sampler.seed is not None else 0,
        "tuner_checkpoint_every": spec.checkpoint.every,
    }


def _build_tuner(spec: CampaignSpec, run_dir: Path, stream: TextIO | None) -> tune.Tuner:
    mode = spec.mode.value
    storage = optuna.storages.RDBStorage(
        rundir.study_url(run_dir), engine_kwargs={"connect_args": {"timeout": 30}}
    )
    searcher = FidelityOptunaSearch(
        space=DefineByRun(spec.space),
        metric=spec.metric,
        mode=mode,
        sampler=make_sampler(spec.sampler, spec.space),
        study_name=spec.name,
        storage=storage,
        max_epochs=spec.budget.max_epochs,
        max_trials=spec.budget.trials,
        epoch_attr=EPOCH_ATTR,
        nest_under=TRAIN_LOOP_CONFIG if _data_parallel(spec) else None,
    )
    state_path = str(run_dir / rundir.SCHEDULER_STATE_FILE)
    scheduler: PersistentASHA | PersistentFIFO
    if spec.scheduler.type is SchedulerType.ASHA:
        scheduler = PersistentASHA(
            state_path=state_path,
            time_attr=EPOCH_ATTR,
            max_t=spec.budget.max_epochs,
            grace_period=spec.scheduler.grace_period,
            reduction_factor=spec.scheduler.reduction_factor,
        )
    else:
        scheduler = PersistentFIFO(state_path=state_path)
    concurrent = max_concurrent_trials(spec, ray.cluster_resources())
    tune_config = tune.TuneConfig(
        metric=spec.metric,
        mode=mode,
        search_alg=searcher,
        scheduler=scheduler,
        num_samples=spec.budget.trials,
        max_concurrent_trials=concurrent,
        # A fresh worker per trial costs ~1 s (importing torch); short ASHA trials are
        # common, so reuse workers between trials (not Ray Train's worker groups).
        reuse_actors=not _data_parallel(spec),
        time_budget_s=spec.budget.time_limit_s,
        trial_name_creator=_trial_name,
        trial_dirname_creator=_trial_name,
    )
    run_config = tune.RunConfig(
        name=run_dir.name,
        storage_path=str(run_dir.parent.resolve()),
        stop={EPOCH_ATTR: spec.budget.max_epochs},
        checkpoint_config=tune.CheckpointConfig(
            num_to_keep=spec.checkpoint.keep,
            checkpoint_score_attribute=spec.metric,
            checkpoint_score_order=mode,
        ),
        failure_config=tune.FailureConfig(max_failures=spec.failure.max_retries),
        callbacks=[
            ProgressCallback(
                metric=spec.metric,
                maximize=spec.mode is Mode.MAX,
                total=spec.budget.trials,
                max_epochs=spec.budget.max_epochs,
                stream=stream,
            ),
            SnapshotGuard(str(run_dir.resolve())),
        ],
        verbose=0,
    )
    print(
        f"campaign {spec.name}: {spec.budget.trials} trials x <= {spec.budget.max_epochs} "
        f"epochs, {concurrent} at a time, {spec.sampler.type.value} + "
        f"{spec.scheduler.type.value}; run folder {run_dir}",
        file=stream or sys.stdout,
    )
    service = _service_config(spec)
    return tune.Tuner(
        _trainable(spec),
        param_space={TRAIN_LOOP_CONFIG: service} if _data_parallel(spec) else service,
        tune_config=tune_config,
        run_config=run_config,
    )


def _prepare_env(spec: CampaignSpec) -> None:
    if _data_parallel(spec):
        # Before ray.train.torch is imported, and before the local Ray starts (its workers
        # inherit the driver's environment).
        os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "0")
        os.environ.setdefault("RAY_TRAIN_ENABLE_V2_MIGRATION_WARNINGS", "0")
    # The period depends on the campaign, so it is set again for each one in this process.
    _set_env_unless_user_set(
        "TUNE_GLOBAL_CHECKPOINT_S", f"{snapshot_period_s(spec.budget.trials):g}"
    )
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    # Snapshots are frequent on purpose (see EXPERIMENT_SNAPSHOT_S); don't warn about it.
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    optuna.logging.set_verbosity(optuna.logging.WARNING)


def run_campaign(
    spec: CampaignSpec,
    run_dir: Path,
    options: RayOptions | None = None,
    *,
    stream: TextIO | None = None,
    code_dirs: list[str] | None = None,
    profile: Profile | None = None,
    usd_per_gpu_hour: float = 0.0,
) -> CampaignResult:
    """Runs a new campaign into ``run_dir`` (which must not exist yet).

    Args:
        spec: The validated campaign.
        run_dir: The run folder to create, e.g. ``runs/<name>``.
        options: Where Ray runs; default an embedded local Ray.
        stream: Where progress goes (default stdout).
        code_dirs: Folders the trainable was imported from (recorded for resume).
        profile: A profile of the trainable; with it the prediction written at the start
            (prediction.json) covers trial-seconds, GPU-hours and dollars, not only work.
        usd_per_gpu_hour: What a GPU-hour costs here (0 for a local run).

    Returns:
        The run folder and its summary.
    """
    if run_dir.exists():
        raise TunerError(
            f"{run_dir}: run folder exists already.\n"
            f"  To fix: `tuner resume {run_dir}` to continue it, or choose another --name."
        )
    _prepare_env(spec)
    started = _init_ray(options or RayOptions())
    try:
        run_dir.mkdir(parents=True)
        rundir.write_yaml(run_dir / rundir.CAMPAIGN_FILE, spec.to_dict())
        rundir.write_json(run_dir / rundir.RUN_FILE, {"code_dirs": list(code_dirs or [])})
        workers = max_concurrent_trials(spec, ray.cluster_resources())
        rundir.write_json(
            run_dir / PREDICTION_FILE,
            predict_cost(
                AshaGeometry.from_spec(spec),
                workers=workers,
                gpus_per_trial=_gpus_per_trial(spec),
                usd_per_gpu_hour=usd_per_gpu_hour,
                profile=profile,
            ),
        )
        tuner = _build_tuner(spec, run_dir, stream)
        return _fit_and_summarize(spec, run_dir, tuner, stream)
    finally:
        if started:
            ray.shutdown()


def resume_campaign(
    run_dir: Path, options: RayOptions | None = None, *, stream: TextIO | None = None
) -> CampaignResult:
    """Continues a campaign whose driver stopped (killed, crashed or interrupted).

    Finished trials are not rerun; unfinished ones continue from their latest checkpoint;
    ASHA's rungs and the Optuna study carry on from the run folder.
    """
    campaign_file = rundir.check_resumable(run_dir)
    spec = load_campaign(campaign_file)
    repaired = repair_snapshot(run_dir)
    if repaired:
        print(f"repaired Tune snapshot files a crash left damaged: {', '.join(repaired)}")
    if not tune.Tuner.can_restore(str(run_dir.resolve())):
        raise TunerError(
            f"{run_dir}: Ray Tune saved no experiment state here (the driver died before "
            "its first snapshot).\n  To fix: start it again with `tuner run`."
        )
    _prepare_env(spec)
    started = _init_ray(options or RayOptions())
    try:
        tuner = tune.Tuner.restore(
            str(run_dir.resolve()),
            trainable=_trainable(spec),
            resume_unfinished=True,
            resume_errored=False,
        )
        print(f"resuming campaign {spec.name} from {run_dir}", file=stream or sys.stdout)
        return _fit_and_summarize(spec, run_dir, tuner, stream)
    finally:
        if started:
            ray.shutdown()


def _fit_and_summarize(
    spec: CampaignSpec, run_dir: Path, tuner: tune.Tuner, stream: TextIO | None
) -> CampaignResult:
    start = time.monotonic()
    grid = tuner.fit()
    wall_s = time.monotonic() - start
    cost = _predicted_vs_actual(spec, run_dir, wall_s)
    summary = write_summary(spec, run_dir, wall_s=wall_s, tune_trials=len(grid), cost=cost)
    out = stream or sys.stdout
    print(f"\n{format_table(summary)}\n", file=out)
    if cost is not None:
        print(f"{format_comparison(cost)}\n", file=out)
    best = summary["best"]
    if best is not None:
        print(
            f"best {spec.metric}={best['value']:.4f} (trial {best['tune_trial_id']}, "
            f"{best['state']}); config in {run_dir / rundir.BEST_FILE}",
            file=out,
        )
    return CampaignResult(run_dir=run_dir, summary=summary)


def _predicted_vs_actual(spec: CampaignSpec, run_dir: Path, wall_s: float) -> dict[str, Any] | None:
    """Writes profile.json; compares what the trials used with prediction.json."""
    run_profile = write_profile(spec, run_dir)
    prediction = read_prediction(run_dir)
    if prediction is None or run_profile is None:
        return None
    actual = actual_cost(
        run_profile,
        gpus_per_trial=_gpus_per_trial(spec),
        usd_per_gpu_hour=float(prediction.get("usd_per_gpu_hour", 0.0)),
        wall_s=wall_s,
    )
    return compare(prediction, actual)


def write_summary(
    spec: CampaignSpec,
    run_dir: Path,
    *,
    wall_s: float | None,
    tune_trials: int,
    cost: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Writes summary.json and best.yaml from the study; returns the summary.

    ``cost`` (predicted vs actual, see :mod:`tuner.cost._reality`) is added when given.
    """
    study = open_study(run_dir)
    summary = summarize(
        study,
        metric=spec.metric,
        maximize=spec.mode is Mode.MAX,
        max_epochs=spec.budget.max_epochs,
    )
    orphans = summary["orphans"]
    real = summary["trials"] - orphans
    finished = sum(summary["states"].get(s, 0) for s in ("COMPLETE", "PRUNED", "FAIL")) - orphans
    status = "completed" if finished >= spec.budget.trials else "time limit reached"
    summary = {
        "campaign": spec.name,
        "status": status,
        "trials_requested": spec.budget.trials,
        "trials_run": real,
        "trials_finished": finished,
        "tune_trials": tune_trials,
        "wall_s": wall_s,
        **summary,
        **({"cost": cost} if cost is not None else {}),
    }
    rundir.write_json(run_dir / rundir.SUMMARY_FILE, summary)
    best = summary["best"]
    if best is not None:
        config = _trial_config(run_dir, best["tune_trial_id"]) or dict(best["params"])
        rundir.write_yaml(
            run_dir / rundir.BEST_FILE,
            {
                "campaign": spec.name,
                "trial": best["tune_trial_id"],
                "metric": spec.metric,
                "value": best["value"],
                "epochs": best["epochs"],
                "config": config,
            },
        )
    return summary


def write_profile(spec: CampaignSpec, run_dir: Path) -> Profile | None:
    """Writes profile.json: what the campaign's real trials measured (see tuner.cost)."""
    try:
        profile = profile_from_run(run_dir, campaign=spec.name, trainable=spec.trainable)
    except TunerError:
        return None  # no trial reported an epoch: nothing measured
    profile.write(run_dir / rundir.PROFILE_FILE)
    return profile


def _gpus_per_trial(spec: CampaignSpec) -> float:
    return spec.resources.gpu * spec.resources.workers


def _trial_config(run_dir: Path, tune_id: str) -> dict[str, Any] | None:
    """The full config a trial ran with (hyperparameters and fixed settings)."""
    params = run_dir / f"trial_{tune_id}" / "params.json"
    if not params.is_file():
        return None
    with open(params) as handle:
        config: dict[str, Any] = json.load(handle)
    config = config.get(TRAIN_LOOP_CONFIG, config)
    return {k: v for k, v in config.items() if not k.startswith("tuner_")}
