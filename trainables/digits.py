"""Built-in ``digits_cnn``: a small CNN on scikit-learn's 8x8 handwritten digits.

Data: ``sklearn.datasets.load_digits`` (1,797 images, 10 classes, shipped with
scikit-learn), pixels scaled from 0..16 to 0..1, the fixed stratified 80/20 split of
:mod:`trainables._data`.

Hyperparameters (config keys, all optional):
    channels (int, 32): the two 3x3 conv layers have ``channels`` and ``2 * channels``.
    hidden (int, 64): width of the hidden layer of the head.
    batch_norm (bool, False): BatchNorm after each conv.
    dropout (float in [0, 1), 0.0): dropout before each linear layer of the head.
    input_standardize (bool, False): standardise pixels with one global mean and std of
        the train split (global, not per pixel: border pixels are almost always 0, and a
        per-pixel scale would differ across positions that augmentation moves pixels
        between).
    augment (float in [0, 1], 0.0 = off): per-image random rotation (up to +-15 degrees
        times ``augment``), scaling (1 +- 0.1 times ``augment``) and shift (up to +-1 pixel
        times ``augment`` on each axis), bilinear with border padding, on the training
        device, training batches only; drawn from the loop's seeded augmentation
        generator, so runs are reproducible and restore exactly.
    Plus the shared loop's keys (optimizer, LR schedule, regularization, pruning,
    precision, GPU efficiency, data path, early stop) and the service's ``tuner_*``
    keys, all listed in :class:`trainables._config.LoopConfig`.

A good start: adam, lr 3e-3, channels 32, batch_size 64 reaches 0.975 ``val_acc`` by epoch
5 (0.97-0.98 after), at about 0.4 s per epoch on one CPU thread.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from trainables._config import get_bool, get_float, get_int
from trainables._data import stratified_split
from trainables._loop import Task, fit
from trainables._session import Session, default_session

__all__ = ["DigitsCNN", "DigitsCNNConfig", "augment_images", "make_task", "train"]

NUM_CLASSES = 10
IMAGE_SIDE = 8
# Augmentation ranges at strength 1.
MAX_ROTATION_DEG = 15.0
MAX_SCALE_CHANGE = 0.1
MAX_SHIFT_PX = 1.0


@dataclass(frozen=True)
class DigitsCNNConfig:
    """Model hyperparameters of :class:`DigitsCNN` (defaults as in the module docstring)."""

    channels: int = 32
    hidden: int = 64
    batch_norm: bool = False
    dropout: float = 0.0

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> DigitsCNNConfig:
        """Reads and validates the model keys of a trial config."""
        return cls(
            channels=get_int(config, "channels", cls.channels, low=1),
            hidden=get_int(config, "hidden", cls.hidden, low=1),
            batch_norm=get_bool(config, "batch_norm", cls.batch_norm),
            dropout=get_float(config, "dropout", cls.dropout, low=0.0, high=1.0, high_open=True),
        )


class DigitsCNN(nn.Module):
    """conv(c)-relu, conv(2c)-relu, 2x2 max-pool, linear(hidden)-relu, linear(10)."""

    def __init__(self, cfg: DigitsCNNConfig) -> None:
        super().__init__()
        c = cfg.channels

        def norm(n: int) -> nn.Module:
            return nn.BatchNorm2d(n) if cfg.batch_norm else nn.Identity()

        self.features = nn.Sequential(
            nn.Conv2d(1, c, 3, padding=1),
            norm(c),
            nn.ReLU(),
            nn.Conv2d(c, 2 * c, 3, padding=1),
            norm(2 * c),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        pooled = 2 * c * (IMAGE_SIDE // 2) ** 2
        self.head = nn.Sequential(
            nn.Flatten(),
            nn.Dropout(cfg.dropout),
            nn.Linear(pooled, cfg.hidden),
            nn.ReLU(),
            nn.Dropout(cfg.dropout),
            nn.Linear(cfg.hidden, NUM_CLASSES),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of shape (batch, 10) for images of shape (batch, 1, 8, 8)."""
        out: torch.Tensor = self.head(self.features(x))
        return out


def augment_images(images: torch.Tensor, rng: torch.Generator, strength: float) -> torch.Tensor:
    """Randomly rotates, scales and shifts each image of a (batch, 1, side, side) tensor.

    The random draws come from ``rng`` (a CPU generator) and the warp runs on the images'
    device. Strength 0 returns ``images`` itself.
    """
    if strength == 0:
        return images
    u = (torch.rand(len(images), 4, generator=rng) * 2 - 1).to(images.device)
    angle = u[:, 0] * math.radians(MAX_ROTATION_DEG * strength)
    scale = 1 + u[:, 1] * (MAX_SCALE_CHANGE * strength)
    # affine_grid maps output to input coordinates in [-1, 1]: one pixel is 2 / side.
    shift = u[:, 2:] * (MAX_SHIFT_PX * strength * 2 / images.shape[-1])
    cos, sin = torch.cos(angle) / scale, torch.sin(angle) / scale
    theta = torch.stack(
        [torch.stack([cos, -sin, shift[:, 0]], 1), torch.stack([sin, cos, shift[:, 1]], 1)], 1
    )
    grid = F.affine_grid(theta, list(images.shape), align_corners=False)
    return F.grid_sample(images, grid, padding_mode="border", align_corners=False)


@functools.lru_cache(maxsize=2)
def _load(standardize: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    x_train, x_val, y_train, y_val = stratified_split(images, digits.target)
    if standardize:
        mean, std = x_train.mean(), x_train.std()
        x_train, x_val = (x_train - mean) / std, (x_val - mean) / std
    return (
        torch.from_numpy(x_train.astype(np.float32)),
        y_train,
        torch.from_numpy(x_val.astype(np.float32)),
        y_val,
    )


def make_task(config: Mapping[str, Any]) -> Task:
    """The digits task for a trial config (data is loaded once per process).

    Raises:
        ValueError: A model or data hyperparameter is invalid.
    """
    model_cfg = DigitsCNNConfig.from_config(config)
    strength = get_float(config, "augment", 0.0, low=0.0, high=1.0)
    x_train, y_train, x_val, y_val = _load(get_bool(config, "input_standardize", False))
    return Task(
        x_train,
        y_train,
        x_val,
        y_val,
        make_model=lambda: DigitsCNN(model_cfg),
        augment=functools.partial(augment_images, strength=strength) if strength else None,
    )


def train(config: dict[str, Any], session: Session | None = None) -> None:
    """Ray Tune function trainable: trains the digits CNN (see the module docstring).

    Args:
        config: Hyperparameters and ``tuner_*`` keys.
        session: Where to report; Ray Tune's (or, for a data-parallel trial, Ray Train's) when None.
    """
    fit(config, make_task(config), session if session is not None else default_session(config))
