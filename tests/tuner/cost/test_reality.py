"""Predicted against actual cost of a campaign."""

from __future__ import annotations

import pytest

from tuner.cost import AshaGeometry, Profile, TrialProfile, estimate_work
from tuner.cost._reality import actual_cost, compare, format_comparison, predict_cost


def _profile(epoch_s: float, epochs: list[int]) -> Profile:
    trials = tuple(
        TrialProfile(str(i), {}, n, epoch_s, 1.0, i == 0, n * epoch_s + 1.0)
        for i, n in enumerate(epochs)
    )
    return Profile("c", "t", "campaign run", "cuda", "A100", "amp", trials)


GEOMETRY = AshaGeometry(8, 4, 1, 2)


def test_without_a_profile_only_the_work_is_predicted() -> None:
    out = predict_cost(GEOMETRY, workers=2, gpus_per_trial=1, usd_per_gpu_hour=2.0, runs=50)
    assert out["trial_epochs"] == pytest.approx(
        estimate_work(GEOMETRY, epoch_s=1.0, workers=2, runs=50).trial_epochs
    )
    assert "trial_s" not in out and out["profile"] is None


def test_with_a_profile_time_and_money_follow() -> None:
    profile = _profile(10.0, [4, 4])
    out = predict_cost(GEOMETRY, workers=2, gpus_per_trial=0.5, usd_per_gpu_hour=2.0,
                       profile=profile, runs=50)  # fmt: skip
    work = estimate_work(GEOMETRY, epoch_s=10.0, startup_s=1.0, workers=2, runs=50)
    assert out["trial_s"] == pytest.approx(work.trial_s)
    assert out["gpu_h"] == pytest.approx(work.trial_s * 0.5 / 3600)
    assert out["usd"] == pytest.approx(out["gpu_h"] * 2.0)


def test_actual_sums_the_trials_and_compare_gives_relative_errors() -> None:
    run = _profile(10.0, [4, 1, 2])  # 7 epochs, 73 trial-seconds
    actual = actual_cost(run, gpus_per_trial=1.0, usd_per_gpu_hour=3.6, wall_s=50.0)
    assert actual["trial_epochs"] == 7 and actual["trial_s"] == pytest.approx(73.0)
    assert actual["usd"] == pytest.approx(73.0 / 3600 * 3.6)
    both = compare({"trial_epochs": 14, "trial_s": 73.0}, actual)
    assert both["error"] == pytest.approx({"trial_epochs": 1.0, "trial_s": 0.0})
    text = format_comparison(both)
    assert "trial-epochs" in text and "+100.0%" in text and "no profile given" in text


def test_cpu_trials_have_no_gpu_rows() -> None:
    actual = actual_cost(_profile(1.0, [1]), gpus_per_trial=0.0, usd_per_gpu_hour=0.0, wall_s=2.0)
    text = format_comparison(compare({"trial_epochs": 1, "gpus_per_trial": 0.0}, actual))
    assert "\nGPU-hours" not in text and "CPU trials: no GPU-hours" in text
