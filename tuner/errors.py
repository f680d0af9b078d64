"""User-facing error types.

Every error a user can cause (a bad campaign file, a bad CLI flag, a missing file) is a
:class:`TunerError`; the CLI prints ``str(err)`` and exits with status 2, no traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["SpecError", "TunerError", "closest"]

# Marks "no value given" for SpecError.got, because None is a legitimate (bad) value.
_NOT_GIVEN: Any = object()


class TunerError(Exception):
    """Base class of every error caused by user input; its message is shown as-is."""


class SpecError(TunerError, ValueError):
    """A campaign file, campaign mapping or CLI flag violates the campaign schema.

    The message reads
    ``"{source}: {path}: {problem} (got {got!r}; allowed {allowed}) Did you mean 'x'?"``
    with the parenthesis holding only the pieces present, followed by a
    ``"\\n  To fix: ..."`` line when a fix is known.

    Attributes:
        source: File path as given, ``"<cli>"`` for command-line flags, or ``"<dict>"``.
        path: Dotted key path (``space.lr.low``), a CLI flag (``--max-epochs``) or a
            location such as ``line 3, column 7``.
        problem: What is wrong, as a short sentence fragment.
        got: The offending value (``None`` when not given; see ``has_got``).
        has_got: Whether ``got`` was given.
        allowed: What is allowed, already formatted for humans (or ``None``).
        suggestion: The closest valid name (or ``None``).
        fix: How to fix it (or ``None``).
    """

    def __init__(
        self,
        source: str,
        path: str,
        problem: str,
        *,
        got: Any = _NOT_GIVEN,
        allowed: str | Sequence[str] | None = None,
        suggestion: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.source = source
        self.path = path
        self.problem = problem
        self.has_got = got is not _NOT_GIVEN
        self.got = got if self.has_got else None
        if allowed is not None and not isinstance(allowed, str):
            allowed = ", ".join(allowed)
        self.allowed: str | None = allowed
        self.suggestion = suggestion
        self.fix = fix
        super().__init__(self._render())

    def _render(self) -> str:
        text = f"{self.source}: {self.path}: {self.problem}"
        details = []
        if self.has_got:
            details.append(f"got {self.got!r}")
        if self.allowed is not None:
            details.append(f"allowed {self.allowed}")
        if details:
            text += f" ({'; '.join(details)})"
        if self.suggestion is not None:
            text += f" Did you mean {self.suggestion!r}?"
        if self.fix:
            text += f"\n  To fix: {self.fix}"
        return text

    def __str__(self) -> str:
        return self._render()

    def __reduce__(self) -> tuple[Any, ...]:
        # Exceptions pickle via self.args by default, which loses the keyword fields;
        # Ray pickles errors raised inside workers.
        kwargs = {
            "allowed": self.allowed,
            "suggestion": self.suggestion,
            "fix": self.fix,
        }
        if self.has_got:
            kwargs["got"] = self.got
        return (_rebuild_spec_error, (self.source, self.path, self.problem, kwargs))


def _rebuild_spec_error(source: str, path: str, problem: str, kwargs: dict[str, Any]) -> SpecError:
    """Unpickle a SpecError."""
    return SpecError(source, path, problem, **kwargs)


def closest(name: object, candidates: Iterable[str], cutoff: float = 0.6) -> str | None:
    """Return the candidate most similar to ``name``, or ``None`` if none is close.

    Comparison ignores case, so ``"TPE"`` suggests ``"tpe"``.

    Args:
        name: The unknown name the user wrote (non-strings are compared by ``str()``).
        candidates: Valid names.
        cutoff: Minimum ``difflib`` similarity ratio in [0, 1].

    Returns:
        The best matching candidate as spelled in ``candidates``, or ``None``.
    """
    by_lower: dict[str, str] = {}
    for candidate in candidates:
        by_lower.setdefault(candidate.lower(), candidate)
    matches = difflib.get_close_matches(str(name).lower(), list(by_lower), n=1, cutoff=cutoff)
    return by_lower[matches[0]] if matches else None
