"""Global L1 magnitude pruning of conv and linear weights (``torch.nn.utils.prune``).

Pruning keeps torch's reparametrisation (``weight_orig`` times a ``weight_mask`` buffer)
rather than making it permanent, so fine-tuning after pruning keeps the pruned weights at
zero and a checkpoint holds the masks: :func:`add_mask_slots` re-creates the slots on a
fresh model before ``load_state_dict`` fills them.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils import prune

__all__ = ["add_mask_slots", "is_pruned", "prunable", "prune_globally", "sparsity"]

_PRUNABLE = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)


def prunable(model: nn.Module) -> list[tuple[nn.Module, str]]:
    """The ``(module, "weight")`` pairs that pruning considers, in module order."""
    return [(m, "weight") for m in model.modules() if isinstance(m, _PRUNABLE)]


def prune_globally(model: nn.Module, amount: float) -> None:
    """Zeroes the ``amount`` fraction of prunable weights with the smallest magnitude."""
    prune.global_unstructured(prunable(model), pruning_method=prune.L1Unstructured, amount=amount)


def is_pruned(model: nn.Module) -> bool:
    """Whether any prunable weight carries a mask."""
    return any(prune.is_pruned(m) for m, _ in prunable(model))


def add_mask_slots(model: nn.Module) -> None:
    """Reparametrises every prunable weight with an all-ones mask (to load a checkpoint into)."""
    for module, name in prunable(model):
        prune.identity(module, name)  # type: ignore[no-untyped-call]


@torch.no_grad()
def sparsity(model: nn.Module) -> float:
    """Fraction of exactly-zero weights among the prunable weights (0.0 when there are none)."""
    zeros = total = 0
    for module, name in prunable(model):
        mask: torch.Tensor | None = getattr(module, f"{name}_mask", None)
        orig: torch.Tensor = getattr(module, f"{name}_orig" if mask is not None else name)
        weight = orig * mask if mask is not None else orig
        zeros += int((weight == 0).sum())
        total += weight.numel()
    return zeros / total if total else 0.0
