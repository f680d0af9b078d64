"""The shared training loop of every built-in trainable: device, AMP, checkpoints, reports.

A model module builds a :class:`Task` (data tensors, a model factory, a loss) and calls
:func:`fit`, which trains it epoch by epoch and reports through a
:class:`~trainables._session.Session`. Every epoch reports ``epoch`` (1-based),
``train_loss``, ``val_loss``, ``val_acc`` (the objective), ``epoch_time_s`` (train plus
validation), ``samples_per_s`` (training samples per second of training time) and
``sparsity`` (fraction of zero conv/linear weights), ``train_time_s`` and ``train_samples``
(the training part of the epoch) and ``tuner_device``; a report that
ends the trial early (divergence, plateau) adds ``tuner_stop_reason``, and the first report
of a run whose checkpoint was bad adds ``tuner_checkpoint_fallback`` (see below).

Measurement (:mod:`trainables._measure`): ``step_time_s`` (mean compute time of an
optimizer step), ``data_wait_share`` (share of training time spent producing batches),
``flops_per_sample`` (training matmul/conv FLOPs per sample, counted once per trial),
``achieved_tflops`` and, on CUDA, ``peak_mem_gib``; for the cost model (constant within a
trial) ``bytes_per_sample``, ``ops_per_batch``, ``weight_bytes_per_batch``, ``param_count``,
``est_mem_gib`` (training memory estimated from parameters, optimizer state and saved
activations), ``batch_size``, ``grad_accum``, ``precision`` (fp32, tf32 or amp) and, on
CUDA, ``gpu_name``. GPU telemetry
(:mod:`trainables._telemetry`): ``telemetry`` and, where NVML reads the trial's GPUs,
``gpu_util_pct``, ``gpu_mem_used_gib``, ``gpu_power_w`` and ``gpu_energy_wh``.

Training knobs read here (see :class:`~trainables._config.LoopConfig`): the LR schedule and
warm-up (:mod:`trainables._schedule`), label smoothing, gradient clipping, gradient
accumulation, magnitude pruning (:mod:`trainables._prune`) and the task's own train-time
augmentation (:attr:`Task.augment`), which draws from a generator seeded by the trial seed.

Checkpoints (a directory holding ``state.pt`` and ``manifest.json``) carry everything
needed to continue with the same data order and random streams, so an interrupted and
restored run matches an uninterrupted one (bitwise on CPU); a pruned model is saved with its
masks. A checkpoint is verified before it is restored (:mod:`trainables._checkpoint`): a bad
one (partly written or copied, corrupted) falls back, with a warning, to the newest good
earlier checkpoint of the trial, or to a fresh start, and the first report says so in
``tuner_checkpoint_fallback`` (``"<bad> -> <used>"``, ``<used>`` being ``none`` for a fresh
start).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
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

from trainables import _batches, _checkpoint, _cuda, _measure, _prune, _telemetry
from trainables._config import LoopConfig
from trainables._plateau import Plateau
from trainables._schedule import LRSchedule
from trainables._session import Session
from tuner.contract import (
    CHECKPOINT_FALLBACK_KEY,
    DEVICE_KEY,
    EPOCH_END_KEY,
    EPOCH_KEY,
    RESERVED_PREFIX,
    STOP_REASON_KEY,
)

__all__ = [
    "CHECKPOINT_FILE",
    "FALLBACK_KEY",
    "RESERVED_PREFIX",
    "Augment",
    "Task",
    "choose_device",
    "fit",
    "train_step",
]

CHECKPOINT_FILE = _checkpoint.CHECKPOINT_FILE
# 2: LambdaLR/OneCycleLR scheduler state, augmentation generator, pruning masks.
# 3: plateau tracker state (best value and its epoch).
# 4: the same state, always with a manifest (size and SHA-256 of state.pt).
_STATE_FORMAT = 4
# Format 2 lacks only the plateau state: such a trial resumes counting from its restore.
_READABLE_FORMATS = (2, 3, 4)
# Written before manifests: restored unverified when they load (a format-4 state without its
# manifest is a partial write).
_UNVERIFIED_FORMATS = (2, 3)
# First-report key of a run whose handed checkpoint was bad: "<bad> -> <used>".
FALLBACK_KEY = CHECKPOINT_FALLBACK_KEY
# The augmentation stream is seeded apart from the data order (seed + this).
_AUGMENT_SEED_OFFSET = 1
# Samples in the one batch whose FLOPs are counted per trial.
_FLOP_PROBE_SAMPLES = 8
# Evaluation needs no activations for backward, so it can use bigger batches.
_MIN_EVAL_BATCH = 1024

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
# A batch of training inputs and a CPU generator to draw random transforms from.
Augment = Callable[[torch.Tensor, torch.Generator], torch.Tensor]


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
        augment: Random transform of a training batch (never applied to validation), or
            None.
        sample_train: Draws each epoch's training inputs and labels from the data-order
            generator (e.g. fresh random windows of a text), as many as ``x_train`` holds;
            None shuffles the fixed ``x_train``/``y_train`` instead.
    """

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_val: torch.Tensor
    y_val: torch.Tensor
    make_model: Callable[[], nn.Module]
    loss_fn: LossFn = F.cross_entropy
    augment: Augment | None = None
    sample_train: Callable[[torch.Generator], tuple[torch.Tensor, torch.Tensor]] | None = None

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

    Resumes from the session's checkpoint when there is one (or, when it is bad, from the
    newest good earlier one: see :mod:`trainables._checkpoint`). Ends the trial itself at the
    last epoch, and with ``tuner_stop_reason`` when a loss stops being finite or the
    objective plateaus (``plateau_patience``).

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
        state, fallback = _restore(session, directory) if directory is not None else (None, None)
    # What the restore fell back to goes into the run's first report, and only that one.
    first_extra = {FALLBACK_KEY: fallback} if fallback is not None else {}

    def report(metrics: dict[str, Any], checkpoint_dir: str | None) -> None:
        session.report({**metrics, **first_extra} if first_extra else metrics, checkpoint_dir)
        first_extra.clear()

    if state is not None and (
        state["epoch"] >= cfg.max_epochs or STOP_REASON_KEY in state["metrics"]
    ):
        # Already finished (e.g. a restarted trial): tell the scheduler again, train nothing.
        report(dict(state["metrics"]), None)
        return

    _seed_everything(cfg.seed)
    _cuda.configure_cuda(cfg, device)
    model = task.make_model().to(device)
    channels_last = cfg.channels_last and device.type == "cuda" and _cuda.has_conv2d(model)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    # Checkpoints hold the plain model's state; the compiled (or DDP) wrapper shares its
    # parameters.
    run_model: nn.Module = torch.compile(model) if cfg.compile else model  # type: ignore[assignment]
    rank, world = session.rank_and_world()
    if world > 1:
        # The process group (gloo on CPU, NCCL on CUDA) was set up by Ray Train's
        # TorchTrainer; DDP averages gradients and broadcasts rank 0's initial weights.
        run_model = nn.parallel.DistributedDataParallel(
            run_model, device_ids=[device.index] if device.type == "cuda" else None
        )
    on_device = _batches.keep_on_device(cfg.data_on_device, [task.x_train, task.y_train])
    loader_workers = None if on_device else cfg.loader_workers
    # On-device data is gathered there per batch; otherwise a DataLoader copies batches over.
    x_train, y_train = task.x_train, task.y_train
    x_val, y_val = task.x_val, task.y_val
    if on_device:
        x_train, y_train = x_train.to(device), y_train.to(device)
        x_val, y_val = x_val.to(device), y_val.to(device)
    # Each data-parallel worker trains on its 1/world share of every epoch's order.
    shard = len(x_train) // world
    steps_per_epoch = math.ceil(math.ceil(shard / cfg.batch_size) / cfg.grad_accum)
    optimizer = _make_optimizer(cfg, model)
    scheduler = LRSchedule(cfg, optimizer, steps_per_epoch)
    train_loss_fn = _train_loss_fn(task.loss_fn, cfg.label_smoothing)
    amp_dtype = _amp_dtype(cfg, device)
    scaler = torch.amp.GradScaler("cuda") if amp_dtype == torch.float16 else None
    data_order = torch.Generator().manual_seed(cfg.seed)
    augment_rng = torch.Generator().manual_seed(cfg.seed + _AUGMENT_SEED_OFFSET)
    plateau = Plateau(cfg.plateau_metric, cfg.plateau_patience, cfg.plateau_min_delta)
    prune_epoch = cfg.max_epochs - cfg.prune_finetune_epochs if cfg.prune_amount > 0 else 0
    start = 1
    if state is not None:
        if state["pruned"]:
            _prune.add_mask_slots(model)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        if scaler is not None and state["scaler"] is not None:
            scaler.load_state_dict(state["scaler"])
        _set_rng_state(state["rng"], data_order, augment_rng, device)
        if "plateau" in state:
            plateau.load_state_dict(state["plateau"])
        start = state["epoch"] + 1

    def prepare(xb: torch.Tensor) -> torch.Tensor:
        if task.augment is not None:
            xb = task.augment(xb, augment_rng)
        return xb.contiguous(memory_format=torch.channels_last) if channels_last else xb

    # FLOPs and bytes per sample do not depend on the batch size, so a few samples are
    # probed, not a whole batch: the probe then costs about one step of a small model.
    probe_n = min(cfg.batch_size, _FLOP_PROBE_SAMPLES)
    probe = _measure.probe_step(
        model,
        train_loss_fn,
        _cuda.to_format(x_train[:probe_n].to(device), channels_last),
        y_train[:probe_n].to(device),
        device,
    )
    flops = probe.flops_per_sample
    profile = _profile_metrics(cfg, probe, device, amp_dtype is not None)
    timer = _measure.PhaseTimer(device)
    with _telemetry.gpu_telemetry(_cuda.trial_gpus(device)) as telemetry:
        for epoch in range(start, cfg.max_epochs + 1):
            t0 = time.perf_counter()
            model.train()
            if task.sample_train is not None:
                x_train, y_train = task.sample_train(data_order)
                if on_device:
                    x_train, y_train = x_train.to(device), y_train.to(device)
            order = torch.randperm(len(x_train), generator=data_order)
            if world > 1:
                # Same permutation on every rank (same seed); equal shards keep the ranks'
                # step counts, and so DDP's gradient all-reduces, in lockstep.
                order = order[: shard * world][rank::world]
            batches = _batches.micro_batches(
                order,
                x_train,
                y_train,
                cfg.batch_size,
                device=device,
                loader_workers=loader_workers,
                non_blocking=cfg.non_blocking,
            )
            loss_sum = torch.zeros((), device=device)
            for _ in range(steps_per_epoch):
                timer.mark()
                step = [(prepare(xb), yb) for xb, yb in itertools.islice(batches, cfg.grad_accum)]
                timer.mark()
                loss_sum += train_step(
                    run_model,
                    optimizer,
                    train_loss_fn,
                    step,
                    grad_clip=cfg.grad_clip,
                    scaler=scaler,
                    amp_dtype=amp_dtype,
                    device=device,
                )
                scheduler.step()
                timer.mark()
            if world > 1:
                torch.distributed.all_reduce(loss_sum)  # the loss over all workers' shards
            seen = len(order) * world
            train_loss = (loss_sum / seen).item()
            train_time = time.perf_counter() - t0
            step_time, data_share = timer.summary()
            samples_per_s = seen / train_time
            metrics: dict[str, Any] = {
                EPOCH_KEY: epoch,
                "train_loss": train_loss,
                "val_loss": math.nan,
                "val_acc": math.nan,
                "epoch_time_s": train_time,
                "train_time_s": train_time,
                "train_samples": seen,
                "samples_per_s": samples_per_s,
                "step_time_s": step_time,
                "data_wait_share": data_share,
                "flops_per_sample": flops,
                "achieved_tflops": _measure.achieved_tflops(flops, samples_per_s),
                "sparsity": _prune.sparsity(model),
                DEVICE_KEY: str(device),
                "workers": world,
                **profile,
            }
            if not math.isfinite(train_loss):
                metrics[STOP_REASON_KEY] = f"diverged: train loss is {train_loss} at epoch {epoch}"
                report({**metrics, **_device_metrics(device, telemetry)}, None)
                return
            if epoch == prune_epoch and not _prune.is_pruned(model):
                # After training epoch P, so its validation already scores the pruned model.
                _prune.prune_globally(model, cfg.prune_amount)
                metrics["sparsity"] = _prune.sparsity(model)
            val_loss, val_acc = _evaluate(
                run_model, task.loss_fn, x_val, y_val, cfg, device, amp_dtype, channels_last
            )
            metrics["epoch_time_s"] = time.perf_counter() - t0
            # When this epoch's score was known, to the microsecond (Tune's own "timestamp"
            # is whole seconds): orders results across trials (benchmarks, reports).
            metrics[EPOCH_END_KEY] = time.time()
            metrics.update(_device_metrics(device, telemetry))
            if not math.isfinite(val_loss):
                metrics[STOP_REASON_KEY] = f"diverged: val loss is {val_loss} at epoch {epoch}"
                report(metrics, None)
                return
            metrics["val_loss"], metrics["val_acc"] = val_loss, val_acc
            stop = plateau.update(epoch, metrics[cfg.plateau_metric])
            if stop is not None:
                metrics[STOP_REASON_KEY] = stop
            # The campaign's budget ran out: checkpoint this epoch and stop. The checkpoint
            # does not record the stop, so a resume with more budget continues the trial.
            paused = None if stop is not None else session.stop_requested(cfg.stop_key)
            if (
                paused is not None
                or stop is not None
                or epoch % cfg.checkpoint_every == 0
                or (epoch == cfg.max_epochs)
            ):
                state = {
                    "format": _STATE_FORMAT,
                    "epoch": epoch,
                    "model": model.state_dict(),
                    "pruned": _prune.is_pruned(model),
                    "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(),
                    "scaler": scaler.state_dict() if scaler is not None else None,
                    "rng": _get_rng_state(data_order, augment_rng, device),
                    "plateau": plateau.state_dict(),
                    "metrics": metrics,
                }
                # Ray copies the directory inside report(), so it may vanish right after.
                if paused is not None:
                    metrics = {**metrics, STOP_REASON_KEY: paused}
                with tempfile.TemporaryDirectory() as out:
                    _checkpoint.write(out, state)
                    report(metrics, out)
            else:
                report(metrics, None)
            if stop is not None or paused is not None:
                return


