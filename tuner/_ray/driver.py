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
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import optuna
import ray
import yaml
from ray import tune

from tuner import atomic, rundir
from tuner._ray.failures import STATUS_FAILURES, FailureWatch
from tuner._ray.guard import BudgetGuard, GuardLink
from tuner._ray.progress import ProgressCallback
from tuner._ray.scheduler import PersistentASHA, PersistentFIFO
from tuner._ray.searcher import (
    FAILURE_ATTR,
    ORPHAN_REASON,
    STOP_REASON_ATTR,
    TUNE_TRIAL_ID_ATTR,
    FidelityOptunaSearch,
)
from tuner._ray.snapshot import (
    ORPHAN_DIR,
    KeepTrialLogs,
    SnapshotGuard,
    recover_trial_logs,
    repair_snapshot,
    set_aside_orphans,
)
from tuner._ray.trial import run_trial
from tuner.budget import (
    LEDGER_FILE,
    Ledger,
    Limits,
    NodePricer,
    NodeType,
    PricingError,
    affordable_slots,
    capacity,
    format_request,
    infeasible,
    node_resources,
    node_types_from_config,
)
from tuner.contract import (
    CHECKPOINT_EVERY_KEY,
    EPOCH_KEY,
    MAX_EPOCHS_KEY,
    SEED_KEY,
    STOP_KEY,
    TRAIN_LOOP_CONFIG,
    TRAINABLE_KEY,
    WORKERS_KEY,
    hyperparameters,
)
from tuner.cost import AshaGeometry, CatalogWarning, Profile, load_catalog, profile_from_run
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
from tuner.study import checkpoint_study, study_storage
from tuner.summary import format_failures, format_table, open_study, summarize

logger = logging.getLogger(__name__)

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
        cluster_config: The cluster's autoscaler config (node types and max_workers), for
            capacity, PENDING reasons and prices of nodes not started yet. On a head made
            by `ray up` it is found at ~/ray_bootstrap_config.yaml by itself.
    """

    address: str | None = None
    num_cpus: int | None = None
    num_gpus: float | None = None
    worker_logs: bool = False
    cluster_config: Path | None = None


# Where `ray up` leaves the autoscaler's config on the head node.
BOOTSTRAP_CONFIG = "~/ray_bootstrap_config.yaml"


@dataclass(frozen=True)
class ClusterView:
    """What the campaign knows of the cluster it runs on.

    Attributes:
        node_types: The autoscaler's node types (empty: no autoscaler config known).
        max_workers: The autoscaler's global worker cap.
        alive: Resources of each alive node.
        config_path: Where the node types came from.
    """

    node_types: list[NodeType] = field(default_factory=list)
    max_workers: int | None = None
    alive: list[dict[str, float]] = field(default_factory=list)
    config_path: str | None = None

    @property
    def autoscaling(self) -> bool:
        """Whether an autoscaler config is known (capacity is asked for and released)."""
        return bool(self.node_types)


def read_cluster(options: RayOptions, *, joined: bool) -> ClusterView:
    """The cluster's node types (from its autoscaler config) and its alive nodes."""
    path = options.cluster_config
    if path is None and joined:
        bootstrap = Path(BOOTSTRAP_CONFIG).expanduser()
        path = bootstrap if bootstrap.is_file() else None
    node_types: list[NodeType] = []
    max_workers = None
    if path is not None:
        try:
            config = yaml.safe_load(Path(path).read_text())
        except (OSError, yaml.YAMLError) as err:
            raise TunerError(
                f"{path}: cannot read the cluster config: {err}.\n"
                "  To fix: pass the YAML file `ray up` used (--cluster-config)."
            ) from None
        if not isinstance(config, dict) or "available_node_types" not in config:
            raise TunerError(
                f"{path}: not an autoscaler config (no available_node_types).\n"
                "  To fix: pass a cluster.yaml with node types, or leave --cluster-config out."
            )
        node_types = node_types_from_config(config)
        raw = config.get("max_workers")
        max_workers = int(raw) if isinstance(raw, (int, float)) else None
    alive = [node_resources(n.get("Resources") or {}) for n in ray.nodes() if n.get("Alive")]
    return ClusterView(node_types, max_workers, alive, None if path is None else str(path))


