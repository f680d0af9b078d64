"""The budget guard's gate for the searcher (tuner._ray.guard), without Ray: the guard's
bookkeeping is plain Python until ``start()`` starts its node watcher."""

from __future__ import annotations

from pathlib import Path

from tuner._ray.guard import GATE_OPEN, GATE_WAIT, BudgetGuard
from tuner.budget import Ledger, Limits, NodePricer
from tuner.cost import AshaGeometry


def _guard(tmp_path: Path, *, slots: int, check_s: float) -> BudgetGuard:
    return BudgetGuard(
        run_dir=tmp_path,
        ledger=Ledger(),
        pricer=NodePricer((), {}),
        limits=Limits(),  # nothing limited: only the slot count holds trials back
        geometry=AshaGeometry(trials=8, max_epochs=3, grace_period=1, reduction_factor=3),
        request={"CPU": 1.0},
        slots=slots,
        max_epochs=3,
        stop_key="stop:test",
        check_s=check_s,
    )


def test_a_freed_slot_opens_the_gate_at_once_not_at_the_next_budget_check(
    tmp_path: Path,
) -> None:
    # Tune asks the searcher again one second after each refusal while no trial runs, so
    # a gate that kept "wait" until the next budget check cost a second or two per trial
    # (24 one-epoch trials: 61 s, against 12 s once the gate followed the live count).
    guard = _guard(tmp_path, slots=1, check_s=3600.0)
    assert guard.gate(live=1) == GATE_WAIT
    assert guard.gate(live=0) == GATE_OPEN
    assert guard.gate(live=1) == GATE_WAIT


def test_slots_bound_the_live_trials(tmp_path: Path) -> None:
    guard = _guard(tmp_path, slots=2, check_s=0.0)
    assert [guard.gate(live=n) for n in range(4)] == [GATE_OPEN, GATE_OPEN, GATE_WAIT, GATE_WAIT]