def train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: LossFn,
    batches: list[tuple[torch.Tensor, torch.Tensor]],
    *,
    grad_clip: float = 0.0,
    scaler: torch.amp.GradScaler | None = None,
    amp_dtype: torch.dtype | None = None,
    device: torch.device | None = None,
) -> torch.Tensor:
    """One optimizer step over micro-batches; returns the summed (not mean) loss, detached.

    Each micro-batch's mean loss is weighted by its share of the step's samples (1/N for N
    equal micro-batches), so the accumulated gradient is that of one batch of all of them.
    With ``grad_clip > 0`` the global gradient norm is clipped to it before the step.
    """
    device = device if device is not None else batches[0][0].device
    total = sum(len(yb) for _, yb in batches)
    loss_sum = torch.zeros((), device=device)
    optimizer.zero_grad(set_to_none=True)
    for xb, yb in batches:
        with _autocast(device, amp_dtype):
            loss = loss_fn(model(xb), yb)
        # One micro-batch (the common case) needs no weighting, and no extra op per step.
        scaled = loss * (len(yb) / total) if len(batches) > 1 else loss
        torch.autograd.backward(scaler.scale(scaled) if scaler is not None else scaled)
        # Summed on the device: a .item() per step would stall the GPU every batch.
        loss_sum += loss.detach().float() * len(yb)
    if grad_clip > 0:
        if scaler is not None:
            scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    return loss_sum


