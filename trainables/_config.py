"""Reading a trial's flat config dict: the service's ``tuner_*`` keys and the loop's knobs.

Values come from Optuna/Ray, so they are checked here, once, at the start of a trial:
a bad value raises ``ValueError`` naming the key, the value and what is allowed.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tuner.contract import (
    CHECKPOINT_EVERY_KEY,
    CONFIG_KEYS,
    DEVICE_KEY,
    MAX_EPOCHS_KEY,
    RESERVED_PREFIX,
    SEED_KEY,
    STOP_KEY,
)

__all__ = [
    "AMP_DTYPES",
    "DATA_PLACEMENTS",
    "DEVICES",
    "LR_SCHEDULES",
    "OPTIMIZERS",
    "PLATEAU_METRICS",
    "RESERVED_KEYS",
    "RESERVED_PREFIX",
    "LoopConfig",
    "get_bool",
    "get_choice",
    "get_float",
    "get_int",
]

# Config keys the service sets (tuner.contract); every other key is a hyperparameter.
RESERVED_KEYS = CONFIG_KEYS
DEVICES = ("auto", "cpu", "cuda")
OPTIMIZERS = ("adam", "adamw", "sgd")
LR_SCHEDULES = ("constant", "cosine", "step", "onecycle")
DATA_PLACEMENTS = ("auto", "always", "never")
AMP_DTYPES = ("auto", "bf16", "fp16")
PLATEAU_METRICS = ("val_loss", "val_acc")
# Default learning rate per optimizer family: adaptive methods want much smaller steps.
DEFAULT_LR = {"adam": 1e-3, "adamw": 1e-3, "sgd": 0.05}


def _did_you_mean(value: str, allowed: Sequence[str]) -> str:
    close = difflib.get_close_matches(value, allowed, n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def get_int(config: Mapping[str, Any], key: str, default: int, *, low: int | None = None) -> int:
    """Reads an int (an integral float such as 64.0 is accepted); ``low`` is inclusive."""
    value = config.get(key, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"config[{key!r}] must be an int, but got {value!r}.")
    if low is not None and value < low:
        raise ValueError(f"config[{key!r}] must be >= {low}, but got {value!r}.")
    return value


def get_float(
    config: Mapping[str, Any],
    key: str,
    default: float,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """Reads a finite float within [low, high] (ends made exclusive by ``*_open``)."""
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"config[{key!r}] must be a finite number, but got {value!r}.")
    value = float(value)
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and (value >= high if high_open else value > high)
    if too_low or too_high:
        rules = []
        if low is not None:
            rules.append(f"{'>' if low_open else '>='} {low}")
        if high is not None:
            rules.append(f"{'<' if high_open else '<='} {high}")
        raise ValueError(f"config[{key!r}] must be {' and '.join(rules)}, but got {value!r}.")
    return value


def get_bool(config: Mapping[str, Any], key: str, default: bool) -> bool:
    """Reads a bool (not a truthy string: ``"false"`` is an error, not True)."""
    value = config.get(key, default)
    if not isinstance(value, bool):
        raise ValueError(f"config[{key!r}] must be true or false, but got {value!r}.")
    return value


def get_choice(config: Mapping[str, Any], key: str, default: str, allowed: Sequence[str]) -> str:
    """Reads one of ``allowed`` and suggests the closest on a typo."""
    value = config.get(key, default)
    if value not in allowed:
        hint = _did_you_mean(value, allowed) if isinstance(value, str) else ""
        raise ValueError(
            f"config[{key!r}] must be one of {list(allowed)}, but got {value!r}.{hint}"
        )
    return str(value)


def _check_reserved_keys(config: Mapping[str, Any]) -> None:
    # A typo such as `tuner_max_epoch` would otherwise silently train with the default.
    for key in config:
        if isinstance(key, str) and key.startswith(RESERVED_PREFIX) and key not in RESERVED_KEYS:
            raise ValueError(
                f"config[{key!r}] is not a known key; keys starting with {RESERVED_PREFIX!r} "
                f"are reserved for the service: {list(RESERVED_KEYS)}."
                f"{_did_you_mean(key, RESERVED_KEYS)}"
            )


@dataclass(frozen=True)
class LoopConfig:
    """What the shared loop reads from a trial's config (model keys are read by the model).

    Attributes mirror the config keys: ``tuner_max_epochs`` (default 10), ``tuner_seed``
    (0), ``tuner_checkpoint_every`` (1), ``tuner_device`` ("auto"), ``optimizer``
    ("adam"), ``lr`` (1e-3 for adam/adamw, 0.05 for sgd), ``momentum`` (0.9, sgd only,
    Nesterov when > 0), ``weight_decay`` (0.0), ``batch_size`` (64), ``lr_schedule``
    ("constant"), ``amp`` (True; used on CUDA only), and the training knobs below.

    Training knobs (see :mod:`trainables._schedule` for the LR schedules):
        ``lr_schedule`` ("constant"): one of "constant", "cosine" (to 0 over the run,
        per optimizer step), "step" (times ``lr_gamma`` every ``lr_step_epochs``),
        "onecycle" (torch ``OneCycleLR`` with ``max_lr = lr``, per optimizer step).
        ``lr_step_epochs`` (10, >= 1) and ``lr_gamma`` (0.1, in (0, 1]): the "step" schedule.
        ``warmup_epochs`` (0.0, >= 0, may be fractional): linear warm-up from 0, multiplied
        onto any schedule. ``label_smoothing`` (0.0, in [0, 1)): training loss only;
        ``val_loss`` stays plain cross-entropy. ``grad_clip`` (0.0 = off, else the max
        global gradient norm). ``grad_accum`` (1, >= 1): micro-batches of ``batch_size``
        per optimizer step. ``prune_amount`` (0.0 = off, in [0, 1)) and
        ``prune_finetune_epochs`` (0, < ``tuner_max_epochs`` when pruning): global L1
        magnitude pruning after epoch ``tuner_max_epochs - prune_finetune_epochs``.

    GPU efficiency knobs (each applies on CUDA only; CPU runs ignore it):
        ``amp_dtype`` ("auto"): the autocast dtype with ``amp`` on: "auto" is bf16 where
        the GPU supports it and fp16 (with a gradient scaler) elsewhere; "bf16" or "fp16"
        asks for one (fp16 on a bf16 GPU runs the scaled fp16 path there too).
        ``channels_last`` (True): channels-last memory format for models with 2-D convs
        and their 4-D inputs. ``cudnn_benchmark`` (True): let cuDNN pick the fastest conv
        algorithms (not bitwise reproducible). ``tf32`` (True): TF32 matmuls and convs on
        Ampere and newer. ``non_blocking`` (True): asynchronous host-to-device copies of
        pinned batches.
    ``compile`` (False): ``torch.compile`` the model (any device).
    ``data_on_device`` ("auto"): "always" keeps the whole dataset on the training device
    (batches are index gathers there), "never" feeds batches through a
    ``torch.utils.data.DataLoader`` (pinned memory on CUDA), "auto" keeps it on the device
    when its tensors total under 1 GiB. ``loader_workers`` (0, >= 0): DataLoader worker
    processes. Both paths draw the same data order from the trial seed.
    Plateau early stop: ``plateau_patience`` (0 = off, >= 0) epochs without an
    improvement of ``plateau_metric`` ("val_loss" or "val_acc") by more than
    ``plateau_min_delta`` (0.0, >= 0) end the trial.
    """

    max_epochs: int = 10
    seed: int = 0
    checkpoint_every: int = 1
    device: str = "auto"
    stop_key: str | None = None
    optimizer: str = "adam"
    lr: float = DEFAULT_LR["adam"]
    momentum: float = 0.9
    weight_decay: float = 0.0
    batch_size: int = 64
    lr_schedule: str = "constant"
    amp: bool = True
    amp_dtype: str = "auto"
    lr_step_epochs: int = 10
    lr_gamma: float = 0.1
    warmup_epochs: float = 0.0
    label_smoothing: float = 0.0
    grad_clip: float = 0.0
    grad_accum: int = 1
    prune_amount: float = 0.0
    prune_finetune_epochs: int = 0
    channels_last: bool = True
    cudnn_benchmark: bool = True
    tf32: bool = True
    non_blocking: bool = True
    compile: bool = False
    data_on_device: str = "auto"
    loader_workers: int = 0
    plateau_patience: int = 0
    plateau_min_delta: float = 0.0
    plateau_metric: str = "val_loss"

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> LoopConfig:
        """Validates and reads the loop's keys from a trial config; other keys are ignored.

        Raises:
            ValueError: A key has a value of the wrong type or out of range, or an unknown
                key uses the reserved ``tuner_`` prefix.
        """
        _check_reserved_keys(config)
        optimizer = get_choice(config, "optimizer", "adam", OPTIMIZERS)
        max_epochs = get_int(config, MAX_EPOCHS_KEY, 10, low=1)
        prune_amount = get_float(
            config, "prune_amount", cls.prune_amount, low=0.0, high=1.0, high_open=True
        )
        prune_finetune_epochs = get_int(
            config, "prune_finetune_epochs", cls.prune_finetune_epochs, low=0
        )
        if prune_amount > 0 and prune_finetune_epochs >= max_epochs:
            raise ValueError(
                f"config['prune_finetune_epochs'] must be < config[{MAX_EPOCHS_KEY!r}] "
                f"({max_epochs}) when pruning, but got {prune_finetune_epochs!r}: pruning "
                f"happens after epoch {MAX_EPOCHS_KEY} - prune_finetune_epochs."
            )
        return cls(
            max_epochs=max_epochs,
            seed=get_int(config, SEED_KEY, 0, low=0),
            checkpoint_every=get_int(config, CHECKPOINT_EVERY_KEY, 1, low=1),
            device=get_choice(config, DEVICE_KEY, "auto", DEVICES),
            stop_key=str(config[STOP_KEY]) if config.get(STOP_KEY) else None,
            optimizer=optimizer,
            lr=get_float(config, "lr", DEFAULT_LR[optimizer], low=0.0, low_open=True),
            momentum=get_float(config, "momentum", 0.9, low=0.0, high=1.0, high_open=True),
            weight_decay=get_float(config, "weight_decay", 0.0, low=0.0),
            batch_size=get_int(config, "batch_size", 64, low=1),
            lr_schedule=get_choice(config, "lr_schedule", "constant", LR_SCHEDULES),
            amp=get_bool(config, "amp", True),
            amp_dtype=get_choice(config, "amp_dtype", cls.amp_dtype, AMP_DTYPES),
            lr_step_epochs=get_int(config, "lr_step_epochs", cls.lr_step_epochs, low=1),
            lr_gamma=get_float(config, "lr_gamma", cls.lr_gamma, low=0.0, high=1.0, low_open=True),
            warmup_epochs=get_float(config, "warmup_epochs", cls.warmup_epochs, low=0.0),
            label_smoothing=get_float(
                config, "label_smoothing", cls.label_smoothing, low=0.0, high=1.0, high_open=True
            ),
            grad_clip=get_float(config, "grad_clip", cls.grad_clip, low=0.0),
            grad_accum=get_int(config, "grad_accum", cls.grad_accum, low=1),
            prune_amount=prune_amount,
            prune_finetune_epochs=prune_finetune_epochs,
            channels_last=get_bool(config, "channels_last", cls.channels_last),
            cudnn_benchmark=get_bool(config, "cudnn_benchmark", cls.cudnn_benchmark),
            tf32=get_bool(config, "tf32", cls.tf32),
            non_blocking=get_bool(config, "non_blocking", cls.non_blocking),
            compile=get_bool(config, "compile", cls.compile),
            data_on_device=get_choice(
                config, "data_on_device", cls.data_on_device, DATA_PLACEMENTS
            ),
            loader_workers=get_int(config, "loader_workers", cls.loader_workers, low=0),
            plateau_patience=get_int(config, "plateau_patience", cls.plateau_patience, low=0),
            plateau_min_delta=get_float(
                config, "plateau_min_delta", cls.plateau_min_delta, low=0.0
            ),
            plateau_metric=get_choice(
                config, "plateau_metric", cls.plateau_metric, PLATEAU_METRICS
            ),
        )
