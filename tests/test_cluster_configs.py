"""The shipped cluster-launcher configs: cluster.yaml and every docs/clusters/*.yaml.

Checked with Ray's own config validation and label parser, against the price catalog the
campaign's spend ledger reads, and for credentials. Fast: no Ray is started.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tuner._ray.cluster import validate_cluster
from tuner.budget._pricing import NodePricer
from tuner.cost import load_catalog
from tuner.cost._catalog import gpu_name_tokens
from tuner.cost._cluster import cluster_config

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = [
    ROOT / "cluster.yaml",
    *sorted((ROOT / "docs" / "clusters").glob("*.yaml")),
    *sorted((ROOT / "docs" / "clusters").glob("*.yml")),
]
IDS = [str(path.relative_to(ROOT)) for path in CONFIGS]

# The labels the ledger reads (tuner/budget/_pricing.py); any other tuner.io/ key is a typo.
TUNER_LABELS = {
    "tuner.io/usd-per-hour",
    "tuner.io/instance-type",
    "tuner.io/cloud",
    "tuner.io/region",
    "tuner.io/market",
}
ACCELERATOR = "accelerator_type:"


@dataclass
class Node:
    """One kind of node a config starts: what Ray will see of it."""

    name: str
    head: bool
    resources: dict[str, float] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)


def _load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict), f"{path}: not a mapping"
    return data


def _is_local(config: dict[str, Any]) -> bool:
    return bool(config["provider"]["type"] == "local")


def _ray_start_flags(commands: list[str]) -> dict[str, str]:
    """The flags of the `ray start` in ``commands`` (``--k=v`` or ``--k v``), unquoted."""
    for command in commands:
        tokens = shlex.split(command)
        for i, token in enumerate(tokens[:-1]):
            if token.endswith("ray") and tokens[i + 1] == "start":
                flags: dict[str, str] = {}
                rest = tokens[i + 2 :]
                for j, arg in enumerate(rest):
                    if not arg.startswith("--"):
                        continue
                    key, eq, value = arg[2:].partition("=")
                    if not eq:
                        following = rest[j + 1] if j + 1 < len(rest) else ""
                        value = "" if following.startswith("--") else following
                    flags[key] = value
                return flags
    raise AssertionError(f"no `ray start` in {commands}")


def _local_node(name: str, head: bool, commands: list[str]) -> Node:
    from ray._private.label_utils import parse_node_labels_string

    flags = _ray_start_flags(commands)
    resources: dict[str, float] = json.loads(flags.get("resources", "{}"))
    for flag, key in (("num-cpus", "CPU"), ("num-gpus", "GPU")):
        if flag in flags:
            resources[key] = float(flags[flag])
    # The parser `ray start --labels` runs: it raises on bad syntax.
    labels = parse_node_labels_string(flags.get("labels", ""))
    return Node(name, head, resources, labels)


def _nodes(config: dict[str, Any]) -> list[Node]:
    if _is_local(config):
        return [
            _local_node("head", True, config["head_start_ray_commands"]),
            _local_node("worker", False, config["worker_start_ray_commands"]),
        ]
    return [
        Node(
            name,
            name == config["head_node_type"],
            dict(node_type.get("resources", {})),
            dict(node_type.get("labels", {})),
        )
        for name, node_type in config["available_node_types"].items()
    ]


def _workers(config: dict[str, Any]) -> list[Node]:
    workers = [node for node in _nodes(config) if not node.head]
    assert workers, "no worker node type"
    return workers


def _walk(data: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """(path, key, value) for every mapping entry and list item, depth first."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield f"{path}.{key}", key, value
            yield from _walk(value, f"{path}.{key}")
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield f"{path}[{i}]", None, value
            yield from _walk(value, f"{path}[{i}]")


@pytest.fixture(scope="module")
def catalog():  # type: ignore[no-untyped-def]
    return load_catalog()


def test_the_configs_are_found() -> None:
    names = {path.name for path in CONFIGS}
    assert {"cluster.yaml", "bare-metal.yaml", "china-telecom.yaml"} <= names


@pytest.mark.parametrize("path", CONFIGS, ids=IDS)
def test_ray_accepts_the_config(path: Path) -> None:
    validate_cluster(_load(path))  # raises with Ray's own message


