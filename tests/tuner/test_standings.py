"""The one meaning of "best": rank_key, Standings, and their agreement with summary.rank."""

from __future__ import annotations

import random

import pytest

from tuner.standings import Standings, rank_key
from tuner.study import ORPHAN_REASON
from tuner.summary import TrialRow, rank, standings


def _row(
    number: int, state: str, value: float | None, epochs: int, reason: str = "", failure: str = ""
) -> TrialRow:
    return TrialRow(number, f"t{number}", state, value, epochs, reason, failure=failure)


def test_full_length_beats_a_better_value_from_fewer_epochs() -> None:
    complete = rank_key(0.6, complete=True, epochs=9, maximize=True)
    pruned = rank_key(0.9, complete=False, epochs=3, maximize=True)
    assert complete < pruned
    # Among trials stopped early, the one that trained longer comes first.
    assert rank_key(0.1, complete=False, epochs=5, maximize=True) < pruned
    # Then the value, in the metric's direction; no value sorts last.
    assert rank_key(0.2, complete=True, epochs=9, maximize=False) < rank_key(
        0.3, complete=True, epochs=9, maximize=False
    )
    assert pruned < rank_key(None, complete=True, epochs=9, maximize=True)


def test_standings_count_once_and_leave_failures_out() -> None:
    s = Standings(maximize=True)
    s.add("a", 0.5, complete=False, epochs=3, failed=False)
    s.add("a", 0.99, complete=True, epochs=9, failed=False)  # the same trial again: ignored
    s.add("b", 0.95, complete=True, epochs=9, failed=True)  # failed: never best
    s.add("c", None, complete=False, epochs=1, failed=False)  # stopped early, no value
    assert (s.best_trial, s.best_value, s.stopped_early) == ("a", 0.5, 2)
    s.add("d", 0.4, complete=True, epochs=9, failed=False)
    assert (s.best_trial, s.best_value) == ("d", 0.4)  # full length wins over a's 0.5
    assert s.count_not_in({"a", "b"}) == 2 and "c" in s and "z" not in s


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("maximize", [True, False])
def test_standings_name_the_trial_summary_ranks_first(seed: int, maximize: bool) -> None:
    rng = random.Random(seed)
    rows = []
    for n in range(rng.randint(1, 12)):
        epochs = rng.randint(1, 9)
        state = rng.choice(["COMPLETE", "PRUNED", "FAIL", "RUNNING"])
        if state == "COMPLETE":
            epochs = 9
        value = None if state in ("FAIL", "RUNNING") else round(rng.random(), 2)
        rows.append(_row(n, state, value, epochs, failure="error" if state == "FAIL" else ""))
    ranked = [r for r in rank(rows, maximize=maximize) if r.value is not None]
    got = standings(rows, maximize=maximize)
    if not ranked:
        assert got.best_trial is None
        return
    assert got.best_value == ranked[0].value
    # Ties in (state, epochs, value) may name either trial; the key must be the same.
    best = next(r for r in rows if r.tune_id == got.best_trial)
    key = rank_key(
        best.value, complete=best.state == "COMPLETE", epochs=best.epochs, maximize=maximize
    )
    first = ranked[0]
    assert key == rank_key(
        first.value, complete=first.state == "COMPLETE", epochs=first.epochs, maximize=maximize
    )
    assert got.stopped_early == sum(1 for r in rows if r.state == "PRUNED")


def test_orphaned_and_running_trials_are_not_standings() -> None:
    rows = [
        _row(0, "RUNNING", None, 2),
        _row(1, "FAIL", None, 0, reason=ORPHAN_REASON),
        _row(2, "PRUNED", 0.3, 1),
    ]
    got = standings(rows, maximize=True)
    assert got.count_not_in(set()) == 1 and got.best_trial == "t2"