def _train_loss_fn(loss_fn: LossFn, label_smoothing: float) -> LossFn:
    if label_smoothing == 0:
        return loss_fn
    if loss_fn is not F.cross_entropy:
        raise ValueError(
            f"config['label_smoothing'] is {label_smoothing!r}, but this task's loss is not "
            "cross-entropy, the only loss it applies to. To fix: leave it at 0.0."
        )
    return functools.partial(F.cross_entropy, label_smoothing=label_smoothing)


@torch.no_grad()
def _evaluate(
    model: nn.Module,
    loss_fn: LossFn,
    x: torch.Tensor,
    y: torch.Tensor,
    cfg: LoopConfig,
    device: torch.device,
    amp_dtype: torch.dtype | None,
    channels_last: bool = False,
) -> tuple[float, float]:
    """Mean loss and accuracy over a split, with one host sync at the end."""
    model.eval()
    loss_sum = torch.zeros((), device=device)
    correct = torch.zeros((), device=device, dtype=torch.long)
    batch = max(cfg.batch_size, _MIN_EVAL_BATCH)
    for i in range(0, len(x), batch):
        # A no-op for data already on the device; a copy per batch for host-side data.
        xb = _cuda.to_format(x[i : i + batch].to(device, non_blocking=True), channels_last)
        yb = y[i : i + batch].to(device, non_blocking=True)
        with _autocast(device, amp_dtype):
            logits = model(xb)
        logits = logits.float()
        loss_sum += loss_fn(logits, yb) * len(xb)
        correct += (logits.argmax(dim=1) == yb).sum()
    # Per target: one per sample, or one per position for sequence labels (batch, time).
    return (loss_sum / len(x)).item(), correct.item() / y.numel()


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


