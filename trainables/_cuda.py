"""CUDA settings and layouts for the shared loop: the GPU efficiency knobs of LoopConfig.

Every function is a no-op (or returns its input) off CUDA, so CPU runs stay bitwise
reproducible whatever the knobs say.
"""

from __future__ import annotations

import os

import torch
from torch import nn

from trainables import _telemetry
from trainables._config import LoopConfig

__all__ = ["configure_cuda", "gpu_name", "has_conv2d", "precision", "to_format", "trial_gpus"]


def configure_cuda(cfg: LoopConfig, device: torch.device) -> None:
    """Applies the CUDA knobs (cuDNN autotuning, TF32); a no-op off CUDA."""
    if device.type != "cuda":
        return
    torch.backends.cudnn.benchmark = cfg.cudnn_benchmark
    tf32 = _tf32(cfg, device)
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    torch.backends.cudnn.allow_tf32 = tf32


def _tf32(cfg: LoopConfig, device: torch.device) -> bool:
    # TF32 tensor cores exist from Ampere (compute capability 8.0) on.
    return cfg.tf32 and torch.cuda.get_device_capability(device)[0] >= 8


def precision(cfg: LoopConfig, device: torch.device, amp: bool) -> str:
    """The math the trial trains in, as the cost model names it: fp32, tf32 or amp."""
    if device.type != "cuda":
        return "fp32"
    if amp:
        return "amp"
    return "tf32" if _tf32(cfg, device) else "fp32"


def gpu_name(device: torch.device) -> str | None:
    """The CUDA device's model name (e.g. "NVIDIA A100-SXM4-40GB"); None off CUDA."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else None


def has_conv2d(model: nn.Module) -> bool:
    """Whether the model has a 2-D convolution (channels-last helps only those)."""
    return any(isinstance(m, nn.Conv2d) for m in model.modules())


def to_format(x: torch.Tensor, channels_last: bool) -> torch.Tensor:
    """``x`` in channels-last layout when asked and 4-D, else ``x`` itself."""
    if channels_last and x.dim() == 4:
        return x.contiguous(memory_format=torch.channels_last)
    return x


def trial_gpus(device: torch.device) -> list[int | str]:
    """NVML ids of the trial's GPUs (empty off CUDA)."""
    if device.type != "cuda":
        return []
    # Ray sets CUDA_VISIBLE_DEVICES to the trial's GPUs: every visible device is the trial's.
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return _telemetry.parse_visible_devices(visible, torch.cuda.device_count())
