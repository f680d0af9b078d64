"""Learning-rate schedules of the shared loop, stepped once per optimizer step.

Every schedule is a torch scheduler stepped after each optimizer step, so its position is
restored exactly from its ``state_dict``:

* ``constant``: ``lr`` throughout.
* ``cosine``: ``lr * (1 + cos(pi * t / T)) / 2`` for step ``t`` of ``T`` in the run.
* ``step``: ``lr * lr_gamma ** (epoch // lr_step_epochs)`` (0-based epoch), so the rate
  changes only at epoch boundaries.
* ``onecycle``: torch ``OneCycleLR`` with ``max_lr = lr`` over the run; momentum is not
  cycled, so ``momentum`` and Adam's betas stay as configured.

``warmup_epochs`` multiplies any of them by ``min(1, (t + 1) / W)`` for the first
``W = round(warmup_epochs * steps_per_epoch)`` steps: a linear ramp from near 0 to 1.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from trainables._config import LoopConfig

__all__ = ["LRSchedule"]


class LRSchedule:
    """A torch LR scheduler times a linear warm-up factor, both per optimizer step."""

    def __init__(
        self, cfg: LoopConfig, optimizer: torch.optim.Optimizer, steps_per_epoch: int
    ) -> None:
        self._optimizer = optimizer
        warmup = cfg.warmup_epochs * steps_per_epoch
        self._warmup_steps = max(1, round(warmup)) if warmup > 0 else 0
        self._scheduler = _torch_scheduler(cfg, optimizer, steps_per_epoch)
        self._apply_warmup()

    def step(self) -> None:
        """Advances by one optimizer step."""
        self._scheduler.step()
        self._apply_warmup()

    def state_dict(self) -> dict[str, Any]:
        """The torch scheduler's state (the warm-up factor follows from its step count)."""
        state: dict[str, Any] = self._scheduler.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores the step count; the optimizer's own state restores the current rates."""
        self._scheduler.load_state_dict(state)

    def _apply_warmup(self) -> None:
        # Safe to scale in place: every scheduler here computes the rate from the base
        # rate and step count, never from the group's current (warmed-up) rate.
        step = self._scheduler.last_epoch
        if step < self._warmup_steps:
            for group in self._optimizer.param_groups:
                group["lr"] *= (step + 1) / self._warmup_steps


def _torch_scheduler(
    cfg: LoopConfig, optimizer: torch.optim.Optimizer, steps_per_epoch: int
) -> torch.optim.lr_scheduler.LRScheduler:
    total = cfg.max_epochs * steps_per_epoch
    if cfg.lr_schedule == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=cfg.lr, total_steps=total, cycle_momentum=False
        )

    def factor(step: int) -> float:
        if cfg.lr_schedule == "cosine":
            return 0.5 * (1.0 + math.cos(math.pi * min(step, total) / total))
        if cfg.lr_schedule == "step":
            return float(cfg.lr_gamma ** ((step // steps_per_epoch) // cfg.lr_step_epochs))
        return 1.0

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
