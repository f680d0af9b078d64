"""Typed field parsing for catalog CSV files, raising SpecError that names file, line and column."""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Collection, Iterator, Mapping
from datetime import date
from pathlib import Path
from typing import TypeVar

from tuner.errors import SpecError, closest
from tuner.spec._checks import Group
from tuner.spec._limits import SIZES, Limit

T = TypeVar("T")


def read_rows(
    path: Path, required: Collection[str], optional: Collection[str] = ()
) -> Iterator[tuple[int, dict[str, str]]]:
    """Yields ``(line_number, row)`` for each data row after checking the header."""
    source = str(path)
    try:
        # utf-8-sig: spreadsheet programs start their CSV files with a byte-order mark.
        text = path.read_text(encoding="utf-8-sig")
    except OSError as err:
        raise SpecError(
            source, "file", "cannot read catalog file", got=str(err), fix="check the path"
        ) from err
    except UnicodeDecodeError as err:
        raise SpecError(
            source,
            "file",
            "not a UTF-8 text file",
            got=str(err),
            fix="save the catalog as CSV with UTF-8 encoding",
        ) from None
    reader = csv.DictReader(text.splitlines())
    try:
        yield from _rows(source, reader, required, optional)
    except csv.Error as err:
        raise SpecError(
            source, f"line {reader.line_num + 1}", "malformed CSV", got=str(err)
        ) from None


def _rows(
    source: str,
    reader: csv.DictReader[str],
    required: Collection[str],
    optional: Collection[str],
) -> Iterator[tuple[int, dict[str, str]]]:
    header = [name.strip() for name in reader.fieldnames or []]
    known = [*required, *optional]
    for i, name in enumerate(header):
        if name not in known:
            raise SpecError(
                source,
                "line 1",
                "unknown column",
                got=name,
                allowed=", ".join(known),
                suggestion=closest(name, known),
            )
        if name in header[:i]:
            raise SpecError(
                source, "line 1", "duplicate column", got=name, fix="keep one of the two columns"
            )
    missing = [name for name in required if name not in header]
    if missing:
        raise SpecError(
            source,
            "line 1",
            "missing required column(s)",
            got=header,
            allowed=", ".join(required),
            fix=f"add the column(s) {', '.join(missing)} to the header",
        )
    for row in reader:
        extra = [value for value in row.get(None) or [] if value.strip()]
        if extra:  # an unquoted comma shifts every field after it
            raise SpecError(
                source,
                f"line {reader.line_num}",
                f"more fields than the header's {len(header)} columns",
                got=extra,
                fix='quote fields that contain a comma, e.g. "a, b"',
            )
        clean = {
            (key or "").strip(): (value or "").strip()
            for key, value in row.items()
            if key is not None
        }
        if not any(clean.values()):
            continue  # blank line
        yield reader.line_num, clean


