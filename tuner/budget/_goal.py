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
        part = self.reached(result)
        return None if part is None else f"goal reached: {part} (trial {trial_id})"

    def reached(self, result: Mapping[str, Any]) -> str | None:
        """``metric=value >= goal`` when ``result`` meets the goal, else None."""
        got = result.get(self.metric)
        if not isinstance(got, (int, float)) or isinstance(got, bool) or math.isnan(got):
            return None
        if not (got >= self.value if self.maximize else got <= self.value):
            return None
        sign = ">=" if self.maximize else "<="
        return f"{self.metric}={got:.6g} {sign} {self.value:g}"


@dataclass(frozen=True, slots=True)
class Goals:
    """One goal per objective of a multi-objective campaign, all met by one result."""

    goals: tuple[Goal, ...]

    def met(self, trial_id: str, result: Mapping[str, Any]) -> str | None:
        """Why the campaign stops at ``result`` of ``trial_id`` (every goal met), or None."""
        parts = [goal.reached(result) for goal in self.goals]
        if any(part is None for part in parts):
            return None
        return f"goal reached: {' and '.join(str(p) for p in parts)} (trial {trial_id})"
