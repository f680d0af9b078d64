"""Campaign work from the ASHA geometry: rungs, simulated trial-epochs, prices, cost-to-finish."""

from __future__ import annotations

import math

import pytest

from tuner.cost._work import (
    AshaGeometry,
    SpotRisk,
    cost_to_finish,
    estimate_work,
    naive_trial_epochs,
    price_work,
)
from tuner.spec import parse_campaign


@pytest.mark.parametrize(
    ("max_epochs", "grace", "eta", "expected"),
    [
        (9, 1, 3, (1, 3)),  # the rung at max_epochs never decides
        (8, 1, 2, (1, 2, 4)),
        (100, 1, 10, (1, 10)),  # log(100)/log(10) is exact: no rung at 100
        (16, 2, 2, (2, 4, 8)),
        (5, 1, 1.5, (1, 2, 3, 4)),  # fractional milestones are judged at the next epoch
        (3, 3, 3, ()),  # grace == max_epochs: nothing to stop
    ],
)
def test_decision_epochs_follow_rays_bracket(
    max_epochs: int, grace: int, eta: float, expected: tuple[int, ...]
) -> None:
    geometry = AshaGeometry(4, max_epochs, grace, eta)
    assert geometry.decision_epochs() == expected


def test_geometry_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match=r"`trials >= 1` must hold, but got self.trials=0"):
        AshaGeometry(0, 9)
    with pytest.raises(ValueError, match="grace_period <= max_epochs"):
        AshaGeometry(4, 2, grace_period=3)
    with pytest.raises(ValueError, match="reduction_factor > 1"):
        AshaGeometry(4, 9, reduction_factor=1.0)


def test_geometry_from_spec(tiny_campaign: dict[str, object]) -> None:
    geometry = AshaGeometry.from_spec(parse_campaign(tiny_campaign, "tiny.yaml"))
    assert geometry == AshaGeometry(8, 4, 1, 2.0, asha=True)


def test_fifo_runs_every_trial_to_the_end() -> None:
    work = estimate_work(AshaGeometry(6, 5, asha=False), epoch_s=2.0, workers=3, runs=5)
    assert work.trial_epochs == 30
    assert work.trial_epochs_sd == 0
    assert work.reach == (6.0,)


def test_two_sequential_trials_match_the_exact_expectation() -> None:
    # Trial 1 meets nobody and runs 9 epochs; trial 2 goes on at each rung iff it beats
    # trial 1 (p = 1/2, same rank at both rungs): 9 + 1 + 0.5 * 8 = 14.
    work = estimate_work(AshaGeometry(2, 9, 1, 3), epoch_s=1.0, workers=1, runs=400)
    assert work.trial_epochs == pytest.approx(14.0, abs=0.8)


def test_async_rule_keeps_more_than_the_naive_closed_form() -> None:
    geometry = AshaGeometry(24, 9, 1, 3)
    work = estimate_work(geometry, epoch_s=1.0, runs=200)
    assert naive_trial_epochs(geometry) == 24 + 8 * 2 + 8 / 3 * 6
    assert work.trial_epochs > naive_trial_epochs(geometry)
    assert work.reach[0] == pytest.approx(24)
    assert work.reach[0] > work.reach[1] > work.reach[2]


def test_estimate_is_deterministic_given_the_seed() -> None:
    geometry = AshaGeometry(12, 9, 1, 3)
    assert estimate_work(geometry, epoch_s=1.0, runs=20, seed=3) == estimate_work(
        geometry, epoch_s=1.0, runs=20, seed=3
    )


def test_more_workers_shorten_the_wall_time_but_not_below_the_work() -> None:
    geometry = AshaGeometry(16, 9, 1, 3)
    one = estimate_work(geometry, epoch_s=10.0, startup_s=5.0, workers=1, runs=100)
    four = estimate_work(geometry, epoch_s=10.0, startup_s=5.0, workers=4, runs=100)
    assert one.wall_s == pytest.approx(one.trial_s, rel=0.05)
    assert four.wall_s < one.wall_s / 2
    assert four.wall_s >= four.trial_s / 4 * 0.95  # a tail, never better than perfect packing
    assert one.trial_s == pytest.approx(10.0 * one.trial_epochs + 5.0 * 16)
    assert one.gpu_h(2.0) == pytest.approx(one.trial_s * 2 / 3600)


