"""Ray's nodes as the ledger sees them: each alive node priced once, and when dead ones ended.

The budget guard's :class:`NodeWatcher` thread calls :func:`read_nodes` every half second
or so.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import ray

from tuner.budget import (
    NodePricer,
    NodeRate,
    NodeSeen,
    PricingError,
    format_request,
    node_resources,
)

logger = logging.getLogger(__name__)

NODE_TYPE_LABEL = "tuner.io/node-type"


def _node_table() -> list[dict[str, Any]]:
    """Every node Ray knows, alive or dead, with its start and end times where known.

    Ray's GCS records when each node started and ended; ``ray.nodes()`` drops those
    times, so the GCS client is asked directly, with ``ray.nodes()`` as the fallback.
    """
    try:
        from ray._private.worker import global_worker

        info = global_worker.gcs_client.get_all_node_info()  # type: ignore[attr-defined]
        return [
            {
                "NodeID": node.node_id.hex(),
                "Alive": node.state == 0,
                "Resources": dict(node.resources_total),
                "Labels": dict(node.labels),
                "NodeManagerAddress": node.node_manager_address,
                "start": node.start_time_ms / 1000.0 or None,
                "end": node.end_time_ms / 1000.0 or None,
            }
            for node in info.values()
        ]
    except Exception:  # an older or newer Ray without these fields
        return [dict(n, start=None, end=None) for n in ray.nodes()]


def read_nodes(
    pricer: NodePricer, cache: dict[str, NodeSeen]
) -> tuple[list[NodeSeen], dict[str, float]]:
    """The alive nodes, priced (each once, when first seen), and when dead ones ended."""
    alive = []
    ended: dict[str, float] = {}
    for node in _node_table():
        node_id = str(node["NodeID"])
        if not node.get("Alive"):
            if node.get("end"):
                ended[node_id] = float(node["end"])
            continue
        seen = cache.get(node_id)
        if seen is None:
            resources = node_resources(node.get("Resources") or {})
            labels = {str(k): str(v) for k, v in (node.get("Labels") or {}).items()}
            try:
                rate = pricer.price(resources, labels)
            except PricingError as err:
                # A node added mid-campaign with a bad label: count it at the default rate
                # and say so, rather than stop accounting.
                rate = pricer.price({}, {})
                rate = NodeRate(rate.usd_per_hour, f"{rate.source}; label error: {err}")
                logger.warning("node %s: %s", node_id, err)
            seen = NodeSeen(
                node_id=node_id,
                usd_per_hour=rate.usd_per_hour,
                rate_source=rate.source,
                gpus=float(resources.get("GPU", 0.0)),
                cpus=float(resources.get("CPU", 0.0)),
                ip=str(node.get("NodeManagerAddress", "")),
                kind=labels.get(NODE_TYPE_LABEL)
                or labels.get("ray.io/node-group")
                or format_request(resources),
                started_at=node.get("start"),
            )
            cache[node_id] = seen
        alive.append(seen)
    return alive, ended


class NodeWatcher(threading.Thread):
    """Calls ``observe`` every ``poll_s`` seconds until ``stopped`` is set (a daemon thread:
    a failed read of Ray's node table is logged and tried again, never raised)."""

    def __init__(self, observe: Callable[[], None], poll_s: float) -> None:
        super().__init__(name="tuner-ledger", daemon=True)
        self._observe = observe
        self._poll_s = poll_s
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self._poll_s):
            try:
                self._observe()
            except Exception:  # a failed GCS read must not kill the campaign
                logger.debug("reading Ray's nodes failed", exc_info=True)
