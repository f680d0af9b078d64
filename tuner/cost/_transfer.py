"""A profile's epoch on another device: what it would take on each GPU of the catalog.

An epoch as Ray counts it (:mod:`tuner.cost._profile`) has a device part (training and
validation math) and a part that stays whatever the GPU (data preparation on the host,
the report, the checkpoint write). Two ways to move the device part:

- **Measured on a catalog GPU** ("relative"): scale it by the throughput ratio that
  :func:`~tuner.cost._predict.predict_throughput` predicts between the two GPUs (its
  roofline split uses the profile's FLOPs per sample).
- **Measured on a CPU** ("absolute"): a CPU says little about a GPU, so the device part is
  rebuilt from the probe's counts: FLOPs at the GPU's calibrated FLOP/s, bytes moved at
  its calibrated bandwidth, and a fixed cost per operation (eager PyTorch launches one
  kernel per ATen op; tiny models are bound by it). Validation keeps its measured share
  of the training time. Uncalibrated against real GPUs: measure on a GPU for a better
  figure (``tuner profile`` there).

Pure: no Ray, no torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tuner.cost._catalog import GpuSpec, find_gpu, load_gpus, resolve_gpu
from tuner.cost._predict import Calibration, effective_rates, load_calibration, predict_throughput
from tuner.cost._profile import Profile, TrialProfile
from tuner.errors import SpecError

__all__ = ["CUDA_CONTEXT_GIB", "EAGER_OP_S", "EpochEstimate", "estimate_epoch", "source_gpu"]

# Seconds a GPU spends per ATen op of a small eager-mode model (dispatch plus launch):
# ~5-10 us on current drivers; a typical figure, not fitted here.
EAGER_OP_S = 8e-6
# Memory the CUDA context and allocator take before the model's first tensor.
CUDA_CONTEXT_GIB = 0.5
# AMP keeps most activations in 16 bits: about half the bytes of FP32.
_AMP_BYTES = 0.5


@dataclass(frozen=True)
class EpochEstimate:
    """A profile's epoch predicted on one GPU.

    Attributes:
        gpu: Catalog GPU name.
        precision: Math the prediction is for.
        epoch_s: Seconds per epoch (Ray's count: train, validate, report, checkpoint).
        startup_s: Set-up seconds per trial on a reused worker (as measured).
        cold_start_s: Extra seconds for a worker's first trial (as measured).
        device_share: Share of ``epoch_s`` the GPU is busy (what trials sharing a GPU
            compete for).
        mem_gib: Memory a trial needs on the GPU, context included (None: unknown).
        method: "relative" (measured on a GPU) or "absolute" (measured on a CPU).
    """

    gpu: str
    precision: str
    epoch_s: float
    startup_s: float
    cold_start_s: float
    device_share: float
    mem_gib: float | None
    method: str

    def shared_epoch_s(self, trials_per_gpu: int) -> float:
        """Seconds per epoch when ``trials_per_gpu`` trials share the GPU (fractional GPUs).

        Their device parts queue on the GPU; the rest (host, report) overlaps.
        """
        return self.epoch_s * max(1.0, trials_per_gpu * self.device_share)


def source_gpu(profile: Profile, gpus: Mapping[str, GpuSpec]) -> GpuSpec | None:
    """The catalog GPU a profile was measured on; None for a CPU or an unknown GPU."""
    if profile.device != "cuda" or not profile.gpu_name:
        return None
    return resolve_gpu(gpus, profile.gpu_name)


def _numbers(trial: TrialProfile, *keys: str) -> tuple[float, ...] | None:
    """The trial's measurements ``keys``, or None if any is missing."""
    values = tuple(trial.number(key) for key in keys)
    return None if any(v is None for v in values) else tuple(v or 0.0 for v in values)


def _absolute_device_s(
    trial: TrialProfile, gpu: GpuSpec, precision: str, calibration: Calibration
) -> float | None:
    """Seconds of GPU work in one epoch of ``trial``, from its probe counts."""
    needed = _numbers(
        trial, "train_samples", "flops_per_sample", "batch_size", "train_time_s", "epoch_time_s"
    )
    if needed is None:
        return None
    samples, flops, batch, train_s, total_s = needed
    flop_s, byte_s = effective_rates(gpu, precision, calibration)
    scale = _AMP_BYTES if precision == "amp" else 1.0
    per_sample = flops / flop_s + scale * (trial.number("bytes_per_sample") or 0.0) / byte_s
    per_batch = (trial.number("ops_per_batch") or 0.0) * EAGER_OP_S + (
        trial.number("weight_bytes_per_batch") or 0.0
    ) / byte_s
    train_gpu_s = samples * per_sample + samples / batch * per_batch
    # Validation keeps its share of the training time measured on the CPU.
    return train_gpu_s * (total_s / train_s if train_s > 0 else 1.0)


def estimate_epoch(
    profile: Profile,
    gpu: str,
    *,
    precision: str | None = None,
    gpus: Mapping[str, GpuSpec] | None = None,
    calibration: Calibration | None = None,
) -> EpochEstimate:
    """Predicts the profile's epoch, start-up and memory on ``gpu``.

    Args:
        profile: What the trainable measured.
        gpu: Catalog name (or any spelling :func:`find_gpu` resolves).
        precision: Math to predict for; default the profile's on a GPU, "amp" from a CPU
            (the built-in loop trains with AMP on CUDA unless ``amp: false``).
        gpus: GPU catalog (default: shipped).
        calibration: Efficiencies (default: shipped).

    Raises:
        SpecError: Unknown GPU, or the catalog lacks a figure the prediction needs.
    """
    known = gpus if gpus is not None else load_gpus()
    cal = calibration if calibration is not None else load_calibration()
    target = find_gpu(known, gpu, source="<profile>", path="gpu")
    source = source_gpu(profile, known)
    mode = precision or (profile.precision if source is not None else "amp")
    host_s, device_s = 0.0, 0.0
    if source is not None:
        method = "relative"
        for trial in profile.trials:
            busy = _device_part(trial)
            sps = trial.number("samples_per_s")
            speedup = 1.0
            if sps:
                pred = predict_throughput(
                    sps,
                    source.name,
                    target.name,
                    mode,
                    trial.number("flops_per_sample") or None,
                    gpus=known,
                    calibration=cal,
                )
                speedup = pred.speedup
            device_s += busy / speedup
            host_s += trial.epoch_s - busy
    else:
        method = "absolute"
        for trial in profile.trials:
            rebuilt = _absolute_device_s(trial, target, mode, cal)
            if rebuilt is None:
                raise SpecError(
                    "<profile>",
                    f"trials[{trial.trial}]",
                    "the trainable reported no FLOPs, samples or batch size, so its epoch "
                    "cannot be predicted on a GPU from a CPU measurement",
                    fix="profile it on a GPU, or report flops_per_sample, train_samples, "
                    "batch_size, train_time_s and epoch_time_s each epoch",
                )
            device_s += rebuilt
            host_s += trial.epoch_s - _device_part(trial)
    n = len(profile.trials)
    epoch_s = (device_s + host_s) / n
    mem = profile.mem_gib
    if mem is not None and not any(t.number("peak_mem_gib") is not None for t in profile.trials):
        mem += CUDA_CONTEXT_GIB  # an estimate without the context; a CUDA peak has it
    return EpochEstimate(
        gpu=target.name,
        precision=mode,
        epoch_s=epoch_s,
        startup_s=profile.startup_s,
        cold_start_s=profile.cold_start_s,
        device_share=(device_s / n) / epoch_s if epoch_s > 0 else 1.0,
        mem_gib=mem,
        method=method,
    )


def _device_part(trial: TrialProfile) -> float:
    """Seconds of one epoch spent on the device: train + validate minus waiting for data."""
    total = trial.number("epoch_time_s")
    if total is None:
        return trial.epoch_s  # a trainable that reports no timing: all of it scales
    train = trial.number("train_time_s") or total
    wait = (trial.number("data_wait_share") or 0.0) * train
    return max(0.0, min(trial.epoch_s, total - wait))