def trial_request(spec: CampaignSpec) -> dict[str, float]:
    """The resources one trial (one DDP worker of it) asks for."""
    return spec.resources.bundle()


def refuse_infeasible(
    spec: CampaignSpec, cluster: ClusterView, *, autoscaler_unknown: bool
) -> None:
    """Raises when no node type (nor alive node) can ever hold one trial.

    Without a known autoscaler config on a cluster that was joined, an autoscaler may still
    add a node that fits, so only a warning is printed then.
    """
    reason = infeasible(trial_request(spec), cluster.node_types, cluster.alive)
    if reason is None:
        return
    source = spec.source
    if autoscaler_unknown:
        print(
            f"warning: {reason} (no autoscaler config known; a node that fits may still be added)",
            file=sys.stderr,
        )
        return
    where = cluster.config_path or "this machine's Ray"
    raise TunerError(
        f"{source}: resources: each trial asks for {format_request(trial_request(spec))}, "
        f"but {reason} ({where}).\n"
        "  To fix: lower resources.cpu / resources.gpu, or add a node type that fits "
        "(or start the local Ray with --num-cpus / --num-gpus)."
    )


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
        # An embedded Ray is this process's alone: no dashboard UI, its dashboard
        # process (Ray's job and state API) on loopback, and (Ray 2.60's default for a
        # local cluster) every client must show the token in ~/.ray/auth_token. Ray 2.60
        # itself turns a node address of 127.0.0.1 into the machine's reachable one and
        # its GCS and raylet listen on all interfaces; the token is what keeps others out
        # (README, "Security").
        ray.init(
            address="local",
            num_cpus=options.num_cpus,
            num_gpus=options.num_gpus,  # type: ignore[arg-type]  # fractional is fine
            include_dashboard=False,
            dashboard_host="127.0.0.1",
            **common,
        )
    return True


