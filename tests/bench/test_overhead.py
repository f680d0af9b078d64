"""The pure parts of bench/overhead.py: reading the trials' stamps into slot time (no Ray)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.overhead import SLOTS, Run, read_trials


def _write(folder: Path, rows: list[dict[str, float]]) -> None:
    folder.mkdir(parents=True)
    (folder / "result.json").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _row(epoch: int, start: float, begin: float, end: float) -> dict[str, float]:
    return {
        "epoch": epoch,
        "bench_start": start,
        "bench_epoch_start": begin,
        "bench_epoch_end": end,
        "bench_pid": 7,
    }


def test_a_trial_paused_at_a_rung_counts_its_two_runs_not_the_pause(tmp_path: Path) -> None:
    # Run 1 from t=0: epoch 1 ends at 1.1; paused; run 2 from t=5 (restored, epoch 2 next).
    _write(
        tmp_path / "trial_a",
        [_row(1, 0.0, 0.05, 1.1), _row(2, 5.0, 5.05, 6.1), _row(3, 5.0, 6.15, 7.2)],
    )
    _write(tmp_path / "trial_b", [_row(1, 1.2, 1.25, 2.3)])
    a, b = read_trials(tmp_path)
    assert (a.epochs, a.runs, a.start, a.end) == (3, 2, 0.0, 7.2)
    assert a.busy_s == pytest.approx(1.1 + 2.2)  # the 3.9 s paused at the rung not counted
    assert a.report_gaps_s == pytest.approx(0.05)  # within run 2 only
    run = Run("ours", 1.0, -1.0, 8.0, [a, b])
    figures = run.figures()
    assert figures["restarts"] == 1
    assert figures["useful_s"] == 4.0
    assert figures["phase_s"] == pytest.approx(7.2)
    in_trials = 1.1 + 2.2 + 1.1
    assert figures["inside"] == pytest.approx((in_trials - 4.0) / 2)
    assert figures["between"] == pytest.approx((7.2 * SLOTS - in_trials) / 2)
    assert figures["share_phase"] == pytest.approx(4.0 / (7.2 * SLOTS))


def test_kept_copies_of_result_logs_are_not_trials(tmp_path: Path) -> None:
    # tuner keeps each trial's result.json with its snapshot copies (.snapshot/<slot>/logs)
    # and sets orphaned trial folders aside (.orphaned): neither is a trial of the run.
    rows = [_row(1, 0.0, 0.05, 1.1)]
    _write(tmp_path / "ours" / "trial_a", rows)
    _write(tmp_path / "ours" / ".snapshot" / "a" / "logs" / "trial_a", rows)
    _write(tmp_path / "ours" / ".orphaned" / "trial_b", rows)
    assert len(read_trials(tmp_path / "ours")) == 1
