"""Whole copies of Tune's experiment snapshot, and their use after a crash."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

from tuner._ray.snapshot import (
    BACKUP_DIR,
    ORPHAN_DIR,
    STAGING_FILE,
    SUPERSEDED_DIR,
    SnapshotGuard,
    current_slot,
    drop_run_files,
    recover_trial_logs,
    repair_snapshot,
    save_generation,
    set_aside_orphans,
)

STATE = "experiment_state-2026-01-01_00-00-00.json"
GEN = "search_gen_state-2026-01-01_00-00-00.json"
PICKLE = "searcher-state-2026-01-01_00-00-00.pkl"


class _Storage:
    def __init__(self, staging: Path) -> None:
        self.experiment_driver_staging_path = str(staging)


class _Trial:
    """What the guard reads of a Tune trial: where the driver stages the snapshot."""

    def __init__(self, staging: Path) -> None:
        self.storage = _Storage(staging)


def _snapshot(folder: Path, n: int) -> None:
    """Snapshot number ``n`` as Tune writes it: trials, the generator's counter, the pickle."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / STATE).write_text(json.dumps({"trial_data": list(range(n))}))
    (folder / GEN).write_text(json.dumps({"counter": n}))
    (folder / PICKLE).write_bytes(pickle.dumps({"trials": n}))


def _generation(folder: Path) -> tuple[int, int, int]:
    return (
        len(json.loads((folder / STATE).read_text())["trial_data"]),
        json.loads((folder / GEN).read_text())["counter"],
        pickle.loads((folder / PICKLE).read_bytes())["trials"],
    )


def test_guard_keeps_the_staged_snapshot_whole_and_repair_puts_it_all_back(
    tmp_path: Path,
) -> None:
    staging, run_dir = tmp_path / "staging", tmp_path / "run"
    run_dir.mkdir()
    guard = SnapshotGuard(str(run_dir), check_every_s=0.0)  # look on every step
    guard.on_step_end(iteration=1, trials=[])  # no trial yet: nothing staged, nothing kept
    assert current_slot(run_dir) is None

    _snapshot(staging, 3)
    guard.on_step_end(iteration=2, trials=[_Trial(staging)])
    first = current_slot(run_dir)
    assert first is not None and _generation(first) == (3, 3, 3)
    guard.on_step_end(iteration=3, trials=[_Trial(staging)])  # unchanged: no new copy
    assert current_slot(run_dir) == first

    _snapshot(staging, 5)
    os.utime(staging / STATE, ns=(1, 1))  # a rewrite leaves another mtime
    guard.on_step_end(iteration=4, trials=[_Trial(staging)])
    second = current_slot(run_dir)
    assert second is not None and second != first and _generation(second) == (5, 5, 5)

    # The driver died while Tune's background sync copied snapshot 6 into the run folder:
    # the generator's counter of 6 arrived, the trial list of 4 (an older sync), and the
    # pickle is torn. Restored as it is, Tune would count 6 trials but resume 4.
    _snapshot(run_dir, 4)
    (run_dir / GEN).write_text(json.dumps({"counter": 6}))
    (run_dir / PICKLE).write_bytes(pickle.dumps({"trials": 6})[:5])
    assert repair_snapshot(run_dir) == sorted([GEN, PICKLE, STATE])
    assert _generation(run_dir) == (5, 5, 5)
    assert repair_snapshot(run_dir) == []  # the run folder holds that snapshot now


def test_repair_sets_aside_files_of_a_session_newer_than_the_kept_snapshot(
    tmp_path: Path,
) -> None:
    staging, run_dir = tmp_path / "staging", tmp_path / "run"
    _snapshot(staging, 2)
    run_dir.mkdir()
    SnapshotGuard(str(run_dir), check_every_s=0.0).on_step_end(1, [_Trial(staging)])
    older = run_dir / STATE.replace("2026", "2025")  # an earlier session's: left alone
    older.write_text("{}")
    newer = run_dir / STATE.replace("2026", "2027")  # a resume that died before its copy
    newer.write_text('{"trial_data": [')
    assert repair_snapshot(run_dir) == sorted([GEN, PICKLE, STATE, newer.name])
    assert not newer.exists()
    assert (run_dir / BACKUP_DIR / SUPERSEDED_DIR / newer.name).is_file()
    assert older.read_text() == "{}"
    assert _generation(run_dir) == (2, 2, 2)


