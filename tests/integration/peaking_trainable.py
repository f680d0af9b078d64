"""A test trainable that peaks at its first epoch: ``val_acc`` is ``0.5 + x/2`` there and
``0.5 - x/2`` at every later epoch, so the trial best at any single epoch (the largest ``x``)
is the worst at its last."""

from __future__ import annotations

from typing import Any

from ray import tune


def train(config: dict[str, Any]) -> None:
    """Reports ``val_acc`` for ``tuner_max_epochs`` epochs (no checkpoints: nothing to resume)."""
    x = float(config["x"])
    for epoch in range(1, int(config["tuner_max_epochs"]) + 1):
        value = 0.5 + x / 2 if epoch == 1 else 0.5 - x / 2
        tune.report({"epoch": epoch, "val_acc": value})
