"""``tuner profile``'s measurement without Ray, and the cost model's prediction set against it.

``tuner profile`` (:func:`tuner.profile`) runs a few short trials one at a time on one
reused Ray worker and builds the profile from the result rows Ray writes per trial
(``trial_*/result.json``: every report plus ``time_this_iter_s``, ``time_total_s``,
``timestamp``, ``pid`` and ``trial_id``) with :func:`tuner.cost.profile_from_run`. Here
the same trials run in this process through a :class:`~trainables._session.LocalSession`
that writes those rows itself, timed the way Ray times a function trainable (wall time
between reports, the first from the trial's start), and the same
:func:`~tuner.cost.profile_from_run` reads them. The one difference: Ray's first trial on a
fresh worker also pays the worker's imports, which this process paid before.

The trials train one configuration, as ``tuner profile --config`` does: the campaign
file's ``fixed`` settings and the trainable's defaults (the random draws of a plain
``tuner profile`` need Optuna).

Pure apart from running the trainable: no Ray, no Optuna.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainables._session import LocalSession
from tuner.contract import CHECKPOINT_EVERY_KEY, DEVICE_KEY, MAX_EPOCHS_KEY, SEED_KEY

if TYPE_CHECKING:
    from tuner.cost import Profile
    from tuner.spec import CampaignSpec

__all__ = [
    "SOURCE",
    "ClockedSession",
    "campaign_for",
    "compare",
    "measure_profile",
    "profile_config",
]

SOURCE = "bench/gpu_check (tuner profile's trials, run without Ray)"
Trainable = Callable[[dict[str, Any], LocalSession], None]


class ClockedSession(LocalSession):
    """A LocalSession that keeps each report as Ray's result row of a function trainable.

    Args:
        trial_id: The trial's id in the rows.
        root: Where checkpoint copies go (see :class:`LocalSession`).
        kwargs: Passed to :class:`LocalSession` (``use_gpus``, ``cpus``).
    """

    def __init__(self, trial_id: str, root: Path, **kwargs: Any) -> None:
        super().__init__(root, **kwargs)
        self.trial_id = trial_id
        self.rows: list[dict[str, Any]] = []
        self._started = self._last = time.perf_counter()

    def start(self) -> None:
        """Marks the trial's start (the first row's ``time_this_iter_s`` counts from here)."""
        self._started = self._last = time.perf_counter()

    def report(self, metrics: dict[str, Any], checkpoint_dir: str | None) -> None:
        """Records the report (copying the checkpoint, as Ray does) and its result row."""
        super().report(metrics, checkpoint_dir)
        now = time.perf_counter()
        self.rows.append(
            {
                **metrics,
                "trial_id": self.trial_id,
                "training_iteration": len(self.rows) + 1,
                "time_this_iter_s": now - self._last,
                "time_total_s": now - self._started,
                "timestamp": int(time.time()),
                "pid": os.getpid(),
            }
        )
        self._last = now


def profile_config(spec: CampaignSpec, epochs: int) -> dict[str, Any]:
    """The config of a profiling trial of ``spec``: its fixed settings and the service keys."""
    return {
        **dict(spec.fixed),
        MAX_EPOCHS_KEY: epochs,
        SEED_KEY: spec.sampler.seed if spec.sampler.seed is not None else 0,
        CHECKPOINT_EVERY_KEY: spec.checkpoint.every,
    }


def campaign_for(trainable: str, folder: Path) -> CampaignSpec:
    """The first campaign file in ``folder`` (by name) that trains ``trainable``.

    Raises:
        ValueError: No campaign file there names it.
    """
    from tuner.spec import load_campaign

    for path in sorted(folder.glob("*.yaml")):
        spec = load_campaign(path, check_trainable=False)
        if spec.trainable == trainable:
            return spec
    raise ValueError(f"no campaign file in {folder} trains {trainable!r}.")


def measure_profile(
    train: Trainable,
    config: Mapping[str, Any],
    *,
    campaign: str,
    trainable: str,
    trials: int,
    device: str,
    cpus: int | None,
    root: Path,
) -> Profile:
    """Runs ``trials`` trials of ``config`` one after another and reads them as a profile.

    Args:
        train: The trainable (``fn(config, session)``).
        config: The trial config (:func:`profile_config`); ``tuner_device`` is set here.
        campaign: The campaign's name, kept on the profile.
        trainable: The campaign's trainable, kept on the profile.
        trials: Trials to run.
        device: "cuda" or "cpu".
        cpus: Torch threads per trial (the campaign's CPUs per trial, as Ray gives them).
        root: An empty folder for the trials' rows and checkpoints.

    Raises:
        ValueError: ``trials`` is below 1.
    """
    from tuner.cost import profile_from_run

    if trials < 1:
        raise ValueError(f"`trials` must be >= 1, but got {trials!r}.")
    trial_config = {**config, DEVICE_KEY: device}
    for i in range(trials):
        trial_dir = root / f"trial_{i:05d}"
        trial_dir.mkdir(parents=True)
        session = ClockedSession(
            f"{i:05d}", trial_dir / "checkpoints", use_gpus=device == "cuda", cpus=cpus
        )
        session.start()
        train(dict(trial_config), session)
        (trial_dir / "params.json").write_text(json.dumps(trial_config), encoding="utf-8")
        lines = "".join(json.dumps(row, default=str) + "\n" for row in session.rows)
        (trial_dir / "result.json").write_text(lines, encoding="utf-8")
    return profile_from_run(root, campaign=campaign, trainable=trainable, source=SOURCE)


def compare(predicted: float | None, measured: float | None) -> dict[str, float | None]:
    """A prediction against its measurement: both, their ratio and the signed error in %.

    ``error_pct`` is ``(predicted / measured - 1) * 100``: positive when the model
    predicted more than was measured. None where either side is missing, not finite or
    not above 0.
    """

    def usable(x: float | None) -> bool:
        return x is not None and math.isfinite(x) and x > 0

    if predicted is None or measured is None or not (usable(predicted) and usable(measured)):
        return {"predicted": predicted, "measured": measured, "ratio": None, "error_pct": None}
    ratio = predicted / measured
    return {
        "predicted": predicted,
        "measured": measured,
        "ratio": ratio,
        "error_pct": (ratio - 1.0) * 100.0,
    }
