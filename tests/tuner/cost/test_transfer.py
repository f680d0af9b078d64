"""A profile's epoch moved to other GPUs: hand-made specs, a flat calibration, exact sums."""

from __future__ import annotations

from typing import Any

import pytest

from tests.tuner.cost._synthetic import FLAT, GPUS
from tuner.cost import Profile, TrialProfile
from tuner.cost._transfer import CUDA_CONTEXT_GIB, EAGER_OP_S, estimate_epoch
from tuner.errors import SpecError


def profile(device: str, gpu_name: str | None, **metrics: Any) -> Profile:
    trial = TrialProfile(
        trial="t", config={}, epochs=3, epoch_s=10.0, startup_s=2.0, cold=False, total_s=32.0,
        metrics=metrics,
    )  # fmt: skip
    return Profile("c", "t", "tuner profile", device, gpu_name, "tf32", (trial,))


# Measured on BASE: 10 s epochs, of which 8 s train + validate (1 s of it waiting for
# data) and 2 s report and checkpoint; compute-bound (1e12 FLOPs at 100 samples/s fills
# BASE's 100 TFLOP/s).
ON_BASE = profile(
    "cuda", "BASE", epoch_time_s=8.0, train_time_s=4.0, data_wait_share=0.25,
    samples_per_s=100.0, flops_per_sample=1e12, peak_mem_gib=10.0,
)  # fmt: skip


def test_relative_scales_only_the_device_part() -> None:
    # device part: 8 s - 0.25 * 4 s data wait = 7 s; the other 3 s stay.
    fast = estimate_epoch(ON_BASE, "FAST", gpus=GPUS, calibration=FLAT)
    assert fast.method == "relative" and fast.precision == "tf32"
    assert fast.epoch_s == pytest.approx(3.0 + 7.0 / 2)
    wide = estimate_epoch(ON_BASE, "WIDE", gpus=GPUS, calibration=FLAT)
    assert wide.epoch_s == pytest.approx(10.0)  # compute-bound: bandwidth does not help
    assert fast.device_share == pytest.approx(3.5 / 6.5)
    assert fast.mem_gib == 10.0  # a CUDA peak already holds the context
    assert (fast.startup_s, fast.cold_start_s) == (2.0, 0.0)


def test_sharing_a_gpu_queues_the_device_parts() -> None:
    fast = estimate_epoch(ON_BASE, "FAST", gpus=GPUS, calibration=FLAT)
    assert fast.shared_epoch_s(1) == fast.epoch_s
    # two trials keep FAST busy 2 x 3.5 s of every 6.5 s: each epoch takes 7 s
    assert fast.shared_epoch_s(2) == pytest.approx(7.0)


# Measured on a CPU: 1,000 samples per epoch in batches of 100, 10 ops per batch.
ON_CPU = profile(
    "cpu", None, epoch_time_s=8.0, train_time_s=4.0, data_wait_share=0.0, samples_per_s=250.0,
    flops_per_sample=1e9, bytes_per_sample=1e6, ops_per_batch=10, weight_bytes_per_batch=1e8,
    batch_size=100, train_samples=1000, est_mem_gib=2.0,
)  # fmt: skip


def test_absolute_rebuilds_the_device_part_from_counts() -> None:
    est = estimate_epoch(ON_CPU, "BASE", precision="tf32", gpus=GPUS, calibration=FLAT)
    per_sample = 1e9 / 100e12 + 1e6 / 1000e9
    per_batch = 10 * EAGER_OP_S + 1e8 / 1000e9
    train = 1000 * per_sample + 10 * per_batch
    # validation keeps its CPU share: the device part is train * 8 / 4
    assert est.method == "absolute"
    assert est.epoch_s == pytest.approx(2.0 + 2 * train)  # + report and checkpoint (2 s)
    assert est.mem_gib == pytest.approx(2.0 + CUDA_CONTEXT_GIB)


def test_absolute_defaults_to_amp_and_halves_the_activation_bytes() -> None:
    amp = estimate_epoch(ON_CPU, "BASE", gpus=GPUS, calibration=FLAT)
    tf32 = estimate_epoch(ON_CPU, "BASE", precision="tf32", gpus=GPUS, calibration=FLAT)
    assert amp.precision == "amp"
    assert tf32.epoch_s - amp.epoch_s == pytest.approx(2 * 1000 * 0.5 * 1e6 / 1000e9)


def test_a_cpu_profile_without_counts_cannot_be_moved() -> None:
    bare = profile("cpu", None, epoch_time_s=8.0)
    with pytest.raises(SpecError, match="reported no FLOPs, samples or batch size"):
        estimate_epoch(bare, "BASE", gpus=GPUS, calibration=FLAT)


def test_unknown_target_gpu() -> None:
    with pytest.raises(SpecError, match=r"gpu: unknown GPU model \(got 'NOPE'"):
        estimate_epoch(ON_BASE, "NOPE", gpus=GPUS, calibration=FLAT)
