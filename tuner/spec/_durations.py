"""Durations such as ``90s``, ``10m``, ``1h30m`` or ``1.5h``, in seconds."""

from __future__ import annotations

import math
import re
from typing import Any

from tuner.errors import SpecError
from tuner.spec._limits import DURATION, Limit

_UNIT_SECONDS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([dhms])")
_WHOLE = re.compile(r"(?:\s*(?:\d+(?:\.\d*)?|\.\d+)\s*[dhms])+\s*")
# A duration as a JSON Schema pattern (tuner.spec._schema): a number, or units as _WHOLE
# reads them (any case, surrounding spaces).
_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
DURATION_PATTERN = (
    r"^\s*(?:" + _NUMBER + "|" + _WHOLE.pattern.replace("[dhms]", "[dhmsDHMS]") + r")\s*$"
)
_ALLOWED = "seconds as a number, or a string like '90s', '10m', '2h', '1h30m', '1.5h'"


def parse_duration(
    value: Any, *, source: str = "<value>", path: str = "duration", limit: Limit = DURATION
) -> float:
    """Convert a duration to seconds.

    Args:
        value: Seconds as an int or float, a numeric string (``"120"``), or a string of
            ``<number><unit>`` parts with units ``d``, ``h``, ``m``, ``s`` in decreasing
            order (``"90s"``, ``"10m"``, ``"2h"``, ``"1h30m"``, ``"1.5h"``).
        source: Where the value came from, for the error message.
        path: Key path or CLI flag of the value, for the error message.
        limit: The longest duration allowed (default a year) and why.

    Returns:
        The duration in seconds, always > 0.

    Raises:
        SpecError: The value is not a duration, is not positive, or is above the limit.
    """
    seconds = _to_seconds(value)
    if seconds is None:
        raise SpecError(source, path, "must be a duration", got=value, allowed=_ALLOWED)
    if not math.isfinite(seconds) or seconds <= 0:
        raise SpecError(source, path, "must be a positive duration", got=value)
    if seconds < limit.low:
        raise SpecError(
            source,
            path,
            f"must be at least {limit.show(limit.low)}",
            got=value,
            fix="durations are counted to the millisecond",
        )
    if seconds > limit.high:
        raise SpecError(
            source, path, f"must be at most {limit.show(limit.high)}", got=value, fix=limit.fix()
        )
    return seconds


def _to_seconds(value: Any) -> float | None:
    """Seconds, or None when ``value`` has no duration syntax."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            return float(value)
        except OverflowError:  # an int beyond the float range
            return math.inf
    if not isinstance(value, str):
        return None
    text = value.strip().lower()
    try:
        return float(text)
    except ValueError:
        pass
    if not _WHOLE.fullmatch(text):
        return None
    parts = _PART.findall(text)
    units = [unit for _, unit in parts]
    order = list(_UNIT_SECONDS)
    # Each unit at most once, largest first: "30m1h" and "1h1h" are rejected as typos.
    if units != sorted(set(units), key=order.index):
        return None
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)


def format_duration(seconds: float) -> str:
    """Human-readable duration (``5400`` -> ``"1h30m"``), the inverse of parse_duration."""
    if seconds != int(seconds):
        return f"{seconds:g}s"
    rest = int(seconds)
    out = ""
    for unit, size in _UNIT_SECONDS.items():
        count, rest = divmod(rest, int(size))
        if count:
            out += f"{count}{unit}"
    return out or "0s"