def test_estimate_rejects_bad_durations() -> None:
    with pytest.raises(ValueError, match="epoch_s > 0"):
        estimate_work(AshaGeometry(2, 3), epoch_s=0.0)
    with pytest.raises(ValueError, match="workers >= 1"):
        estimate_work(AshaGeometry(2, 3), epoch_s=1.0, workers=0)


def test_price_on_demand_bills_machines_for_the_wall_time() -> None:
    work = estimate_work(AshaGeometry(4, 3, asha=False), epoch_s=600.0, workers=2, runs=3)
    cost = price_work(work, instances=2, gpus_per_trial=1, usd_per_hour_ondemand=3.0)
    assert cost.instance_h == pytest.approx(2 * work.wall_s / 3600)
    assert cost.usd_ondemand == pytest.approx(cost.instance_h * 3.0)
    assert cost.usd_spot is None


def test_spot_adds_lost_work_and_restarts() -> None:
    work = estimate_work(AshaGeometry(4, 3, asha=False), epoch_s=600.0, runs=3)
    risk = SpotRisk(preemptions_per_h=1.0, checkpoint_every_epochs=2, restart_s=300.0)
    # Each preemption loses half of 2 epochs (600 s) plus 300 s restart: 1/4 of an hour.
    assert risk.overhead(600.0) == pytest.approx(0.25)
    cost = price_work(
        work, instances=1, gpus_per_trial=1, usd_per_hour_ondemand=3.0,
        usd_per_hour_spot=1.0, spot=risk,
    )  # fmt: skip
    assert cost.spot_wall_s == pytest.approx(work.wall_s / 0.75)
    assert cost.usd_spot == pytest.approx(cost.spot_wall_s / 3600 * 1.0)
    never = price_work(
        work, instances=1, gpus_per_trial=1, usd_per_hour_ondemand=3.0, usd_per_hour_spot=1.0,
        spot=SpotRisk(preemptions_per_h=20.0, restart_s=300.0),
    )  # fmt: skip
    assert math.isinf(never.spot_wall_s)


def test_cost_to_finish_corrects_with_what_was_consumed() -> None:
    estimate = estimate_work(AshaGeometry(20, 9, 1, 3), epoch_s=1.0, runs=200)
    prefix = estimate.prefix_epochs
    start = cost_to_finish(estimate, trials_finished=0, finished_epochs=0)
    assert start.trial_epochs == pytest.approx(estimate.trial_epochs)
    on_track = cost_to_finish(estimate, trials_finished=10, finished_epochs=round(prefix[10]))
    assert on_track.trial_epochs == pytest.approx(prefix[20] - prefix[10], rel=0.05)
    heavy = cost_to_finish(estimate, trials_finished=10, finished_epochs=round(2 * prefix[10]))
    assert heavy.trial_epochs > 1.3 * on_track.trial_epochs
    running = cost_to_finish(
        estimate, trials_finished=10, finished_epochs=round(prefix[10]),
        trials_running=2, running_epochs=4,
    )  # fmt: skip
    assert running.trial_epochs == pytest.approx(on_track.trial_epochs - 4)
    assert running.trials == 8
    done = cost_to_finish(estimate, trials_finished=20, finished_epochs=90)
    assert done.trial_epochs == 0 and done.wall_s == 0


def test_cost_to_finish_rejects_impossible_progress() -> None:
    estimate = estimate_work(AshaGeometry(4, 3), epoch_s=1.0, runs=5)
    with pytest.raises(ValueError, match="trials_finished \\+ trials_running <= trials"):
        cost_to_finish(estimate, trials_finished=4, finished_epochs=8, trials_running=1)
