"""Last-good copies of Tune's snapshot files, and their use after a crash mid-write."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tuner._snapshot import BACKUP_DIR, SnapshotGuard, repair_snapshot

STATE = "experiment_state-2026-01-01_00-00-00.json"


def test_guard_backs_up_intact_files_only_and_repair_restores_them(tmp_path: Path) -> None:
    guard = SnapshotGuard(str(tmp_path), check_every_s=0.0)  # look on every step
    state = tmp_path / STATE
    state.write_text(json.dumps({"trial_data": [1, 2]}))
    guard.on_step_end(iteration=1, trials=[])
    assert json.loads((tmp_path / BACKUP_DIR / STATE).read_text()) == {"trial_data": [1, 2]}

    # The driver dies while Tune rewrites the file: "w" truncated it, nothing was written.
    state.write_text("")
    os.utime(state, ns=(1, 1))  # a different mtime, as a rewrite would leave
    guard.on_step_end(iteration=2, trials=[])
    assert json.loads((tmp_path / BACKUP_DIR / STATE).read_text()) == {"trial_data": [1, 2]}

    assert repair_snapshot(tmp_path) == [STATE]
    assert json.loads(state.read_text()) == {"trial_data": [1, 2]}
    assert repair_snapshot(tmp_path) == []  # intact now: nothing to do


def test_repair_leaves_a_damaged_file_without_backup_alone(tmp_path: Path) -> None:
    (tmp_path / STATE).write_text("{")
    assert repair_snapshot(tmp_path) == []
    assert (tmp_path / STATE).read_text() == "{"
