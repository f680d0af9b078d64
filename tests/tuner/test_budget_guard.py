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


def test_to_finish_is_the_cost_models_rest_corrected_by_the_epochs_used(tmp_path: Path) -> None:
    from tuner.contract import EPOCH_KEY
    from tuner.cost import cost_to_finish, estimate_work

    guard = _guard(tmp_path, slots=2, check_s=3600.0)
    assert guard.to_finish(done=0) is None  # no epoch measured: nothing to say
    # Two trials ended after 1 and 3 epochs; one runs, at epoch 2: 2 s per epoch.
    guard.on_trial_result(0, [], _Trial("a"), {EPOCH_KEY: 1, "time_total_s": 2.0})
    guard.on_trial_result(0, [], _Trial("b"), {EPOCH_KEY: 3, "time_total_s": 6.0})
    guard.on_trial_result(0, [], _Trial("c"), {EPOCH_KEY: 2, "time_total_s": 4.0})
    guard._running = {"c"}
    rest = guard.to_finish(done=2)
    assert rest is not None
    estimate = estimate_work(guard._geometry, epoch_s=2.0, workers=2, runs=100)
    expected = cost_to_finish(
        estimate, trials_finished=2, finished_epochs=4, trials_running=1, running_epochs=2
    )
    assert rest["trial_epochs"] == round(expected.trial_epochs, 1) > 0
    assert rest["wall_s"] == round(expected.wall_s, 1) > 0
    assert rest["usd"] == 0.0  # nothing priced here: a CPU box with no node types
    # The counts never exceed the campaign's trials (the live count can run ahead).
    assert guard.to_finish(done=99) is not None


class _Trial:
    def __init__(self, trial_id: str) -> None:
        self.trial_id = trial_id
