"""A test trainable that reports when it started and stopped (wall clock), nothing else."""

from __future__ import annotations

import time
from typing import Any

from ray import tune


def train(config: dict[str, Any]) -> None:
    """Two 0.5 s "epochs"; ``val_acc`` grows with ``x`` so ASHA has something to rank."""
    start = time.time()
    for epoch in range(1, int(config["tuner_max_epochs"]) + 1):
        time.sleep(0.5)
        tune.report(
            {"epoch": epoch, "val_acc": float(config["x"]), "t_start": start, "t_end": time.time()}
        )