def test_ray_validation_catches_a_broken_config() -> None:
    config = _load(ROOT / "cluster.yaml")
    broken = copy.deepcopy(config)
    worker = next(name for name in broken["available_node_types"] if name != "head")
    broken["available_node_types"][worker]["min_workers"] = "zero"
    with pytest.raises(Exception, match="zero"):
        validate_cluster(broken)
    broken = copy.deepcopy(config)
    broken["available_node_types"]["head"]["labels"] = {"tuner.io/usd-per-hour": 1.5}
    with pytest.raises(Exception, match=r"1\.5"):
        validate_cluster(broken)  # label values are strings


@pytest.mark.parametrize("path", CONFIGS, ids=IDS)
def test_workers_scale_from_zero_and_the_head_runs_no_trials(path: Path) -> None:
    config = _load(path)
    assert config["max_workers"] >= 1
    assert 0 < config["idle_timeout_minutes"] <= 10
    if _is_local(config):
        assert config.get("min_workers") == 0
        assert config["max_workers"] <= len(config["provider"]["worker_ips"])
        head = _nodes(config)[0]
        assert head.resources.get("CPU") == 0 and head.resources.get("GPU") == 0
        return
    types = config["available_node_types"]
    head = types[config["head_node_type"]]
    assert head["resources"]["CPU"] == 0
    assert head["max_workers"] == 0
    for name, node_type in types.items():
        assert node_type["min_workers"] == 0, name
        if name != config["head_node_type"]:
            assert 1 <= node_type["max_workers"] <= config["max_workers"], name


@pytest.mark.parametrize("path", CONFIGS, ids=IDS)
def test_workers_name_their_gpu(path: Path) -> None:
    config = _load(path)
    for node in _workers(config):
        accelerators = [key for key in node.resources if key.startswith(ACCELERATOR)]
        assert len(accelerators) == 1, f"{node.name}: {node.resources}"
        assert node.resources[accelerators[0]] == 1, node.name
        if not _is_local(config):  # the local provider's hosts report their own
            assert node.resources["GPU"] >= 1, node.name
            assert node.resources["CPU"] >= 1, node.name
        for key in ("CPU", "GPU"):  # `ray start --resources` rejects these
            assert key not in json.loads(
                _ray_start_flags(config["worker_start_ray_commands"]).get("resources", "{}")
            )


@pytest.mark.parametrize("path", CONFIGS, ids=IDS)
def test_labels_follow_rays_label_syntax(path: Path) -> None:
    from ray._private.label_utils import validate_node_label_syntax, validate_node_labels

    for node in _nodes(_load(path)):
        for key, value in node.labels.items():
            assert isinstance(key, str) and isinstance(value, str), (node.name, key, value)
        validate_node_label_syntax(node.labels)
        validate_node_labels(node.labels)  # no ray.io/ prefix
        unknown = {k for k in node.labels if k.startswith("tuner.io/")} - TUNER_LABELS
        assert not unknown, f"{node.name}: unknown labels {unknown}"


@pytest.mark.parametrize("path", CONFIGS, ids=IDS)
def test_every_worker_is_priced_from_its_labels(path: Path, catalog) -> None:  # type: ignore[no-untyped-def]
    config = _load(path)
    for node in _workers(config):
        labels = node.labels
        if "tuner.io/usd-per-hour" in labels:
            assert float(labels["tuner.io/usd-per-hour"]) >= 0, node.name
            continue
        assert "tuner.io/instance-type" in labels, f"{node.name}: no price label"
        rows = [
            row
            for row in catalog.instances
            if row.instance_type == labels["tuner.io/instance-type"]
            and row.cloud == labels.get("tuner.io/cloud", row.cloud)
            and row.region == labels.get("tuner.io/region", row.region)
        ]
        assert len(rows) == 1, f"{node.name}: {labels} matches {len(rows)} catalog rows"
        row = rows[0]
        if not _is_local(config):
            assert row.cloud == config["provider"]["type"], node.name
            assert row.region == config["provider"]["region"], node.name
            assert node.resources["GPU"] == row.gpu_count, node.name
            assert node.resources["CPU"] == row.vcpus, node.name
        gpu = next(k for k in node.resources if k.startswith(ACCELERATOR))[len(ACCELERATOR) :]
        assert gpu_name_tokens(gpu) <= gpu_name_tokens(row.gpu), (node.name, gpu, row.gpu)


