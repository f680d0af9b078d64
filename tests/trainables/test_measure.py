"""Per-epoch measurement: phase timing, FLOP counting and the metrics the loop reports."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from trainables import digits, tabular
from trainables._measure import (
    PhaseTimer,
    achieved_tflops,
    estimate_train_mem_gib,
    flops_per_sample,
    probe_step,
)
from trainables._session import LocalSession

MEASURED = {"step_time_s", "data_wait_share", "flops_per_sample", "achieved_tflops"}
PROFILED = {
    "bytes_per_sample",
    "ops_per_batch",
    "weight_bytes_per_batch",
    "param_count",
    "est_mem_gib",
    "batch_size",
    "grad_accum",
    "precision",
}
GIB = 2**30
# Training FLOPs of the default tabular MLP (30 -> 64 -> 64 -> 2), per sample: forward
# 2*(30*64 + 64*64 + 64*2) = 12,288; backward the same for the weight gradients plus
# 2*(64*64 + 64*2) = 8,448 for the input gradients of layers 2 and 3 (the data needs none).
TABULAR_FLOPS = 12_288 * 2 + 8_448


def test_phase_timer_splits_data_and_compute_time() -> None:
    # No wall-clock bounds (a loaded machine stretches any sleep): the test reads the same
    # clock just before and just after each of the timer's marks, so every interval the
    # timer measured lies between the shortest and the longest interval those readings
    # allow; and each phase lasts at least its sleep, so data and compute differ.
    timer = PhaseTimer(torch.device("cpu"))
    brackets = []  # (just before, just after) each mark

    def mark() -> None:
        before = time.perf_counter()
        timer.mark()
        brackets.append((before, time.perf_counter()))

    for _ in range(2):
        mark()
        time.sleep(0.03)  # producing the batch
        mark()
        time.sleep(0.01)  # the step
        mark()
    step_time, data_share = timer.summary()

    def phase(first: int) -> tuple[float, float]:
        """Least and most total time of the phase from mark ``first`` to the next."""
        pairs = [(brackets[i], brackets[i + 1]) for i in range(first, len(brackets), 3)]
        return sum(b[0] - a[1] for a, b in pairs), sum(b[1] - a[0] for a, b in pairs)

    data_lo, data_hi = phase(0)
    compute_lo, compute_hi = phase(1)
    assert data_lo >= 2 * 0.03 and compute_lo >= 2 * 0.01  # sleeps never end early
    assert compute_lo / 2 <= step_time <= compute_hi / 2  # the mean step of the two
    assert data_lo / (data_lo + compute_hi) <= data_share <= data_hi / (data_hi + compute_lo)
    assert timer.summary() == (0.0, 0.0)  # reset


def test_phase_timer_rejects_an_incomplete_step() -> None:
    timer = PhaseTimer(torch.device("cpu"))
    timer.mark()
    with pytest.raises(ValueError, match="3 marks per step, but got 1 marks"):
        timer.summary()


def test_flops_of_a_linear_layer_count_forward_and_weight_gradient() -> None:
    # Forward 2*4*3 per sample, weight gradient the same; the input needs no gradient.
    xb, yb = torch.randn(2, 4), torch.tensor([0, 1])
    assert flops_per_sample(nn.Linear(4, 3), F.cross_entropy, xb, yb, torch.device("cpu")) == 48


def test_flop_count_leaves_model_and_rng_untouched() -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.5), nn.Linear(8, 3))
    model.train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    xb, yb = torch.randn(5, 4), torch.zeros(5, dtype=torch.long)
    rng = torch.get_rng_state()
    flops_per_sample(
        model,
        F.cross_entropy,
        xb,
        yb,
        torch.device("cpu"),
    )
    assert model.training
    assert all(p.grad is None for p in model.parameters())
    for key, value in model.state_dict().items():
        torch.testing.assert_close(value, before[key], rtol=0, atol=0)
    assert torch.equal(torch.get_rng_state(), rng)


def _mlp(width: int) -> nn.Module:
    return nn.Sequential(nn.Linear(30, width), nn.ReLU(), nn.Linear(width, 2))


def _probe(model: nn.Module, n: int = 8):  # type: ignore[no-untyped-def]
    xb, yb = torch.randn(n, 30), torch.zeros(n, dtype=torch.long)
    return probe_step(model, F.cross_entropy, xb, yb, torch.device("cpu"))


def test_probe_counts_parameters_and_splits_weight_from_activation_traffic() -> None:
    probe = _probe(_mlp(64))
    assert probe.param_count == 30 * 64 + 64 + 64 * 2 + 2
    assert probe.param_bytes == 4 * probe.param_count
    # Forward reads every weight once and backward writes a gradient of each: at least 2x.
    assert probe.weight_traffic_bytes >= 2 * probe.param_bytes
    # Activations: at least the input (30 floats) and the hidden layer (64) each sample.
    assert probe.traffic_bytes_per_sample >= 4 * (30 + 64)
    assert probe.ops_per_step >= 6  # 2 matmuls forward, 3 backward, a loss, an activation


def test_probe_is_per_sample_and_grows_with_the_model() -> None:
    small, big = _probe(_mlp(64), n=8), _probe(_mlp(64), n=16)
    assert big.flops_per_sample == small.flops_per_sample
    # Per-sample figures stay put when the batch doubles; the scalar loss is shared.
    assert big.saved_bytes_per_sample == pytest.approx(small.saved_bytes_per_sample, rel=0.05)
    assert big.ops_per_step == small.ops_per_step
    wide = _probe(_mlp(256))
    # The hidden activation is saved once (ReLU output = second matmul input): 4x wider.
    hidden_share = wide.saved_bytes_per_sample - small.saved_bytes_per_sample
    assert hidden_share == pytest.approx(3 * 64 * 4, rel=0.1)


def test_memory_estimate_adds_weights_gradients_optimizer_state_and_activations() -> None:
    probe = _probe(_mlp(64))
    sgd = estimate_train_mem_gib(probe, 64, "sgd") * GIB
    momentum = estimate_train_mem_gib(probe, 64, "sgd", momentum=0.9) * GIB
    adam = estimate_train_mem_gib(probe, 64, "adam") * GIB
    assert momentum - sgd == pytest.approx(probe.param_bytes)  # one buffer per parameter
    assert adam - sgd == pytest.approx(2 * probe.param_bytes)  # two moments
    assert sgd == pytest.approx(2 * probe.param_bytes + 64 * probe.saved_bytes_per_sample)
    double = estimate_train_mem_gib(probe, 128, "sgd") * GIB
    assert double - sgd == pytest.approx(64 * probe.saved_bytes_per_sample)


def test_achieved_tflops() -> None:
    assert achieved_tflops(2e6, 5e5) == pytest.approx(1.0)


def test_loop_reports_measurements(tmp_path: Path) -> None:
    session = LocalSession(tmp_path)
    tabular.train({"tuner_max_epochs": 2}, session)
    for m in session.metrics:
        assert m.keys() >= MEASURED
        assert m["flops_per_sample"] == TABULAR_FLOPS
        assert m["achieved_tflops"] == pytest.approx(
            TABULAR_FLOPS * m["samples_per_s"] / 1e12, rel=1e-9
        )
        assert 0 < m["step_time_s"] < m["epoch_time_s"]
        assert 0 <= m["data_wait_share"] < 1
        assert "peak_mem_gib" not in m  # CUDA only
        assert m.keys() >= PROFILED
        assert m["precision"] == "fp32"  # CPU math
        assert m["batch_size"] == 64 and m["grad_accum"] == 1
        assert m["param_count"] == 30 * 64 + 64 + 64 * 64 + 64 + 64 * 2 + 2
        assert 0 < m["est_mem_gib"] < 0.01
        assert "gpu_name" not in m


def test_augmentation_shows_up_as_data_wait(tmp_path: Path) -> None:
    plain, augmented = LocalSession(tmp_path / "plain"), LocalSession(tmp_path / "aug")
    config = {"tuner_max_epochs": 1, "channels": 4, "hidden": 8}
    digits.train(config, plain)
    digits.train({**config, "augment": 1.0}, augmented)
    assert augmented.metrics[0]["data_wait_share"] > plain.metrics[0]["data_wait_share"]


@pytest.mark.gpu
def test_cuda_measurements(tmp_path: Path) -> None:
    session = LocalSession(tmp_path)
    digits.train({"tuner_max_epochs": 2, "augment": 0.5}, session)
    for m in session.metrics:
        assert m.keys() >= MEASURED | PROFILED | {"peak_mem_gib", "gpu_name"}
        assert 0 < m["peak_mem_gib"] < 10
        assert m["precision"] in {"amp", "tf32", "fp32"}
        assert 0 < m["data_wait_share"] < 1
        assert 0 < m["step_time_s"] < m["epoch_time_s"]
        assert math.isfinite(m["achieved_tflops"]) and m["achieved_tflops"] > 0