class RowReader:
    """Reads typed fields from one CSV row; errors read ``file: line N.column: ...``.

    With a ``group`` each field's error is recorded and reading goes on (a placeholder
    stands for the field); :meth:`close` then skips the row.
    """

    def __init__(
        self, source: str, line: int, row: Mapping[str, str], group: Group | None = None
    ) -> None:
        self.source = source
        self.line = line
        self.row = row
        self.group = group

    def path(self, column: str) -> str:
        """Key path of ``column`` in this row, for error messages."""
        return f"line {self.line}.{column}"

    def check(self, read: Callable[[], T], placeholder: T) -> T:
        """``read()``; with a group, its error is recorded and ``placeholder`` returned."""
        if self.group is None:
            return read()
        with self.group:
            return read()
        return placeholder

    def close(self) -> None:
        """Skips the row (:class:`~tuner.spec._checks.Skipped`) when a field failed."""
        if self.group is not None:
            self.group.close()

    def text(self, column: str, *, required: bool = True) -> str:
        """A string field of at most ``SIZES["text"]`` characters; empty is an error when
        ``required``."""
        return self.check(lambda: self._text(column, required=required), "")

    def _text(self, column: str, *, required: bool = True) -> str:
        value = self.row.get(column, "")
        if required and not value:
            raise SpecError(
                self.source,
                self.path(column),
                "required field is empty",
                fix=f"fill in {column!r} on line {self.line}",
            )
        limit = SIZES["text"]
        if len(value) > limit.high:
            raise SpecError(
                self.source,
                self.path(column),
                f"has {len(value)} characters; at most {limit.show(limit.high)} are allowed",
                got=value,
                fix=limit.reason,
            )
        return value

    def number(
        self,
        column: str,
        *,
        required: bool = True,
        positive: bool = False,
        limit: Limit | None = None,
    ) -> float | None:
        """A non-negative finite float (strictly positive when ``positive``) of at most
        ``limit``'s high; empty -> None."""
        return self.check(
            lambda: self._number(column, required=required, positive=positive, limit=limit),
            None,
        )

    def _number(
        self, column: str, *, required: bool, positive: bool, limit: Limit | None
    ) -> float | None:
        raw = self._text(column, required=required)
        if not raw:
            return None
        try:
            value = float(raw)
        except ValueError:
            raise SpecError(
                self.source, self.path(column), "not a number", got=raw, allowed="a decimal number"
            ) from None
        if not math.isfinite(value) or value < 0 or (positive and value == 0):
            allowed = "a number > 0" if positive else "a number >= 0"
            raise SpecError(
                self.source, self.path(column), "out of range", got=raw, allowed=allowed
            )
        if limit is not None:
            self._at_most(column, value, raw, limit)
        return value

    def _at_most(self, column: str, value: float, raw: str, limit: Limit) -> None:
        if value > limit.high:
            raise SpecError(
                self.source,
                self.path(column),
                f"must be at most {limit.show(limit.high)}",
                got=raw,
                fix=limit.fix(),
            )

    def required_number(
        self, column: str, *, positive: bool = False, limit: Limit | None = None
    ) -> float:
        """Like :meth:`number` but the field must be present."""
        value = self.number(column, positive=positive, limit=limit)
        return 0.0 if value is None else value  # None only when recorded as missing

    def integer(self, column: str, *, limit: Limit, required: bool = True) -> int | None:
        """An integer field in ``limit``'s range; empty -> None."""
        return self.check(lambda: self._integer(column, limit=limit, required=required), None)

    def _integer(self, column: str, *, limit: Limit, required: bool) -> int | None:
        raw = self._text(column, required=required)
        if not raw:
            return None
        if not (raw.isascii() and raw.isdigit()):  # "²".isdigit(), but int("²") fails
            raise SpecError(
                self.source,
                self.path(column),
                "not a whole number",
                got=raw,
                allowed="0, 1, 2, ...",
            )
        digits = raw.lstrip("0") or "0"
        if len(digits) > 18:  # beyond every limit (and int() of thousands of digits fails)
            self._at_most(column, math.inf, raw, limit)
        value = int(digits)
        if value < limit.low:
            raise SpecError(
                self.source,
                self.path(column),
                "out of range",
                got=value,
                allowed=f"an integer >= {limit.show(limit.low)}",
            )
        self._at_most(column, value, raw, limit)
        return value

    def day(self, column: str) -> date:
        """An ISO date (YYYY-MM-DD) field."""
        return self.check(lambda: self._day(column), date.min)

    def _day(self, column: str) -> date:
        raw = self._text(column)
        try:
            return date.fromisoformat(raw)
        except ValueError:
            raise SpecError(
                self.source, self.path(column), "not a date", got=raw, allowed="YYYY-MM-DD"
            ) from None

    def choice(self, column: str, allowed: Collection[str]) -> str:
        """A field from a closed set of names."""
        return self.check(lambda: self._choice(column, allowed), next(iter(allowed)))

    def _choice(self, column: str, allowed: Collection[str]) -> str:
        raw = self._text(column)
        if raw not in allowed:
            raise SpecError(
                self.source,
                self.path(column),
                f"unknown {column}",
                got=raw,
                allowed=", ".join(sorted(allowed)),
                suggestion=closest(raw, allowed),
            )
        return raw
