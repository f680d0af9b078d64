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

:func:`fit` runs the steps; the parts live apart: the task (:mod:`trainables._task`), the
training setup of a run (:mod:`trainables._run`), an epoch's training and evaluation
(:mod:`trainables._epoch`) and the checkpointed state (:mod:`trainables._state`).
"""

from __future__ import annotations

import math
import tempfile
import time
from typing import Any

import torch

from trainables import _checkpoint, _cuda, _measure, _prune, _state, _telemetry
from trainables._config import LoopConfig
from trainables._epoch import Trained, evaluate, train_epoch, train_step
from trainables._run import Run
from trainables._run import train_loss_fn as _train_loss_fn  # noqa: F401  # tests import it here
from trainables._session import Session
from trainables._task import Augment, Task
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
# First-report key of a run whose handed checkpoint was bad: "<bad> -> <used>".
FALLBACK_KEY = CHECKPOINT_FALLBACK_KEY
# Samples in the one batch whose FLOPs are counted per trial.
_FLOP_PROBE_SAMPLES = 8


def choose_device(requested: str, session: Session) -> torch.device:
    """Picks the device once: "auto" is CUDA iff available and the session gives GPUs.

    Raises:
        ValueError: "cuda" was requested where CUDA is not available.
    """
    cuda = torch.cuda.is_available()
    if requested == "cuda" and not cuda:
        raise ValueError(
            f"config[{DEVICE_KEY!r}] is 'cuda', but torch.cuda.is_available() is False here. "
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
    cfg, device = _configure(config, session)
    state, fallback = _restore(session)
    report = _Reporter(session, fallback)
    if state is not None and _state.is_finished(state, cfg.max_epochs):
        # Already finished (e.g. a restarted trial): tell the scheduler again, train nothing.
        report(dict(state["metrics"]), None)
        return
    _state.seed_everything(cfg.seed)
    _cuda.configure_cuda(cfg, device)
    run = Run.build(cfg, task, session, device)
    start = _state.load(run, state) if state is not None else 1
    flops, profile = _profile(run)
    timer = _measure.PhaseTimer(device)
    with _telemetry.gpu_telemetry(_cuda.trial_gpus(device)) as telemetry:
        for epoch in range(start, cfg.max_epochs + 1):
            trained = train_epoch(run, timer)
            metrics = _train_metrics(run, epoch, trained, flops, profile)
            diverged = _divergence("train", trained.loss, epoch)
            if diverged is not None:
                metrics[STOP_REASON_KEY] = diverged
                report({**metrics, **_device_metrics(device, telemetry)}, None)
                return
            _prune_on_schedule(run, epoch, metrics)
            val_loss, val_acc = evaluate(run)
            _end_epoch(metrics, trained.started, device, telemetry)
            diverged = _divergence("val", val_loss, epoch)
            if diverged is not None:
                metrics[STOP_REASON_KEY] = diverged
                report(metrics, None)
                return
            metrics["val_loss"], metrics["val_acc"] = val_loss, val_acc
            stop, paused = _stop_signals(run, epoch, metrics, session)
            _checkpoint_and_report(run, epoch, metrics, report, stop=stop, paused=paused)
            if stop is not None or paused is not None:
                return


def _configure(config: dict[str, Any], session: Session) -> tuple[LoopConfig, torch.device]:
    """Reads the loop's config, gives torch the session's CPU threads and picks the device."""
    cfg = LoopConfig.from_config(config)
    threads = session.cpu_count()
    if threads:
        torch.set_num_threads(threads)
    return cfg, choose_device(cfg.device, session)


def _restore(session: Session) -> tuple[dict[str, Any] | None, str | None]:
    """The session's state to resume from (None: from scratch) and the fallback taken."""
    with session.checkpoint_dir() as directory:
        return _state.restore(session, directory) if directory is not None else (None, None)


class _Reporter:
    """Reports to the session, adding the restore's fallback to the run's first report."""

    def __init__(self, session: Session, fallback: str | None) -> None:
        self._session = session
        # What the restore fell back to goes into the run's first report, and only that one.
        self._first_extra = {FALLBACK_KEY: fallback} if fallback is not None else {}

    def __call__(self, metrics: dict[str, Any], checkpoint_dir: str | None) -> None:
        """Reports ``metrics`` and, if given, the checkpoint in ``checkpoint_dir``."""
        extra = self._first_extra
        self._session.report({**metrics, **extra} if extra else metrics, checkpoint_dir)
        extra.clear()


