"""A Ray cluster-launcher config (cluster.yaml) for a recommended instance type.

One CPU head that runs the campaign's driver and GPU workers of the picked type, from zero
up to the number of machines the plan rents, removed after an idle timeout. The project
is shipped with ``file_mounts`` and installed into a virtual environment by
``setup_commands``; Ray starts from that environment. No credentials: the clouds' own
login (AWS profile, ``gcloud auth``, ``az login``) is used, and placeholders mark what the
user must fill in (GCP project, hosts of a local cluster).

Pure: returns a dict; :func:`tuner._ray.cluster.validate_cluster` checks it with Ray's own
cluster-config schema.
"""

from __future__ import annotations

import re
from typing import Any

from tuner.cost._catalog import Instance

__all__ = ["PLACEHOLDER_HOSTS", "cluster_config"]

# TEST-NET addresses (RFC 5737): valid IPs that route nowhere, to be replaced.
PLACEHOLDER_HOSTS = ("192.0.2.10", "192.0.2.11")
_VENV = "~/tuner-venv"
# `ray submit` runs `python` in a login shell: make it the node's venv.
_PATH_LINE = (
    "grep -qxF 'export PATH=\"$HOME/tuner-venv/bin:$PATH\"' ~/.bashrc || "
    "echo 'export PATH=\"$HOME/tuner-venv/bin:$PATH\"' >> ~/.bashrc"
)
_PROJECT = "~/tuner"
# GCP names GPUs it attaches to N1 machines; A2/A3/G2 machine types come with theirs.
_GCP_ACCELERATORS = {
    "T4": "nvidia-tesla-t4",
    "V100-SXM2-16GB": "nvidia-tesla-v100",
    "L4": "nvidia-l4",
    "A100-SXM4-40GB": "nvidia-tesla-a100",
}
_HEAD_TYPES = {"aws": "m5.xlarge", "gcp": "n2-standard-4", "azure": "Standard_D4s_v3"}
_HEAD_DASHBOARD = (
    f'{_VENV}/bin/pip install -q "ray[default]==$({_VENV}/bin/python -c '
    "'import ray; print(ray.__version__)')\""
)


def _common(name: str, max_workers: int, idle_minutes: float) -> dict[str, Any]:
    return {
        "cluster_name": name,
        "max_workers": max_workers,
        "upscaling_speed": 1.0,
        "idle_timeout_minutes": idle_minutes,
        "file_mounts": {_PROJECT: "."},
        "rsync_exclude": [".venv", "runs", ".git", "**/__pycache__"],
        # Caches and other ignored build output stay home (a .mypy_cache alone is 64 MB).
        "rsync_filter": [".gitignore"],
        "setup_commands": [
            f"python3 -m venv {_VENV}",
            f"{_VENV}/bin/pip install -q --upgrade pip",
            f"{_VENV}/bin/pip install -q -e {_PROJECT}",
            _PATH_LINE,
        ],
        # The head's dashboard serves Ray's Job Submission API (tuner submit / list /
        # logs / stop --address): ray[default], at the Ray version the project installed.
        "head_setup_commands": [_HEAD_DASHBOARD],
        "head_start_ray_commands": [
            f"{_VENV}/bin/ray stop",
            "ulimit -n 65536; "
            f"{_VENV}/bin/ray start --head --port=6379 --object-manager-port=8076 "
            "--autoscaling-config=~/ray_bootstrap_config.yaml --dashboard-host=127.0.0.1",
        ],
        "worker_start_ray_commands": [
            f"{_VENV}/bin/ray stop",
            f"ulimit -n 65536; {_VENV}/bin/ray start --address=$RAY_HEAD_IP:6379 "
            "--object-manager-port=8076",
        ],
    }


def _worker_resources(instance: Instance) -> dict[str, Any]:
    resources: dict[str, Any] = {"GPU": instance.gpu_count}
    if instance.vcpus:
        resources["CPU"] = instance.vcpus
    return resources


def _aws(instance: Instance, spot: bool) -> dict[str, Any]:
    worker: dict[str, Any] = {"InstanceType": instance.instance_type, "ImageId": "latest_dlami"}
    if spot:
        worker["InstanceMarketOptions"] = {"MarketType": "spot"}
    return {
        "provider": {"type": "aws", "region": instance.region, "cache_stopped_nodes": False},
        "auth": {"ssh_user": "ubuntu"},
        "head": {"InstanceType": _HEAD_TYPES["aws"], "ImageId": "latest_dlami"},
        "worker": worker,
    }


