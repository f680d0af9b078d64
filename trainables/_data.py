"""Data preparation shared by the built-ins: a fixed stratified split and standardisation.

The split depends only on :data:`SPLIT_SEED`, never on the trial seed, so every trial of a
campaign is scored on the same validation samples.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch

__all__ = ["SPLIT_SEED", "VAL_FRACTION", "standardize", "stratified_split"]

SPLIT_SEED = 0
VAL_FRACTION = 0.2


def standardize(
    x_train: npt.NDArray[np.floating], x_val: npt.NDArray[np.floating]
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """Scales both splits by the train split's per-feature mean and std (no val leakage)."""
    mean = x_train.mean(axis=0)
    std = x_train.std(axis=0)
    std = np.where(std > 0, std, 1.0)  # a constant feature stays 0 rather than nan
    return ((x_train - mean) / std).astype(np.float32), ((x_val - mean) / std).astype(np.float32)


def stratified_split(
    x: npt.NDArray[np.floating], y: npt.NDArray[np.integer]
) -> tuple[npt.NDArray[np.floating], npt.NDArray[np.floating], torch.Tensor, torch.Tensor]:
    """Splits 80/20, stratified by class, with :data:`SPLIT_SEED`.

    Returns:
        ``(x_train, x_val, y_train, y_val)``: inputs as numpy arrays (for further
        preparation) and labels as int64 tensors.
    """
    from sklearn.model_selection import train_test_split

    x_train, x_val, y_train, y_val = train_test_split(
        x, y, test_size=VAL_FRACTION, stratify=y, random_state=SPLIT_SEED
    )
    return (
        x_train,
        x_val,
        torch.as_tensor(y_train, dtype=torch.long),
        torch.as_tensor(y_val, dtype=torch.long),
    )
