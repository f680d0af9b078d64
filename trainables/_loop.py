"""The shared training loop of every built-in trainable: device, AMP, checkpoints, reports.

A model module builds a :class:`Task` (data tensors, a model factory, a loss) and calls
:func:`fit`, which trains it epoch by epoch and reports through a
:class:`~trainables._session.Session`. Every epoch reports ``epoch`` (1-based),
``train_loss``, ``val_loss``, ``val_acc`` (the objective), ``epoch_time_s`` (train plus
validation), ``samples_per_s`` (training samples per second of training time) and
``tuner_device``; the report that ends the trial adds ``tuner_stop_reason``.

Checkpoints (a directory holding ``state.pt``) carry everything needed to continue with
the same data order and random streams, so an interrupted and restored run matches an
uninterrupted one (bitwise on CPU).
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from trainables._config import RESERVED_PREFIX, LoopConfig
from trainables._session import Session

__all__ = ["CHECKPOINT_FILE", "RESERVED_PREFIX", "Task", "choose_device", "fit"]

CHECKPOINT_FILE = "state.pt"
_STATE_FORMAT = 1
# Evaluation needs no activations for backward, so it can use bigger batches.
_MIN_EVAL_BATCH = 1024

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Task:
    """A classification problem for :func:`fit`.

    Attributes:
        x_train: Training inputs, first dimension is the sample.
        y_train: Training class indices (int64).
        x_val: Validation inputs.
        y_val: Validation class indices (int64).
        make_model: Builds a freshly initialised model (called after seeding).
        loss_fn: Mean loss of a batch of logits against class indices.
    """

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_val: torch.Tensor
    y_val: torch.Tensor
    make_model: Callable[[], nn.Module]
    loss_fn: LossFn = F.cross_entropy

    def __post_init__(self) -> None:
        for x, y, split in ((self.x_train, self.y_train, "train"), (self.x_val, self.y_val, "val")):
            if len(x) != len(y) or len(x) == 0:
                raise ValueError(
                    f"Task {split} split needs as many labels as inputs and at least one "
                    f"sample, but got {len(x)} inputs and {len(y)} labels."
                )


def choose_device(requested: str, session: Session) -> torch.device:
    """Picks the device once: "auto" is CUDA iff available and the session gives GPUs.

    Raises:
        ValueError: "cuda" was requested where CUDA is not available.
    """
    cuda = torch.cuda.is_available()
    if requested == "cuda" and not cuda:
        raise ValueError(
            "config['tuner_device'] is 'cuda', but torch.cuda.is_available() is False here. "
            "To fix: use 'auto' (CUDA when present) or 'cpu'."
        )
    if requested == "cuda" or (requested == "auto" and cuda and session.gpu_ids()):
        # Ray sets CUDA_VISIBLE_DEVICES to the trial's GPUs, so the current device is ours.
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def fit(config: dict[str, Any], task: Task, session: Session) -> None:
    """Trains ``task`` to ``tuner_max_epochs``, reporting and checkpointing each epoch.

    Resumes from the session's checkpoint when there is one. Ends the trial itself (with
    ``tuner_stop_reason``) at the last epoch or when a loss stops being finite.

    Args:
        config: The trial config: ``tuner_*`` keys plus hyperparameters (see
            :class:`~trainables._config.LoopConfig`); unknown hyperparameters are ignored.
        task: Data and model to train.
        session: Where to report and restore from.

    Raises:
        ValueError: The config holds an invalid value.
    """
    cfg = LoopConfig.from_config(config)
    threads = session.cpu_count()
    if threads:
        torch.set_num_threads(threads)
    device = choose_device(cfg.device, session)
    with session.checkpoint_dir() as directory:
        state = _load_state(directory) if directory is not None else None
    if state is not None and state["epoch"] >= cfg.max_epochs:
        # Already finished (e.g. a restarted trial): tell the scheduler again, train nothing.
        session.report(dict(state["metrics"]), None)
        return

    _seed_everything(cfg.seed)
    model = task.make_model().to(device)
    # The data lives on the device for the whole run; batches are index gathers there.
    x_train, y_train = task.x_train.to(device), task.y_train.to(device)
    x_val, y_val = task.x_val.to(device), task.y_val.to(device)
    steps_per_epoch = math.ceil(len(x_train) / cfg.batch_size)
    optimizer = _make_optimizer(cfg, model)
    scheduler = _make_scheduler(cfg, optimizer, steps_per_epoch)
    amp_dtype = _amp_dtype(cfg, device)
    scaler = torch.amp.GradScaler("cuda") if amp_dtype == torch.float16 else None
    data_order = torch.Generator().manual_seed(cfg.seed)
    start = 1
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        if scheduler is not None and state["scheduler"] is not None:
            scheduler.load_state_dict(state["scheduler"])
        if scaler is not None and state["scaler"] is not None:
            scaler.load_state_dict(state["scaler"])
        _set_rng_state(state["rng"], data_order, device)
        start = state["epoch"] + 1

    for epoch in range(start, cfg.max_epochs + 1):
        t0 = time.perf_counter()
        model.train()
        order = torch.randperm(len(x_train), generator=data_order).to(device)
        loss_sum = torch.zeros((), device=device)
        for i in range(0, len(order), cfg.batch_size):
            idx = order[i : i + cfg.batch_size]
            with _autocast(device, amp_dtype):
                loss = task.loss_fn(model(x_train[idx]), y_train[idx])
            optimizer.zero_grad(set_to_none=True)
            if scaler is not None:
                torch.autograd.backward(scaler.scale(loss))
                scaler.step(optimizer)
                scaler.update()
            else:
                torch.autograd.backward(loss)
                optimizer.step()
            if scheduler is not None:
                scheduler.step()
            # Summed on the device: a .item() per step would stall the GPU every batch.
            loss_sum += loss.detach().float() * len(idx)
        train_loss = (loss_sum / len(x_train)).item()
        train_time = time.perf_counter() - t0
        metrics: dict[str, Any] = {
            "epoch": epoch,
            "train_loss": train_loss,
            "val_loss": math.nan,
            "val_acc": math.nan,
            "epoch_time_s": train_time,
            "samples_per_s": len(x_train) / train_time,
            "tuner_device": str(device),
        }
        if not math.isfinite(train_loss):
            metrics["tuner_stop_reason"] = f"diverged: train loss is {train_loss} at epoch {epoch}"
            session.report(metrics, None)
            return
        val_loss, val_acc = _evaluate(model, task.loss_fn, x_val, y_val, cfg, device, amp_dtype)
        metrics["epoch_time_s"] = time.perf_counter() - t0
        if not math.isfinite(val_loss):
            metrics["tuner_stop_reason"] = f"diverged: val loss is {val_loss} at epoch {epoch}"
            session.report(metrics, None)
            return
        metrics["val_loss"], metrics["val_acc"] = val_loss, val_acc
        if epoch % cfg.checkpoint_every == 0 or epoch == cfg.max_epochs:
            state = {
                "format": _STATE_FORMAT,
                "epoch": epoch,
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict() if scheduler is not None else None,
                "scaler": scaler.state_dict() if scaler is not None else None,
                "rng": _get_rng_state(data_order, device),
                "metrics": metrics,
            }
            # Ray copies the directory inside report(), so it may vanish right after.
            with tempfile.TemporaryDirectory() as out:
                torch.save(state, os.path.join(out, CHECKPOINT_FILE))
                session.report(metrics, out)
        else:
            session.report(metrics, None)


@torch.no_grad()
def _evaluate(
    model: nn.Module,
    loss_fn: LossFn,
    x: torch.Tensor,
    y: torch.Tensor,
    cfg: LoopConfig,
    device: torch.device,
    amp_dtype: torch.dtype | None,
) -> tuple[float, float]:
    """Mean loss and accuracy over a split, with one host sync at the end."""
    model.eval()
    loss_sum = torch.zeros((), device=device)
    correct = torch.zeros((), device=device, dtype=torch.long)
    batch = max(cfg.batch_size, _MIN_EVAL_BATCH)
    for i in range(0, len(x), batch):
        xb, yb = x[i : i + batch], y[i : i + batch]
        with _autocast(device, amp_dtype):
            logits = model(xb)
        logits = logits.float()
        loss_sum += loss_fn(logits, yb) * len(xb)
        correct += (logits.argmax(dim=1) == yb).sum()
    return (loss_sum / len(x)).item(), correct.item() / len(x)


def _make_optimizer(cfg: LoopConfig, model: nn.Module) -> torch.optim.Optimizer:
    params = model.parameters()
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(
            params,
            lr=cfg.lr,
            momentum=cfg.momentum,
            nesterov=cfg.momentum > 0,
            weight_decay=cfg.weight_decay,
        )
    if cfg.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    return torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)


def _make_scheduler(
    cfg: LoopConfig, optimizer: torch.optim.Optimizer, steps_per_epoch: int
) -> torch.optim.lr_scheduler.LRScheduler | None:
    if cfg.lr_schedule == "constant":
        return None
    # Stepped per batch so the decay is smooth even for runs of a few epochs.
    return torch.optim.lr_scheduler.CosineAnnealingLR(
        optimizer, T_max=cfg.max_epochs * steps_per_epoch
    )


def _amp_dtype(cfg: LoopConfig, device: torch.device) -> torch.dtype | None:
    if device.type != "cuda" or not cfg.amp:
        return None
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


def _autocast(
    device: torch.device, dtype: torch.dtype | None
) -> contextlib.AbstractContextManager[Any]:
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def _get_rng_state(data_order: torch.Generator, device: torch.device) -> dict[str, Any]:
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
    }


def _set_rng_state(rng: dict[str, Any], data_order: torch.Generator, device: torch.device) -> None:
    random.setstate(rng["python"])
    np_rng = rng["numpy"]
    key = np.asarray(np_rng["key"], dtype=np.uint32)
    np.random.set_state(("MT19937", key, np_rng["pos"], np_rng["has_gauss"], np_rng["gauss"]))
    torch.set_rng_state(rng["torch"])
    # A checkpoint written on a GPU may be resumed on CPU and vice versa.
    if device.type == "cuda" and rng["cuda"] is not None:
        torch.cuda.set_rng_state(rng["cuda"], device)
    data_order.set_state(rng["data_order"])


def _load_state(directory: str) -> dict[str, Any]:
    path = os.path.join(directory, CHECKPOINT_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"Checkpoint directory {directory!r} has no {CHECKPOINT_FILE!r}; it was not "
            "written by trainables._loop.fit."
        )
    state: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=True)
    if state.get("format") != _STATE_FORMAT:
        raise ValueError(
            f"Checkpoint {path!r} has format {state.get('format')!r}; this version reads "
            f"format {_STATE_FORMAT}."
        )
    return state
