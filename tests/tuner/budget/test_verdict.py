"""The budget guard's decisions on hand-made usage and outlooks."""

from __future__ import annotations

import pytest

from tuner.budget import Limits, Outlook, Usage, affordable_slots, assess, expected_epochs_left
from tuner.cost import AshaGeometry

GEOMETRY = AshaGeometry(trials=27, max_epochs=9, grace_period=1, reduction_factor=3)


@pytest.mark.parametrize(
    ("epoch", "expected"),
    [
        (0, 1 + 2 / 3 + 6 / 9),  # to rung 1 surely, to 3 with 1/3, to 9 with 1/9
        (1, 2 + 6 / 3),  # past rung 1: to 3 surely, to 9 with 1/3
        (3, 6.0),
        (5, 4.0),
        (9, 0.0),
    ],
)
def test_expected_epochs_follow_asha_rungs(epoch: int, expected: float) -> None:
    assert expected_epochs_left(GEOMETRY, epoch) == pytest.approx(expected)


def test_fifo_trials_run_to_the_end() -> None:
    fifo = AshaGeometry(trials=4, max_epochs=5, asha=False)
    assert expected_epochs_left(fifo, 2) == 3.0


# $1 per trial-hour; a new trial is expected to take 1800 s ($0.50).
OUTLOOK = Outlook(usd_per_trial_s=1 / 3600, gpu_h_per_trial_s=1 / 3600, new_trial_s=1800.0)


def test_new_trial_allowed_when_it_fits() -> None:
    verdict = assess(Limits(usd=10.0), Usage(usd=5.0, gpu_hours=5.0, running_s=0.0), OUTLOOK)
    assert verdict.launch and not verdict.exhausted


def test_running_trials_commitment_blocks_a_new_one() -> None:
    outlook = Outlook(1 / 3600, 1 / 3600, 1800.0, running_left_s=[3600.0, 3600.0])
    # $7 spent + $2 committed + $0.50 new = $9.50 <= $10: fine; at $7.60 it is not.
    ok = assess(Limits(usd=10.0), Usage(7.0, 0.0, 0.0), outlook)
    held = assess(Limits(usd=10.0), Usage(7.6, 0.0, 0.0), outlook)
    assert ok.launch
    assert not held.launch and not held.exhausted
    assert "2 running trial(s) need ~$2.00 more and a new one ~$0.50" in held.reason


def test_at_the_limit_the_budget_is_exhausted() -> None:
    verdict = assess(Limits(usd=10.0), Usage(10.0, 0.0, 0.0), OUTLOOK)
    assert verdict.exhausted and not verdict.launch
    assert verdict.reason == "budget exhausted: $10.00 of $10.00 (usd)"


def test_stop_lead_reaches_the_limit_one_epoch_early() -> None:
    # Burning $36/h = $0.01/s; stopping takes 60 s = $0.60: at $9.50 of $10 it is time.
    outlook = Outlook(1 / 3600, 0.0, 1800.0, usd_per_s_now=0.01, stop_lead_s=60.0)
    assert assess(Limits(usd=10.0), Usage(9.3, 0.0, 0.0), outlook).exhausted is False
    assert assess(Limits(usd=10.0), Usage(9.5, 0.0, 0.0), outlook).exhausted is True


def test_gpu_hours_and_deadline_limits() -> None:
    gpu = assess(Limits(gpu_hours=1.0), Usage(0.0, 0.8, 0.0), OUTLOOK)
    assert not gpu.launch and "gpu_hours" in gpu.reason
    late = assess(Limits(deadline_s=3600.0), Usage(0.0, 0.0, 2000.0), OUTLOOK)
    assert not late.launch  # 2000 + 1800 > 3600
    assert assess(Limits(deadline_s=3600.0), Usage(0.0, 0.0, 3600.0), OUTLOOK).exhausted


def test_unknown_epoch_time_lets_trials_start() -> None:
    outlook = Outlook(1 / 3600, 1 / 3600, new_trial_s=None)
    assert assess(Limits(usd=1.0), Usage(0.5, 0.0, 0.0), outlook).launch


def test_affordable_slots() -> None:
    # $10 buys 10 trial-hours; a first rung takes 2 h: 5 trials at once.
    assert (
        affordable_slots(
            Limits(usd=10.0), usd_per_trial_s=1 / 3600, gpu_h_per_trial_s=0.0, first_rung_s=7200
        )
        == 5
    )
    assert (
        affordable_slots(Limits(), usd_per_trial_s=1.0, gpu_h_per_trial_s=1.0, first_rung_s=1)
        is None
    )
    # Never below one.
    assert (
        affordable_slots(
            Limits(usd=0.01), usd_per_trial_s=1.0, gpu_h_per_trial_s=0.0, first_rung_s=100
        )
        == 1
    )
