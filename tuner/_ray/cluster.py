"""Where a campaign runs: starting or joining Ray, what the cluster holds and can fit.

The cluster view comes from Ray's alive nodes and, where known, the autoscaler's config
(node types and ``max_workers``): it decides how many trials run at once, refuses a trial
no node can ever hold, and asks the autoscaler for the campaign's capacity up front.
"""

from __future__ import annotations

import copy
import logging
import math
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray
import yaml

from tuner.budget import (
    NodePricer,
    NodeType,
    PricingError,
    capacity,
    format_request,
    infeasible,
    node_resources,
    node_types_from_config,
)
from tuner.errors import ClusterError, TunerWarning
from tuner.spec import CampaignSpec


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
            raise ClusterError(
                str(path),
                f"cannot read the cluster config: {err}.",
                fix="pass the YAML file `ray up` used (--cluster-config).",
            ) from None
        if not isinstance(config, dict) or "available_node_types" not in config:
            raise ClusterError(
                str(path),
                "not an autoscaler config (no available_node_types).",
                fix="pass a cluster.yaml with node types, or leave --cluster-config out.",
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
    add a node that fits, so only a :class:`~tuner.errors.TunerWarning` is given then.
    """
    reason = infeasible(trial_request(spec), cluster.node_types, cluster.alive)
    if reason is None:
        return
    source = spec.source
    if autoscaler_unknown:
        warnings.warn(
            f"{reason} (no autoscaler config known; a node that fits may still be added)",
            TunerWarning,
            stacklevel=2,
        )
        return
    where = cluster.config_path or "this machine's Ray"
    raise ClusterError(
        source,
        f"each trial asks for {format_request(trial_request(spec))}, but {reason} ({where}).",
        path="resources",
        fix="lower resources.cpu / resources.gpu, or add a node type that fits "
        "(or start the local Ray with --num-cpus / --num-gpus).",
    )


@contextmanager
def ray_session(options: RayOptions) -> Iterator[None]:
    """Ray for the block: started (and shut down after) or joined, or the caller's own."""
    started = init_ray(options)
    try:
        yield
    finally:
        if started:
            ray.shutdown()


def init_ray(options: RayOptions) -> bool:
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
        with _quiet_token_notice():
            ray.init(
                address="local",
                num_cpus=options.num_cpus,
                num_gpus=options.num_gpus,  # type: ignore[arg-type]  # fractional is fine
                include_dashboard=False,
                dashboard_host="127.0.0.1",
                **common,
            )
    return True


# The logger of Ray's authentication_token_setup.py; its notice that a new local cluster
# turned token authentication on (Ray 2.60's default) is a 250-character WARNING line on the
# terminal of every embedded run.
_TOKEN_LOGGER = "ray._private.authentication.authentication_token_setup"
_TOKEN_NOTICE = "Token authentication is enabled"


class _TokenNoticeFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(_TOKEN_NOTICE)


@contextmanager
def _quiet_token_notice() -> Iterator[None]:
    """Drops Ray's "token authentication is enabled" notice while an embedded Ray starts:
    authentication stays on (the token in ~/.ray/auth_token, as Ray sets it up); only that
    notice is filtered, its warning that authentication is *disabled* still shows."""
    logger = logging.getLogger(_TOKEN_LOGGER)
    quiet = _TokenNoticeFilter()
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


def is_joined(options: RayOptions) -> bool:
    address = options.address or os.environ.get("RAY_ADDRESS")
    return bool(address) and address != "local"


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


@contextmanager
def capacity_requested(spec: CampaignSpec, cluster: ClusterView, slots: int) -> Iterator[None]:
    """Asks the autoscaler for the campaign's capacity at once; releases it at the end."""
    if not cluster.autoscaling:
        yield
        return
    from ray.autoscaler.sdk import request_resources

    bundle = trial_request(spec)
    # No more than the cluster can ever hold: max_concurrent x workers is the user's number.
    most = capacity(bundle, cluster.node_types, cluster.max_workers)
    request_resources(bundles=[bundle] * min(slots * spec.resources.workers, most))
    try:
        yield
    finally:
        # Idle nodes then go away after the autoscaler's idle timeout.
        request_resources(bundles=[])


def check_prices(pricer: NodePricer, cluster: ClusterView) -> None:
    """Prices every node type before the campaign starts: a bad label is an error now."""
    for node_type in cluster.node_types:
        try:
            pricer.price(node_type.resources, node_type.labels)
        except PricingError as err:
            raise ClusterError(
                str(cluster.config_path),
                str(err),
                path=f"available_node_types.{node_type.name}.labels",
            ) from None


def validate_cluster(config: dict[str, Any]) -> None:
    """Checks ``config`` as ``ray up`` would: defaults filled in, then Ray's schema.

    Raises:
        Exception: Ray's validation error (jsonschema.ValidationError or ValueError).
    """
    from ray.autoscaler._private.util import prepare_config, validate_config

    validate_config(prepare_config(copy.deepcopy(config)))
