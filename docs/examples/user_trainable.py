"""A user trainable that lives outside the tuner package: the whole contract in one file.

Campaign: docs/examples/user_campaign.yaml names it as ``user_trainable:train``; ``tuner run``
puts the campaign file's folder (and the current directory) on the import path of the driver
and of the local Ray workers.

The contract:
- ``train(config: dict) -> None``; hyperparameters come in ``config``; keys starting with
  ``tuner_`` are the service's (``tuner_max_epochs``, ``tuner_seed``, ...).
- Report once per epoch with ``ray.tune.report(metrics, checkpoint=...)``; ``metrics`` holds
  ``epoch`` (1-based) and the campaign's metric.
- Restore from ``ray.tune.get_checkpoint()`` when Ray hands one over (after a failure, a
  node loss or ``tuner resume``), continuing at the next epoch.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import torch
from ray import tune


def _data(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A noisy linear regression problem: y = x @ w + 0.1 * noise (fixed per seed)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(512, 8, generator=gen)
    w = torch.randn(8, 1, generator=gen)
    y = x @ w + 0.1 * torch.randn(512, 1, generator=gen)
    return x[:400], y[:400], x[400:], y[400:]


def train(config: dict[str, Any]) -> None:
    """Fits a linear model with SGD; the objective is ``val_loss`` (mean squared error)."""
    torch.manual_seed(int(config.get("tuner_seed", 0)))
    x_train, y_train, x_val, y_val = _data(seed=0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=float(config["lr"]), momentum=config["momentum"])
    start = 1
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as directory:
            state = torch.load(os.path.join(directory, "state.pt"))
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = state["epoch"] + 1
    for epoch in range(start, int(config["tuner_max_epochs"]) + 1):
        for i in range(0, len(x_train), 32):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x_train[i : i + 32]), y_train[i : i + 32])
            loss.backward()
            opt.step()
        with torch.no_grad():
            val_loss = torch.nn.functional.mse_loss(model(x_val), y_val).item()
        with tempfile.TemporaryDirectory() as directory:
            state = {"model": model.state_dict(), "opt": opt.state_dict(), "epoch": epoch}
            torch.save(state, os.path.join(directory, "state.pt"))
            tune.report(
                {"epoch": epoch, "val_loss": val_loss},
                checkpoint=tune.Checkpoint.from_directory(directory),
            )
