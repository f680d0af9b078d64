"""A stand-in trainable for the autoscaling bench: each epoch sleeps ``epoch_s`` seconds.

It holds its (logical) GPU the way a training trial would, without loading the 2 CPU cores,
so the bench measures what the orchestration wastes (node start-up, trial turnover, the
tail), not how fast this machine trains. ``val_acc`` grows with ``x`` and the epoch.
"""

from __future__ import annotations

import time
from typing import Any

from ray import tune


def train(config: dict[str, Any]) -> None:
    """``tuner_max_epochs`` epochs of ``epoch_s`` seconds each."""
    x = float(config["x"])
    for epoch in range(1, int(config["tuner_max_epochs"]) + 1):
        time.sleep(float(config.get("epoch_s", 1.0)))
        tune.report({"epoch": epoch, "val_acc": x * (1 - 0.5**epoch)})
