"""A test trainable that reports when it started and stopped (wall clock), nothing else.

With ``fixed: {started_dir: DIR, pack: K}`` each trial takes the next free slot number in
DIR (an O_EXCL file: slot 1, 2, ...) and, before its first epoch, waits until the K
trials of its group of K (slots 1..K, K+1..2K, ... up to ``trials``) have all started,
or ``wait_s`` passes. So trials that the scheduler lets run at once are alive at once
however slowly Ray starts their workers on a loaded machine, and trials it does not let
run at once cannot be: the overlap of their spans shows the scheduler's packing, not the
machine's speed. It also reports the GPU ids Ray gave the trial.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

import ray
from ray import tune


def _take_slot(folder: Path) -> int:
    slot = 1
    while True:
        try:
            os.close(os.open(folder / f"slot-{slot}", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            slot += 1
        else:
            return slot


def _wait_for_group(config: dict[str, Any]) -> None:
    folder = Path(config["started_dir"])
    pack, trials = int(config["pack"]), int(config["trials"])
    slot = _take_slot(folder)
    group_end = min(trials, math.ceil(slot / pack) * pack)
    deadline = time.monotonic() + float(config.get("wait_s", 60.0))
    while time.monotonic() < deadline:
        if all((folder / f"slot-{n}").exists() for n in range(1, group_end + 1)):
            return
        time.sleep(0.05)


def train(config: dict[str, Any]) -> None:
    """Two 0.5 s "epochs"; ``val_acc`` grows with ``x`` so ASHA has something to rank."""
    start = time.time()
    if "started_dir" in config:
        _wait_for_group(config)
    gpu_ids = [str(i) for i in ray.get_gpu_ids()]
    for epoch in range(1, int(config["tuner_max_epochs"]) + 1):
        time.sleep(0.5)
        tune.report(
            {
                "epoch": epoch,
                "val_acc": float(config["x"]),
                "t_start": start,
                "t_end": time.time(),
                "gpu_ids": ",".join(gpu_ids),
            }
        )
