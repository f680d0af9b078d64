"""Node types, fits and PENDING reasons on a hand-made autoscaler config."""

from __future__ import annotations

from tuner.budget import capacity, infeasible, node_types_from_config, pending_reason

CONFIG = {
    "max_workers": 3,
    "head_node_type": "head",
    "available_node_types": {
        "head": {"resources": {"CPU": 0}, "max_workers": 0},
        "t4": {"resources": {"CPU": 4, "GPU": 1}, "max_workers": 2},
        "a100x8": {"resources": {"CPU": 96, "GPU": 8}, "max_workers": 1},
    },
}
TYPES = node_types_from_config(CONFIG)


def test_head_first_and_max_workers() -> None:
    assert [t.name for t in TYPES] == ["head", "t4", "a100x8"]
    assert TYPES[0].head


def test_capacity_fills_the_largest_nodes_first_under_the_global_cap() -> None:
    # 1 x a100x8 holds 8 one-GPU trials, then 2 x t4 one each: 10 (3 workers in all).
    assert capacity({"CPU": 1, "GPU": 1}, TYPES, max_workers=3) == 10
    assert capacity({"CPU": 1, "GPU": 1}, TYPES, max_workers=1) == 8
    assert capacity({"CPU": 8, "GPU": 2}, TYPES, max_workers=3) == 4


def test_infeasible_names_the_request_and_every_node_type() -> None:
    reason = infeasible({"CPU": 8, "GPU": 16}, TYPES)
    assert reason == (
        "no node type fits {GPU: 16, CPU: 8}: head {CPU: 0}; t4 {GPU: 1, CPU: 4}; "
        "a100x8 {GPU: 8, CPU: 96}"
    )
    assert infeasible({"CPU": 8, "GPU": 2}, TYPES) is None
    # Without node types, alive nodes decide.
    assert infeasible({"GPU": 1}, [], alive=[{"CPU": 2}]) == "no node type fits {GPU: 1}: {CPU: 2}"


def test_pending_reasons() -> None:
    request = {"CPU": 1, "GPU": 1}
    waiting = pending_reason(request, TYPES, [{"CPU": 0}], [], workers_by_type={})
    assert waiting.startswith("waiting for the autoscaler to add a node (t4, a100x8)")
    full = pending_reason(
        request, TYPES, [{"CPU": 0}], [], workers_by_type={"t4": 2, "a100x8": 1}, max_workers=3
    )
    assert "are at max_workers" in full
    no_autoscaler = pending_reason(request, [], [{"CPU": 2, "GPU": 1}], [])
    assert "no autoscaler config is known" in no_autoscaler
    assert pending_reason({"GPU": 9}, TYPES, [], []).startswith("no node type fits {GPU: 9}")
