"""Helpers shared by the trainables tests: a session that is cut off mid-run, and weights."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from trainables._loop import CHECKPOINT_FILE
from trainables._session import LocalSession


class Preempted(Exception):
    """Stands in for Ray stopping a trial (ASHA pause, node loss) after some reports."""


class PreemptedSession(LocalSession):
    """A LocalSession that raises :class:`Preempted` right after its ``after``-th report."""

    def __init__(self, root: Path, after: int) -> None:
        super().__init__(root)
        self.after = after

    def report(self, metrics: dict[str, Any], checkpoint_dir: str | None) -> None:
        super().report(metrics, checkpoint_dir)
        if len(self.reports) == self.after:
            raise Preempted


def checkpoint_weights(checkpoint: str | None) -> dict[str, torch.Tensor]:
    """The model weights saved in a checkpoint directory."""
    assert checkpoint is not None
    state = torch.load(os.path.join(checkpoint, CHECKPOINT_FILE), weights_only=True)
    weights: dict[str, torch.Tensor] = state["model"]
    return weights
