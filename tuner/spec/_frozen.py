"""A read-only, picklable mapping and deep freeze/thaw helpers for YAML values."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


class FrozenDict(Mapping[str, Any]):
    """Read-only mapping that pickles (unlike ``types.MappingProxyType``).

    Values are stored frozen (see :func:`freeze`) but read back as plain, fresh copies
    (lists and dicts, see :func:`thaw`): ``dict(frozen)`` hands a trainable the values
    as written in the YAML, and mutating them cannot change the spec.
    """

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        self._data: dict[str, Any] = dict(data or {})

    def __getitem__(self, key: str) -> Any:
        return thaw(self._data[key])

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"FrozenDict({self._data!r})"

    def __getstate__(self) -> dict[str, Any]:
        return self._data

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._data = state


def freeze(value: Any) -> Any:
    """Return ``value`` with lists turned into tuples and mappings into FrozenDicts."""
    if isinstance(value, Mapping):
        return FrozenDict({key: freeze(item) for key, item in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(item) for item in value)
    return value


def thaw(value: Any) -> Any:
    """Return a plain, YAML-dumpable copy: tuples become lists, mappings become dicts."""
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(item) for item in value]
    return value