def max_concurrent_trials(
    spec: CampaignSpec, cluster: dict[str, float], view: ClusterView | None = None
) -> int:
    """Trials that can run at once: the campaign's cap, else what the cluster fits.

    With the autoscaler's node types known, what the cluster fits at its largest.
    """
    if spec.resources.max_concurrent is not None:
        return min(spec.resources.max_concurrent, spec.budget.trials)
    workers = spec.resources.workers
    if view is not None and view.autoscaling:
        bundles = capacity(trial_request(spec), view.node_types, view.max_workers)
        return max(1, min(spec.budget.trials, bundles // workers))
    fits = cluster.get("CPU", 0.0) / spec.resources.cpus_per_trial
    if spec.resources.gpu > 0:
        fits = min(fits, cluster.get("GPU", 0.0) / spec.resources.gpus_per_trial)
    return max(1, min(spec.budget.trials, math.floor(fits + 1e-9)))


def _trial_name(trial: Any) -> str:
    return f"trial_{trial.trial_id}"


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


def _service_config(spec: CampaignSpec, stop_key: str) -> dict[str, Any]:
    """The constant part of every trial's config: fixed settings and reserved keys."""
    return {
        STOP_KEY: stop_key,
        **dict(spec.fixed),
        **({WORKERS_KEY: spec.resources.workers} if _data_parallel(spec) else {}),
        TRAINABLE_KEY: spec.trainable,
        MAX_EPOCHS_KEY: spec.budget.max_epochs,
        SEED_KEY: spec.sampler.seed if spec.sampler.seed is not None else 0,
        CHECKPOINT_EVERY_KEY: spec.checkpoint.every,
    }


def is_uri(storage: str | None) -> bool:
    """Whether ``storage`` is a URI (s3://, gs://, file://...) rather than a local path."""
    return storage is not None and "://" in storage


def _storage_root(run_dir: Path, storage: str | None) -> str:
    """Where Tune keeps the experiment: the run folder's parent, or a storage URI."""
    return storage.rstrip("/") if storage and is_uri(storage) else str(run_dir.parent.resolve())


def _build_tuner(
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
        nest_under=TRAIN_LOOP_CONFIG if _data_parallel(spec) else None,
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
            min_peers=0 if _data_parallel(spec) else spec.scheduler.min_peers,
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
        reuse_actors=not _data_parallel(spec),
        time_budget_s=spec.budget.time_limit_s,
        trial_name_creator=_trial_name,
        trial_dirname_creator=_trial_name,
    )
    run_config = tune.RunConfig(
        name=run_dir.name,
        storage_path=_storage_root(run_dir, storage),
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
    service = _service_config(spec, stop_key)
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
    # Tune raises in the driver (ending the whole run) at a result without the metric; such
    # a trial is FAIL with a message naming what it reported instead (tuner.outcome).
    os.environ.setdefault("TUNE_DISABLE_STRICT_METRIC_CHECKING", "1")
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
    storage: str | None = None,
) -> CampaignResult:
    """Runs a new campaign into ``run_dir`` (which must not exist yet).

    Args:
        spec: The validated campaign.
        run_dir: The run folder to create, e.g. ``runs/<name>``.
        options: Where Ray runs; default an embedded local Ray.
        stream: Where progress goes (default stdout).
        code_dirs: Folders the trainable was imported from (recorded for resume).
        profile: A profile of the trainable; with it the prediction written at the start
            (prediction.json) covers trial-seconds, GPU-hours and dollars, not only work,
            and the budget guard can cap concurrency before the first epoch is measured.
        usd_per_gpu_hour: What a GPU-hour costs here, for the predicted vs actual dollars
            (0 for a local run; the ledger prices nodes itself, see ``pricing``).
        storage: A URI Ray Tune supports (s3://, gs://, file://...) for the experiment's
            checkpoints and state, as ``RunConfig.storage_path``; trials on any node write
            there. The run folder keeps the study and the ledger and is copied to
            ``<storage>/<run folder name>/`` at the end. None: all in the run folder.

    Returns:
        The run folder and its summary.

    Raises:
        TunerError: The run folder exists, or no node can ever hold one trial (nothing is
            written then).
    """
    if run_dir.exists():
        raise TunerError(
            f"{run_dir}: run folder exists already.\n"
            f"  To fix: `tuner resume {run_dir}` to continue it, or choose another --name."
        )
    if is_uri(storage):
        rundir.check_storage_uri(str(storage), source="run_campaign", path="storage")
    options = options or RayOptions()
    _prepare_env(spec)
    pricer = make_pricer(spec)
    started = _init_ray(options)
    try:
        joined = _joined(options)
        cluster = read_cluster(options, joined=joined)
        refuse_infeasible(spec, cluster, autoscaler_unknown=joined and not cluster.autoscaling)
        check_prices(pricer, cluster)
        run_dir.mkdir(parents=True)
        stop_key = f"stop:{spec.name}:{uuid.uuid4().hex}"
        rundir.write_yaml(run_dir / rundir.CAMPAIGN_FILE, spec.to_dict())
        atomic.write_json(
            run_dir / rundir.RUN_FILE,
            {
                "code_dirs": list(code_dirs or []),
                "stop_key": stop_key,
                **({"storage": storage} if is_uri(storage) else {}),
            },
        )
        concurrent = max_concurrent_trials(spec, ray.cluster_resources(), cluster)
        guard = _make_guard(
            spec, run_dir, Ledger(), pricer, cluster, concurrent, profile, stream, stop_key
        )
        concurrent = guard.slots
        atomic.write_json(
            run_dir / PREDICTION_FILE,
            predict_cost(
                AshaGeometry.from_spec(spec),
                workers=concurrent,
                gpus_per_trial=spec.resources.gpus_per_trial,
                usd_per_gpu_hour=usd_per_gpu_hour,
                profile=profile,
            ),
        )
        tuner = _build_tuner(
            spec, run_dir, stream, concurrent=concurrent, stop_key=stop_key, storage=storage
        )
        watch = FailureWatch(stop_key, spec.failure.max_failed_trials, stream)
        result = _fit_and_summarize(spec, run_dir, tuner, stream, guard, cluster, watch)
    finally:
        if started:
            ray.shutdown()
    _finish(run_dir, storage, stream)
    return result


def resume_campaign(
    run_dir: Path, options: RayOptions | None = None, *, stream: TextIO | None = None
) -> CampaignResult:
    """Continues a campaign whose driver stopped (killed, crashed or interrupted).

    Finished trials are not rerun; unfinished ones continue from their latest checkpoint;
    ASHA's rungs, the Optuna study and the spend ledger carry on from the run folder.
    """
    campaign_file = rundir.check_resumable(run_dir)
    spec = load_campaign(campaign_file)
    final = _final_trial_ids(run_dir)
    repaired = repair_snapshot(run_dir)
    if repaired:
        state = [name for name in repaired if "/" not in name]
        logs = len(repaired) - len(state)
        what = ", ".join(state + ([f"{logs} trial result log(s)"] if logs else []))
        print(
            "restored Tune's last whole snapshot over files a crash left damaged or out of "
            f"step: {what}",
            file=stream or sys.stdout,
        )
    recovered = recover_trial_logs(run_dir, final)
    if recovered:
        print(
            f"recovered {len(recovered)} result log(s) of trials that ended after Tune's last "
            "snapshot from the stopped driver's staging folder",
            file=stream or sys.stdout,
        )
    orphans = set_aside_orphans(run_dir, finished=final)
    if orphans:
        print(
            f"{len(orphans)} trial folder(s) of trials started after Tune's last snapshot "
            f"moved to {run_dir / ORPHAN_DIR}: {', '.join(orphans)}",
            file=stream or sys.stdout,
        )
    run_info = json.loads((run_dir / rundir.RUN_FILE).read_text())
    storage = run_info.get("storage")
    experiment = f"{storage.rstrip('/')}/{run_dir.name}" if storage else str(run_dir.resolve())
    if not tune.Tuner.can_restore(experiment):
        raise TunerError(
            f"{run_dir}: Ray Tune saved no experiment state here (the driver died before "
            "its first snapshot).\n  To fix: start it again with `tuner run`."
        )
    options = options or RayOptions()
    _prepare_env(spec)
    pricer = make_pricer(spec)
    stop_key = run_info.get("stop_key")
    ledger, ledger_file = read_ledger(run_dir)
    started = _init_ray(options)
    try:
        cluster = read_cluster(options, joined=_joined(options))
        tuner = tune.Tuner.restore(
            experiment,
            trainable=_trainable(spec),
            resume_unfinished=True,
            resume_errored=False,
        )
        guard = None
        if stop_key:  # run folders of older versions have no guard
            concurrent = max_concurrent_trials(spec, ray.cluster_resources(), cluster)
            guard = _make_guard(
                spec, run_dir, ledger, pricer, cluster, concurrent, None, stream, stop_key
            )
            guard.carry_over(ledger_file)
        print(f"resuming campaign {spec.name} from {run_dir}", file=stream or sys.stdout)
        watch = None
        if stop_key:
            watch = FailureWatch(
                stop_key, spec.failure.max_failed_trials, stream, earlier=_failed_trials(run_dir)
            )
        result = _fit_and_summarize(spec, run_dir, tuner, stream, guard, cluster, watch)
    finally:
        if started:
            ray.shutdown()
    _finish(run_dir, storage, stream)
    return result


def _finish(run_dir: Path, storage: str | None, stream: TextIO | None) -> None:
    """The report, then the copy to storage: after the embedded Ray is shut down, so its
    workers (and on a GPU machine their CUDA memory) are not held while plots are drawn."""
    _write_report(run_dir, stream or sys.stdout)
    _upload(run_dir, storage, stream)


def check_prices(pricer: NodePricer, cluster: ClusterView) -> None:
    """Prices every node type before the campaign starts: a bad label is an error now."""
    for node_type in cluster.node_types:
        try:
            pricer.price(node_type.resources, node_type.labels)
        except PricingError as err:
            raise TunerError(
                f"{cluster.config_path}: available_node_types.{node_type.name}.labels: {err}"
            ) from None


def _upload(run_dir: Path, storage: str | None, stream: TextIO | None) -> None:
    """Copies the run folder's own files next to Tune's in the storage URI."""
    if not is_uri(storage):
        return
    import pyarrow.fs  # type: ignore[import-untyped]  # Ray's dependency

    assert storage is not None
    target = f"{storage.rstrip('/')}/{run_dir.name}"
    fs, path = pyarrow.fs.FileSystem.from_uri(target)
    pyarrow.fs.copy_files(
        str(run_dir.resolve()),
        path,
        source_filesystem=pyarrow.fs.LocalFileSystem(),
        destination_filesystem=fs,
    )
    print(f"run folder copied to {target}", file=stream or sys.stdout)


def _joined(options: RayOptions) -> bool:
    address = options.address or os.environ.get("RAY_ADDRESS")
    return bool(address) and address != "local"


def make_pricer(spec: CampaignSpec) -> NodePricer:
    """Prices nodes for the ledger: the catalog (plus ``pricing.catalog``) and the default."""
    user = spec.pricing.catalog
    if user is not None and not Path(user).is_absolute() and spec.source != "<dict>":
        beside = Path(spec.source).parent / user
        user = str(beside) if beside.is_file() else user
    with warnings.catch_warnings():
        # Stale-price warnings belong to `tuner recommend`; the ledger uses what there is.
        warnings.simplefilter("ignore", CatalogWarning)
        catalog = load_catalog(user)
    return NodePricer(
        catalog.instances,
        catalog.gpus,
        default_usd_per_hour=spec.pricing.node_usd_per_hour,
        spot=spec.pricing.spot,
    )


def read_ledger(run_dir: Path) -> tuple[Ledger, dict[str, Any]]:
    """The run's ledger.json as a ledger and as written (the guard's outcome is there too),
    or a fresh ledger and {} when there is none."""
    path = run_dir / LEDGER_FILE
    if not path.is_file():
        return Ledger(), {}
    try:
        data = dict(json.loads(path.read_text()))
        return Ledger.from_dict(data), data
    except (ValueError, TypeError, KeyError) as err:
        raise TunerError(
            f"{path}: the spend ledger is damaged ({err}).\n"
            "  To fix: restore it from a backup; deleting it resumes with nothing spent."
        ) from None


def _make_guard(
    spec: CampaignSpec,
    run_dir: Path,
    ledger: Ledger,
    pricer: NodePricer,
    cluster: ClusterView,
    concurrent: int,
    profile: Profile | None,
    stream: TextIO | None,
    stop_key: str,
) -> BudgetGuard:
    geometry = AshaGeometry.from_spec(spec)
    limits = Limits.from_budget(spec.budget)
    epoch_s = profile.epoch_s if profile is not None and profile.trials else None
    guard = BudgetGuard(
        run_dir=run_dir,
        ledger=ledger,
        pricer=pricer,
        limits=limits,
        geometry=geometry,
        request=trial_request(spec),
        slots=concurrent,
        node_types=cluster.node_types,
        max_workers=cluster.max_workers,
        epoch_s=epoch_s,
        pending_warning_s=spec.resources.pending_warning_s,
        max_epochs=spec.budget.max_epochs,
        epoch_attr=EPOCH_ATTR,
        stop_key=stop_key,
        stream=stream,
    )
    if epoch_s is not None and limits.any and spec.resources.max_concurrent is None:
        usd_s, gpu_s = guard.planned_rates()
        first = (*geometry.decision_epochs(), geometry.max_epochs)[0]
        cap = affordable_slots(
            limits, usd_per_trial_s=usd_s, gpu_h_per_trial_s=gpu_s, first_rung_s=epoch_s * first
        )
        if cap is not None and cap < concurrent:
            print(
                f"budget: {cap} trial(s) at a time (of {concurrent} the cluster fits): what "
                "the budget affords with every one reaching ASHA's first rung",
                file=stream or sys.stdout,
            )
            guard.slots = cap
    return guard


@contextmanager
def _capacity_requested(spec: CampaignSpec, cluster: ClusterView, slots: int) -> Iterator[None]:
    """Asks the autoscaler for the campaign's capacity at once; releases it at the end."""
    if not cluster.autoscaling:
        yield
        return
    from ray.autoscaler.sdk import request_resources

    bundle = trial_request(spec)
    request_resources(bundles=[bundle] * (slots * spec.resources.workers))
    try:
        yield
    finally:
        # Idle nodes then go away after the autoscaler's idle timeout.
        request_resources(bundles=[])


def _fit_and_summarize(
    spec: CampaignSpec,
    run_dir: Path,
    tuner: tune.Tuner,
    stream: TextIO | None,
    guard: BudgetGuard | None = None,
    cluster: ClusterView | None = None,
    watch: FailureWatch | None = None,
) -> CampaignResult:
    start = time.monotonic()
    if guard is not None:
        guard.start()
    if watch is not None:
        watch.start()
    try:
        with _capacity_requested(spec, cluster or ClusterView(), guard.slots if guard else 1):
            grid = tuner.fit()
    finally:
        if guard is not None:
            guard.close()
        if watch is not None:
            watch.close()
    wall_s = time.monotonic() - start
    checkpoint_study(run_dir)  # study.db alone is the whole study from here on
    if guard is not None and guard.exhausted is not None:
        _close_unstarted(run_dir, spec, guard.exhausted)
    cost = _predicted_vs_actual(spec, run_dir, wall_s)
    budget = guard.summary() if guard is not None else None
    summary = write_summary(
        spec,
        run_dir,
        wall_s=wall_s,
        tune_trials=len(grid),
        cost=cost,
        budget=budget,
        failure_limit=watch.summary() if watch is not None else None,
    )
    out = stream or sys.stdout
    print(f"\n{format_table(summary)}\n", file=out)
    failures = format_failures(summary)
    if failures:
        print(f"{failures}\n", file=out)
    if cost is not None:
        print(f"{format_comparison(cost)}\n", file=out)
    if budget is not None:
        print(f"{format_spend(budget)}\n", file=out)
    best = summary["best"]
    if best is not None:
        print(
            f"best {spec.metric}={best['value']:.4f} (trial {best['tune_trial_id']}, "
            f"{best['state']}); config in {run_dir / rundir.BEST_FILE}",
            file=out,
        )
    if summary["status"] == STATUS_BUDGET:
        print(f"status: {STATUS_BUDGET} ({budget and budget['exhausted']})", file=out)
    if summary["status"] == STATUS_FAILURES:
        limit = summary["failure_limit"]
        print(
            f"status: {STATUS_FAILURES} ({limit['failed']} trials failed, more than "
            f"failure.max_failed_trials={limit['max_failed_trials']}; "
            f"{summary['trials_finished']} of {spec.budget.trials} trials finished)",
            file=out,
        )
    return CampaignResult(run_dir=run_dir, summary=summary)


NO_REPORT_ENV = "TUNER_NO_REPORT"
"""Set (to anything but empty or 0) to skip the report at the end of a campaign (the test
suite does: ~2 s of plotting per campaign); ``tuner report RUN_DIR`` writes it later."""


def _write_report(run_dir: Path, out: TextIO) -> None:
    """The campaign report at the end of the run; its failure never loses the campaign."""
    if os.environ.get(NO_REPORT_ENV, "") not in ("", "0"):
        return
    from tuner.report import write_report

    try:
        written = write_report(run_dir)
    except Exception as err:  # the results are saved; the report can be rewritten
        print(
            f"report not written ({type(err).__name__}: {err}); `tuner report {run_dir}` retries",
            file=out,
        )
        return
    print(
        f"report: {written['html']} (also {written['markdown'].name}, {written['json'].name})",
        file=out,
    )


def _final_trial_ids(run_dir: Path) -> set[str]:
    """Tune ids of the study's trials that ended (not as orphans): whole trials."""
    try:
        study = open_study(run_dir)
    except FileNotFoundError:
        return set()
    return {
        str(t.user_attrs[TUNE_TRIAL_ID_ATTR])
        for t in study.get_trials(deepcopy=False)
        if t.state.is_finished()
        and TUNE_TRIAL_ID_ATTR in t.user_attrs
        and t.user_attrs.get(STOP_REASON_ATTR) != ORPHAN_REASON
    }


def _failed_trials(run_dir: Path) -> int:
    """Trials of the study that failed by their own fault (what the failure limit counts)."""
    try:
        study = open_study(run_dir)
    except FileNotFoundError:
        return 0
    return sum(1 for t in study.get_trials(deepcopy=False) if FAILURE_ATTR in t.user_attrs)


STATUS_BUDGET = "budget exhausted"
# What is left of the budget affords no further trial: none starts, the campaign ends.
STATUS_HELD_BACK = "stopped: the budget affords no further trial"


def _close_unstarted(run_dir: Path, spec: CampaignSpec, reason: str) -> None:
    """Trials asked for but stopped by the budget before they started: FAIL, with why.

    Tune ends such trials without telling the searcher; left RUNNING, they would look
    orphaned to a resume.
    """
    from optuna.trial import TrialState

    from tuner._ray.searcher import STOP_REASON_ATTR

    study = open_study(run_dir)
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study._storage.set_trial_user_attr(
            trial._trial_id, STOP_REASON_ATTR, f"{reason}; it never started"
        )
        study.tell(trial.number, state=TrialState.FAIL)


def format_spend(budget: dict[str, Any]) -> str:
    """The ledger's totals in one line, e.g. ``spent $1.20 of $5.00: 0.9 node-hours...``."""
    limits = budget["limits"]
    usd = f"${budget['usd']:,.2f}"
    if limits.get("usd") is not None:
        usd += f" of ${limits['usd']:,.2f}"
    parts = [
        f"spent {usd}",
        f"{budget['node_hours']:.3g} node-hours on {budget['nodes']} node(s)",
        f"{budget['gpu_hours']:.3g} GPU-hours of nodes"
        + (f" (limit {limits['gpu_hours']:g})" if limits.get("gpu_hours") is not None else ""),
        f"{budget['trial_gpu_hours']:.3g} GPU-hours in trials",
    ]
    share = budget.get("gpu_node_idle_share")
    if share is not None:
        parts.append(f"GPU nodes idle {100 * share:.0f}% of their time")
    return "ledger: " + "; ".join(parts)


def _predicted_vs_actual(spec: CampaignSpec, run_dir: Path, wall_s: float) -> dict[str, Any] | None:
    """Writes profile.json; compares what the trials used with prediction.json."""
    run_profile = write_profile(spec, run_dir)
    prediction = read_prediction(run_dir)
    if prediction is None or run_profile is None:
        return None
    actual = actual_cost(
        run_profile,
        gpus_per_trial=spec.resources.gpus_per_trial,
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
    budget: dict[str, Any] | None = None,
    failure_limit: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Writes summary.json and best.yaml from the study; returns the summary.

    ``cost`` (predicted vs actual, see :mod:`tuner.cost._reality`), ``budget`` (the
    ledger's totals and the guard's outcome) and ``failure_limit`` (the failure watch's
    count against ``failure.max_failed_trials``) are added when given.
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
    if budget is not None and budget.get("exhausted"):
        status = STATUS_BUDGET
    elif budget is not None and budget.get("held_back") and finished < spec.budget.trials:
        status = STATUS_HELD_BACK
    if failure_limit is not None and failure_limit.get("limit_reached"):
        status = STATUS_FAILURES
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
        **({"budget": budget} if budget is not None else {}),
        **({"failure_limit": failure_limit} if failure_limit is not None else {}),
    }
    atomic.write_json(run_dir / rundir.SUMMARY_FILE, summary)
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


def _trial_config(run_dir: Path, tune_id: str) -> dict[str, Any] | None:
    """The full config a trial ran with (hyperparameters and fixed settings)."""
    params = run_dir / f"trial_{tune_id}" / "params.json"
    if not params.is_file():
        return None
    with open(params) as handle:
        config: dict[str, Any] = json.load(handle)
    return hyperparameters(config)
