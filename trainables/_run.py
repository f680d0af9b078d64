"""The training setup of one run of the shared loop: what every epoch trains with.

A :class:`Run` holds the model (and its compiled or data-parallel wrapper), its optimizer,
LR schedule and gradient scaler, the data on its device, the trial's data-order and
augmentation generators and the plateau tracker. Its stateful parts are what a checkpoint
saves and restores (:mod:`trainables._state`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from trainables import _batches, _cuda
from trainables._config import LoopConfig
from trainables._plateau import Plateau
from trainables._schedule import LRSchedule
from trainables._session import Session
from trainables._task import LossFn, Task

__all__ = ["Run", "amp_dtype", "make_optimizer", "train_loss_fn"]

# The augmentation stream is seeded apart from the data order (seed + this).
_AUGMENT_SEED_OFFSET = 1


@dataclass(frozen=True)
class Run:
    """Everything a run trains with, built once per run by :meth:`build`.

    Attributes:
        cfg: The loop's config.
        task: The task trained.
        device: The training device.
        model: The plain model; checkpoints hold its state.
        wrapped: The model that trains and evaluates: ``model`` itself, or its compiled or
            data-parallel (DDP) wrapper, which shares its parameters.
        channels_last: Whether the model and its 4-D inputs use the channels-last format.
        rank: This worker's rank among the data-parallel workers (0 when alone).
        world: The number of data-parallel workers (1 when alone).
        on_device: Whether the data lives on the device (batches are index gathers there)
            rather than in host memory (a DataLoader copies batches over).
        x_train: Training inputs, on the device when the data lives there.
        y_train: Training labels, where ``x_train`` is.
        x_val: Validation inputs, where ``x_train`` is.
        y_val: Validation labels, where ``x_train`` is.
        shard: Training samples per worker and epoch.
        steps_per_epoch: Optimizer steps per epoch.
        optimizer: The optimizer of ``model``'s parameters.
        scheduler: The LR schedule, stepped once per optimizer step.
        train_loss_fn: The training loss (the task's, with label smoothing if configured).
        amp_dtype: The autocast dtype, or None without mixed precision.
        scaler: The fp16 gradient scaler, or None.
        data_order: Generator of the epochs' data orders (and sampled training data).
        augment_rng: Generator of the training augmentation's random draws.
        plateau: The plateau early-stop tracker.
        prune_epoch: The epoch after whose training the model is pruned (0: never).
    """

    cfg: LoopConfig
    task: Task
    device: torch.device
    model: nn.Module
    wrapped: nn.Module
    channels_last: bool
    rank: int
    world: int
    on_device: bool
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_val: torch.Tensor
    y_val: torch.Tensor
    shard: int
    steps_per_epoch: int
    optimizer: torch.optim.Optimizer
    scheduler: LRSchedule
    train_loss_fn: LossFn
    amp_dtype: torch.dtype | None
    scaler: torch.amp.GradScaler | None
    data_order: torch.Generator
    augment_rng: torch.Generator
    plateau: Plateau
    prune_epoch: int

    @classmethod
    def build(cls, cfg: LoopConfig, task: Task, session: Session, device: torch.device) -> Run:
        """Builds a fresh run: model, data placement, optimizer, schedule and generators.

        Call it after seeding: the model is initialised from the global RNG.

        Raises:
            ValueError: Label smoothing is configured for a loss other than cross-entropy.
        """
        model = task.make_model().to(device)
        channels_last = cfg.channels_last and device.type == "cuda" and _cuda.has_conv2d(model)
        if channels_last:
            model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        # Checkpoints hold the plain model's state; the compiled (or DDP) wrapper shares its
        # parameters.
        wrapped: nn.Module = torch.compile(model) if cfg.compile else model  # type: ignore[assignment]
        rank, world = session.rank_and_world()
        if world > 1:
            # The process group (gloo on CPU, NCCL on CUDA) was set up by Ray Train's
            # TorchTrainer; DDP averages gradients and broadcasts rank 0's initial weights.
            wrapped = nn.parallel.DistributedDataParallel(
                wrapped, device_ids=[device.index] if device.type == "cuda" else None
            )
        on_device = _batches.keep_on_device(cfg.data_on_device, [task.x_train, task.y_train])
        # On-device data is gathered there per batch; otherwise a DataLoader copies batches over.
        x_train, y_train = task.x_train, task.y_train
        x_val, y_val = task.x_val, task.y_val
        if on_device:
            x_train, y_train = x_train.to(device), y_train.to(device)
            x_val, y_val = x_val.to(device), y_val.to(device)
        # Each data-parallel worker trains on its 1/world share of every epoch's order.
        shard = len(x_train) // world
        steps_per_epoch = math.ceil(math.ceil(shard / cfg.batch_size) / cfg.grad_accum)
        optimizer = make_optimizer(cfg, model)
        scheduler = LRSchedule(cfg, optimizer, steps_per_epoch)
        loss_fn = train_loss_fn(task.loss_fn, cfg.label_smoothing)
        amp = amp_dtype(cfg, device)
        return cls(
            cfg=cfg,
            task=task,
            device=device,
            model=model,
            wrapped=wrapped,
            channels_last=channels_last,
            rank=rank,
            world=world,
            on_device=on_device,
            x_train=x_train,
            y_train=y_train,
            x_val=x_val,
            y_val=y_val,
            shard=shard,
            steps_per_epoch=steps_per_epoch,
            optimizer=optimizer,
            scheduler=scheduler,
            train_loss_fn=loss_fn,
            amp_dtype=amp,
            scaler=torch.amp.GradScaler("cuda") if amp == torch.float16 else None,
            data_order=torch.Generator().manual_seed(cfg.seed),
            augment_rng=torch.Generator().manual_seed(cfg.seed + _AUGMENT_SEED_OFFSET),
            plateau=Plateau(cfg.plateau_metric, cfg.plateau_patience, cfg.plateau_min_delta),
            prune_epoch=(cfg.max_epochs - cfg.prune_finetune_epochs if cfg.prune_amount > 0 else 0),
        )

    def epoch_data(self) -> tuple[torch.Tensor, torch.Tensor]:
        """This epoch's training inputs and labels: the task's samples, or the fixed ones."""
        if self.task.sample_train is None:
            return self.x_train, self.y_train
        x_train, y_train = self.task.sample_train(self.data_order)
        if self.on_device:
            x_train, y_train = x_train.to(self.device), y_train.to(self.device)
        return x_train, y_train

    @property
    def loader_workers(self) -> int | None:
        """DataLoader worker processes for host-side data; None gathers on the device."""
        return None if self.on_device else self.cfg.loader_workers

    def prepare(self, xb: torch.Tensor) -> torch.Tensor:
        """A training batch as the model takes it: augmented, in the model's memory format."""
        if self.task.augment is not None:
            xb = self.task.augment(xb, self.augment_rng)
        return xb.contiguous(memory_format=torch.channels_last) if self.channels_last else xb


def make_optimizer(cfg: LoopConfig, model: nn.Module) -> torch.optim.Optimizer:
    """The configured optimizer (SGD with Nesterov momentum, AdamW or Adam) of ``model``."""
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


def train_loss_fn(loss_fn: LossFn, label_smoothing: float) -> LossFn:
    """The training loss: ``loss_fn``, or cross-entropy with ``label_smoothing``.

    Raises:
        ValueError: Label smoothing is asked of a loss other than cross-entropy.
    """
    if label_smoothing == 0:
        return loss_fn
    if loss_fn is not F.cross_entropy:
        raise ValueError(
            f"config['label_smoothing'] is {label_smoothing!r}, but this task's loss is not "
            "cross-entropy, the only loss it applies to. To fix: leave it at 0.0."
        )
    return functools.partial(F.cross_entropy, label_smoothing=label_smoothing)


def amp_dtype(cfg: LoopConfig, device: torch.device) -> torch.dtype | None:
    """The autocast dtype on CUDA with AMP on (``cfg.amp_dtype``; "auto" is bf16 where
    supported, else fp16), else None.

    Raises:
        ValueError: bf16 is asked for on a GPU without it.
    """
    if device.type != "cuda" or not cfg.amp:
        return None
    if cfg.amp_dtype == "fp16":
        return torch.float16
    bf16 = torch.cuda.is_bf16_supported()
    if cfg.amp_dtype == "bf16" and not bf16:
        raise ValueError(
            f"config['amp_dtype'] is 'bf16', but {torch.cuda.get_device_name(device)} does not "
            "support bfloat16. To fix: use 'auto' or 'fp16'."
        )
    return torch.bfloat16 if bf16 else torch.float16
