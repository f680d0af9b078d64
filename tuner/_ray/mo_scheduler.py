"""MO-ASHA: :class:`~tuner._ray.scheduler.PersistentASHA` for several objectives.

Each rung records the vector of the objectives' values of every trial that reached it (as
the user wrote them: ``scheduler_state.json`` holds ``{"trial_id": [val_acc, param_count]}``
per rung, and a resume reads them back like single-objective rungs). A trial reaching a rung
continues when it ranks in the top ``1 / reduction_factor`` of the rung's results by
non-dominated sorting and crowding distance (:func:`tuner.pareto.is_promotable`, after
Schmucker et al. 2021); otherwise it stops there. Waiting for peers works as in the single
objective scheduler: a trial that reaches a rung with fewer than ``min_peers`` other results
pauses there and is judged by the same rule once they exist.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ray.tune.schedulers import TrialScheduler

from tuner._ray.scheduler import PersistentASHA
from tuner.pareto import is_promotable

if TYPE_CHECKING:
    from ray.tune.execution.tune_controller import TuneController
    from ray.tune.experiment import Trial

__all__ = ["MultiObjectiveASHA"]


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class MultiObjectiveASHA(PersistentASHA):
    """ASHA whose rungs rank value vectors (see the module docstring).

    Tune gives it the primary metric and mode (``TuneConfig``), which it only uses for
    Tune's own checks; ``metrics`` and ``maximize`` say what the rungs compare.

    Args:
        metrics: The objectives' metric names, primary first.
        maximize: For each, whether larger is better.
        **kwargs: Passed to :class:`PersistentASHA`.
    """

    def __init__(self, *, metrics: Sequence[str], maximize: Sequence[bool], **kwargs: Any) -> None:
        if len(metrics) != len(maximize) or not metrics:
            raise ValueError(
                f"`metrics` and `maximize` must have the same length >= 1, but got "
                f"{metrics=}, {maximize=}."
            )
        super().__init__(**kwargs)
        self._metrics = tuple(metrics)
        self._maximize = tuple(maximize)

    def _has_values(self, result: dict[str, Any]) -> bool:
        return all(_number(result.get(m)) for m in self._metrics)

    def _rung_value(self, result: dict[str, Any]) -> list[float]:
        return [float(result[m]) for m in self._metrics]

    def _continues(self, value: Any, others: list[Any]) -> bool:
        return is_promotable(value, others, self._reduction_factor, self._maximize)

    def _record(self, trial: Trial, t: float, value: list[float]) -> str:
        """Records ``value`` at the highest rung ``t`` reached that lacks the trial, and
        says whether the trial continues from there (no new rung: it continues)."""
        for milestone, recorded in self._brackets[0]._rungs:
            if t < milestone or trial.trial_id in recorded:
                continue
            keep = self._continues(value, list(recorded.values()))
            recorded[trial.trial_id] = value
            return str(TrialScheduler.CONTINUE if keep else TrialScheduler.STOP)
        return str(TrialScheduler.CONTINUE)

    def _bracket_result(
        self, tune_controller: TuneController, trial: Trial, result: dict[str, Any]
    ) -> str:
        t = result.get(self._time_attr)
        if not isinstance(t, (int, float)) or isinstance(t, bool) or not self._has_values(result):
            return str(TrialScheduler.CONTINUE)
        if t >= self._max_t and self._stop_last_trials:
            action = str(TrialScheduler.STOP)
        else:
            action = self._record(trial, float(t), self._rung_value(result))
        if action == TrialScheduler.STOP:
            self._num_stopped += 1
        return action

    def _bracket_complete(
        self, tune_controller: TuneController, trial: Trial, result: dict[str, Any]
    ) -> None:
        t = result.get(self._time_attr)
        if isinstance(t, (int, float)) and not isinstance(t, bool) and self._has_values(result):
            self._record(trial, float(t), self._rung_value(result))
        self._trial_info.pop(trial.trial_id, None)

    def debug_string(self) -> str:
        rungs = ", ".join(
            f"{milestone:g}: {len(recorded)}" for milestone, recorded in self._brackets[0]._rungs
        )
        return f"MO-ASHA: num_stopped={self._num_stopped}, results per rung {rungs}"