def _gcp(instance: Instance, spot: bool) -> dict[str, Any]:
    disk = [
        {
            "boot": True,
            "autoDelete": True,
            "type": "PERSISTENT",
            "initializeParams": {
                "diskSizeGb": 100,
                "sourceImage": "projects/deeplearning-platform-release/global/images/"
                "family/common-cu121-ubuntu-2204-py310",
            },
        }
    ]
    machine, _, attached = instance.instance_type.partition("+")
    worker: dict[str, Any] = {
        "machineType": machine,
        "disks": disk,
        "scheduling": [{"onHostMaintenance": "TERMINATE"}, {"preemptible": spot}],
    }
    match = re.fullmatch(r"(\d+)x(.+)", attached)
    if match:  # "n1-standard-1+1xT4": an N1 host with GPUs attached
        worker["guestAccelerators"] = [
            {
                "acceleratorType": _GCP_ACCELERATORS.get(instance.gpu, instance.gpu.lower()),
                "acceleratorCount": int(match.group(1)),
            }
        ]
    return {
        "provider": {
            "type": "gcp",
            "region": instance.region,
            "availability_zone": f"{instance.region}-a",
            "project_id": "<your-gcp-project-id>",
        },
        "auth": {"ssh_user": "ubuntu"},
        "head": {"machineType": _HEAD_TYPES["gcp"], "disks": disk},
        "worker": worker,
    }


def _azure(instance: Instance, spot: bool) -> dict[str, Any]:
    def vm(size: str, spot_vm: bool) -> dict[str, Any]:
        params: dict[str, Any] = {
            "vmSize": size,
            "imagePublisher": "microsoft-dsvm",
            "imageOffer": "ubuntu-hpc",
            "imageSku": "2204",
            "imageVersion": "latest",
        }
        if spot_vm:
            params["priority"] = "Spot"
        return {"azure_arm_parameters": params}

    return {
        "provider": {
            "type": "azure",
            "location": instance.region,
            "resource_group": "tuner-cluster",
        },
        "auth": {
            "ssh_user": "ubuntu",
            "ssh_private_key": "~/.ssh/id_rsa",
            "ssh_public_key": "~/.ssh/id_rsa.pub",
        },
        "head": vm(_HEAD_TYPES["azure"], False),
        "worker": vm(instance.instance_type, spot),
    }


def cluster_config(
    instance: Instance,
    *,
    workers: int,
    campaign: str,
    spot: bool = False,
    idle_timeout_minutes: float = 5.0,
) -> dict[str, Any]:
    """A cluster-launcher config whose GPU workers are ``instance``, 0 to ``workers``.

    AWS, GCP and Azure rows get their cloud's provider; any other cloud (China Telecom
    Cloud, a rented server) gets Ray's ``local`` provider with placeholder hosts to
    replace: the machines are already there (and billed), so all of them join.

    Args:
        instance: The instance type to run trials on.
        workers: Most GPU machines at once (the plan's machine count).
        campaign: Campaign name (cluster name ``tuner-<campaign>``).
        spot: Ask for spot / preemptible workers where the cloud supports it.
        idle_timeout_minutes: Minutes an idle worker lives before it is removed.
    """
    name = "tuner-" + re.sub(r"[^a-z0-9-]", "-", campaign.lower())[:40]
    config = _common(name, workers, idle_timeout_minutes)
    builders = {"aws": _aws, "gcp": _gcp, "azure": _azure}
    if instance.cloud in builders:
        parts = builders[instance.cloud](instance, spot)
        config["provider"] = parts["provider"]
        config["auth"] = parts["auth"]
        config["available_node_types"] = {
            "head": {
                "node_config": parts["head"],
                "resources": {"CPU": 0},  # the driver only; trials go to GPU workers
                "min_workers": 0,
                "max_workers": 0,
            },
            "gpu_worker": {
                "node_config": parts["worker"],
                "resources": _worker_resources(instance),
                "min_workers": 0,
                "max_workers": workers,
            },
        }
        config["head_node_type"] = "head"
        return config
    hosts = [PLACEHOLDER_HOSTS[1]] if workers == 1 else [
        f"192.0.2.{11 + i}" for i in range(workers)
    ]  # fmt: skip
    config["provider"] = {
        "type": "local",
        "head_ip": PLACEHOLDER_HOSTS[0],
        "worker_ips": hosts,
    }
    config["auth"] = {"ssh_user": "ubuntu", "ssh_private_key": "~/.ssh/id_rsa"}
    # Ray's local provider detects each host's CPUs and GPUs itself and takes no node
    # types: every listed host joins.
    return config
