"""What the rest of a running campaign should take: trial-epochs, wall time, dollars and
GPU-hours, from the cost model's work estimate corrected by the epochs its trials used
(:func:`tuner.cost.cost_to_finish`). Pure: the budget guard feeds it what it observed."""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any

from tuner.cost import AshaGeometry, WorkEstimate, cost_to_finish, estimate_work

__all__ = ["Forecast"]


class Forecast:
    """The rest of a campaign of ``geometry``, ``workers`` trials at a time.

    The work estimate (a replay of ASHA's rule over simulated runs) is made at the measured
    epoch time and made again only when that moves by more than ``refresh`` (10%).
    """

    def __init__(
        self, geometry: AshaGeometry, *, workers: int, runs: int = 100, refresh: float = 0.1
    ) -> None:
        self._geometry = geometry
        self._workers = max(1, workers)
        self._runs = runs
        self._refresh = refresh
        self._estimate: WorkEstimate | None = None

    def estimate(self, epoch_s: float) -> WorkEstimate:
        """The campaign's work estimate at ``epoch_s`` seconds per trial-epoch."""
        cached = self._estimate
        if cached is None or abs(cached.epoch_s - epoch_s) > self._refresh * cached.epoch_s:
            cached = estimate_work(
                self._geometry, epoch_s=epoch_s, workers=self._workers, runs=self._runs
            )
            self._estimate = cached
        return cached

    def rest(
        self,
        *,
        epoch_s: float,
        progress: Mapping[str, tuple[int, float]],
        running: Set[str],
        done: int,
        usd_per_trial_s: float,
        gpu_h_per_trial_s: float,
    ) -> dict[str, Any]:
        """``{"trial_epochs", "wall_s", "usd", "gpu_hours"}`` still to come.

        Args:
            epoch_s: Measured seconds per trial-epoch.
            progress: Per trial that reported: epochs done and seconds they took.
            running: Trials running now (the rest of ``progress`` ended).
            done: Trials ended (may run ahead of ``progress``: trials that never reported).
            usd_per_trial_s: Dollars per trial-second.
            gpu_h_per_trial_s: GPU-hours per trial-second.
        """
        estimate = self.estimate(epoch_s)
        trials = estimate.geometry.trials
        done = min(done, trials)
        finished_epochs = sum(e for t, (e, _) in progress.items() if t not in running)
        running_epochs = sum(e for t, (e, _) in progress.items() if t in running)
        rest = cost_to_finish(
            estimate,
            trials_finished=done,
            finished_epochs=finished_epochs,
            trials_running=min(len(running), trials - done),
            running_epochs=running_epochs,
        )
        trial_s = rest.trial_epochs * epoch_s
        return {
            "trial_epochs": round(rest.trial_epochs, 1),
            "wall_s": round(rest.wall_s, 1),
            "usd": round(trial_s * usd_per_trial_s, 4),
            "gpu_hours": round(trial_s * gpu_h_per_trial_s, 4),
        }
