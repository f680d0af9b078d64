"""Shared test fixtures: small campaign dicts for fast Ray runs."""

from __future__ import annotations

from typing import Any

import pytest


def tiny_digits_campaign(**overrides: Any) -> dict[str, Any]:
    """A digits campaign small enough for a test: seconds per trial on one CPU."""
    data: dict[str, Any] = {
        "name": "tiny-digits",
        "trainable": "digits_cnn",
        "metric": "val_acc",
        "mode": "max",
        "space": {
            "lr": {"type": "float", "low": 1.0e-3, "high": 3.0e-2, "log": True},
            "optimizer": {"type": "categorical", "choices": ["adam", "sgd"]},
            "momentum": {"type": "float", "low": 0.5, "high": 0.95, "when": {"optimizer": "sgd"}},
            "channels": {"type": "int", "low": 8, "high": 16, "step": 8},
        },
        "budget": {"trials": 8, "max_epochs": 4},
        "scheduler": {"type": "asha", "grace_period": 1, "reduction_factor": 2},
        "sampler": {"type": "tpe", "seed": 0, "startup_trials": 4},
        "resources": {"cpu": 1, "gpu": 0},
        "checkpoint": {"every": 1, "keep": 2},
        "fixed": {"batch_size": 64},
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return data


@pytest.fixture
def tiny_campaign() -> dict[str, Any]:
    return tiny_digits_campaign()
