"""Primitive validators shared by the campaign and space parsers.

Each check returns the value converted to its Python type or raises SpecError naming the
source, the key path, the rule and the value. Booleans are never numbers here.

A parser groups checks that do not depend on each other (:meth:`Checker.group`) inside one
boundary (:meth:`Checker.collecting`), so that a collecting checker can go on after a
failed check and report every error of a file at the boundary; a check that needs a value
whose own check failed is skipped rather than reported again.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from enum import Enum
from types import TracebackType
from typing import Any, NoReturn, TypeVar

from tuner.contract import RESERVED_PREFIX
from tuner.errors import SpecError, closest
from tuner.spec._limits import SEED, SIZES, Limit

E = TypeVar("E", bound=Enum)

__all__ = ["RESERVED_PREFIX", "Checker", "Group", "Skipped", "join"]


def join(path: str, key: object) -> str:
    """Dotted key path of ``key`` under ``path``."""
    return f"{path}.{key}" if path else str(key)


class Skipped(Exception):
    """A group of checks stops: a value it needs failed its own check (already recorded)."""


class Checker:
    """Validators bound to one ``source`` (a file path, ``"<cli>"`` or ``"<dict>"``).

    With ``collect`` (the default) a failed check inside a :meth:`group` block is recorded
    in ``errors`` and checking goes on; the outermost :meth:`collecting` block raises them
    all at its end. Without it the first failed check raises at once.
    """

    def __init__(self, source: str, *, collect: bool = True) -> None:
        self.source = source
        self.collect = collect
        self.errors: list[SpecError] = []
        self._depth = 0

    def fail(self, path: str, problem: str, **details: Any) -> NoReturn:
        """Raise a SpecError at ``path``; ``details`` are SpecError keyword fields."""
        raise SpecError(self.source, path, problem, **details)

    @contextmanager
    def collecting(self) -> Iterator[None]:
        """The boundary of a validation: the outermost block raises what was recorded.

        Nested blocks (a parser called by another) pass everything through.
        """
        self._depth += 1
        try:
            yield
        except SpecError as err:
            if not self.collect or self._depth > 1:
                raise
            self.errors.extend(err.errors)
        except Skipped:  # after a recorded error; without one it is a bug
            if self._depth > 1 or not self.errors:
                raise
        finally:
            self._depth -= 1
        if self._depth == 0 and self.errors:
            errors, self.errors = self.errors, []
            raise SpecError.combine(errors)

    def group(self) -> Group:
        """A group of checks that do not depend on each other (see :class:`Group`)."""
        return Group(self)

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
        each = self.group()
        for key in data:
            if key not in allowed:
                with each:
                    self.fail(
                        join(path, key),
                        "unknown key",
                        allowed=allowed,
                        suggestion=closest(key, allowed),
                    )
        for key in required:
            if key not in data:
                with each:
                    self.fail(join(path, key), "required key is missing")

    def required(self, data: Mapping[str, Any], key: str) -> Any:
        """``data[key]``; :class:`Skipped` when it is missing (:meth:`keys` reported it)."""
        if key not in data:
            raise Skipped
        return data[key]

    def integer(
        self, value: Any, path: str, *, ge: int | None = None, limit: Limit | None = None
    ) -> int:
        """An int (not a bool, not a float such as ``3.0``), ``>= ge`` (default the
        limit's low) and at most the limit's high."""
        if ge is None and limit is not None:
            ge = int(limit.low)
        rule = "must be an integer" if ge is None else f"must be an integer >= {ge}"
        if type(value) is not int or (ge is not None and value < ge):
            self.fail(path, rule, got=value)
        if limit is not None:
            self.at_most(value, path, limit)
        return value

    def at_most(self, value: float, path: str, limit: Limit) -> None:
        """Fails when ``value`` is above ``limit``'s high, with the bound and its reason."""
        if value > limit.high:
            self.fail(path, f"must be at most {limit.show(limit.high)}", got=value, fix=limit.fix())

    def size(self, count: int, path: str, limit: Limit, what: str, *, got: Any = None) -> None:
        """Fails when a length or count is above ``limit``: ``what`` says of what."""
        if count > limit.high:
            self.fail(
                path,
                f"has {count} {what}; at most {limit.show(limit.high)} are allowed",
                fix=limit.reason,
                **({} if got is None else {"got": got}),
            )

    def number(
        self,
        value: Any,
        path: str,
        *,
        gt: float | None = None,
        ge: float | None = None,
        limit: Limit | None = None,
    ) -> float:
        """A finite int or float (not a bool), ``> gt`` or ``>= ge`` (default the limit's
        low) and at most the limit's high."""
        if gt is None and ge is None and limit is not None:
            gt, ge = (limit.low, None) if limit.low_open else (None, limit.low)
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
        if limit is not None:
            self.at_most(value, path, limit)
        return float(value)

    def boolean(self, value: Any, path: str) -> bool:
        """``true`` or ``false``."""
        if not isinstance(value, bool):
            self.fail(path, "must be true or false", got=value)
        return value

    def string(
        self, value: Any, path: str, *, nonempty: bool = True, limit: Limit = SIZES["text"]
    ) -> str:
        """A string, by default non-empty, of at most ``limit`` characters."""
        if not isinstance(value, str):
            self.fail(path, "must be a string", got=value)
        if nonempty and not value.strip():
            self.fail(path, "must not be empty", got=value)
        self.size(len(value), path, limit, "characters", got=value)
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


class Group:
    """Checks that do not depend on each other, each in its own ``with group:`` block.

    A block that fails is recorded by the checker (or raises, when it does not collect)
    and the next block runs; :meth:`close` then skips whatever needed the group's values.
    """

    def __init__(self, checker: Checker) -> None:
        self.checker = checker
        self.failed = False

    def __enter__(self) -> Group:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        err: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        if isinstance(err, SpecError):
            if not self.checker.collect:
                return False
            self.checker.errors.extend(err.errors)
        elif not isinstance(err, Skipped):
            return False
        self.failed = True
        return True

    def close(self) -> None:
        """Raises :class:`Skipped` when a block failed: what follows needs every value."""
        if self.failed:
            raise Skipped


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
MAX_SEED = int(SEED.high)


def check_campaign_name(ck: Checker, value: Any, path: str) -> str:
    """A campaign name: letters, digits, ``_``, ``.``, ``-``; starts with a letter or digit."""
    name = ck.string(value, path, limit=SIZES["name"])
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
        ck.fail(path, f"must be an integer <= {MAX_SEED}", got=seed, fix=SEED.reason)
    return seed
