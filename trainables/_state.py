"""The checkpointable state of a run of the shared loop: its format and random streams.

A run's state (the dict in a checkpoint's ``state.pt``) carries everything needed to continue
with the same data order and random streams: the model (with its pruning masks), optimizer,
LR schedule, gradient scaler and plateau tracker states, and every random generator the run
draws from. So an interrupted and restored run matches an uninterrupted one (bitwise on
CPU). Writing and verifying the files is :mod:`trainables._checkpoint`'s job.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch

from trainables import _checkpoint, _prune
from trainables._run import Run
from trainables._session import Session
from tuner.contract import STOP_REASON_KEY

__all__ = [
    "READABLE_FORMATS",
    "STATE_FORMAT",
    "UNVERIFIED_FORMATS",
    "capture",
    "get_rng_state",
    "is_finished",
    "load",
    "restore",
    "seed_everything",
    "set_rng_state",
]

# 2: LambdaLR/OneCycleLR scheduler state, augmentation generator, pruning masks.
# 3: plateau tracker state (best value and its epoch).
# 4: the same state, always with a manifest (size and SHA-256 of state.pt).
STATE_FORMAT = 4
# Format 2 lacks only the plateau state: such a trial resumes counting from its restore.
READABLE_FORMATS = (2, 3, 4)
# Written before manifests: restored unverified when they load (a format-4 state without its
# manifest is a partial write).
UNVERIFIED_FORMATS = (2, 3)


def seed_everything(seed: int) -> None:
    """Seeds Python's, NumPy's and torch's global random streams."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def get_rng_state(
    data_order: torch.Generator, augment_rng: torch.Generator, device: torch.device
) -> dict[str, Any]:
    """The state of every random stream a run draws from, for :func:`set_rng_state`."""
    # Plain ints, lists and tensors only, so the file loads with torch.load(weights_only=True).
    np_state = np.random.get_state(legacy=False)
    return {
        "python": random.getstate(),
        "numpy": {
            "key": np_state["state"]["key"].tolist(),
            "pos": int(np_state["state"]["pos"]),
            "has_gauss": int(np_state["has_gauss"]),
            "gauss": float(np_state["gauss"]),
        },
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
        "data_order": data_order.get_state(),
        "augment": augment_rng.get_state(),
    }


def set_rng_state(
    rng: dict[str, Any],
    data_order: torch.Generator,
    augment_rng: torch.Generator,
    device: torch.device,
) -> None:
    """Puts every random stream a run draws from back to ``rng`` (:func:`get_rng_state`)."""
    random.setstate(rng["python"])
    np_rng = rng["numpy"]
    key = np.asarray(np_rng["key"], dtype=np.uint32)
    np.random.set_state(("MT19937", key, np_rng["pos"], np_rng["has_gauss"], np_rng["gauss"]))
    torch.set_rng_state(rng["torch"])
    # A checkpoint written on a GPU may be resumed on CPU and vice versa.
    if device.type == "cuda" and rng["cuda"] is not None:
        torch.cuda.set_rng_state(rng["cuda"], device)
    data_order.set_state(rng["data_order"])
    augment_rng.set_state(rng["augment"])


def capture(run: Run, epoch: int, metrics: dict[str, Any]) -> dict[str, Any]:
    """The state of ``run`` after ``epoch``, whose report was ``metrics``, to checkpoint."""
    return {
        "format": STATE_FORMAT,
        "epoch": epoch,
        "model": run.model.state_dict(),
        "pruned": _prune.is_pruned(run.model),
        "optimizer": run.optimizer.state_dict(),
        "scheduler": run.scheduler.state_dict(),
        "scaler": run.scaler.state_dict() if run.scaler is not None else None,
        "rng": get_rng_state(run.data_order, run.augment_rng, run.device),
        "plateau": run.plateau.state_dict(),
        "metrics": metrics,
    }


def load(run: Run, state: dict[str, Any]) -> int:
    """Loads a restored ``state`` into a freshly built ``run``; returns the next epoch."""
    if state["pruned"]:
        _prune.add_mask_slots(run.model)
    run.model.load_state_dict(state["model"])
    run.optimizer.load_state_dict(state["optimizer"])
    run.scheduler.load_state_dict(state["scheduler"])
    if run.scaler is not None and state["scaler"] is not None:
        run.scaler.load_state_dict(state["scaler"])
    set_rng_state(state["rng"], run.data_order, run.augment_rng, run.device)
    if "plateau" in state:
        run.plateau.load_state_dict(state["plateau"])
    start: int = state["epoch"] + 1
    return start


def is_finished(state: dict[str, Any], max_epochs: int) -> bool:
    """Whether the run that saved ``state`` had ended: at its last epoch, or stopped early."""
    return bool(state["epoch"] >= max_epochs or STOP_REASON_KEY in state["metrics"])


def restore(session: Session, directory: str) -> tuple[dict[str, Any] | None, str | None]:
    """The state to resume from (None: from scratch) and the fallback taken, if any.

    A session may list the handed checkpoint's earlier ones itself (``checkpoint_lineage``,
    as :class:`~trainables._session.RaySession` does for remote storage); otherwise they
    are its sibling directories on the local disk.

    Raises:
        ValueError: A good checkpoint holds a state format this version cannot read.
    """
    lineage = getattr(session, "checkpoint_lineage", None) or _checkpoint.local_lineage
    restored = _checkpoint.restore(directory, lineage, unverified_formats=UNVERIFIED_FORMATS)
    state = restored.state
    if state is not None and state.get("format") not in READABLE_FORMATS:
        raise ValueError(
            f"Checkpoint {directory!r} has format {state.get('format')!r}; this version reads "
            f"formats {list(READABLE_FORMATS)}."
        )
    return state, restored.fallback
