"""Per-epoch measurement of the training loop: step time, data-wait share, FLOPs, memory.

The loop marks three points per optimizer step with :meth:`PhaseTimer.mark`: before it
starts producing the step's batches, once they are ready, and after the step. The data
phase (index gathers, augmentation, DataLoader waits, host-to-device copies) is the first
interval, compute the second. On CPU the marks are ``time.perf_counter`` readings, and
CPU ops are synchronous. On CUDA they are CUDA events recorded in the stream, so timing
adds no host syncs: one ``synchronize`` at the end of the epoch resolves them all. Because
an event's GPU timestamp is taken when the stream reaches it, time the GPU spends idle
waiting for the host to enqueue the next batch (a slow DataLoader) counts as data wait.

Training FLOPs per sample are counted once per trial with
:class:`torch.utils.flop_counter.FlopCounterMode` (forward plus backward of one batch on
the model in eval mode, with the RNG state forked, so the trial's state is untouched).
It counts matmul and convolution FLOPs only; elementwise work is not included, which is
also how peak TFLOPS figures are quoted.
"""

from __future__ import annotations

import time
from typing import Any

import torch
from torch import nn

__all__ = ["PhaseTimer", "achieved_tflops", "flops_per_sample", "peak_mem_gib"]

_GIB = 2**30


class PhaseTimer:
    """Data and compute time of each optimizer step of one epoch (see the module docstring).

    Args:
        device: The training device; CUDA devices are timed with events.
    """

    def __init__(self, device: torch.device) -> None:
        self._cuda = device.type == "cuda"
        self._marks: list[Any] = []

    def mark(self) -> None:
        """Records a point in time (three per step: start, batches ready, step done)."""
        if self._cuda:
            event = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            event.record()
            self._marks.append(event)
        else:
            self._marks.append(time.perf_counter())

    def summary(self) -> tuple[float, float]:
        """``(mean step compute time in s, data share of data+compute time)``; resets.

        Synchronizes the device once on CUDA (the epoch's end needs a sync anyway).
        """
        marks, self._marks = self._marks, []
        if len(marks) % 3 != 0:
            raise ValueError(f"PhaseTimer needs 3 marks per step, but got {len(marks)} marks.")
        if not marks:
            return 0.0, 0.0
        if self._cuda:
            marks[-1].synchronize()
            elapsed = [
                (
                    marks[i].elapsed_time(marks[i + 1]) / 1e3,
                    marks[i + 1].elapsed_time(marks[i + 2]) / 1e3,
                )
                for i in range(0, len(marks), 3)
            ]
        else:
            elapsed = [
                (marks[i + 1] - marks[i], marks[i + 2] - marks[i + 1])
                for i in range(0, len(marks), 3)
            ]
        data = sum(d for d, _ in elapsed)
        compute = sum(c for _, c in elapsed)
        total = data + compute
        return compute / len(elapsed), (data / total if total > 0 else 0.0)


def flops_per_sample(
    model: nn.Module,
    loss_fn: Any,
    xb: torch.Tensor,
    yb: torch.Tensor,
    device: torch.device,
) -> float:
    """Training FLOPs (forward + backward) per sample of one batch, leaving ``model`` as is.

    Runs in eval mode, so BatchNorm statistics do not move (conv and matmul FLOPs are the
    same in both modes), takes gradients with ``torch.autograd.grad`` so no ``.grad`` is
    left behind, and forks the RNG so the trial's random streams are untouched (a restored
    run must match an uninterrupted one). No copy of the model is made: large models may
    not fit twice, and pruned weights cannot be deep-copied.
    """
    from torch.utils.flop_counter import FlopCounterMode

    was_training = model.training
    model.eval()
    params = [p for p in model.parameters() if p.requires_grad]
    devices = [device] if device.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=devices), FlopCounterMode(display=False) as counter:
            loss = loss_fn(model(xb), yb)
            torch.autograd.grad(loss, params, allow_unused=True)
    finally:
        model.train(was_training)
    return float(counter.get_total_flops()) / len(xb)


def achieved_tflops(flops: float, samples_per_s: float) -> float:
    """Achieved training throughput in TFLOPS: FLOPs per sample times samples per second."""
    return flops * samples_per_s / 1e12


def peak_mem_gib(device: torch.device) -> float:
    """Peak allocated CUDA memory since the last reset, in GiB; then resets the peak."""
    peak = torch.cuda.max_memory_allocated(device) / _GIB
    torch.cuda.reset_peak_memory_stats(device)
    return peak
