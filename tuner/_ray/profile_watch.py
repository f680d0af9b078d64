"""``tuner profile``'s trials seen from Tune: each start and each epoch reported is told to
its :class:`~tuner.profile_view.ProfileProgress`; a Ray Tune callback run in the driver."""

from __future__ import annotations

from typing import Any

from ray.tune import Callback
from ray.tune.experiment import Trial

from tuner.contract import EPOCH_KEY
from tuner.profile_view import ProfileProgress

__all__ = ["ProfileWatch"]


class ProfileWatch(Callback):
    """Tells ``progress`` when a profiling trial starts and when it reports an epoch."""

    def __init__(self, progress: ProfileProgress) -> None:
        self._progress: ProfileProgress | None = progress

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles its callbacks with the experiment; the terminal view stays here.
        return {**self.__dict__, "_progress": None}

    def setup(self, *args: Any, **info: Any) -> None:
        if self._progress is not None:
            self._progress.phase("measuring")

    def on_trial_start(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        if self._progress is not None:
            self._progress.trial_started()

    def on_trial_result(
        self, iteration: int, trials: list[Trial], trial: Trial, result: dict[Any, Any], **info: Any
    ) -> None:
        epoch = result.get(EPOCH_KEY)
        if self._progress is not None and isinstance(epoch, int | float):
            self._progress.epoch_reported(int(epoch))
