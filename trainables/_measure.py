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

The same probe (:func:`probe_step`) also records what a cost model needs to predict the
step on a GPU it was not measured on: the ATen operations one forward and backward runs
(about one kernel each on a GPU), the bytes they read and write (activation traffic per
sample, and weight and gradient traffic per step), and the bytes autograd saves for the
backward pass, which with the parameters, gradients and optimizer state estimates the
training memory on devices that cannot measure it (:func:`estimate_train_mem_gib`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

__all__ = [
    "PhaseTimer",
    "StepProbe",
    "achieved_tflops",
    "estimate_train_mem_gib",
    "flops_per_sample",
    "peak_mem_gib",
    "probe_step",
]

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


@dataclass(frozen=True)
class StepProbe:
    """One forward and backward of a small batch, measured op by op (see :func:`probe_step`).

    Attributes:
        flops_per_sample: Training matmul/conv FLOPs per sample.
        ops_per_step: ATen operations of one forward + backward, views excluded (about
            one GPU kernel each; a GPU pays a launch for every one, however small).
        traffic_bytes_per_sample: Bytes the operations read and write in activations and
            their gradients, per sample.
        weight_traffic_bytes: Bytes the operations read and write in parameters and
            parameter gradients, per step (independent of the batch size).
        saved_bytes_per_sample: Bytes autograd keeps for the backward pass, per sample
            (activations; the parameters themselves are not counted).
        param_count: Trainable parameters.
        param_bytes: Bytes of the trainable parameters.
    """

    flops_per_sample: float
    ops_per_step: int
    traffic_bytes_per_sample: float
    weight_traffic_bytes: float
    saved_bytes_per_sample: float
    param_count: int
    param_bytes: int


def _storage_key(t: torch.Tensor) -> int:
    return int(t.untyped_storage().data_ptr())


class _TrafficMode(TorchDispatchMode):  # type: ignore[no-untyped-call]  # torch's own hook
    """Records the non-view ATen ops a region runs and the storages and sizes they touch."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.ops = 0
        self.touched: list[tuple[int, int]] = []  # (storage, bytes) per tensor argument

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if not func.is_view:  # views move no data and launch no kernel
            self.ops += 1
            self.touched += [
                (_storage_key(t), t.numel() * t.element_size())
                for t in tree_leaves((args, kwargs, out))
                if isinstance(t, torch.Tensor)
            ]
        return out

    def split(self, weights: set[int]) -> tuple[int, int]:
        """(activation bytes, weight and gradient bytes) touched."""
        weight = sum(size for key, size in self.touched if key in weights)
        return sum(size for _, size in self.touched) - weight, weight


def probe_step(
    model: nn.Module,
    loss_fn: Any,
    xb: torch.Tensor,
    yb: torch.Tensor,
    device: torch.device,
) -> StepProbe:
    """Measures one forward + backward of ``xb`` op by op, leaving ``model`` as is.

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
    weights = {_storage_key(p) for p in model.parameters()}
    weights |= {_storage_key(b) for b in model.buffers()}
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        key = _storage_key(t)
        if key not in weights:
            saved[key] = max(saved.get(key, 0), t.untyped_storage().nbytes())
        return t

    devices = [device] if device.type == "cuda" else []
    traffic = _TrafficMode()
    try:
        with (
            torch.random.fork_rng(devices=devices),
            FlopCounterMode(display=False) as counter,
            traffic,
        ):
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                loss = loss_fn(model(xb), yb)
            grads = torch.autograd.grad(loss, params, allow_unused=True)
    finally:
        model.train(was_training)
    # Parameter gradients (and the ops that accumulate them) are weight traffic, per step.
    activation_bytes, weight_bytes = traffic.split(
        weights | {_storage_key(g) for g in grads if g is not None}
    )
    n = len(xb)
    return StepProbe(
        flops_per_sample=float(counter.get_total_flops()) / n,
        ops_per_step=traffic.ops,
        traffic_bytes_per_sample=activation_bytes / n,
        weight_traffic_bytes=float(weight_bytes),
        saved_bytes_per_sample=sum(saved.values()) / n,
        param_count=sum(p.numel() for p in params),
        param_bytes=sum(p.numel() * p.element_size() for p in params),
    )


def flops_per_sample(
    model: nn.Module,
    loss_fn: Any,
    xb: torch.Tensor,
    yb: torch.Tensor,
    device: torch.device,
) -> float:
    """Training FLOPs (forward + backward) per sample of one batch (see :func:`probe_step`)."""
    return probe_step(model, loss_fn, xb, yb, device).flops_per_sample


# Optimizer state per parameter, in parameter-sized tensors.
_OPTIMIZER_STATES = {"adam": 2, "adamw": 2, "sgd_momentum": 1, "sgd": 0}


def estimate_train_mem_gib(
    probe: StepProbe, batch_size: int, optimizer: str, momentum: float = 0.0
) -> float:
    """Training memory without a CUDA allocator to ask: weights, gradients, state, activations.

    ``param_bytes * (2 + optimizer states) + saved_bytes_per_sample * batch_size``. It
    leaves out the CUDA context (a few hundred MiB), allocator fragmentation and
    temporary workspaces, so a GPU needs some headroom above it.

    Args:
        probe: What :func:`probe_step` measured.
        batch_size: Samples per forward pass (one micro-batch).
        optimizer: "sgd", "adam" or "adamw".
        momentum: SGD momentum (a momentum buffer exists when > 0).
    """
    key = "sgd_momentum" if optimizer == "sgd" and momentum > 0 else optimizer
    states = _OPTIMIZER_STATES.get(key, 2)
    total = probe.param_bytes * (2 + states) + probe.saved_bytes_per_sample * batch_size
    return total / _GIB


def achieved_tflops(flops: float, samples_per_s: float) -> float:
    """Achieved training throughput in TFLOPS: FLOPs per sample times samples per second."""
    return flops * samples_per_s / 1e12


def peak_mem_gib(device: torch.device) -> float:
    """Peak allocated CUDA memory since the last reset, in GiB; then resets the peak."""
    peak = torch.cuda.max_memory_allocated(device) / _GIB
    torch.cuda.reset_peak_memory_stats(device)
    return peak
