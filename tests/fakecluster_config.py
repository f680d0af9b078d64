"""The autoscaling config of a :class:`tests.fakecluster.FakeCluster`: Ray's
``fake_multinode`` provider, the head's type and the worker node types a test gives."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.fakecluster import FakeCluster

HEAD_NODE_TYPE = "ray.head.default"  # the fake provider tags its head with this type

DEFAULT_NODE_TYPES: dict[str, dict[str, Any]] = {
    "gpu_worker": {
        "resources": {"CPU": 1, "GPU": 1, "accelerator_type:A100": 1},
        "labels": {},
        "min_workers": 0,
        "max_workers": 2,
    }
}


def validate_node_types(node_types: dict[str, dict[str, Any]]) -> None:
    """Raises ValueError or TypeError where ``node_types`` is not what FakeCluster takes."""
    if HEAD_NODE_TYPE in node_types:
        raise ValueError(f"{HEAD_NODE_TYPE!r} is the head's type name")
    for name, spec in node_types.items():
        unknown = set(spec) - {"resources", "labels", "min_workers", "max_workers"}
        if unknown:
            raise ValueError(f"node type {name!r}: unknown keys {sorted(unknown)}")
        for key, value in (spec.get("labels") or {}).items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise TypeError(f"node type {name!r}: label {key!r}={value!r} not str")


def autoscaling_config(cluster: FakeCluster, node_ip: str) -> dict[str, Any]:
    """The autoscaling config (``--autoscaling-config``) of ``cluster``, whose head's GCS
    listens on ``node_ip`` and ``cluster.ports['gcs']``."""
    types: dict[str, Any] = {
        HEAD_NODE_TYPE: {
            "resources": dict(cluster.head_resources),
            "node_config": {},
            "max_workers": 0,
        }
    }
    for name, spec in cluster.node_types.items():
        resources = dict(spec.get("resources") or {})
        resources.setdefault("object_store_memory", cluster.worker_object_store_memory)
        entry: dict[str, Any] = {
            "resources": resources,
            "node_config": {},
            "min_workers": int(spec.get("min_workers", 0)),
            "max_workers": int(spec.get("max_workers", 1)),
        }
        if spec.get("labels"):
            entry["labels"] = dict(spec["labels"])
        types[name] = entry
    return {
        "cluster_name": f"fake-{os.getpid()}-{cluster.ports['gcs']}",
        "max_workers": sum(t.get("max_workers", 0) for t in types.values()),
        "upscaling_speed": cluster.upscaling_speed,
        "idle_timeout_minutes": cluster.idle_timeout_s / 60.0,
        "docker": {},
        "provider": {
            "type": "fake_multinode",
            "use_node_id_as_ip": True,
            "disable_node_updaters": True,
            "disable_launch_config_check": True,
            # the provider's default is <node ip>:6379, someone else's Ray
            "gcs_address": f"{node_ip}:{cluster.ports['gcs']}",
            "launch_multiple": cluster.launch_multiple,
        },
        "auth": {},
        "available_node_types": types,
        "head_node_type": HEAD_NODE_TYPE,
        "file_mounts": {},
        "cluster_synced_files": [],
        "file_mounts_sync_continuously": False,
        "rsync_exclude": [],
        "rsync_filter": [],
        "initialization_commands": [],
        "setup_commands": [],
        "head_setup_commands": [],
        "worker_setup_commands": [],
        "head_start_ray_commands": [],
        "worker_start_ray_commands": [],
    }