@pytest.mark.parametrize("path", CONFIGS, ids=IDS)
def test_the_ledger_prices_every_worker(path: Path, catalog) -> None:  # type: ignore[no-untyped-def]
    pricer = NodePricer(catalog.instances, catalog.gpus)
    for node in _workers(_load(path)):
        rate = pricer.price(node.resources, node.labels)
        assert rate.usd_per_hour > 0, (node.name, rate)
        assert "label" in rate.source or "catalog" in rate.source, (node.name, rate)


_SECRET_WORDS = re.compile(
    r"access_key|secret|password|passwd|token|credential|api_key|apikey", re.IGNORECASE
)
_SECRET_TEXT = [
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),  # an AWS access key id
]


@pytest.mark.parametrize("path", CONFIGS, ids=IDS)
def test_no_credentials(path: Path) -> None:
    text = path.read_text()
    for pattern in _SECRET_TEXT:
        assert not pattern.search(text), f"{path.name}: {pattern.pattern}"
    config = _load(path)
    for where, key, value in _walk(config):
        for item in (key, value):
            if isinstance(item, str):
                assert not _SECRET_WORDS.search(item), f"{path.name}{where}: {item!r}"
    auth = config["auth"]
    if _is_local(config):
        assert set(auth) <= {"ssh_user", "ssh_private_key"}
        key_path = auth.get("ssh_private_key", "~/")
        assert re.fullmatch(r"[~/][\w./-]*", key_path), "ssh_private_key must be a path"
    else:
        assert set(auth) == {"ssh_user"}  # the cloud login and Ray's own key pair


@pytest.mark.parametrize("path", CONFIGS, ids=IDS)
def test_the_project_is_shipped_and_installed(path: Path) -> None:
    config = _load(path)
    assert config["file_mounts"] == {"~/tuner": "."}
    excluded = set(config["rsync_exclude"])
    assert {".venv", "runs", ".git"} <= excluded
    assert excluded & {"__pycache__", "**/__pycache__"}
    setup = config["setup_commands"]
    assert any(c.startswith("python3 -m venv ~/tuner-venv") for c in setup)
    assert "~/tuner-venv/bin/pip install -q -e ~/tuner" in setup
    # The head's dashboard (Job Submission API) needs ray[default] at the installed version.
    assert config["head_setup_commands"] == [
        '~/tuner-venv/bin/pip install -q "ray[default]==$(~/tuner-venv/bin/python -c '
        "'import ray; print(ray.__version__)')\""
    ]
    # `ray submit` runs `python SCRIPT` and `ray down` runs `ray stop` in a login shell.
    assert any("tuner-venv/bin:$PATH" in c and "~/.bashrc" in c for c in setup)
    for commands in (config["head_start_ray_commands"], config["worker_start_ray_commands"]):
        assert commands[0] == "~/tuner-venv/bin/ray stop"
        assert "~/tuner-venv/bin/ray start" in commands[1]
    head = _ray_start_flags(config["head_start_ray_commands"])
    assert head["autoscaling-config"] == "~/ray_bootstrap_config.yaml"
    assert "head" in head


def test_cluster_yaml_matches_the_generated_configs(catalog) -> None:  # type: ignore[no-untyped-def]
    """cluster.yaml follows `tuner recommend --emit-cluster` (tuner/cost/_cluster.py)."""
    config = _load(ROOT / "cluster.yaml")
    instance = next(row for row in catalog.instances if row.instance_type == "g4dn.xlarge")
    generated = cluster_config(instance, workers=1, campaign="x")
    keys = ("file_mounts", "head_setup_commands", "head_start_ray_commands")
    for key in (*keys, "worker_start_ray_commands"):
        assert config[key] == generated[key], key
    for command in generated["setup_commands"]:
        assert any(c.startswith(command) for c in config["setup_commands"]), command
    assert config["provider"]["type"] == generated["provider"]["type"]
    assert config["provider"]["region"] == generated["provider"]["region"]
    assert config["auth"] == generated["auth"]
    head = config["available_node_types"][config["head_node_type"]]
    generated_head = generated["available_node_types"][generated["head_node_type"]]
    assert head["node_config"]["InstanceType"] == generated_head["node_config"]["InstanceType"]
    assert head["resources"] == generated_head["resources"]