def test_trial_logs_kept_with_their_snapshot_and_put_back_by_repair(tmp_path: Path) -> None:
    # The driver's staging folder holds each trial's result logs beside the snapshot; the
    # run folder gets both by Tune's background copy, which a kill can cut short.
    staging, run_dir = tmp_path / "staging", tmp_path / "run"
    _snapshot(staging, 2)
    for trial, lines in (("trial_a", 2), ("trial_b", 1)):
        (staging / trial).mkdir()
        (staging / trial / "result.json").write_text('{"epoch": 1}\n' * lines)
    (staging / "trial_a" / "progress.csv").write_text("epoch\n1\n2\n")
    save_generation(staging, run_dir)
    first = current_slot(run_dir)
    assert first is not None
    assert (first / "logs" / "trial_a" / "result.json").read_text().count("\n") == 2

    # Trial b reports again, trial a does not; two generations on, the first slot is
    # written again: b's log is copied anew, a's (unchanged) is left as it was.
    a_first = (first / "logs/trial_a/result.json").stat().st_ino
    for n in (3, 4):
        with (staging / "trial_b" / "result.json").open("a") as log:
            log.write('{"epoch": 2}\n')
        _snapshot(staging, n)
        os.utime(staging / STATE, ns=(n, n))
        save_generation(staging, run_dir)
    second = current_slot(run_dir)
    assert second == first
    assert (second / "logs/trial_a/result.json").stat().st_ino == a_first
    assert (second / "logs/trial_b/result.json").read_text().count("\n") == 3

    # Killed before Tune's copy carried b's second result (and a's whole log) over; a
    # third trial's folder exists that this snapshot never saw a log of.
    for trial in ("trial_a", "trial_b", "trial_c"):
        (run_dir / trial).mkdir()
    (run_dir / "trial_b" / "result.json").write_text('{"epoch": 1}\n')
    (run_dir / "trial_c" / "result.json").write_text('{"epoch": 1}\n')
    changed = repair_snapshot(run_dir)
    assert "trial_a/result.json" in changed and "trial_b/result.json" in changed
    assert "trial_a/progress.csv" in changed
    assert (run_dir / "trial_a/result.json").read_text() == '{"epoch": 1}\n' * 2
    assert (run_dir / "trial_b/result.json").read_text().count("\n") == 3
    assert (run_dir / "trial_c/result.json").read_text() == '{"epoch": 1}\n'
    assert not [n for n in repair_snapshot(run_dir) if "/" in n]  # in step now


def test_repair_never_takes_rows_away_from_a_trial_log(tmp_path: Path) -> None:
    staging, run_dir = tmp_path / "staging", tmp_path / "run"
    _snapshot(staging, 2)
    rows = [json.dumps({"epoch": n}) + "\n" for n in (1, 2, 3)]
    for trial in ("trial_a", "trial_b", "trial_c"):
        (staging / trial).mkdir()
        (staging / trial / "result.json").write_text("".join(rows[:2]))
    save_generation(staging, run_dir)
    for trial in ("trial_a", "trial_b", "trial_c"):
        (run_dir / trial).mkdir(parents=True)
    # a: Tune's copy came after the snapshot and holds a row more (the run folder is ahead);
    # b: a copy killed mid-write, a torn row after the first; c: a later session's rows.
    (run_dir / "trial_a/result.json").write_text("".join(rows))
    (run_dir / "trial_b/result.json").write_text(rows[0] + rows[1][:5])
    (run_dir / "trial_c/result.json").write_text(rows[0] + rows[2])
    assert [n for n in repair_snapshot(run_dir) if "/" in n] == ["trial_b/result.json"]
    assert (run_dir / "trial_a/result.json").read_text() == "".join(rows)
    assert (run_dir / "trial_b/result.json").read_text() == "".join(rows[:2])
    assert (run_dir / "trial_c/result.json").read_text() == rows[0] + rows[2]


