"""cluster.yaml for a pick: every shipped instance type passes Ray's own config validation."""

from __future__ import annotations

import warnings
from datetime import date

import pytest

from tuner._ray.cluster import validate_cluster
from tuner.cost import Instance, load_catalog
from tuner.cost._cluster import PLACEHOLDER_HOSTS, cluster_config

DAY = date(2026, 12, 1)


def _catalog_instances() -> list[Instance]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # price-age warnings are not this test's business
        return list(load_catalog().instances)


@pytest.mark.parametrize("spot", [False, True])
def test_every_shipped_instance_type_gives_a_valid_cluster(spot: bool) -> None:
    for instance in _catalog_instances():
        validate_cluster(cluster_config(instance, workers=3, campaign="Digits CNN", spot=spot))


def test_cloud_worker_nodes_scale_from_zero_to_the_plan() -> None:
    g5 = Instance("aws", "us-east-1", "g5.12xlarge", "A10G", 4, 48, 192, 5.6, 2.0, "", "t", DAY)
    config = cluster_config(g5, workers=3, campaign="Digits CNN", spot=True)
    worker = config["available_node_types"]["gpu_worker"]
    assert (worker["min_workers"], worker["max_workers"]) == (0, 3)
    assert worker["resources"] == {"GPU": 4, "CPU": 48}
    assert worker["node_config"]["InstanceMarketOptions"] == {"MarketType": "spot"}
    assert config["available_node_types"]["head"]["resources"] == {"CPU": 0}
    assert config["cluster_name"] == "tuner-digits-cnn"
    assert any("pip install -q -e ~/tuner" in c for c in config["setup_commands"])
    assert "aws_access_key_id" not in str(config).lower()  # no credentials, ever


def test_gcp_n1_hosts_get_their_gpus_attached() -> None:
    n1 = Instance("gcp", "us-central1", "n1-standard-1+1xT4", "T4", 1, 1, 3.75, 0.4, 0.15, "",
                  "t", DAY)  # fmt: skip
    node = cluster_config(n1, workers=1, campaign="c")["available_node_types"]["gpu_worker"]
    assert node["node_config"]["machineType"] == "n1-standard-1"
    assert node["node_config"]["guestAccelerators"] == [
        {"acceleratorType": "nvidia-tesla-t4", "acceleratorCount": 1}
    ]


def test_other_clouds_use_the_local_provider_with_placeholder_hosts() -> None:
    rented = Instance("rented", "x", "8xA100", "A100-SXM4-80GB", 8, 128, 1024, 13.7, None, "",
                      "t", DAY)  # fmt: skip
    config = cluster_config(rented, workers=2, campaign="c")
    assert config["provider"]["type"] == "local"
    assert config["provider"]["head_ip"] == PLACEHOLDER_HOSTS[0]
    assert len(config["provider"]["worker_ips"]) == 2
    validate_cluster(config)


def test_validator_rejects_a_broken_config() -> None:
    g5 = Instance("aws", "us-east-1", "g5.xlarge", "A10G", 1, 4, 16, 1.0, None, "", "t", DAY)
    config = cluster_config(g5, workers=1, campaign="c")
    config["head_node_type"] = "nope"
    with pytest.raises(ValueError, match="head_node_type"):
        validate_cluster(config)
