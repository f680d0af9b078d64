"""Failed trials in the driver: what each raised, their messages, and the failure limit.

A :class:`FailureWatch` lives in the driver for one campaign, part of its
:class:`~tuner._ray.campaign.Campaign`, which the searcher and the schedulers are given:

- the scheduler (``tuner._ray.scheduler``) reads what a trial raised from the error files Ray
  Tune writes (:func:`read_trial_error`) and records it here, before Tune tells the searcher;
- the searcher (``tuner._ray.searcher``) reports every FAIL here with its message, which is printed;
- once more than ``failure.max_failed_trials`` trials have failed, the searcher starts no new
  trial (``Searcher.FINISHED``); running trials finish, and the campaign ends with
  :attr:`~tuner.finish.Status.FAILURE_LIMIT`.

No Ray import: the Ray objects it reads (``Trial``) arrive as arguments.
"""

from __future__ import annotations

import pickle
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from tuner.outcome import ErrorInfo, Failure, describe_error_text, describe_exception


@dataclass
class FailureWatch:
    """Counts the campaign's failed trials against ``limit`` and prints their messages.

    Attributes:
        limit: ``failure.max_failed_trials``; None: no limit.
        stream: Where messages go (default stdout).
        earlier: Trials that failed before this driver started (a resume).
    """

    limit: int | None = None
    stream: TextIO | None = None
    earlier: int = 0
    errors: dict[str, ErrorInfo] = field(default_factory=dict)
    failed: dict[str, Failure] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    reached: bool = False

    def __post_init__(self) -> None:
        # A resumed campaign that had already failed past its limit starts nothing new.
        if self.limit is not None and self.earlier > self.limit:
            self.reached = True

    @property
    def count(self) -> int:
        """Failed trials of the campaign, before and since a resume."""
        return self.earlier + len(self.failed)

    def record_error(self, trial_id: str, info: ErrorInfo) -> None:
        """What ``trial_id`` raised last (a retry that raises again replaces it)."""
        self.errors[trial_id] = info

    def error_of(self, trial_id: str) -> ErrorInfo | None:
        """What ``trial_id`` raised last, if it raised."""
        return self.errors.get(trial_id)

    def trial_failed(self, trial_id: str, failure: Failure, message: str) -> None:
        """Counts a FAIL, prints its message, and says so when the limit is passed."""
        if trial_id in self.failed:
            return
        self.failed[trial_id] = failure
        self.messages[trial_id] = message
        self._say(f"trial failed ({failure.value}): {message}")
        if self.limit is not None and not self.reached and self.count > self.limit:
            self.reached = True
            self._say(
                f"failure limit reached: {self.count} trials failed, more than "
                f"failure.max_failed_trials={self.limit}; no new trial starts, running "
                "trials finish"
            )

    def summary(self) -> dict[str, Any]:
        """The limit and what was counted, for summary.json."""
        return {
            "max_failed_trials": self.limit,
            "failed": self.count,
            "limit_reached": self.reached,
        }

    def _say(self, line: str) -> None:
        out = self.stream or sys.stdout
        # A terminal's progress line is redrawn in place (tuner._ray.progress): clear it first.
        prefix = "\r\x1b[2K" if out.isatty() else ""
        out.write(f"{prefix}{line}\n")
        out.flush()


def read_trial_error(trial: Any) -> ErrorInfo | None:
    """What a Tune trial raised, from the files ``Trial.handle_error`` has just written.

    Tune pickles the ``RayTaskError`` (``error.pkl``) whose ``.cause`` is the trainable's
    exception; unpickling needs the exception's class importable here (torch for an OOM),
    so the text trace (``error.txt``, appended once per failure) is the fallback.
    """
    pickled = getattr(trial, "pickled_error_file", None)
    if pickled and Path(pickled).is_file():
        try:
            with open(pickled, "rb") as handle:
                exc = pickle.load(handle)  # Tune's own file for this trial, this run
        except Exception:
            exc = None
        if isinstance(exc, BaseException):
            return describe_exception(exc)
    text_file = getattr(trial, "error_file", None)
    if text_file and Path(text_file).is_file():
        try:
            text = Path(text_file).read_text(errors="replace")
        except OSError:
            return None
        last = text.rsplit("Failure # ", 1)[-1]
        body = last.split("\n", 1)[1] if "\n" in last else last
        return describe_error_text(body)
    return None
