"""The autoscaler is asked for the campaign's capacity at once, but never for more bundles
than the cluster can ever hold: resources.max_concurrent x resources.workers is a user's
number (up to 10,000 x 1,024), the cluster's node types are not."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from tests.conftest import tiny_digits_campaign
from tuner.budget import NodeType
from tuner.spec import parse_campaign


def test_the_request_is_capped_at_what_the_cluster_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    from tuner._ray.cluster import ClusterView, capacity_requested

    asked: list[int] = []
    sdk = types.ModuleType("ray.autoscaler.sdk")
    sdk.request_resources = lambda bundles: asked.append(len(bundles))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ray.autoscaler.sdk", sdk)
    data: dict[str, Any] = tiny_digits_campaign(
        resources={"cpu": 1, "gpu": 1, "workers": 1024, "max_concurrent": 10_000},
        budget={"trials": 100_000, "max_epochs": 4},
    )
    spec = parse_campaign(data, check_trainable=False)
    gpu_node = NodeType("gpu", {"CPU": 32, "GPU": 8}, max_workers=4)
    view = ClusterView(node_types=[gpu_node], max_workers=4)
    assert view.autoscaling
    with capacity_requested(spec, view, slots=10_000):
        pass
    assert asked == [4 * 8, 0]  # 32 one-GPU workers at most, then released
