"""User-facing error types.

Every error a user can cause (a bad campaign file, a bad CLI flag, a missing run folder, a
cluster that cannot hold a trial) is a :class:`TunerError` subclass; the CLI prints
``str(err)`` and exits with status 2, no traceback, and a library caller can read the same
facts from its attributes: the file at fault, the key path in it, the value, what is
allowed, the closest valid name and how to fix it.

The message reads ``"{source}: {path}: {problem} (got {got!r}; allowed {allowed}) Did you
mean 'x'?"``, each piece only where the error has it, then a ``"\n  To fix: ..."`` line
when a fix is known. A file with several errors raises one :class:`SpecErrors` whose
message has one such message per error.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "ClusterError",
    "FileError",
    "RunFolderError",
    "ServiceError",
    "SpecError",
    "SpecErrors",
    "TunerError",
    "TunerWarning",
    "closest",
]

# Marks "no value given" for TunerError.got, because None is a legitimate (bad) value.
_NOT_GIVEN: Any = object()
# Errors of one input that a SpecErrors message lists; the rest are counted.
MAX_SHOWN = 20
# Characters of a value (or of what is allowed) a message shows; a longer one is cut.
MAX_DETAIL = 1000


class TunerError(Exception):
    """Base class of every error caused by user input.

    Attributes:
        problem: What is wrong, as a short sentence fragment (the whole message when the
            error has no other parts).
        source: The file or folder at fault (as given), ``"<cli>"`` for command-line flags,
            ``"<dict>"`` for a campaign mapping, or None.
        path: Dotted key path (``space.lr.low``), a CLI flag (``--max-epochs``), a location
            such as ``line 3, column 7``, or None.
        got: The offending value (``None`` when not given; see ``has_got``).
        has_got: Whether ``got`` was given.
        allowed: What is allowed, formatted for humans, or None.
        suggestion: The closest valid name, or None.
        fix: How to fix it, or None.
    """

    def __init__(
        self,
        problem: str,
        *,
        source: str | None = None,
        path: str | None = None,
        got: Any = _NOT_GIVEN,
        allowed: str | Sequence[str] | None = None,
        suggestion: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.problem = problem
        self.source = source
        self.path = path
        self.has_got = got is not _NOT_GIVEN
        self.got = got if self.has_got else None
        if allowed is not None and not isinstance(allowed, str):
            allowed = ", ".join(allowed)
        self.allowed: str | None = allowed
        self.suggestion = suggestion
        self.fix = fix
        super().__init__(self._render())

    def _render(self) -> str:
        text = ": ".join(str(part) for part in (self.source, self.path) if part is not None)
        text = f"{text}: {self.problem}" if text else self.problem
        details = []
        if self.has_got:
            details.append(f"got {_shorten(_repr(self.got))}")
        if self.allowed is not None:
            details.append(f"allowed {_shorten(self.allowed)}")
        if details:
            text += f" ({'; '.join(details)})"
        if self.suggestion is not None:
            text += f" Did you mean {self.suggestion!r}?"
        if self.fix:
            text += f"\n  To fix: {self.fix}"
        return text

    def __str__(self) -> str:
        return self._render()

    def messages(self) -> list[str]:
        """The message of each error this one reports (one; :class:`SpecErrors` several)."""
        return [self._render()]

    def _fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "source": self.source,
            "path": self.path,
            "allowed": self.allowed,
            "suggestion": self.suggestion,
            "fix": self.fix,
        }
        if self.has_got:
            fields["got"] = self.got
        return fields

    def __reduce__(self) -> tuple[Any, ...]:
        # Exceptions pickle via self.args by default, which loses the keyword fields;
        # Ray pickles errors raised inside workers.
        return (_rebuild, (type(self), self.problem, self._fields()))


def _repr(value: Any) -> str:
    """``repr(value)``; an int too long for repr (over 4,300 digits) by its size."""
    try:
        return repr(value)
    except ValueError:
        return f"<an integer of about {int(value.bit_length() * 0.30103)} digits>"


def _shorten(text: str) -> str:
    """``text``, or its start and its length when it is longer than :data:`MAX_DETAIL`."""
    if len(text) <= MAX_DETAIL:
        return text
    return f"{text[: MAX_DETAIL // 2]}... ({len(text)} characters)"


def _rebuild(cls: type[TunerError], problem: str, fields: dict[str, Any]) -> TunerError:
    """Unpickles a TunerError of any subclass."""
    error = cls.__new__(cls)
    TunerError.__init__(error, problem, **fields)
    return error


class SpecError(TunerError, ValueError):
    """A campaign file, campaign mapping, catalog, profile or CLI flag breaks its schema.

    ``source`` and ``path`` are always given: the file (or ``"<cli>"``, ``"<dict>"``) and
    the key path in it. ``errors`` lists every error found (see :class:`SpecErrors`).
    """

    source: str
    path: str

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
        super().__init__(
            problem,
            source=source,
            path=path,
            got=got,
            allowed=allowed,
            suggestion=suggestion,
            fix=fix,
        )

    @property
    def errors(self) -> tuple[SpecError, ...]:
        """Every error of the input: this one alone (:class:`SpecErrors` holds several)."""
        return (self,)

    @staticmethod
    def combine(errors: Sequence[SpecError]) -> SpecError:
        """The one error itself, or a :class:`SpecErrors` of several."""
        if len(errors) == 1:
            return errors[0]
        return SpecErrors(errors)


class SpecErrors(SpecError):
    """Several errors of one input, found in one pass.

    Its attributes are the first error's; ``errors`` holds them all, and ``str()`` gives
    one message per error (the first :data:`MAX_SHOWN`, then how many more there are).
    """

    def __init__(self, errors: Sequence[SpecError]) -> None:
        if len(errors) < 2:
            raise ValueError(f"`len(errors) >= 2` must hold, but got {len(errors)=}.")
        self._errors = tuple(e for error in errors for e in error.errors)
        first = self._errors[0]
        details = {k: v for k, v in first._fields().items() if k not in ("source", "path")}
        super().__init__(first.source, first.path, first.problem, **details)

    @property
    def errors(self) -> tuple[SpecError, ...]:
        """Every error, in the order found."""
        return self._errors

    def messages(self) -> list[str]:
        """One message per error, the first :data:`MAX_SHOWN`; then how many more."""
        shown = [error._render() for error in self._errors[:MAX_SHOWN]]
        more = len(self._errors) - MAX_SHOWN
        if more > 0:
            shown.append(f"{self.source}: ... and {more} more errors ({len(self._errors)} in all)")
        return shown

    def _render(self) -> str:
        return "\n".join(self.messages())

    def __reduce__(self) -> tuple[Any, ...]:
        return (SpecErrors, (self._errors,))


class FileError(TunerError):
    """A file the user named is missing, unreadable or not the kind of file expected."""

    source: str

    def __init__(self, source: str, problem: str, *, fix: str | None = None) -> None:
        super().__init__(problem, source=source, fix=fix)


class RunFolderError(TunerError):
    """A run folder that cannot be used as asked: missing, taken already, not a run folder,
    not resumable, or with a damaged file inside (``source`` names the folder or file)."""

    source: str

    def __init__(self, source: str, problem: str, *, fix: str | None = None) -> None:
        super().__init__(problem, source=source, fix=fix)


class ClusterError(TunerError):
    """The cluster cannot run the campaign as given: its config is unreadable, its node
    labels are wrong, or no node (nor node type) can ever hold one trial."""

    def __init__(
        self, source: str, problem: str, *, path: str | None = None, fix: str | None = None
    ) -> None:
        super().__init__(problem, source=source, path=path, fix=fix)


class TunerWarning(UserWarning):
    """Something a caller may want to know that does not stop the call: a profile of another
    trainable than the campaign's, a stale price in a catalog, a trial no known node fits on
    a cluster an autoscaler may still grow. The CLI prints it as ``warning: ...``."""


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


class ServiceError(TunerError):
    """A cluster's Job Submission API cannot be used as asked: nothing answers at the
    address, the token is missing or refused, or no such campaign was submitted there
    (``source`` is the address)."""

    source: str

    def __init__(self, address: str, problem: str, *, fix: str | None = None) -> None:
        super().__init__(problem, source=address, fix=fix)
