"""The public Python API: load a campaign, run, resume or open it, profile, recommend, predict.

The CLI is a thin layer over these functions. They raise :class:`~tuner.errors.TunerError`
subclasses for bad input (never ``sys.exit``), leave the caller's logging configuration and
environment as they found them, and use a Ray the caller already started (an embedded one
is started and shut down otherwise). Ray and torch are imported only when a campaign runs.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from tuner import rundir
from tuner.errors import TunerWarning
from tuner.results import Result, open_run
from tuner.spec import CampaignSpec, Tracking, parse_campaign, parse_duration
from tuner.spec import load_campaign as _load_campaign_file
from tuner.spec._checks import Checker
from tuner.spec._limits import CAMPAIGN, FLAGS, Limit

if TYPE_CHECKING:
    from tuner._ray.cluster import RayOptions
    from tuner.cost import Catalog, Prediction, Profile
    from tuner.cost._advise import Advice

__all__ = [
    "load_campaign",
    "open_run",
    "predict",
    "profile",
    "recommend",
    "resume",
    "run",
]

PathLike = str | os.PathLike[str]


def load_campaign(
    source: PathLike | Mapping[str, Any], *, check_trainable: bool = True
) -> CampaignSpec:
    """Loads and validates a campaign: a campaign file, or the same as a mapping.

    A trainable ``module:function`` is looked up next to the campaign file and in the
    working directory (then installed packages), as ``tuner run`` does.

    Args:
        source: A campaign YAML file, or a mapping of its contents.
        check_trainable: Also import the trainable to check that it exists.

    Returns:
        The frozen campaign spec.

    Raises:
        FileError: The file is missing or unreadable.
        SpecError: The campaign breaks the schema (file, key path, value, what is allowed,
            the closest valid name).
    """
    if isinstance(source, Mapping):
        with rundir.code_dirs_on_path(_code_dirs(None)):
            return parse_campaign(source, "<dict>", check_trainable=check_trainable)
    with rundir.code_dirs_on_path(_code_dirs(str(source))):
        return _load_campaign_file(source, check_trainable=check_trainable)


def run(
    campaign: CampaignSpec | PathLike | Mapping[str, Any],
    *,
    trials: int | None = None,
    max_epochs: int | None = None,
    time_limit: float | str | None = None,
    seed: int | None = None,
    name: str | None = None,
    budget_usd: float | None = None,
    budget_gpu_hours: float | None = None,
    deadline: float | str | None = None,
    runs_dir: PathLike = rundir.DEFAULT_RUNS_ROOT,
    storage: str | None = None,
    profile: Profile | PathLike | None = None,
    usd_per_gpu_hour: float = 0.0,
    address: str | None = None,
    num_cpus: int | None = None,
    num_gpus: float | None = None,
    cluster_config: PathLike | None = None,
    worker_logs: bool = False,
    stream: TextIO | None = None,
    study_storage: str | None = None,
    warm_start: PathLike | None = None,
    tracking: Tracking | None = None,
) -> Result:
    """Runs a campaign to its end into a new run folder, ``<runs_dir>/<name>``.

    Args:
        campaign: A spec from :func:`load_campaign`, a campaign file, or a mapping.
        trials: Overrides ``budget.trials``.
        max_epochs: Overrides ``budget.max_epochs``.
        time_limit: Overrides ``budget.time_limit``: seconds, or a duration like ``"10m"``.
        seed: Overrides ``sampler.seed``.
        name: The campaign's name (and run folder's); a taken name gets ``-2``, ``-3``...
        budget_usd: Overrides ``budget.usd``: dollars the nodes may cost.
        budget_gpu_hours: Overrides ``budget.gpu_hours``.
        deadline: Overrides ``budget.deadline``: seconds, or a duration like ``"6h"``.
        runs_dir: Parent of the run folder.
        storage: Where Ray Tune keeps checkpoints and experiment state: a URI Ray supports
            (``s3://``, ``gs://``, ``file://``), or a folder (an NFS mount), which then
            replaces ``runs_dir``.
        profile: A profile of the trainable (a :class:`~tuner.cost.Profile`, a file from
            :func:`profile` or a run folder): predicts time and money at the start and lets
            the budget cap concurrency before the first epoch.
        usd_per_gpu_hour: Price of a GPU-hour here, for predicted vs actual dollars.
        address: A Ray cluster to join (``"auto"``, ``host:port``, ``ray://...``); default
            ``RAY_ADDRESS``, else an embedded local Ray. A Ray this process already started
            is used as it is, and left running.
        num_cpus: CPUs of the embedded Ray (default: all).
        num_gpus: GPUs of the embedded Ray (default: detected; logical GPUs work on CPU).
        cluster_config: The cluster's autoscaler config (node types, ``max_workers``).
        worker_logs: Stream the trials' own output here.
        stream: Where the live progress and the closing table go (default stdout).
        study_storage: Overrides ``study_storage``: the Optuna storage URL of the study
            (``postgresql+psycopg://user@host/db``, ``journal:///path``; default: study.db
            in the run folder). Checked to be reachable before anything is written.
        warm_start: Overrides ``warm_start.from``: an earlier campaign's run folder whose
            finished trials seed the sampler; its best (``warm_start.top``) are tried first.
            Checked before anything is written.
        tracking: Replaces the ``tracking`` section: the MLflow store and W&B project each
            trial is logged to (:class:`~tuner.spec.Tracking`); checked before anything is
            written.

    Returns:
        The campaign's :class:`~tuner.results.Result`.

    Raises:
        SpecError: An override or the campaign is invalid (nothing is written).
        ClusterError: No node can ever hold one trial (nothing is written).
        RunFolderError: The run folder cannot be created.
    """
    spec = _spec(campaign)
    _check_numbers(
        (usd_per_gpu_hour, "usd_per_gpu_hour", FLAGS["--usd-per-gpu-hour"]),
        (num_cpus, "num_cpus", FLAGS["--num-cpus"]),
        (num_gpus, "num_gpus", FLAGS["--num-gpus"]),
    )
    spec = spec.with_overrides(
        usd=budget_usd,
        gpu_hours=budget_gpu_hours,
        deadline_s=_seconds(deadline, "deadline"),
        trials=trials,
        max_epochs=max_epochs,
        time_limit_s=_seconds(time_limit, "time_limit"),
        seed=seed,
        name=name,
        study_storage=study_storage,
        warm_start=None if warm_start is None else str(warm_start),
        tracking=tracking,
    )
    root = Path(runs_dir)
    if storage is not None and rundir.is_uri(storage):
        rundir.check_storage_uri(storage, source="<api>", path="storage")
    elif storage is not None:
        root, storage = Path(storage), None  # a shared folder: the run folder goes there
    loaded = _profile_of(profile, spec, consequence=": predicted times will be off")
    run_dir = rundir.new_run_dir(root, spec.name)
    code_dirs = _code_dirs(spec.source)
    from tuner._ray.driver import run_campaign  # Ray and torch only once the input is good

    with rundir.code_dirs_on_path(code_dirs):
        outcome = run_campaign(
            spec,
            run_dir,
            _ray_options(address, num_cpus, num_gpus, cluster_config, worker_logs),
            stream=stream,
            code_dirs=code_dirs,
            profile=loaded,
            usd_per_gpu_hour=usd_per_gpu_hour,
            storage=storage,
        )
    return open_run(outcome.run_dir)


def resume(
    run_dir: PathLike,
    *,
    address: str | None = None,
    num_cpus: int | None = None,
    num_gpus: float | None = None,
    cluster_config: PathLike | None = None,
    worker_logs: bool = False,
    stream: TextIO | None = None,
) -> Result:
    """Continues a campaign whose driver stopped (killed, crashed or interrupted).

    Finished trials are kept, unfinished ones continue from their latest checkpoint, and
    ASHA's rungs, the Optuna study and the spend ledger carry on from the run folder.

    Args:
        run_dir: The run folder.
        address: See :func:`run` (and ``num_cpus``, ``num_gpus``, ``cluster_config``,
            ``worker_logs``, ``stream``).

    Raises:
        RunFolderError: Not a run folder, or Ray Tune saved no state to resume from.
    """
    folder = Path(run_dir)
    rundir.check_resumable(folder)
    from tuner._ray.driver import resume_campaign

    with rundir.code_dirs_on_path(rundir.read_code_dirs(folder)):
        outcome = resume_campaign(
            folder,
            _ray_options(address, num_cpus, num_gpus, cluster_config, worker_logs),
            stream=stream,
        )
    return open_run(outcome.run_dir)


def profile(
    campaign: CampaignSpec | PathLike | Mapping[str, Any],
    *,
    trials: int = 3,
    epochs: int = 3,
    config: Mapping[str, Any] | PathLike | None = None,
    address: str | None = None,
    num_cpus: int | None = None,
    num_gpus: float | None = None,
    cluster_config: PathLike | None = None,
    worker_logs: bool = False,
    progress: TextIO | None = None,
) -> Profile:
    """Measures a campaign's trainable here: a few short trials, one at a time.

    The trials run exactly as a campaign's do (same trainable, resources, reports and
    checkpoints), on random configurations of the space or on ``config``, in a temporary
    run folder; their results become the profile :func:`recommend` and :func:`run` use.

    Args:
        campaign: The campaign whose trainable to measure.
        trials: Configurations to measure.
        epochs: Epochs per trial (2 or more separate set-up from steady epochs).
        config: One configuration for every trial (a mapping, or a ``best.yaml``).
        address: See :func:`run` (and ``num_cpus``, ``num_gpus``, ``cluster_config``,
            ``worker_logs``).
        progress: Where to show the measurement's progress (phase, trial and epoch of
            how many, elapsed time): redrawn in place on a terminal, one line per phase,
            trial and epoch elsewhere. None: nothing is shown.

    Raises:
        SpecError: A bad config, or no trial reported an epoch (the trainable failed).
    """
    from tuner.spec import load_config_file

    spec = _spec(campaign)
    _check_numbers(
        (trials, "trials", CAMPAIGN["budget.trials"]),
        (epochs, "epochs", CAMPAIGN["budget.max_epochs"]),
        (num_cpus, "num_cpus", FLAGS["--num-cpus"]),
        (num_gpus, "num_gpus", FLAGS["--num-gpus"]),
    )
    if config is not None and not isinstance(config, Mapping):
        config = load_config_file(Path(config))
    options = _ray_options(address, num_cpus, num_gpus, cluster_config, worker_logs)
    return _measure(
        spec, trials=trials, epochs=epochs, config=config, options=options, progress=progress
    )


def _measure(
    spec: CampaignSpec,
    *,
    trials: int,
    epochs: int,
    config: Mapping[str, Any] | None,
    options: RayOptions,
    progress: TextIO | None = None,
) -> Profile:
    """Runs the profiling campaign of ``spec`` in a temporary run folder; its profile."""
    from tuner._ray.profiling import measure_profile
    from tuner.cost import profile_spec

    measured = profile_spec(spec, trials=trials, epochs=epochs, config=config)
    code_dirs = _code_dirs(spec.source)
    return measure_profile(spec, measured, options, code_dirs=code_dirs, progress=progress)


def recommend(
    campaign: CampaignSpec | PathLike | Mapping[str, Any],
    *,
    budget_usd: float,
    deadline: float | str | None = None,
    profile: Profile | PathLike | None = None,
    catalog: Catalog | PathLike | None = None,
    spot: bool = False,
    clouds: Sequence[str] = (),
    gpus_per_trial: float | None = None,
    precision: str | None = None,
    max_instances: int = 8,
    provision: float | str = "5m",
    address: str | None = None,
    num_cpus: int | None = None,
    num_gpus: float | None = None,
    cluster_config: PathLike | None = None,
    worker_logs: bool = False,
) -> Advice:
    """Ranks the catalog's GPU instance types for a campaign, a budget and a deadline.

    Args:
        campaign: The campaign.
        budget_usd: Dollars available.
        deadline: Wall-clock time available: seconds, or a duration like ``"6h"``.
        profile: A profile of the trainable (a Profile, a file or a run folder); without
            one the trainable is measured here first (:func:`profile`, 3 x 3 epochs).
        catalog: The price catalog (a Catalog, or your instance CSV added to the shipped
            one); default the shipped catalog.
        spot: Price on spot instances.
        clouds: Only these clouds (e.g. ``["aws", "gcp"]``).
        gpus_per_trial: GPUs per trial (default: the campaign's, 1 if it asks for none).
        precision: The math to predict for (``fp32``, ``tf32``, ``amp``...).
        max_instances: Most machines of a type.
        provision: Billed time per machine to boot and set up: seconds, or ``"5m"``.
        address: Where to measure without a profile (and ``num_cpus``, ``num_gpus``,
            ``cluster_config``, ``worker_logs``; see :func:`run`).

    Returns:
        The advice: its ``recommendation`` (ranked options, the pick within the deadline
        and within the budget, the Pareto front) and notes; write its report with
        :func:`tuner.report.write_recommendation`.
    """
    from tuner.cost import AshaGeometry, load_catalog
    from tuner.cost._advise import advise

    spec = _spec(campaign)
    _check_numbers(
        (budget_usd, "budget_usd", FLAGS["--budget-usd"]),
        (gpus_per_trial, "gpus_per_trial", FLAGS["--gpus-per-trial"]),
        (max_instances, "max_instances", FLAGS["--max-instances"]),
        (num_cpus, "num_cpus", FLAGS["--num-cpus"]),
        (num_gpus, "num_gpus", FLAGS["--num-gpus"]),
    )
    deadline_s = None
    if deadline is not None:
        deadline_s = parse_duration(deadline, source="<api>", path="deadline")
    provision_s = parse_duration(
        provision, source="<api>", path="provision", limit=FLAGS["--provision"]
    )
    if catalog is None or isinstance(catalog, (str, os.PathLike)):
        catalog = load_catalog(None if catalog is None else Path(catalog))
    loaded = _profile_of(profile, spec)
    if loaded is None:
        options = _ray_options(address, num_cpus, num_gpus, cluster_config, worker_logs)
        loaded = _measure(spec, trials=3, epochs=3, config=None, options=options)
    return advise(
        spec.name,
        AshaGeometry.from_spec(spec),
        loaded,
        catalog,
        budget_usd=budget_usd,
        deadline_h=None if deadline_s is None else deadline_s / 3600,
        spot=spot,
        gpus_per_trial=gpus_per_trial if gpus_per_trial is not None else default_gpus(spec),
        cpus_per_trial=float(spec.resources.cpus_per_trial),
        precision=precision,
        clouds=list(clouds),
        max_instances=max_instances,
        provision_s=provision_s,
    )


def predict(
    samples_per_s: float,
    *,
    from_gpu: str,
    to_gpu: str,
    precision: str,
    flops_per_sample: float | None = None,
    workload_class: str = "default",
    non_scaling_share: float = 0.0,
) -> Prediction:
    """Predicts a training throughput measured on one GPU model on another.

    Args:
        samples_per_s: Training samples per second measured on ``from_gpu``.
        from_gpu: The GPU model it was measured on (e.g. ``A100-SXM4-40GB``).
        to_gpu: The GPU model to predict for.
        precision: The math it ran in (``fp32``, ``tf32``, ``amp``...).
        flops_per_sample: Training FLOPs per sample (forward and backward), if measured.
        workload_class: The calibrated class that splits the step when FLOPs are unknown.
        non_scaling_share: Share of the measured time that does not scale (data loading).

    Raises:
        SpecError: An unknown GPU, precision or class, or a bad number.
    """
    from tuner.cost import predict_throughput

    return predict_throughput(
        samples_per_s,
        from_gpu,
        to_gpu,
        precision,
        flops_per_sample,
        workload_class=workload_class,
        non_scaling_share=non_scaling_share,
    )


def default_gpus(spec: CampaignSpec) -> float:
    """GPUs per trial a recommendation prices: the campaign's, or 1 when it asks for none."""
    return float(spec.resources.gpus_per_trial) or 1.0


def _spec(campaign: CampaignSpec | PathLike | Mapping[str, Any]) -> CampaignSpec:
    return campaign if isinstance(campaign, CampaignSpec) else load_campaign(campaign)


def _code_dirs(source: str | None) -> list[str]:
    """Where a campaign's ``module:function`` trainable is imported from: the campaign
    file's folder and the working directory (then installed packages)."""
    dirs = []
    if source is not None and Path(source).is_file():
        dirs.append(str(Path(source).resolve().parent))
    dirs.append(str(Path.cwd()))
    return list(dict.fromkeys(dirs))


def _check_numbers(*numbers: tuple[float | None, str, Limit]) -> None:
    """Each ``(value, argument name, limit)`` given (not None) is in its limit's range."""
    ck = Checker("<api>")
    with ck.collecting():
        each = ck.group()
        for value, name, limit in numbers:
            if value is None:
                continue
            with each:
                if limit.kind == "int":
                    ck.integer(value, name, limit=limit)
                else:
                    ck.number(value, name, limit=limit)


def _seconds(value: float | str | None, name: str) -> float | None:
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return None if value is None else float(value)
    return parse_duration(str(value), source="<api>", path=name)


def _profile_of(
    profile: Profile | PathLike | None, spec: CampaignSpec, *, consequence: str = ""
) -> Profile | None:
    """``profile`` loaded; a :class:`TunerWarning` when it measured another trainable."""
    from tuner.cost import Profile, load_profile

    if profile is None:
        return None
    loaded = profile if isinstance(profile, Profile) else load_profile(Path(profile))
    if loaded.trainable != spec.trainable:
        where = f"the profile of {loaded.campaign!r}" if isinstance(profile, Profile) else profile
        warnings.warn(
            f"{where} profiles {loaded.trainable!r}, but the campaign trains "
            f"{spec.trainable!r}{consequence}",
            TunerWarning,
            stacklevel=3,
        )
    return loaded


def _ray_options(
    address: str | None,
    num_cpus: int | None,
    num_gpus: float | None,
    cluster_config: PathLike | None,
    worker_logs: bool,
) -> RayOptions:
    from tuner._ray.cluster import RayOptions

    return RayOptions(
        address=address,
        num_cpus=num_cpus,
        num_gpus=num_gpus,
        worker_logs=worker_logs,
        cluster_config=None if cluster_config is None else Path(cluster_config),
    )
