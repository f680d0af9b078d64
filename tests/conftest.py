"""Shared test fixtures: small campaign dicts for fast Ray runs, pinned built-ins."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# Which tests may skip: the `gpu` and `no_gpu` markers; under CI=true any other skip fails.
pytest_plugins = ["tests.no_silent_skips"]

# Campaigns in tests skip the end-of-run report (~2 s of plotting each, ~100 campaigns);
# tests/tuner/report/ turns it back on where the report is what they check.
os.environ.setdefault("TUNER_NO_REPORT", "1")


def kill_session(sid: int) -> None:
    """SIGKILLs every process in session ``sid``: a CLI the test started and its Ray."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # the 6th field of /proc/PID/stat: session id
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(stat.parent.name), signal.SIGKILL)


def run_cli(args: list[str], *, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """Runs ``python -m tuner.cli ARGS`` in its own session; whatever it leaves is killed."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuner.cli", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        kill_session(proc.pid)
        proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


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


def live_campaign(run_dir: Path, **state: Any) -> Any:
    """A running campaign's state (tuner._ray.campaign.Campaign) of the tiny digits campaign,
    for driving the searcher, schedulers and callbacks by hand; ``state`` sets its fields
    (``watch``, ``guard``, ``stop_key``...)."""
    from tuner._ray.campaign import Campaign
    from tuner.spec import parse_campaign

    spec = parse_campaign(tiny_digits_campaign(), check_trainable=False)
    return Campaign(spec=spec, run_dir=run_dir, **state)


@pytest.fixture
def tiny_campaign() -> dict[str, Any]:
    return tiny_digits_campaign()


@pytest.fixture
def pinned_builtins(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pin the built-in trainables so messages listing them stay exact."""
    import trainables

    monkeypatch.setattr(
        trainables,
        "BUILTINS",
        {"digits_cnn": "trainables.digits:train", "tabular_mlp": "trainables.tabular:train"},
    )


def files_under(root: Path) -> set[Path]:
    """Every path under ``root`` but Python's bytecode caches (of a trainable's import)."""
    return {p for p in root.rglob("*") if "__pycache__" not in p.parts}
