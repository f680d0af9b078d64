"""A test trainable that fails in chosen regions of its space, each in its own way.

- ``width`` above 128: one good epoch, then ``torch.OutOfMemoryError`` (what CUDA raises,
  simulated on the CPU), whatever ``kind`` says;
- ``kind: raise``: ``ValueError`` before the first report;
- ``kind: silent``: returns without ever reporting;
- ``kind: nometric``: reports ``epoch`` and ``loss`` but never ``val_loss``;
- ``kind: ok``: reports ``val_loss`` every epoch.

Every call appends a line to ``<calls_dir>/<width>-<kind>`` (``fixed: calls_dir``), so a test
sees how often Tune ran each config (retries included).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ray import tune

OOM_WIDTH = 128


def train(config: dict[str, Any]) -> None:
    width, kind = int(config["width"]), str(config["kind"])
    calls = Path(config["calls_dir"])
    calls.mkdir(parents=True, exist_ok=True)
    with open(calls / f"{width}-{kind}", "a") as handle:
        handle.write("call\n")
    max_epochs = int(config["tuner_max_epochs"])
    if kind == "raise" and width <= OOM_WIDTH:
        raise ValueError(f"width {width} does not fit kind {kind!r}")
    if kind == "silent" and width <= OOM_WIDTH:
        return
    for epoch in range(1, max_epochs + 1):
        if width > OOM_WIDTH and epoch == 2:
            import torch  # here: a worker that never raises it need not import torch

            raise torch.OutOfMemoryError(
                f"CUDA out of memory. Tried to allocate {width // 64:.2f} GiB (simulated)"
            )
        loss = 1.0 / (epoch * width)
        if kind == "nometric" and width <= OOM_WIDTH:
            tune.report({"epoch": epoch, "loss": loss})
        else:
            tune.report({"epoch": epoch, "val_loss": loss})
