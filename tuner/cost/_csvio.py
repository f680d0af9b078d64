"""Typed field parsing for catalog CSV files, raising SpecError that names file, line and column."""

from __future__ import annotations

import csv
import math
from collections.abc import Collection, Iterator, Mapping
from datetime import date
from pathlib import Path

from tuner.errors import SpecError, closest


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
    """Reads typed fields from one CSV row; errors read ``file: line N.column: ...``."""

    def __init__(self, source: str, line: int, row: Mapping[str, str]) -> None:
        self.source = source
        self.line = line
        self.row = row

    def path(self, column: str) -> str:
        """Key path of ``column`` in this row, for error messages."""
        return f"line {self.line}.{column}"

    def text(self, column: str, *, required: bool = True) -> str:
        """A string field; empty is an error when ``required``."""
        value = self.row.get(column, "")
        if required and not value:
            raise SpecError(
                self.source,
                self.path(column),
                "required field is empty",
                fix=f"fill in {column!r} on line {self.line}",
            )
        return value

    def number(self, column: str, *, required: bool = True, positive: bool = False) -> float | None:
        """A non-negative finite float (strictly positive when ``positive``); empty -> None."""
        raw = self.text(column, required=required)
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
        return value

    def required_number(self, column: str, *, positive: bool = False) -> float:
        """Like :meth:`number` but the field must be present."""
        value = self.number(column, positive=positive)
        if value is None:  # unreachable: number() raises on an empty required field
            raise SpecError(self.source, self.path(column), "required field is empty")
        return value

    def integer(self, column: str, *, required: bool = True) -> int | None:
        """A non-negative integer field; empty -> None."""
        raw = self.text(column, required=required)
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
        return int(raw)

    def day(self, column: str) -> date:
        """An ISO date (YYYY-MM-DD) field."""
        raw = self.text(column)
        try:
            return date.fromisoformat(raw)
        except ValueError:
            raise SpecError(
                self.source, self.path(column), "not a date", got=raw, allowed="YYYY-MM-DD"
            ) from None

    def choice(self, column: str, allowed: Collection[str]) -> str:
        """A field from a closed set of names."""
        raw = self.text(column)
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
