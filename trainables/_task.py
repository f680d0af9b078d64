"""What a model module hands the shared loop: a :class:`Task` (data, model factory, loss)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["Augment", "LossFn", "Task"]

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
# A batch of training inputs and a CPU generator to draw random transforms from.
Augment = Callable[[torch.Tensor, torch.Generator], torch.Tensor]


@dataclass(frozen=True)
class Task:
    """A classification problem for :func:`~trainables._loop.fit`.

    Attributes:
        x_train: Training inputs, first dimension is the sample.
        y_train: Training class indices (int64).
        x_val: Validation inputs.
        y_val: Validation class indices (int64).
        make_model: Builds a freshly initialised model (called after seeding).
        loss_fn: Mean loss of a batch of logits against class indices.
        augment: Random transform of a training batch (never applied to validation), or
            None.
        sample_train: Draws each epoch's training inputs and labels from the data-order
            generator (e.g. fresh random windows of a text), as many as ``x_train`` holds;
            None shuffles the fixed ``x_train``/``y_train`` instead.
    """

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_val: torch.Tensor
    y_val: torch.Tensor
    make_model: Callable[[], nn.Module]
    loss_fn: LossFn = F.cross_entropy
    augment: Augment | None = None
    sample_train: Callable[[torch.Generator], tuple[torch.Tensor, torch.Tensor]] | None = None

    def __post_init__(self) -> None:
        for x, y, split in ((self.x_train, self.y_train, "train"), (self.x_val, self.y_val, "val")):
            if len(x) != len(y) or len(x) == 0:
                raise ValueError(
                    f"Task {split} split needs as many labels as inputs and at least one "
                    f"sample, but got {len(x)} inputs and {len(y)} labels."
                )
