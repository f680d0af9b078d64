"""The spend ledger's arithmetic on hand-made observations (epoch seconds from 0)."""

from __future__ import annotations

import json

import pytest

from tuner.budget import Ledger, NodeSeen


def _node(node_id: str, rate: float = 3.6, gpus: float = 1.0, ip: str = "") -> NodeSeen:
    return NodeSeen(node_id, rate, "test", gpus, 4.0, ip=ip or node_id)


def test_node_lifetimes_use_midpoints_between_observations() -> None:
    ledger = Ledger()
    ledger.begin_session(0.0)
    head, gpu = _node("head", rate=0.0, gpus=0.0), _node("gpu", rate=3.6)
    ledger.observe([head], 0.0)
    ledger.observe([head, gpu], 10.0)  # gpu appeared between 0 and 10: start 5
    ledger.observe([head, gpu], 100.0)
    ledger.observe([head], 110.0)  # gone between 100 and 110: end 105
    assert ledger.nodes["gpu"].start == 5.0
    assert ledger.nodes["gpu"].end == 105.0
    # 100 s at $3.60/h = $0.10; 100 s x 1 GPU.
    assert ledger.usd(200.0) == pytest.approx(0.1)
    assert ledger.gpu_hours(200.0) == pytest.approx(100 / 3600)
    # The head is alive to "now" (200 s).
    assert ledger.node_hours(200.0) == pytest.approx((200 + 100) / 3600)


def test_idle_share_counts_gpu_node_time_without_trials() -> None:
    ledger = Ledger()
    ledger.begin_session(0.0)
    ledger.observe([_node("gpu", ip="10.0.0.2")], 0.0)
    ledger.trial_started("t1", 1.0, 10.0)
    ledger.trial_node("t1", "10.0.0.2")
    ledger.trial_stopped("t1", 50.0)
    ledger.trial_started("t2", 1.0, 40.0)  # overlaps t1: busy time is a union
    ledger.trial_node("t2", "10.0.0.2")
    ledger.trial_stopped("t2", 90.0)
    ledger.observe([], 100.0)  # node gone between 0 and 100 -> end 50? no: last seen 0
    # Last seen at 0, previous observation at 0: it ended halfway, at 50.
    assert ledger.nodes["gpu"].end == 50.0
    idle, alive = ledger.gpu_node_idle(100.0)
    assert alive == 50.0
    assert idle == pytest.approx(10.0)  # 0-10 idle, 10-50 busy
    assert ledger.trial_gpu_s(100.0) == {"t1": 40.0, "t2": 50.0}


def test_round_trip_and_resume_accrue_the_gap_for_surviving_nodes() -> None:
    ledger = Ledger()
    ledger.begin_session(0.0)
    ledger.observe([_node("a"), _node("b")], 0.0)
    ledger.observe([_node("a"), _node("b")], 60.0)
    ledger.trial_started("t1", 1.0, 1.0)
    # The driver dies here: no end_session. What it saved comes back:
    saved = json.loads(json.dumps(ledger.to_dict(60.0)))
    resumed = Ledger.from_dict(saved)
    assert resumed.sessions == [[0.0, 60.0]]
    assert resumed.trials["t1"].intervals == [[1.0, 60.0]]
    resumed.begin_session(300.0)
    resumed.observe([_node("a")], 300.0)  # a survived the gap (billed); b did not
    assert resumed.nodes["a"].end is None
    assert resumed.nodes["b"].end == 60.0  # counted up to when it was last seen
    assert resumed.node_hours(300.0) == pytest.approx((300 + 60) / 3600)
    assert resumed.running_s(400.0) == pytest.approx(60 + 100)


def test_restarted_trial_adds_an_interval() -> None:
    ledger = Ledger()
    ledger.trial_started("t", 2.0, 0.0)
    ledger.trial_started("t", 2.0, 5.0)  # still running: no second interval
    ledger.trial_stopped("t", 10.0)
    ledger.trial_started("t", 2.0, 20.0)
    ledger.end_session(25.0)
    assert ledger.trials["t"].intervals == [[0.0, 10.0], [20.0, 25.0]]
    assert ledger.trial_gpu_s(30.0) == {"t": 2.0 * 15.0}


def test_a_trials_cost_is_its_share_of_the_spend_by_trial_seconds() -> None:
    ledger = Ledger()
    ledger.begin_session(0.0)
    ledger.observe([_node("gpu", rate=3.6)], 0.0)  # $1 per 1000 s
    ledger.trial_started("a", 1.0, 0.0)
    ledger.trial_started("b", 1.0, 0.0)
    ledger.trial_stopped("a", 100.0)
    # At b's end (300 s): $0.30 spent over 400 trial-seconds, b held 300 of them.
    assert ledger.trial_usd("b", 300.0) == pytest.approx(0.3 * 300 / 400)
    assert ledger.trial_usd("a", 300.0) == pytest.approx(0.3 * 100 / 400)
    assert ledger.trial_usd("never-started", 300.0) == 0.0