def _profile_metrics(
    cfg: LoopConfig, probe: _measure.StepProbe, device: torch.device, amp: bool
) -> dict[str, Any]:
    """What the cost model reads from every epoch's report (constant within a trial)."""
    metrics: dict[str, Any] = {
        "bytes_per_sample": probe.traffic_bytes_per_sample,
        "ops_per_batch": probe.ops_per_step,
        "weight_bytes_per_batch": probe.weight_traffic_bytes,
        "param_count": probe.param_count,
        "est_mem_gib": _measure.estimate_train_mem_gib(
            probe, cfg.batch_size, cfg.optimizer, cfg.momentum
        ),
        "batch_size": cfg.batch_size,
        "grad_accum": cfg.grad_accum,
        "precision": _cuda.precision(cfg, device, amp),
    }
    name = _cuda.gpu_name(device)
    if name is not None:
        metrics["gpu_name"] = name
    return metrics


def _device_metrics(
    device: torch.device, telemetry: _telemetry.Sampler | _telemetry.Unavailable
) -> dict[str, Any]:
    """Peak CUDA memory of the epoch (then reset) and the epoch's GPU telemetry."""
    metrics = telemetry.epoch_metrics()
    if device.type == "cuda":
        metrics["peak_mem_gib"] = _measure.peak_mem_gib(device)
    return metrics


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


def _get_rng_state(
    data_order: torch.Generator, augment_rng: torch.Generator, device: torch.device
) -> dict[str, Any]:
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


def _set_rng_state(
    rng: dict[str, Any],
    data_order: torch.Generator,
    augment_rng: torch.Generator,
    device: torch.device,
) -> None:
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


def _restore(session: Session, directory: str) -> tuple[dict[str, Any] | None, str | None]:
    """The state to resume from (None: from scratch) and the fallback taken, if any.

    A session may list the handed checkpoint's earlier ones itself (``checkpoint_lineage``,
    as :class:`~trainables._session.RaySession` does for remote storage); otherwise they
    are its sibling directories on the local disk.

    Raises:
        ValueError: A good checkpoint holds a state format this version cannot read.
    """
    lineage = getattr(session, "checkpoint_lineage", None) or _checkpoint.local_lineage
    restored = _checkpoint.restore(directory, lineage, unverified_formats=_UNVERIFIED_FORMATS)
    state = restored.state
    if state is not None and state.get("format") not in _READABLE_FORMATS:
        raise ValueError(
            f"Checkpoint {directory!r} has format {state.get('format')!r}; this version reads "
            f"formats {list(_READABLE_FORMATS)}."
        )
    return state, restored.fallback
