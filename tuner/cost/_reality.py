"""Predicted against actual: what a campaign was expected to cost, and what it did cost.

At the start of ``tuner run`` the ASHA work model predicts trial-epochs (and, with a
profile, trial-seconds, GPU-hours and dollars at the campaign's rate); the prediction is
written to ``prediction.json`` before the first trial runs, so it cannot be tuned after
the fact. At the end the run's own profile (its trials' results) gives the actual figures
and ``summary.json`` carries both side by side.

Pure: no Ray, no torch.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from tuner.cost._profile import Profile
from tuner.cost._work import AshaGeometry, estimate_work

__all__ = ["actual_cost", "compare", "format_comparison", "predict_cost", "read_prediction"]

PREDICTION_FILE = "prediction.json"
_ROWS = (
    ("trial_epochs", "trial-epochs", "{:.0f}"),
    ("trial_s", "trial-seconds", "{:.1f}"),
    ("gpu_h", "GPU-hours", "{:.4g}"),
    ("usd", "USD", "{:.4g}"),
)


def predict_cost(
    geometry: AshaGeometry,
    *,
    workers: int,
    gpus_per_trial: float,
    usd_per_gpu_hour: float,
    profile: Profile | None = None,
    runs: int = 500,
) -> dict[str, Any]:
    """The campaign's predicted work, and its time and money when a profile is given.

    Args:
        geometry: Trials, epochs and rungs.
        workers: Trials at once.
        gpus_per_trial: GPUs each trial holds (0 for CPU trials).
        usd_per_gpu_hour: Price of a GPU-hour (0 for a local run).
        profile: A profile of the trainable measured on this kind of device.
        runs: Simulated ASHA runs.
    """
    epoch_s = profile.epoch_s if profile is not None else 1.0
    work = estimate_work(
        geometry,
        epoch_s=epoch_s,
        startup_s=profile.startup_s if profile is not None else 0.0,
        cold_start_s=profile.cold_start_s if profile is not None else 0.0,
        workers=workers,
        runs=runs,
    )
    out: dict[str, Any] = {
        "trial_epochs": work.trial_epochs,
        "trial_epochs_sd": work.trial_epochs_sd,
        "workers": work.workers,
        "gpus_per_trial": gpus_per_trial,
        "usd_per_gpu_hour": usd_per_gpu_hour,
        "profile": None,
    }
    if profile is not None:
        gpu_h = work.gpu_h(gpus_per_trial)
        out |= {
            "trial_s": work.trial_s,
            "wall_s": work.wall_s,
            "gpu_h": gpu_h,
            "usd": gpu_h * usd_per_gpu_hour,
            "epoch_s": profile.epoch_s,
            "profile": f"{profile.source} on {profile.gpu_name or profile.device}",
        }
    return out


def actual_cost(
    run_profile: Profile, *, gpus_per_trial: float, usd_per_gpu_hour: float, wall_s: float | None
) -> dict[str, Any]:
    """What the run consumed, from its trials' results (``profile.json``)."""
    trial_s = sum(t.total_s for t in run_profile.trials)
    gpu_h = trial_s * gpus_per_trial / 3600.0
    return {
        "trial_epochs": sum(t.epochs for t in run_profile.trials),
        "trial_s": trial_s,
        "wall_s": wall_s,
        "gpu_h": gpu_h,
        "usd": gpu_h * usd_per_gpu_hour,
        "epoch_s": run_profile.epoch_s,
    }


def compare(predicted: dict[str, Any], actual: dict[str, Any]) -> dict[str, Any]:
    """Both sides and the relative error (predicted / actual - 1) of each figure."""
    error = {}
    for key, _, _ in _ROWS:
        p, a = predicted.get(key), actual.get(key)
        if isinstance(p, int | float) and isinstance(a, int | float) and a > 0:
            error[key] = p / a - 1.0
    return {"predicted": predicted, "actual": actual, "error": error}


def format_comparison(comparison: dict[str, Any]) -> str:
    """A small table: figure, predicted, actual, error."""
    predicted, actual, error = (comparison[k] for k in ("predicted", "actual", "error"))
    lines = [f"{'predicted vs actual':<20}{'predicted':>12}{'actual':>12}{'error':>9}"]
    cpu_trials = not predicted.get("gpus_per_trial")
    for key, label, fmt in _ROWS:
        a = actual.get(key)
        if a is None or (cpu_trials and key in ("gpu_h", "usd")):
            continue
        p = predicted.get(key)
        p_text = fmt.format(p) if isinstance(p, int | float) and math.isfinite(p) else "-"
        e = error.get(key)
        lines.append(
            f"{label:<20}{p_text:>12}{fmt.format(a):>12}"
            + (f"{e:>+9.1%}" if e is not None else f"{'':>9}")
        )
    if cpu_trials:
        lines.append("(CPU trials: no GPU-hours or GPU dollars to compare)")
    source = predicted.get("profile")
    lines.append(
        f"(times predicted from {source})"
        if source
        else "(no profile given at start: only the work was predicted; "
        "`tuner run --profile P` predicts time and money too)"
    )
    return "\n".join(lines)


def read_prediction(run_dir: Path) -> dict[str, Any] | None:
    """The prediction a run wrote at its start, or None."""
    path = run_dir / PREDICTION_FILE
    if not path.is_file():
        return None
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data
