"""What a cluster can hold: node types from an autoscaler config, fits, and PENDING reasons.

Pure: works on the autoscaler config as a dict (``available_node_types``, ``max_workers``)
and on alive nodes' resources as ``ray.nodes()`` reports them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# Ray bookkeeping resources that say nothing about fit.
_IGNORED = ("memory", "object_store_memory")


@dataclass(frozen=True, slots=True)
class NodeType:
    """One kind of node the cluster has or can add."""

    name: str
    resources: Mapping[str, float]
    max_workers: int
    labels: Mapping[str, str] = field(default_factory=dict)
    head: bool = False


def node_resources(resources: Mapping[str, float]) -> dict[str, float]:
    """A node's resources without Ray's bookkeeping ones (memory, ``node:<ip>``)."""
    return {
        k: float(v) for k, v in resources.items() if k not in _IGNORED and not k.startswith("node:")
    }


def format_request(request: Mapping[str, float]) -> str:
    """``{GPU: 2, CPU: 8}``: a resource request as people write it."""
    order = sorted(request, key=lambda k: (k not in ("GPU", "CPU"), k != "GPU", k))
    shown = [k for k in order if request[k]] or order  # {CPU: 0} rather than {}
    return "{" + ", ".join(f"{k}: {request[k]:g}" for k in shown) + "}"


def node_types_from_config(config: Mapping[str, Any]) -> list[NodeType]:
    """Node types of a cluster-launcher / autoscaler config (head first)."""
    types = config.get("available_node_types") or {}
    head = config.get("head_node_type")
    out = []
    for name, raw in types.items():
        resources = {k: float(v) for k, v in (raw.get("resources") or {}).items()}
        is_head = name == head
        out.append(
            NodeType(
                name=name,
                resources=resources,
                max_workers=1 if is_head else int(raw.get("max_workers", 0)),
                labels=dict(raw.get("labels") or {}),
                head=is_head,
            )
        )
    out.sort(key=lambda t: not t.head)
    return out


def fits(request: Mapping[str, float], resources: Mapping[str, float]) -> bool:
    """Whether a node with ``resources`` can hold ``request`` at all."""
    return all(resources.get(k, 0.0) + 1e-9 >= v for k, v in request.items() if v > 0)


def bundles_per_node(request: Mapping[str, float], resources: Mapping[str, float]) -> int:
    """How many ``request`` bundles one node with ``resources`` holds."""
    counts = [
        math.floor(resources.get(k, 0.0) / v + 1e-9)
        for k, v in request.items()
        if v > 0 and k not in _IGNORED
    ]
    return min(counts) if counts else 0


def capacity(
    request: Mapping[str, float], node_types: Sequence[NodeType], max_workers: int | None = None
) -> int:
    """Most ``request`` bundles the cluster holds at its largest (worker cap respected)."""
    total = 0
    workers_left = max_workers if max_workers is not None else math.inf
    ranked = sorted(
        (t for t in node_types if not t.head),
        key=lambda t: -bundles_per_node(request, t.resources),
    )
    for t in node_types:
        if t.head:
            total += bundles_per_node(request, t.resources)
    for t in ranked:
        per = bundles_per_node(request, t.resources)
        if per <= 0 or workers_left <= 0:
            continue
        n = int(min(t.max_workers, workers_left))
        total += per * n
        workers_left -= n
    return total


def infeasible(
    request: Mapping[str, float],
    node_types: Sequence[NodeType],
    alive: Sequence[Mapping[str, float]] = (),
) -> str | None:
    """Why ``request`` can never run, or None if some node type or alive node fits it."""
    if any(fits(request, r) for r in alive) or any(
        fits(request, t.resources) and (t.head or t.max_workers > 0) for t in node_types
    ):
        return None
    shapes = [f"{t.name} {format_request(t.resources)}" for t in node_types] or [
        format_request(r) for r in alive
    ]
    return f"no node type fits {format_request(request)}: " + "; ".join(shapes)


def pending_reason(
    request: Mapping[str, float],
    node_types: Sequence[NodeType],
    alive_total: Sequence[Mapping[str, float]],
    alive_free: Sequence[Mapping[str, float]],
    *,
    workers_by_type: Mapping[str, int] | None = None,
    max_workers: int | None = None,
) -> str:
    """A short reason why a trial asking for ``request`` is still PENDING."""
    impossible = infeasible(request, node_types, alive_total)
    if impossible is not None:
        return impossible
    if any(fits(request, free) for free in alive_free):
        return f"a node has {format_request(request)} free, but Ray has not placed the trial yet"
    if not node_types:
        return (
            f"every node that fits {format_request(request)} is busy, and no autoscaler "
            "config is known: it waits for a running trial to finish"
        )
    counts = dict(workers_by_type or {})
    total_workers = sum(counts.values())
    fitting = [t for t in node_types if not t.head and fits(request, t.resources)]
    growable = [t for t in fitting if counts.get(t.name, 0) < t.max_workers]
    if not growable or (max_workers is not None and total_workers >= max_workers):
        names = ", ".join(t.name for t in fitting) or "none"
        return (
            f"node types that fit {format_request(request)} ({names}) are at max_workers: "
            "it waits for a running trial to finish"
        )
    names = ", ".join(t.name for t in growable)
    return (
        f"waiting for the autoscaler to add a node ({names}) for {format_request(request)}; "
        "if this lasts, check `ray status` and the autoscaler log (quota, capacity, cloud "
        "errors)"
    )


def planned_rates(
    request: Mapping[str, float],
    alive: Sequence[Any],
    node_types: Sequence[NodeType],
    pricer: Any,
) -> tuple[float, float]:
    """Dollars and GPU-hours per trial-second of the cheapest node that fits a trial:
    among the nodes alive (:class:`tuner.budget.NodeSeen`) and the autoscaler's worker
    types, priced by ``pricer`` (:class:`tuner.budget.NodePricer`)."""
    shapes = [(n.usd_per_hour, n.gpus, {"GPU": n.gpus, "CPU": n.cpus}) for n in alive]
    for t in node_types:
        if not t.head:
            rate = pricer.price(t.resources, t.labels).usd_per_hour
            shapes.append((rate, t.resources.get("GPU", 0.0), dict(t.resources)))
    options = []
    for rate, gpus, resources in shapes:
        per = bundles_per_node(request, resources) if fits(request, resources) else 0
        if per > 0:
            options.append((rate / per / 3600.0, gpus / per / 3600.0))
    if not options:
        return 0.0, request.get("GPU", 0.0) / 3600.0
    return min(options)
