"""Plateau early stop: end a trial whose objective stopped improving.

The tracker's state is a small dict of plain numbers so it goes into the loop's
checkpoint, and a restored trial stops at the same epoch as an uninterrupted one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Plateau"]


@dataclass
class Plateau:
    """Tracks the best value of ``metric`` and says when ``patience`` epochs passed without
    an improvement by more than ``min_delta``.

    Attributes:
        metric: "val_loss" (lower is better) or "val_acc" (higher is better).
        patience: Epochs without improvement that end the trial; 0 turns the check off.
        min_delta: How much better than the best a value must be to count.
        best: Best value so far, or None before the first epoch.
        best_epoch: The epoch of ``best`` (0 before the first epoch).
    """

    metric: str
    patience: int
    min_delta: float
    best: float | None = None
    best_epoch: int = 0

    def update(self, epoch: int, value: float) -> str | None:
        """Records epoch ``epoch``'s value; returns the stop reason on a plateau, else None."""
        if self.best is None or self._improves(value, self.best):
            self.best, self.best_epoch = value, epoch
            return None
        if self.patience == 0 or epoch - self.best_epoch < self.patience:
            return None
        return (
            f"plateau: no {self.metric} improvement > {self.min_delta:g} for {self.patience} "
            f"epochs (best {self.best:.4f} at epoch {self.best_epoch})"
        )

    def state_dict(self) -> dict[str, Any]:
        """The best value and its epoch (for the checkpoint)."""
        return {"best": self.best, "best_epoch": self.best_epoch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores what :meth:`state_dict` returned."""
        self.best, self.best_epoch = state["best"], state["best_epoch"]

    def _improves(self, value: float, best: float) -> bool:
        if self.metric == "val_acc":
            return value > best + self.min_delta
        return value < best - self.min_delta
