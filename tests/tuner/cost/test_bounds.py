"""The cost model at the largest (and smallest) values the input bounds allow: no overflow,
no division by zero, and work bounded whatever the trial count, the epochs or the machines."""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from tuner.budget import Limits, affordable_slots
from tuner.cost import AshaGeometry, Catalog, Profile, estimate_work, load_catalog
from tuner.cost import _recommend as recommend_module
from tuner.cost._advise import advise
from tuner.cost._reality import predict_cost
from tuner.cost._work import SIM_EVENTS, cost_to_finish
from tuner.spec._limits import CAMPAIGN, FLAGS, PROFILE

TRIALS = int(CAMPAIGN["budget.trials"].high)
EPOCHS = int(CAMPAIGN["budget.max_epochs"].high)
YEAR_S = CAMPAIGN["budget.deadline"].high

GEOMETRIES = [
    AshaGeometry(TRIALS, EPOCHS, 1, 1.01),  # the most rungs
    AshaGeometry(TRIALS, EPOCHS, 1, CAMPAIGN["scheduler.reduction_factor"].high),
    AshaGeometry(TRIALS, EPOCHS, asha=False),
    AshaGeometry(TRIALS, EPOCHS, EPOCHS, 3.0),
    AshaGeometry(1, 1),
]


def _profile(epoch_s: float, startup_s: float) -> Profile:
    trial = {
        "trial": "a",
        "epochs": int(PROFILE["trials[].epochs"].high),
        "epoch_s": epoch_s,
        "startup_s": startup_s,
        "total_s": PROFILE["trials[].total_s"].high,
        "metrics": {
            "samples_per_s": PROFILE["samples_per_s"].high,
            "flops_per_sample": PROFILE["flops_per_sample"].high,
            "bytes_per_sample": PROFILE["bytes_per_sample"].high,
            "peak_mem_gib": 1.0,
            "gpu_name": "NVIDIA A100-SXM4-40GB",
        },
    }
    return Profile.from_dict(
        {
            "format": 1,
            "campaign": "c",
            "trainable": "t",
            "device": "cuda",
            "precision": "amp",
            "gpu_name": "NVIDIA A100-SXM4-40GB",
            "trials": [trial, {**trial, "trial": "b", "cold": True}],
        }
    )


PROFILES = [_profile(1e-9, 0.0), _profile(YEAR_S, YEAR_S)]


@pytest.fixture
def count_estimates(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    calls: list[int] = []
    real = recommend_module.estimate_work

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(recommend_module, "estimate_work", counted)
    yield calls


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
def test_estimates_at_the_largest_campaigns_are_finite_and_quick(geometry: AshaGeometry) -> None:
    start = time.monotonic()
    work = estimate_work(geometry, epoch_s=YEAR_S, startup_s=YEAR_S, workers=10_000)
    assert time.monotonic() - start < 20  # ~0.5 s here; bounded by SIM_EVENTS, not the input
    first = (*geometry.decision_epochs(), geometry.max_epochs)[0]
    assert geometry.trials * first <= work.trial_epochs <= geometry.trials * geometry.max_epochs
    assert all(math.isfinite(x) for x in (work.wall_s, work.trial_s, work.trial_epochs_sd))
    assert len(work.prefix_epochs) <= SIM_EVENTS
    assert work.prefix(geometry.trials) == pytest.approx(work.trial_epochs)
    rest = cost_to_finish(work, trials_finished=geometry.trials // 2, finished_epochs=10**9)
    assert math.isfinite(rest.trial_epochs)


def test_a_large_campaign_is_replayed_smaller_and_scaled_back_up() -> None:
    # 20,000 trials on 200 workers: replayed as 2,000 on 20, then scaled by 10.
    big = estimate_work(AshaGeometry(20_000, 27, 1, 3.0), epoch_s=1.0, workers=200, runs=20)
    small = estimate_work(AshaGeometry(2_000, 27, 1, 3.0), epoch_s=1.0, workers=20, runs=20)
    assert big.trial_epochs == pytest.approx(10 * small.trial_epochs)
    assert big.wall_s == pytest.approx(small.wall_s)
    assert big.prefix(10_000) == pytest.approx(10 * small.prefix(1_000))
    # The replay stays close to a full simulation.
    full = estimate_work(AshaGeometry(4_000, 27, 1, 3.0), epoch_s=1.0, workers=40, runs=5)
    assert full.trial_epochs == pytest.approx(2 * small.trial_epochs, rel=0.05)


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
@pytest.mark.parametrize("profile", PROFILES, ids=["fastest", "slowest"])
def test_the_start_of_run_prediction_at_the_limits(
    geometry: AshaGeometry, profile: Profile
) -> None:
    out = predict_cost(
        geometry,
        workers=int(CAMPAIGN["resources.max_concurrent"].high),
        gpus_per_trial=FLAGS["--gpus-per-trial"].high,
        usd_per_gpu_hour=FLAGS["--usd-per-gpu-hour"].high,
        profile=profile,
    )
    assert all(math.isfinite(out[k]) for k in ("trial_epochs", "trial_s", "gpu_h", "usd"))


def _one_instance_catalog() -> Catalog:
    catalog = load_catalog()
    a100 = next(i for i in catalog.instances if i.gpu.startswith("A100") and i.gpu_count == 8)
    return Catalog(gpus=catalog.gpus, instances=(a100,))


@pytest.mark.parametrize(
    ("geometry", "profile", "gpus"),
    [
        (GEOMETRIES[0], PROFILES[0], 1.0),
        (GEOMETRIES[2], PROFILES[1], 1.0),
        (GEOMETRIES[1], PROFILES[0], FLAGS["--gpus-per-trial"].low),
    ],
    ids=["most-rungs-fastest", "fifo-slowest", "tiny-gpu-share"],
)
def test_recommend_at_the_limits_is_bounded(
    geometry: AshaGeometry, profile: Profile, gpus: float, count_estimates: list[int]
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        advice = advise(
            "c",
            geometry,
            profile,
            _one_instance_catalog(),
            budget_usd=1.0,  # too little: the trials it buys are searched for
            deadline_h=1 / 3600,  # too soon: more machines are searched for
            spot=False,
            gpus_per_trial=gpus,
            cpus_per_trial=0.0,
            precision=None,
            clouds=[],
            max_instances=int(FLAGS["--max-instances"].high),
            provision_s=FLAGS["--provision"].high,
        )
    plan = advice.recommendation.plans[0]
    if gpus < 1:  # 10,000 trials on one GPU need 10,000 times its memory
        assert not plan.fits and "GiB" in plan.reason
    else:
        assert plan.fits, plan.reason
        assert plan.usd is not None and plan.wall_h is not None
    # 1 + 31 one by one + doubling and halving to 1000 + the trials bought + the reference
    assert len(count_estimates) <= 1 + 31 + 2 * 10 + 17 + 1


def test_the_budget_cap_of_concurrency_survives_tiny_and_huge_rates() -> None:
    limits = Limits(usd=CAMPAIGN["budget.usd"].high, gpu_hours=CAMPAIGN["budget.gpu_hours"].high)
    for rate, first_rung_s in ((1e-300, 1e-300), (5e-324, 1.0), (1e300, 1e300), (0.0, 1.0)):
        cap = affordable_slots(
            limits, usd_per_trial_s=rate, gpu_h_per_trial_s=rate, first_rung_s=first_rung_s
        )
        assert cap is None or cap >= 1


def test_reduction_factors_close_to_one_are_refused() -> None:
    with pytest.raises(ValueError, match=r"reduction_factor >= 1\.01"):
        AshaGeometry(4, 9, reduction_factor=1.0001)
