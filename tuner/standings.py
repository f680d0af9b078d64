"""The one meaning of "best" in a campaign, and the standings of its finished trials.

The best trial is the first in this order: trials that trained the full ``max_epochs``
(COMPLETE) before trials stopped earlier (PRUNED), then the ones that trained longer, then
by the value of the metric at the trial's **last** epoch. A trial's value is its last one,
not its best epoch's: that is the model the trial ends with (and, for a trial stopped early,
the value ASHA judged it by). Comparing full-length trials first keeps a trial that looked
good for two epochs from beating one that held up for twenty.

Every place that names a best trial uses :func:`rank_key`: the live line (from the trials
finished so far, :class:`Standings`), the final line, ``summary.json``, ``best.yaml``,
``tuner show``, the report and :class:`tuner.Result`. Running trials have no value yet: the
live line's best is the best of the finished trials, which is what ``best.yaml`` would name
if the campaign stopped now.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Standings", "rank_key"]


def rank_key(
    value: float | None, *, complete: bool, epochs: int, maximize: bool
) -> tuple[int, int, float]:
    """Sort key of a trial, best first: complete ones, then more epochs, then by value.

    Trials without a (finite) value sort last.
    """
    if value is None:
        return (2, 0, 0.0)
    return (0 if complete else 1, -epochs, -value if maximize else value)


@dataclass
class Standings:
    """The finished trials of a campaign so far: the best one and how many stopped early.

    A resumed campaign starts from the trials its study had already told
    (:meth:`add` each), so its live line remembers the best found before the crash.
    """

    maximize: bool
    best_value: float | None = None
    best_trial: str | None = None
    stopped_early: int = 0
    _best_key: tuple[int, int, float] | None = None
    _seen: set[str] = field(default_factory=set)

    def __contains__(self, trial_id: object) -> bool:
        return trial_id in self._seen

    def count_not_in(self, trial_ids: set[str]) -> int:
        """How many counted trials are not among ``trial_ids`` (for a resumed campaign:
        trials its study finished after Tune's last snapshot, which Tune does not list)."""
        return len(self._seen - trial_ids)

    def add(
        self, trial_id: str, value: float | None, *, complete: bool, epochs: int, failed: bool
    ) -> None:
        """Counts a finished trial once (later calls for the same id are ignored).

        Args:
            trial_id: Its Tune trial id.
            value: Its metric at its last epoch (None if it had no finite one).
            complete: Whether it trained ``max_epochs`` epochs.
            epochs: Epochs it trained.
            failed: Whether it failed (it then neither counts as stopped early nor is best).
        """
        if trial_id in self._seen:
            return
        self._seen.add(trial_id)
        if failed:
            return
        if not complete:
            self.stopped_early += 1
        if value is None:
            return
        key = rank_key(value, complete=complete, epochs=epochs, maximize=self.maximize)
        if self._best_key is None or key < self._best_key:
            self._best_key, self.best_value, self.best_trial = key, value, trial_id
