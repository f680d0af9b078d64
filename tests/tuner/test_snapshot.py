"""Last-good copies of Tune's snapshot files, and their use after a crash mid-write."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tuner._snapshot import (
    BACKUP_DIR,
    ORPHAN_DIR,
    SnapshotGuard,
    repair_snapshot,
    set_aside_orphans,
)

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


def _trial_entry(trial_id: str) -> list[str]:
    # Tune's layout: [trial JSON state, run metadata], each a JSON string.
    return [json.dumps({"trial_id": trial_id, "config": {}}), json.dumps({})]


def test_trial_folders_the_newest_snapshot_does_not_know_are_set_aside(tmp_path: Path) -> None:
    # An older session's snapshot knew only "a"; the newest (the one Tune restores) knows a, b.
    (tmp_path / "experiment_state-2026-01-01_00-00-00.json").write_text(
        json.dumps({"trial_data": [_trial_entry("a")]})
    )
    (tmp_path / STATE.replace("00-00-00", "00-05-00")).write_text(
        json.dumps({"trial_data": [_trial_entry("a"), _trial_entry("b")]})
    )
    for name in ("a", "b", "c"):  # c started after the newest snapshot: an orphan
        (tmp_path / f"trial_{name}").mkdir()
        (tmp_path / f"trial_{name}" / "result.json").write_text('{"epoch": 1}\n')
    (tmp_path / ORPHAN_DIR).mkdir()
    (tmp_path / ORPHAN_DIR / "trial_c").mkdir()  # an earlier resume set one aside already

    assert set_aside_orphans(tmp_path) == ["trial_c"]
    assert sorted(p.name for p in tmp_path.glob("trial_*")) == ["trial_a", "trial_b"]
    kept = tmp_path / ORPHAN_DIR / "trial_c.1" / "result.json"
    assert kept.read_text() == '{"epoch": 1}\n'  # moved, not deleted
    assert set_aside_orphans(tmp_path) == []


def test_without_a_snapshot_no_folder_is_touched(tmp_path: Path) -> None:
    (tmp_path / "trial_a").mkdir()
    assert set_aside_orphans(tmp_path) == []
    assert (tmp_path / "trial_a").is_dir()


def test_a_trial_that_ended_after_the_snapshot_keeps_its_folder(tmp_path: Path) -> None:
    # "d" started and was pruned between the snapshot and the crash: its Optuna trial is
    # final, a whole trial of the campaign. "e" was still running: an orphan.
    (tmp_path / STATE).write_text(json.dumps({"trial_data": [_trial_entry("a")]}))
    for name in ("a", "d", "e"):
        (tmp_path / f"trial_{name}").mkdir()
    assert set_aside_orphans(tmp_path, finished={"d"}) == ["trial_e"]
    assert sorted(p.name for p in tmp_path.glob("trial_*")) == ["trial_a", "trial_d"]
