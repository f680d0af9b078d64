"""One epoch of the shared loop: the optimizer steps over the epoch's data, and evaluation."""

from __future__ import annotations

import contextlib
import itertools
import time
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from trainables import _batches, _cuda, _measure
from trainables._run import Run
from trainables._task import LossFn

__all__ = ["Trained", "evaluate", "train_epoch", "train_step"]

# Evaluation needs no activations for backward, so it can use bigger batches.
_MIN_EVAL_BATCH = 1024


@dataclass(frozen=True)
class Trained:
    """The training part of an epoch.

    Attributes:
        started: When the epoch started (``time.perf_counter()``).
        loss: Mean training loss over every worker's samples.
        samples: Training samples of the epoch, over every worker.
        time_s: Training time of the epoch.
        step_time_s: Mean compute time of an optimizer step.
        data_wait_share: Share of training time spent producing batches.
    """

    started: float
    loss: float
    samples: int
    time_s: float
    step_time_s: float
    data_wait_share: float


def train_epoch(run: Run, timer: _measure.PhaseTimer) -> Trained:
    """Trains ``run`` for one epoch in the order drawn from its data-order generator."""
    started = time.perf_counter()
    cfg = run.cfg
    run.model.train()
    x_train, y_train = run.epoch_data()
    order = torch.randperm(len(x_train), generator=run.data_order)
    if run.world > 1:
        # Same permutation on every rank (same seed); equal shards keep the ranks'
        # step counts, and so DDP's gradient all-reduces, in lockstep.
        order = order[: run.shard * run.world][run.rank :: run.world]
    batches = _batches.micro_batches(
        order,
        x_train,
        y_train,
        cfg.batch_size,
        device=run.device,
        loader_workers=run.loader_workers,
        non_blocking=cfg.non_blocking,
    )
    loss_sum = torch.zeros((), device=run.device)
    for _ in range(run.steps_per_epoch):
        timer.mark()
        step = [(run.prepare(xb), yb) for xb, yb in itertools.islice(batches, cfg.grad_accum)]
        timer.mark()
        loss_sum += train_step(
            run.wrapped,
            run.optimizer,
            run.train_loss_fn,
            step,
            grad_clip=cfg.grad_clip,
            scaler=run.scaler,
            amp_dtype=run.amp_dtype,
            device=run.device,
        )
        run.scheduler.step()
        timer.mark()
    if run.world > 1:
        torch.distributed.all_reduce(loss_sum)  # the loss over all workers' shards
    seen = len(order) * run.world
    loss = (loss_sum / seen).item()
    time_s = time.perf_counter() - started
    step_time, data_share = timer.summary()
    return Trained(started, loss, seen, time_s, step_time, data_share)


def train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: LossFn,
    batches: list[tuple[torch.Tensor, torch.Tensor]],
    *,
    grad_clip: float = 0.0,
    scaler: torch.amp.GradScaler | None = None,
    amp_dtype: torch.dtype | None = None,
    device: torch.device | None = None,
) -> torch.Tensor:
    """One optimizer step over micro-batches; returns the summed (not mean) loss, detached.

    Each micro-batch's mean loss is weighted by its share of the step's samples (1/N for N
    equal micro-batches), so the accumulated gradient is that of one batch of all of them.
    With ``grad_clip > 0`` the global gradient norm is clipped to it before the step.
    """
    device = device if device is not None else batches[0][0].device
    total = sum(len(yb) for _, yb in batches)
    loss_sum = torch.zeros((), device=device)
    optimizer.zero_grad(set_to_none=True)
    for xb, yb in batches:
        with _autocast(device, amp_dtype):
            loss = loss_fn(model(xb), yb)
        # One micro-batch (the common case) needs no weighting, and no extra op per step.
        scaled = loss * (len(yb) / total) if len(batches) > 1 else loss
        torch.autograd.backward(scaler.scale(scaled) if scaler is not None else scaled)
        # Summed on the device: a .item() per step would stall the GPU every batch.
        loss_sum += loss.detach().float() * len(yb)
    if grad_clip > 0:
        if scaler is not None:
            scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    return loss_sum


@torch.no_grad()
def evaluate(run: Run) -> tuple[float, float]:
    """Mean loss and accuracy over the validation split, with one host sync at the end."""
    model, loss_fn, device = run.wrapped, run.task.loss_fn, run.device
    x, y = run.x_val, run.y_val
    model.eval()
    loss_sum = torch.zeros((), device=device)
    correct = torch.zeros((), device=device, dtype=torch.long)
    batch = max(run.cfg.batch_size, _MIN_EVAL_BATCH)
    for i in range(0, len(x), batch):
        # A no-op for data already on the device; a copy per batch for host-side data.
        xb = _cuda.to_format(x[i : i + batch].to(device, non_blocking=True), run.channels_last)
        yb = y[i : i + batch].to(device, non_blocking=True)
        with _autocast(device, run.amp_dtype):
            logits = model(xb)
        logits = logits.float()
        loss_sum += loss_fn(logits, yb) * len(xb)
        correct += (logits.argmax(dim=1) == yb).sum()
    # Per target: one per sample, or one per position for sequence labels (batch, time).
    return (loss_sum / len(x)).item(), correct.item() / y.numel()


def _autocast(
    device: torch.device, dtype: torch.dtype | None
) -> contextlib.AbstractContextManager[Any]:
    """Autocast to ``dtype`` on ``device``, or nothing when ``dtype`` is None."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)
