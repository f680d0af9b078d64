"""The trainable contract: what tuner and a trainable agree on, spelled once.

A trainable is any importable ``module:function`` with the signature
``fn(config: dict) -> None``. Both sides import this module: tuner to fill in a trial's
config and read its reports, the built-in trainables (and any user trainable that wants the
names) to read the config and report.

- **Config in.** ``config`` holds the trial's hyperparameters, the campaign's ``fixed``
  settings and the service's own keys, all named with :data:`RESERVED_PREFIX`
  (:data:`CONFIG_KEYS`). A data-parallel trial (``resources.workers > 1``) runs under Ray
  Train's ``TorchTrainer``, which hands the same dict to every worker; Tune then holds it
  under :data:`TRAIN_LOOP_CONFIG`.
- **Reports out.** One ``ray.tune.report(metrics, checkpoint=...)`` per epoch, with
  :data:`EPOCH_KEY` (1-based) and the campaign's metric. A trial that ends itself (it
  diverged, it plateaued) adds :data:`STOP_REASON_KEY`. Other report keys the service reads
  are named below; every other key is the trainable's own.
- **Stop signal.** When the campaign's budget is spent, the driver writes the reason under
  ``config[STOP_KEY]`` in Ray's key-value store (namespace :data:`STOP_NAMESPACE`); a trial
  that reads it checkpoints and stops after its epoch.
- **Checkpoints.** A checkpoint is a directory holding :data:`CHECKPOINT_FILE` (the state)
  and :data:`MANIFEST_FILE` (its size and SHA-256, written last); restore with
  ``ray.tune.get_checkpoint()``.

No imports beyond the standard library: this module is loaded in every trial.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "CHECKPOINT_EVERY_KEY",
    "CHECKPOINT_FALLBACK_KEY",
    "CHECKPOINT_FILE",
    "CONFIG_KEYS",
    "DEVICE_KEY",
    "EPOCH_END_KEY",
    "EPOCH_KEY",
    "MANIFEST_FILE",
    "MAX_EPOCHS_KEY",
    "RESERVED_PREFIX",
    "SEED_KEY",
    "STOP_KEY",
    "STOP_NAMESPACE",
    "STOP_REASON_KEY",
    "TRAINABLE_KEY",
    "TRAIN_LOOP_CONFIG",
    "WORKERS_KEY",
    "hyperparameters",
    "is_reserved",
]

RESERVED_PREFIX = "tuner_"
"""Every key the service adds to a config or a report starts with this; a search space
parameter, a fixed setting or the campaign's metric may not."""

# -- config keys the service sets ----------------------------------------------------------
TRAINABLE_KEY = "tuner_trainable"
"""The ``module:function`` the trial runs (read by the trial wrapper)."""
MAX_EPOCHS_KEY = "tuner_max_epochs"
"""Epochs a trial trains at most (``budget.max_epochs``)."""
SEED_KEY = "tuner_seed"
"""The trial's seed (``sampler.seed``, 0 when unset)."""
CHECKPOINT_EVERY_KEY = "tuner_checkpoint_every"
"""Epochs between checkpoints (``checkpoint.every``)."""
DEVICE_KEY = "tuner_device"
"""``auto``, ``cpu`` or ``cuda`` in a config; the device a trial trained on in a report."""
WORKERS_KEY = "tuner_workers"
"""Data-parallel workers of the trial, set when more than one."""
STOP_KEY = "tuner_stop_key"
"""Key of the campaign's stop signal in Ray's key-value store."""

CONFIG_KEYS = (
    MAX_EPOCHS_KEY,
    SEED_KEY,
    CHECKPOINT_EVERY_KEY,
    DEVICE_KEY,
    TRAINABLE_KEY,
    WORKERS_KEY,
    STOP_KEY,
)
"""The service's config keys; every other key of a config is a hyperparameter or a fixed
setting."""

TRAIN_LOOP_CONFIG = "train_loop_config"
"""Where Ray Train's ``TorchTrainer`` (data-parallel trials) takes the config."""

# -- report keys the service reads ---------------------------------------------------------
EPOCH_KEY = "epoch"
"""The epoch a report closes, 1-based: ASHA's time attribute and Optuna's step."""
STOP_REASON_KEY = "tuner_stop_reason"
"""Reported by a trial that ends itself (divergence, plateau, a spent budget)."""
EPOCH_END_KEY = "tuner_epoch_end_unix_s"
"""When the epoch's score was known (Unix seconds, to the microsecond)."""
CHECKPOINT_FALLBACK_KEY = "tuner_checkpoint_fallback"
"""First report of a run whose checkpoint was bad: ``"<bad> -> <used>"``."""

# -- stop signal and checkpoints -----------------------------------------------------------
STOP_NAMESPACE = "tuner"
"""Namespace of the stop signal in Ray's key-value store."""
CHECKPOINT_FILE = "state.pt"
"""The state file of a checkpoint directory."""
MANIFEST_FILE = "manifest.json"
"""A checkpoint's manifest: the size and SHA-256 of each file, written last."""


def is_reserved(key: object) -> bool:
    """Whether ``key`` is one of the service's (starts with :data:`RESERVED_PREFIX`)."""
    return isinstance(key, str) and key.startswith(RESERVED_PREFIX)


def hyperparameters(config: Mapping[str, Any]) -> dict[str, Any]:
    """A trial's config without the service's keys (and out of Ray Train's nesting)."""
    inner = config.get(TRAIN_LOOP_CONFIG, config)
    if not isinstance(inner, Mapping):
        inner = config
    return {k: v for k, v in inner.items() if not is_reserved(k)}
