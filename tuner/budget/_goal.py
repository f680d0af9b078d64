"""A campaign's goal (``budget.goal``): the value of its metric that is good enough. Pure:
the budget guard asks it about each result and stops the campaign when it is met."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Goal", "Goals"]


@dataclass(frozen=True, slots=True)
class Goal:
    """``metric`` reaching ``value`` (at least it when ``maximize``, at most it otherwise)."""

    metric: str
    value: float
    maximize: bool

    def met(self, trial_id: str, result: Mapping[str, Any]) -> str | None:
        """Why the campaign stops at ``result`` of ``trial_id`` (its reason), or None."""
        got = result.get(self.metric)
        if not isinstance(got, (int, float)) or isinstance(got, bool) or math.isnan(got):
            return None
        reached = got >= self.value if self.maximize else got <= self.value
        if not reached:
            return None
        sign = ">=" if self.maximize else "<="
        return f"goal reached: {self.metric}={got:.6g} {sign} {self.value:g} (trial {trial_id})"


@dataclass(frozen=True, slots=True)
class Goals:
    """One goal per objective of a multi-objective campaign, all met by one result."""

    goals: tuple[Goal, ...]

    def met(self, trial_id: str, result: Mapping[str, Any]) -> str | None:
        """Why the campaign stops at ``result`` of ``trial_id`` (every goal met), or None."""
        parts = []
        for goal in self.goals:
            reason = goal.met(trial_id, result)
            if reason is None:
                return None
            sign = ">=" if goal.maximize else "<="
            parts.append(f"{goal.metric}={result[goal.metric]:.6g} {sign} {goal.value:g}")
        return f"goal reached: {' and '.join(parts)} (trial {trial_id})"
