"""Search-space parameters: typed, frozen, and round-trippable to the YAML schema."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

from tuner.spec._frozen import freeze, thaw

__all__ = [
    "CategoricalParam",
    "Condition",
    "FixedParam",
    "FloatParam",
    "IntParam",
    "Param",
    "Space",
    "same_value",
]

# Relative tolerance when checking that a float lies on a step grid.
_STEP_RTOL = 1e-9


def same_value(a: Any, b: Any) -> bool:
    """Equality that tells ``True`` from ``1`` and ``1`` from ``1.0`` (YAML keeps them apart)."""
    return type(a) is type(b) and bool(a == b)


@dataclass(frozen=True, slots=True)
class Condition:
    """``parent`` must take one of ``values`` for the owning parameter to be active."""

    parent: str
    values: tuple[Any, ...]

    def holds(self, config: Mapping[str, Any]) -> bool:
        """Whether the chosen ``config`` satisfies this condition (absent parent: no)."""
        if self.parent not in config:
            return False
        chosen = config[self.parent]
        return any(same_value(chosen, value) for value in self.values)


def _when_to_dict(when: tuple[Condition, ...]) -> dict[str, Any]:
    return {"when": {c.parent: list(c.values) for c in when}} if when else {}


def _on_step(value: float, low: float, step: float) -> bool:
    ratio = (value - low) / step
    return abs(ratio - round(ratio)) <= _STEP_RTOL * max(1.0, abs(ratio))


@dataclass(frozen=True, slots=True)
class FloatParam:
    """A float in ``[low, high]``, optionally log-uniform or on a ``step`` grid."""

    kind: ClassVar[str] = "float"
    name: str
    low: float
    high: float
    log: bool = False
    step: float | None = None
    when: tuple[Condition, ...] = ()

    def contains(self, value: Any) -> bool:
        """Whether ``value`` is a float this parameter can take."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if not self.low <= value <= self.high:
            return False
        return self.step is None or _on_step(value, self.low, self.step)

    def is_active(self, config: Mapping[str, Any]) -> bool:
        """Whether all ``when`` conditions hold for the values chosen so far."""
        return all(c.holds(config) for c in self.when)

    def to_dict(self) -> dict[str, Any]:
        """The parameter in the campaign-file schema."""
        out: dict[str, Any] = {"type": "float", "low": self.low, "high": self.high}
        if self.log:
            out["log"] = True
        if self.step is not None:
            out["step"] = self.step
        return out | _when_to_dict(self.when)


@dataclass(frozen=True, slots=True)
class IntParam:
    """An integer in ``[low, high]`` on a ``step`` grid, optionally log-uniform."""

    kind: ClassVar[str] = "int"
    name: str
    low: int
    high: int
    log: bool = False
    step: int = 1
    when: tuple[Condition, ...] = ()

    def contains(self, value: Any) -> bool:
        """Whether ``value`` is an int this parameter can take."""
        return (
            type(value) is int
            and self.low <= value <= self.high
            and (value - self.low) % self.step == 0
        )

    def is_active(self, config: Mapping[str, Any]) -> bool:
        """Whether all ``when`` conditions hold for the values chosen so far."""
        return all(c.holds(config) for c in self.when)

    def to_dict(self) -> dict[str, Any]:
        """The parameter in the campaign-file schema."""
        out: dict[str, Any] = {"type": "int", "low": self.low, "high": self.high}
        if self.log:
            out["log"] = True
        if self.step != 1:
            out["step"] = self.step
        return out | _when_to_dict(self.when)


@dataclass(frozen=True, slots=True)
class CategoricalParam:
    """One of a tuple of scalar ``choices`` (str, int, float, bool or None)."""

    kind: ClassVar[str] = "categorical"
    name: str
    choices: tuple[Any, ...]
    when: tuple[Condition, ...] = ()

    def contains(self, value: Any) -> bool:
        """Whether ``value`` is one of the choices (``True`` is not ``1``)."""
        return any(same_value(value, choice) for choice in self.choices)

    def is_active(self, config: Mapping[str, Any]) -> bool:
        """Whether all ``when`` conditions hold for the values chosen so far."""
        return all(c.holds(config) for c in self.when)

    def to_dict(self) -> dict[str, Any]:
        """The parameter in the campaign-file schema."""
        return {"type": "categorical", "choices": list(self.choices)} | _when_to_dict(self.when)


@dataclass(frozen=True, slots=True)
class FixedParam:
    """A constant; ``value`` is frozen deeply (lists as tuples, mappings as FrozenDict)."""

    kind: ClassVar[str] = "fixed"
    name: str
    value: Any
    when: tuple[Condition, ...] = ()

    def contains(self, value: Any) -> bool:
        """Whether ``value`` equals the constant (lists and tuples compare alike)."""
        return same_value(freeze(value), self.value)

    def is_active(self, config: Mapping[str, Any]) -> bool:
        """Whether all ``when`` conditions hold for the values chosen so far."""
        return all(c.holds(config) for c in self.when)

    def to_dict(self) -> dict[str, Any]:
        """The parameter in the campaign-file schema."""
        return {"type": "fixed", "value": thaw(self.value)} | _when_to_dict(self.when)


Param: TypeAlias = FloatParam | IntParam | CategoricalParam | FixedParam


@dataclass(frozen=True, slots=True)
class Space:
    """The search space: parameters in topological order (parents before children).

    Parameters without conditions among each other keep their file order.
    """

    params: tuple[Param, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """Parameter names in topological order."""
        return tuple(p.name for p in self.params)

    def __getitem__(self, name: str) -> Param:
        for param in self.params:
            if param.name == name:
                return param
        raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        return any(p.name == name for p in self.params)

    def __iter__(self) -> Iterator[Param]:
        return iter(self.params)

    def __len__(self) -> int:
        return len(self.params)

    @property
    def is_finite(self) -> bool:
        """Whether every parameter takes finitely many values (floats need a step)."""
        return all(not isinstance(p, FloatParam) or p.step is not None for p in self.params)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """The ``space:`` section of the campaign-file schema."""
        return {p.name: p.to_dict() for p in self.params}
