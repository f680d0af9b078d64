"""Built-in ``tabular_mlp``: an MLP on scikit-learn's breast cancer data (binary, 30 features).

Data: ``sklearn.datasets.load_breast_cancer`` (569 samples, shipped with scikit-learn),
the fixed stratified 80/20 split of :mod:`trainables._data`.

Hyperparameters (config keys, all optional):
    hidden (int, 64): width of each hidden layer.
    layers (int, 2): number of hidden layers (0 gives logistic regression).
    dropout (float in [0, 1), 0.0): dropout after each hidden layer.
    batch_norm (bool, False): BatchNorm after each hidden linear layer (before the ReLU).
    input_standardize (bool, True): standardise each feature with the train split's mean
        and std (per feature); False feeds the raw features.
    Plus the shared loop's keys (optimizer, LR schedule, regularization, pruning,
    precision, GPU efficiency, data path, early stop) and the service's ``tuner_*``
    keys, all listed in :class:`trainables._config.LoopConfig`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from trainables._config import get_bool, get_float, get_int
from trainables._data import standardize, stratified_split
from trainables._loop import Task, fit
from trainables._session import Session, default_session

__all__ = ["MLP", "MLPConfig", "make_task", "train"]

NUM_CLASSES = 2


@dataclass(frozen=True)
class MLPConfig:
    """Model hyperparameters of :class:`MLP` (defaults as in the module docstring)."""

    in_features: int
    hidden: int = 64
    layers: int = 2
    dropout: float = 0.0
    batch_norm: bool = False

    @classmethod
    def from_config(cls, config: Mapping[str, Any], in_features: int) -> MLPConfig:
        """Reads and validates the model keys of a trial config."""
        return cls(
            in_features=in_features,
            hidden=get_int(config, "hidden", cls.hidden, low=1),
            layers=get_int(config, "layers", cls.layers, low=0),
            dropout=get_float(config, "dropout", cls.dropout, low=0.0, high=1.0, high_open=True),
            batch_norm=get_bool(config, "batch_norm", cls.batch_norm),
        )


class MLP(nn.Module):
    """``layers`` x (linear-[batchnorm]-relu-dropout), then a linear layer to the logits."""

    def __init__(self, cfg: MLPConfig) -> None:
        super().__init__()
        blocks: list[nn.Module] = []
        width = cfg.in_features
        for _ in range(cfg.layers):
            norm = nn.BatchNorm1d(cfg.hidden) if cfg.batch_norm else nn.Identity()
            blocks += [nn.Linear(width, cfg.hidden), norm, nn.ReLU(), nn.Dropout(cfg.dropout)]
            width = cfg.hidden
        blocks.append(nn.Linear(width, NUM_CLASSES))
        self.net = nn.Sequential(*blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of shape (batch, 2) for features of shape (batch, in_features)."""
        out: torch.Tensor = self.net(x)
        return out


@functools.lru_cache(maxsize=2)
def _load(input_standardize: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    x_train, x_val, y_train, y_val = stratified_split(data.data, data.target)
    if input_standardize:
        x_train, x_val = standardize(x_train, x_val)
    return (
        torch.from_numpy(x_train.astype(np.float32)),
        y_train,
        torch.from_numpy(x_val.astype(np.float32)),
        y_val,
    )


def make_task(config: Mapping[str, Any]) -> Task:
    """The breast cancer task for a trial config (data is loaded once per process).

    Raises:
        ValueError: A model hyperparameter is invalid.
    """
    x_train, y_train, x_val, y_val = _load(get_bool(config, "input_standardize", True))
    model_cfg = MLPConfig.from_config(config, in_features=x_train.shape[1])
    return Task(x_train, y_train, x_val, y_val, make_model=lambda: MLP(model_cfg))


def train(config: dict[str, Any], session: Session | None = None) -> None:
    """Ray Tune function trainable: trains the MLP (see the module docstring).

    Args:
        config: Hyperparameters and ``tuner_*`` keys.
        session: Where to report; Ray Tune's (or, for a data-parallel trial, Ray Train's) when None.
    """
    fit(config, make_task(config), session if session is not None else default_session(config))
