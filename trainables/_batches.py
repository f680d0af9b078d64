"""Feeding training batches: index gathers on the device, or a DataLoader from host memory.

Both paths take the epoch's order (a permutation drawn from the trial's data-order
generator) and yield the same micro-batches in the same order, so the choice changes
speed, not results, and the generator's state alone restores the data order exactly.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch.utils.data import DataLoader, Dataset

__all__ = ["ON_DEVICE_LIMIT_BYTES", "keep_on_device", "micro_batches"]

# "auto" keeps datasets below this on the device: small next to any training GPU's memory.
ON_DEVICE_LIMIT_BYTES = 2**30


def keep_on_device(placement: str, tensors: list[torch.Tensor]) -> bool:
    """Whether the data lives on the training device ("always", or "auto" and under 1 GiB)."""
    if placement == "auto":
        return sum(t.numel() * t.element_size() for t in tensors) < ON_DEVICE_LIMIT_BYTES
    return placement == "always"


class _Gather(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """A dataset indexed by a whole batch of indices at once (one gather, no collation)."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x, self.y = x, y

    def __getitem__(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[idx], self.y[idx]

    def __len__(self) -> int:
        return len(self.x)


def micro_batches(
    order: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    batch_size: int,
    *,
    device: torch.device,
    loader_workers: int | None,
    non_blocking: bool = True,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Yields ``(inputs, labels)`` batches of ``batch_size`` on ``device`` in ``order``.

    Args:
        order: Sample indices for the epoch (on CPU).
        x: Inputs, on ``device`` when ``loader_workers`` is None, else in host memory.
        y: Labels, where ``x`` is.
        batch_size: Samples per batch (the last may be smaller).
        device: The training device.
        loader_workers: None to gather on the device; else a DataLoader with this many
            worker processes copies each batch over (pinned memory on CUDA).
        non_blocking: Copy pinned batches to CUDA asynchronously.
    """
    # torch.split, not Tensor.split: the method is untyped.
    chunks = torch.split(order, batch_size)
    if loader_workers is None:
        on_device = order.to(device)
        for idx in torch.split(on_device, batch_size):
            yield x[idx], y[idx]
        return
    loader = DataLoader(
        _Gather(x, y),
        sampler=list(chunks),
        batch_size=None,  # the sampler yields whole batches of indices
        num_workers=loader_workers,
        pin_memory=device.type == "cuda",
        # Each iterator draws a base seed for its workers from this generator; without one
        # it would draw from the global RNG and shift the trial's dropout stream.
        generator=torch.Generator().manual_seed(0),
    )
    copy_async = non_blocking and device.type == "cuda"
    for xb, yb in loader:
        yield xb.to(device, non_blocking=copy_async), yb.to(device, non_blocking=copy_async)
