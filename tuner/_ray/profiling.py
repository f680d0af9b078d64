"""Runs ``tuner profile``'s campaign (:func:`tuner.cost.profile_spec`) in a temporary run
folder, its progress shown as it goes (:mod:`tuner.profile_view`), and reads its profile."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path
from typing import TextIO

from tuner import rundir
from tuner._ray.cluster import RayOptions
from tuner._ray.driver import run_campaign
from tuner._ray.profile_watch import ProfileWatch
from tuner.cost import Profile, profile_from_run
from tuner.profile_view import ProfileProgress
from tuner.spec import CampaignSpec

__all__ = ["measure_profile"]


def measure_profile(
    spec: CampaignSpec,
    measured: CampaignSpec,
    options: RayOptions,
    *,
    code_dirs: list[str],
    progress: TextIO | None = None,
) -> Profile:
    """The profile of ``spec``'s trainable from a run of ``measured``, its profiling
    campaign; ``progress``: where to show how far it is (None: nowhere)."""
    shown = ProfileProgress(
        progress or io.StringIO(),
        campaign=spec.name,
        trials=measured.budget.trials,
        epochs=measured.budget.max_epochs,
    )
    with (
        shown,
        tempfile.TemporaryDirectory(prefix="tuner-profile-") as tmp,
        rundir.code_dirs_on_path(code_dirs),
    ):
        run_dir = Path(tmp) / measured.name
        shown.phase("starting Ray")
        watch = [ProfileWatch(shown)]
        run_campaign(
            measured, run_dir, options, stream=io.StringIO(), code_dirs=code_dirs, watchers=watch
        )
        shown.phase("reading results")
        profile = profile_from_run(
            run_dir, campaign=spec.name, trainable=spec.trainable, source="tuner profile"
        )
        shown.phase("done")
        return profile
