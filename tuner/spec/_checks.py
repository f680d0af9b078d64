"""Primitive validators shared by the campaign and space parsers.

Each check returns the value converted to its Python type or raises SpecError naming the
source, the key path, the rule and the value. Booleans are never numbers here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from enum import Enum
from typing import Any, NoReturn, TypeVar

from tuner.contract import RESERVED_PREFIX
from tuner.errors import SpecError, closest

E = TypeVar("E", bound=Enum)

__all__ = ["RESERVED_PREFIX", "Checker", "join"]


def join(path: str, key: object) -> str:
    """Dotted key path of ``key`` under ``path``."""
    return f"{path}.{key}" if path else str(key)


class Checker:
    """Validators bound to one ``source`` (a file path, ``"<cli>"`` or ``"<dict>"``)."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, problem: str, **details: Any) -> NoReturn:
        """Raise a SpecError at ``path``; ``details`` are SpecError keyword fields."""
        raise SpecError(self.source, path, problem, **details)

    def mapping(self, value: Any, path: str, *, fix: str | None = None) -> Mapping[str, Any]:
        """A mapping whose keys are all strings."""
        if not isinstance(value, Mapping):
            self.fail(path or "top level", "must be a mapping", got=value, fix=fix)
        for key in value:
            if not isinstance(key, str):
                self.fail(join(path, key), "keys must be strings", got=key)
        return value

    def keys(
        self,
        data: Mapping[str, Any],
        path: str,
        allowed: Iterable[str],
        required: Iterable[str] = (),
    ) -> None:
        """Reject unknown keys (suggesting the closest) and report missing required ones."""
        allowed = list(allowed)
        for key in data:
            if key not in allowed:
                self.fail(
                    join(path, key),
                    "unknown key",
                    allowed=allowed,
                    suggestion=closest(key, allowed),
                )
        for key in required:
            if key not in data:
                self.fail(join(path, key), "required key is missing")

    def integer(self, value: Any, path: str, *, ge: int | None = None) -> int:
        """An int (not a bool, not a float such as ``3.0``), optionally ``>= ge``."""
        rule = "must be an integer" if ge is None else f"must be an integer >= {ge}"
        if type(value) is not int or (ge is not None and value < ge):
            self.fail(path, rule, got=value)
        return value

    def number(
        self, value: Any, path: str, *, gt: float | None = None, ge: float | None = None
    ) -> float:
        """A finite int or float (not a bool), optionally ``> gt`` or ``>= ge``."""
        rule = "must be a number"
        if gt is not None:
            rule += f" > {gt:g}"
        elif ge is not None:
            rule += f" >= {ge:g}"
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.fail(path, rule, got=value, fix=_number_fix(value))
        try:
            finite = math.isfinite(value)
        except OverflowError:  # an int beyond the float range
            finite = False
        if not finite:
            self.fail(path, "must be a finite number", got=value)
        if (gt is not None and value <= gt) or (ge is not None and value < ge):
            self.fail(path, rule, got=value)
        return float(value)

    def boolean(self, value: Any, path: str) -> bool:
        """``true`` or ``false``."""
        if not isinstance(value, bool):
            self.fail(path, "must be true or false", got=value)
        return value

    def string(self, value: Any, path: str, *, nonempty: bool = True) -> str:
        """A string, by default non-empty."""
        if not isinstance(value, str):
            self.fail(path, "must be a string", got=value)
        if nonempty and not value.strip():
            self.fail(path, "must not be empty", got=value)
        return value

    def enum(
        self, value: Any, path: str, enum_cls: type[E], what: str, *, fix: str | None = None
    ) -> E:
        """A member of ``enum_cls`` given by its value; suggests the closest on a typo."""
        names = [member.value for member in enum_cls]
        for member in enum_cls:
            if isinstance(value, str) and member.value == value:
                return member
        self.fail(
            path,
            f"unknown {what}",
            got=value,
            allowed=names,
            suggestion=closest(value, names) if isinstance(value, str) else None,
            fix=fix,
        )


# YAML 1.1 (PyYAML) reads 1e-3 as a string: its floats need a '.' before the exponent.
_NO_DOT_EXPONENT = re.compile(r"([-+]?\d+)([eE][-+]?\d+)")


def _number_fix(value: Any) -> str | None:
    """How to write a number YAML read as a string (``1e-3``), else None."""
    match = _NO_DOT_EXPONENT.fullmatch(value.strip()) if isinstance(value, str) else None
    if match is None:
        return None
    return f"write {match[1]}.0{match[2]}: YAML reads {value} (no '.' before the exponent) as text"


# Ray Tune names folders after the campaign, so keep it to path-safe characters.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
# numpy (and so every Optuna sampler) accepts seeds in [0, 2**32).
MAX_SEED = 2**32 - 1


def check_campaign_name(ck: Checker, value: Any, path: str) -> str:
    """A campaign name: letters, digits, ``_``, ``.``, ``-``; starts with a letter or digit."""
    name = ck.string(value, path)
    if not NAME_PATTERN.fullmatch(name):
        ck.fail(
            path,
            "must start with a letter or digit and contain only letters, digits, '_', '.', '-'",
            got=name,
            fix="it names the run folder, e.g. 'digits-cnn' or 'mlp_v2'",
        )
    return name


def check_seed(ck: Checker, value: Any, path: str) -> int:
    """A sampler seed in ``[0, 2**32)``."""
    seed = ck.integer(value, path, ge=0)
    if seed > MAX_SEED:
        ck.fail(path, f"must be an integer <= {MAX_SEED}", got=seed)
    return seed
