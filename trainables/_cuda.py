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

__all__ = ["configure_cuda", "has_conv2d", "to_format", "trial_gpus"]


def configure_cuda(cfg: LoopConfig, device: torch.device) -> None:
    """Applies the CUDA knobs (cuDNN autotuning, TF32); a no-op off CUDA."""
    if device.type != "cuda":
        return
    torch.backends.cudnn.benchmark = cfg.cudnn_benchmark
    # TF32 tensor cores exist from Ampere (compute capability 8.0) on.
    tf32 = cfg.tf32 and torch.cuda.get_device_capability(device)[0] >= 8
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    torch.backends.cudnn.allow_tf32 = tf32


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