def _profile(run: Run) -> tuple[float, dict[str, Any]]:
    """Training FLOPs per sample and the cost model's metrics, probed once per run."""
    # FLOPs and bytes per sample do not depend on the batch size, so a few samples are
    # probed, not a whole batch: the probe then costs about one step of a small model.
    cfg, device = run.cfg, run.device
    probe_n = min(cfg.batch_size, _FLOP_PROBE_SAMPLES)
    probe = _measure.probe_step(
        run.model,
        run.train_loss_fn,
        _cuda.to_format(run.x_train[:probe_n].to(device), run.channels_last),
        run.y_train[:probe_n].to(device),
        device,
    )
    return probe.flops_per_sample, _profile_metrics(cfg, probe, device, run.amp_dtype is not None)


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


def _train_metrics(
    run: Run, epoch: int, trained: Trained, flops: float, profile: dict[str, Any]
) -> dict[str, Any]:
    """The epoch's metrics after training; validation fills in ``val_loss`` and ``val_acc``."""
    samples_per_s = trained.samples / trained.time_s
    return {
        EPOCH_KEY: epoch,
        "train_loss": trained.loss,
        "val_loss": math.nan,
        "val_acc": math.nan,
        "epoch_time_s": trained.time_s,
        "train_time_s": trained.time_s,
        "train_samples": trained.samples,
        "samples_per_s": samples_per_s,
        "step_time_s": trained.step_time_s,
        "data_wait_share": trained.data_wait_share,
        "flops_per_sample": flops,
        "achieved_tflops": _measure.achieved_tflops(flops, samples_per_s),
        "sparsity": _prune.sparsity(run.model),
        DEVICE_KEY: str(run.device),
        "workers": run.world,
        **profile,
    }


def _divergence(split: str, loss: float, epoch: int) -> str | None:
    """The stop reason of a ``split`` loss that is no longer finite, else None."""
    if math.isfinite(loss):
        return None
    return f"diverged: {split} loss is {loss} at epoch {epoch}"


def _prune_on_schedule(run: Run, epoch: int, metrics: dict[str, Any]) -> None:
    """Prunes the model after its pruning epoch's training, updating ``metrics``' sparsity."""
    if epoch == run.prune_epoch and not _prune.is_pruned(run.model):
        # After training epoch P, so its validation already scores the pruned model.
        _prune.prune_globally(run.model, run.cfg.prune_amount)
        metrics["sparsity"] = _prune.sparsity(run.model)


def _end_epoch(
    metrics: dict[str, Any],
    started: float,
    device: torch.device,
    telemetry: _telemetry.Sampler | _telemetry.Unavailable,
) -> None:
    """Adds the epoch's time, end and device metrics to ``metrics`` once it is scored."""
    metrics["epoch_time_s"] = time.perf_counter() - started
    # When this epoch's score was known, to the microsecond (Tune's own "timestamp"
    # is whole seconds): orders results across trials (benchmarks, reports).
    metrics[EPOCH_END_KEY] = time.time()
    metrics.update(_device_metrics(device, telemetry))


def _device_metrics(
    device: torch.device, telemetry: _telemetry.Sampler | _telemetry.Unavailable
) -> dict[str, Any]:
    """Peak CUDA memory of the epoch (then reset) and the epoch's GPU telemetry."""
    metrics = telemetry.epoch_metrics()
    if device.type == "cuda":
        metrics["peak_mem_gib"] = _measure.peak_mem_gib(device)
    return metrics


def _stop_signals(
    run: Run, epoch: int, metrics: dict[str, Any], session: Session
) -> tuple[str | None, str | None]:
    """The plateau's stop reason (added to ``metrics``) and, failing that, the budget's."""
    stop = run.plateau.update(epoch, metrics[run.cfg.plateau_metric])
    if stop is not None:
        metrics[STOP_REASON_KEY] = stop
    # The campaign's budget ran out: checkpoint this epoch and stop. The checkpoint
    # does not record the stop, so a resume with more budget continues the trial.
    paused = None if stop is not None else session.stop_requested(run.cfg.stop_key)
    return stop, paused


def _checkpoint_and_report(
    run: Run,
    epoch: int,
    metrics: dict[str, Any],
    report: _Reporter,
    *,
    stop: str | None,
    paused: str | None,
) -> None:
    """Reports the epoch, with a checkpoint when one is due or the trial stops after it."""
    cfg = run.cfg
    if not (
        paused is not None
        or stop is not None
        or epoch % cfg.checkpoint_every == 0
        or epoch == cfg.max_epochs
    ):
        report(metrics, None)
        return
    state = _state.capture(run, epoch, metrics)
    # The budget's stop goes into the report only, not the checkpointed metrics.
    if paused is not None:
        metrics = {**metrics, STOP_REASON_KEY: paused}
    # Ray copies the directory inside report(), so it may vanish right after.
    with tempfile.TemporaryDirectory() as out:
        _checkpoint.write(out, state)
        report(metrics, out)
