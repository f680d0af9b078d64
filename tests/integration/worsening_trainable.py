"""A test trainable whose score gets worse every epoch, with a checkpoint at each one."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from ray import tune


def train(config: dict[str, Any]) -> None:
    """``val_acc`` falls from ``x`` by 0.1 an epoch; each epoch's checkpoint names its epoch.

    The best score is always the first epoch's: a checkpoint store that kept the best ones
    would keep the oldest, not the newest.
    """
    for epoch in range(1, int(config["tuner_max_epochs"]) + 1):
        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp, "state.json").write_text(json.dumps({"epoch": epoch}))
            tune.report(
                {"epoch": epoch, "val_acc": float(config["x"]) - 0.1 * epoch},
                checkpoint=tune.Checkpoint.from_directory(tmp),
            )
