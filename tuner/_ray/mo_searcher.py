"""The fidelity-correct Optuna searcher for a campaign with several objectives.

:class:`FidelityOptunaSearch` with ``metric`` and ``mode`` lists (Ray's ``OptunaSearch``
then creates a study with one direction per metric). What changes:

- Each epoch's values go to the Optuna trial as the user attribute
  ``epoch_values.<epoch>`` (the list of the objectives' values), since Optuna refuses
  ``trial.report`` in a multi-objective study (:mod:`tuner.front`).
- A trial is COMPLETE only at ``max_epochs`` with a finite value of every objective, and is
  told the whole vector; a trial stopped earlier is PRUNED (its per-epoch vectors stay in
  its attributes); a last result missing one of the metrics is a FAIL naming that metric.
- After a restore, the epochs the study already has, and the last result of a trial
  stopped before it ran again, are read from those attributes.
"""

from __future__ import annotations

import math
from typing import Any

import optuna

from tuner._ray.searcher import FidelityOptunaSearch
from tuner.front import epoch_attr, epoch_values
from tuner.outcome import Decision, ErrorInfo, Outcome, decide_outcome

__all__ = ["MultiObjectiveOptunaSearch"]


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class MultiObjectiveOptunaSearch(FidelityOptunaSearch):
    """``FidelityOptunaSearch`` for ``metric``/``mode`` lists (see the module docstring).

    Args:
        metric: The objectives' metric names, primary first.
        mode: ``"min"`` or ``"max"`` for each.
        **kwargs: Passed to :class:`FidelityOptunaSearch`.
    """

    def __init__(self, *, metric: list[str], mode: list[str], **kwargs: Any) -> None:
        if len(metric) < 2 or len(metric) != len(mode):
            raise ValueError(
                f"`metric` and `mode` must be lists of the same length >= 2, but got "
                f"{metric=}, {mode=}."
            )
        super().__init__(metric=list(metric), mode=list(mode), **kwargs)
        self._metrics = list(metric)

    @property
    def metrics(self) -> list[str]:
        """The objectives' metric names."""
        return list(self._metrics)

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        if trial_id in self._completed_trials or trial_id in self._already_final:
            return
        ot_trial = self._ot_trials.get(trial_id)
        epoch = result.get(self._epoch_attr)
        if ot_trial is None or not _number(epoch):
            return
        values = [result.get(m) for m in self.metrics]
        if not all(_number(v) for v in values):
            return
        vector = [float(v) for v in values]  # type: ignore[arg-type]  # numbers, checked
        step = int(epoch)  # type: ignore[arg-type]
        seen = self._reported.setdefault(trial_id, set())
        if step in seen or any(math.isnan(v) for v in vector):
            return
        seen.add(step)
        ot_trial.set_user_attr(epoch_attr(step), vector)

    def _decide(
        self, result: dict[str, Any] | None, error: bool, error_info: ErrorInfo | None
    ) -> tuple[Decision, str]:
        """The first objective whose decision is not COMPLETE decides (a FAIL before a
        PRUNED); the primary's decision otherwise."""
        decisions = [
            (
                decide_outcome(
                    result,
                    error=error,
                    metric=metric,
                    max_epochs=self._max_epochs,
                    epoch_attr=self._epoch_attr,
                    error_info=error_info,
                ),
                metric,
            )
            for metric in self.metrics
        ]
        for outcome in (Outcome.FAIL, Outcome.PRUNED):
            for decision, metric in decisions:
                if decision.outcome is outcome:
                    return decision, metric
        return decisions[0]

    def _told_values(
        self, decision: Decision, result: dict[str, Any] | None
    ) -> float | list[float] | None:
        if decision.outcome is not Outcome.COMPLETE or result is None:
            return None
        return [float(result[m]) for m in self.metrics]

    def _reported_epochs(self, frozen: optuna.trial.FrozenTrial) -> set[int]:
        return set(epoch_values(frozen.user_attrs))

    def _result_from_study(self, ot_trial: Any) -> dict[str, Any] | None:
        study: optuna.Study = self._ot_study  # type: ignore[assignment]
        frozen = study._storage.get_trial(ot_trial._trial_id)
        recorded = epoch_values(frozen.user_attrs)
        if not recorded:
            return None
        last = max(recorded)
        return {**dict(zip(self.metrics, recorded[last], strict=True)), self._epoch_attr: last}
