"""NVML telemetry: the off-GPU path for real, the summaries with a stand-in for NVML."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch

from trainables import tabular
from trainables._session import LocalSession
from trainables._telemetry import (
    Reading,
    Sampler,
    Unavailable,
    gpu_telemetry,
    parse_visible_devices,
    summarize,
)

GPU_KEYS = {"gpu_util_pct", "gpu_mem_used_gib", "gpu_power_w", "gpu_energy_wh"}
GIB = 2**30


class FakeNvml:
    """Stands in for NVML (this machine has no GPU): readings from a script, a fake clock."""

    def __init__(self, readings: list[list[Reading]]) -> None:
        self.readings = readings
        self.now = 0.0
        self.fail: str | None = None

    def read(self) -> Sequence[Reading]:
        if self.fail is not None:
            raise RuntimeError(self.fail)
        return self.readings.pop(0)

    def clock(self) -> float:
        return self.now


def _reading(util: float, mem_gib: float, power_w: float, energy_j: float | None) -> Reading:
    return Reading(
        util, int(mem_gib * GIB), power_w * 1e3, None if energy_j is None else energy_j * 1e3
    )


def test_summarize_uses_energy_counter_when_present() -> None:
    samples = [
        (0.0, [_reading(0, 1, 100, 0.0), _reading(0, 2, 100, 0.0)]),  # anchor: not averaged
        (1.0, [_reading(50, 3, 200, 3600.0), _reading(100, 4, 300, 7200.0)]),
        (2.0, [_reading(70, 1, 400, 7200.0), _reading(100, 1, 100, 10800.0)]),
    ]
    summary = summarize(samples)
    assert summary["gpu_util_pct"] == pytest.approx(80.0)  # (50+100+70+100) / 4
    assert summary["gpu_mem_used_gib"] == pytest.approx(7.0)  # max over time of the sum
    assert summary["gpu_power_w"] == pytest.approx(500.0)  # mean over time of the sum
    assert summary["gpu_energy_wh"] == pytest.approx(5.0)  # (7200 + 10800) J / 3600


def test_summarize_integrates_power_without_energy_counter() -> None:
    samples = [
        (0.0, [_reading(0, 1, 100, None)]),
        (1.0, [_reading(0, 1, 300, None)]),  # 200 W mean over 1 s
        (3.0, [_reading(0, 1, 300, None)]),  # 300 W over 2 s
    ]
    assert summarize(samples)["gpu_energy_wh"] == pytest.approx(800 / 3600)


def test_summarize_needs_two_samples() -> None:
    with pytest.raises(ValueError, match="at least 2 samples, but got 1"):
        summarize([(0.0, [_reading(0, 1, 1, None)])])


def test_sampler_windows_share_their_boundary_sample() -> None:
    nvml = FakeNvml([[_reading(10 * i, 1, 100, 3600.0 * i)] for i in range(4)])
    sampler = Sampler(nvml.read, interval_s=3600, clock=nvml.clock)  # the thread never fires
    try:
        nvml.now = 1.0
        sampler.sample()
        nvml.now = 2.0
        first = sampler.epoch_metrics()  # samples at 0 (anchor), 1, 2
        nvml.now = 3.0
        second = sampler.epoch_metrics()  # samples at 2 (anchor), 3
    finally:
        sampler.close()
    assert first == {
        "telemetry": "nvml",
        "gpu_util_pct": pytest.approx(15.0),
        "gpu_mem_used_gib": pytest.approx(1.0),
        "gpu_power_w": pytest.approx(100.0),
        "gpu_energy_wh": pytest.approx(2.0),
    }
    assert second["gpu_util_pct"] == pytest.approx(30.0)
    assert second["gpu_energy_wh"] == pytest.approx(1.0)


def test_sampler_read_failure_reports_unavailable_without_gpu_keys() -> None:
    nvml = FakeNvml([[_reading(10, 1, 100, None)]])
    sampler = Sampler(nvml.read, interval_s=3600, clock=nvml.clock)
    nvml.fail = "GPU is lost"
    try:
        metrics = sampler.epoch_metrics()
    finally:
        sampler.close()
    assert metrics == {"telemetry": "unavailable: NVML read failed: GPU is lost"}


def test_sampler_thread_samples_and_stops_on_close() -> None:
    nvml = FakeNvml([[_reading(50, 1, 100, None)] for _ in range(1000)])
    reads = 0
    sampled = threading.Event()

    def read() -> Sequence[Reading]:
        nonlocal reads
        reads += 1
        if reads >= 5:  # the constructor's anchor, then four by the thread
            sampled.set()
        return nvml.read()

    sampler = Sampler(read, interval_s=0.01)
    # No wall-clock bound: wait for the thread's own samples (the timeout only ends a
    # hung test; a loaded machine delays the samples, it does not drop them).
    assert sampled.wait(timeout=60), f"the thread sampled {reads - 1} times"
    metrics = sampler.epoch_metrics()
    sampler.close()
    assert metrics["gpu_util_pct"] == pytest.approx(50.0)
    assert "gpu-telemetry" not in {t.name for t in threading.enumerate()}
    after_close = reads
    sampler.epoch_metrics()  # the main thread's own sample; no thread reads any more
    assert reads == after_close + 1


def test_no_cuda_device_is_unavailable() -> None:
    with gpu_telemetry([]) as telemetry:
        assert telemetry == Unavailable("no CUDA device for this trial")
        assert telemetry.epoch_metrics() == {
            "telemetry": "unavailable: no CUDA device for this trial"
        }


@pytest.mark.no_gpu
def test_nvml_init_failure_is_unavailable_with_the_error() -> None:
    with gpu_telemetry([0]) as telemetry:
        metrics = telemetry.epoch_metrics()
    assert metrics["telemetry"].startswith("unavailable: NVML init failed: ")
    assert not metrics.keys() & GPU_KEYS


def test_cpu_trial_reports_unavailable_and_no_gpu_keys(tmp_path: Path) -> None:
    session = LocalSession(tmp_path)
    tabular.train({"tuner_max_epochs": 1, "tuner_device": "cpu"}, session)
    (metrics,) = session.metrics
    assert metrics["telemetry"] == "unavailable: no CUDA device for this trial"
    assert not metrics.keys() & GPU_KEYS


@pytest.mark.parametrize(
    ("visible", "count", "expected"),
    [
        (None, 2, [0, 1]),  # unset: every device torch sees
        ("3,1", 2, [3, 1]),  # Ray's ids for the trial, in CUDA's order
        ("GPU-abc, 2", 2, ["GPU-abc", 2]),  # UUIDs pass through
        ("0,1,2", 1, [0]),  # torch sees fewer than listed
        ("", 0, []),
    ],
)
def test_parse_visible_devices(visible: str | None, count: int, expected: list[int | str]) -> None:
    assert parse_visible_devices(visible, count) == expected


@pytest.mark.gpu
def test_real_nvml_reads_the_trial_gpu() -> None:
    ids = parse_visible_devices(os.environ.get("CUDA_VISIBLE_DEVICES"), torch.cuda.device_count())
    with gpu_telemetry(ids, interval_s=0.05) as telemetry:
        assert isinstance(telemetry, Sampler)
        x = torch.randn(4096, 4096, device="cuda")
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            x = (x @ x).clamp_(-1, 1)
        torch.cuda.synchronize()
        metrics = telemetry.epoch_metrics()
    assert metrics["telemetry"] == "nvml"
    assert 0 <= metrics["gpu_util_pct"] <= 100
    assert metrics["gpu_mem_used_gib"] > 0.05
    assert metrics["gpu_power_w"] > 0
    assert metrics["gpu_energy_wh"] > 0