def test_logs_of_trials_that_ended_after_the_snapshot_come_from_the_dead_driver_staging(
    tmp_path: Path,
) -> None:
    staging, run_dir = tmp_path / "staging", tmp_path / "run"
    run_dir.mkdir()
    assert recover_trial_logs(run_dir, {"a"}) == []  # no staging folder recorded: nothing
    guard = SnapshotGuard(str(run_dir), check_every_s=0.0)
    guard.on_step_begin(iteration=1, trials=[_Trial(staging)])
    assert (run_dir / BACKUP_DIR / STAGING_FILE).read_text() == str(staging)
    # Trial a ended after the last snapshot (the run folder has its checkpoint, no log);
    # b is still running (Tune restores it from the snapshot: its log is left alone); c
    # ended and has no folder in the run folder yet.
    for trial in ("trial_a", "trial_b", "trial_c"):
        (staging / trial).mkdir(parents=True)
        (staging / trial / "result.json").write_text('{"epoch": 1}\n{"epoch": 2}\n')
    (staging / "trial_a" / "progress.csv").write_text("epoch\n1\n2\n")
    (run_dir / "trial_a" / "checkpoint_000001").mkdir(parents=True)
    (run_dir / "trial_b").mkdir()
    (run_dir / "trial_b" / "result.json").write_text('{"epoch": 1}\n')
    assert recover_trial_logs(run_dir, {"a", "c"}) == [
        "trial_a/result.json",
        "trial_a/progress.csv",
        "trial_c/result.json",
    ]
    assert (run_dir / "trial_a/result.json").read_text().count("\n") == 2
    assert (run_dir / "trial_c/result.json").read_text().count("\n") == 2
    assert (run_dir / "trial_b/result.json").read_text() == '{"epoch": 1}\n'
    assert recover_trial_logs(run_dir, {"a", "c"}) == []  # in step now
    # The machine was replaced (or rebooted): the staging folder is gone, nothing to take.
    (run_dir / "trial_a/result.json").unlink()
    staging.rename(tmp_path / "elsewhere")
    assert recover_trial_logs(run_dir, {"a"}) == []


def test_guard_copies_the_snapshot_while_tune_takes_it(tmp_path: Path) -> None:
    # Tune calls callbacks' get_state right after writing the snapshot to staging and
    # before copying it to the run folder: the slot has it then, not a check period later.
    staging, run_dir = tmp_path / "staging", tmp_path / "run"
    run_dir.mkdir()
    guard = SnapshotGuard(str(run_dir), check_every_s=3600.0)
    guard.on_step_begin(iteration=1, trials=[_Trial(staging)])
    _snapshot(staging, 4)
    assert guard.get_state() is None  # no state of its own: Tune writes no file for it
    slot = current_slot(run_dir)
    assert slot is not None and _generation(slot) == (4, 4, 4)
    guard.on_step_end(iteration=1, trials=[_Trial(staging)])  # its check: nothing new
    _snapshot(staging, 6)
    os.utime(staging / STATE, ns=(1, 1))
    guard.on_step_end(iteration=2, trials=[_Trial(staging)])  # within the period: no copy
    assert _generation(current_slot(run_dir) or slot) == (4, 4, 4)
    guard.get_state()
    assert _generation(current_slot(run_dir) or slot) == (6, 6, 6)


def test_a_crash_while_a_slot_is_written_leaves_the_current_one_in_use(tmp_path: Path) -> None:
    staging, run_dir = tmp_path / "staging", tmp_path / "run"
    _snapshot(staging, 2)
    assert save_generation(staging, run_dir) == sorted([GEN, PICKLE, STATE])
    kept = current_slot(run_dir)
    assert kept is not None
    other = run_dir / BACKUP_DIR / ("b" if kept.name == "a" else "a")
    other.mkdir()  # the next copy began, then the driver died: "current" was not moved
    (other / STATE).write_text('{"trial_')
    assert current_slot(run_dir) == kept
    repair_snapshot(run_dir)
    assert _generation(run_dir) == (2, 2, 2)


def test_run_folders_without_slots_get_damaged_files_from_their_last_intact_copy(
    tmp_path: Path,
) -> None:
    # The layout of earlier versions: one last-intact copy per file in .snapshot/.
    (tmp_path / BACKUP_DIR).mkdir()
    (tmp_path / BACKUP_DIR / STATE).write_text(json.dumps({"trial_data": [1, 2]}))
    (tmp_path / STATE).write_text("")
    assert repair_snapshot(tmp_path) == [STATE]
    assert json.loads((tmp_path / STATE).read_text()) == {"trial_data": [1, 2]}
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


def test_drop_run_files_leaves_tunes_own_files_in_its_staging_folder(tmp_path: Path) -> None:
    tunes = [
        "experiment_state-2026-12-08_01-49-04.json",
        "search_gen_state-2026-12-08_01-49-04.json",
        "searcher-state-2026-12-08_01-49-04.pkl",
        "basic-variant-state-2026-12-08_01-49-04.json",
        "tuner.pkl",
        "trainable.pkl",
    ]
    copies = ["ledger.json", "status.json", "scheduler_state.json", "run.json", "x.pkl"]
    for name in (*tunes, *copies, "notes.txt"):
        (tmp_path / name).write_text("{}")
    (tmp_path / "trial_1").mkdir()
    (tmp_path / "trial_1" / "result.json").write_text("{}")
    assert drop_run_files(tmp_path) == sorted(copies)
    left = {p.name for p in tmp_path.iterdir()}
    assert left == {*tunes, "notes.txt", "trial_1"}
    assert (tmp_path / "trial_1" / "result.json").is_file()
    assert drop_run_files(tmp_path) == []
