"""Keeps a last-good copy of Ray Tune's experiment snapshot, so a crash mid-write loses nothing.

Tune rewrites ``experiment_state-*.json``, ``search_gen_state-*.json`` and
``searcher-state-*.pkl`` in place; a driver killed during that write leaves them empty, and
``Tuner.restore`` then silently starts the experiment afresh. This callback copies each file
to ``.snapshot/`` (atomically) whenever Tune has rewritten it and it reads back whole; before a
resume, :func:`repair_snapshot` puts the last good copy back in place of a damaged file.
"""

from __future__ import annotations

import json
import logging
import os
import pickletools
import shutil
import time
from collections.abc import Set
from pathlib import Path
from typing import Any

from ray.tune import Callback

logger = logging.getLogger(__name__)

BACKUP_DIR = ".snapshot"
# Tune snapshots once a second or less often (campaign.snapshot_period_s); looking twice as
# often keeps the backup at most one snapshot behind without listing the run folder on
# every controller step.
CHECK_EVERY_S = 0.5
_PATTERNS = ("experiment_state-*.json", "search_gen_state-*.json", "searcher-state-*.pkl")


def _intact(path: Path) -> bool:
    try:
        data = path.read_bytes()
        if not data:
            return False
        if path.suffix == ".json":
            json.loads(data)
        else:
            # Walks the opcodes to the final STOP without building objects (unpickling the
            # searcher would open its SQLite study): a truncated pickle raises.
            for _ in pickletools.genops(data):
                pass
    except Exception:
        return False
    return True


def _state_files(run_dir: Path) -> list[Path]:
    return [p for pattern in _PATTERNS for p in run_dir.glob(pattern)]


class SnapshotGuard(Callback):
    """Copies Tune's snapshot files to ``run_dir/.snapshot`` after each intact rewrite."""

    def __init__(self, run_dir: str, check_every_s: float = CHECK_EVERY_S) -> None:
        self._run_dir = run_dir
        self._check_every_s = check_every_s
        self._seen: dict[str, int] = {}
        self._last_check = 0.0

    def on_step_end(self, iteration: int, trials: list[Any], **info: Any) -> None:
        now = time.monotonic()
        if now - self._last_check < self._check_every_s:
            return
        self._last_check = now
        run_dir = Path(self._run_dir)
        backup = run_dir / BACKUP_DIR
        for path in _state_files(run_dir):
            try:
                mtime = path.stat().st_mtime_ns
            except FileNotFoundError:
                continue
            if self._seen.get(path.name) == mtime or not _intact(path):
                continue
            backup.mkdir(exist_ok=True)
            tmp = backup / f".{path.name}.tmp"
            shutil.copyfile(path, tmp)
            os.replace(tmp, backup / path.name)
            self._seen[path.name] = mtime


def repair_snapshot(run_dir: Path) -> list[str]:
    """Replaces damaged snapshot files with their last good copies; returns their names."""
    backup = run_dir / BACKUP_DIR
    repaired = []
    for path in _state_files(run_dir):
        good = backup / path.name
        if not _intact(path) and good.is_file() and _intact(good):
            shutil.copyfile(good, path)
            repaired.append(path.name)
    if repaired:
        logger.warning("Restored Tune snapshot files damaged by a crash: %s", repaired)
    return repaired


# Trial folders a restored experiment does not know go here on resume (kept, not deleted).
ORPHAN_DIR = ".orphaned"


def snapshot_trial_ids(run_dir: Path) -> set[str] | None:
    """Trial ids in Tune's newest experiment snapshot (the one a restore reads), or None."""
    states = sorted(run_dir.glob("experiment_state-*.json"))
    if not states:
        return None
    data = json.loads(states[-1].read_text())
    ids: set[str] = set()
    for entry in data.get("trial_data", []):
        state = entry[0] if isinstance(entry, list) and entry else entry
        if isinstance(state, str):
            state = json.loads(state)
        if isinstance(state, dict) and state.get("trial_id"):
            ids.add(str(state["trial_id"]))
    return ids


def set_aside_orphans(run_dir: Path, finished: Set[str] = frozenset()) -> list[str]:
    """Moves trial folders the snapshot does not know into ``ORPHAN_DIR``; returns them.

    A trial started after Tune's last snapshot before the driver died has a folder (its
    first results, maybe a checkpoint) that no restore will ever continue: the resumed
    experiment does not know it, and its Optuna trial is marked FAIL as orphaned. Left in
    place, its partial results would be read as a trial's (profiles, reports). Moved, not
    deleted: what it measured stays on disk.

    Args:
        finished: Tune trial ids whose Optuna trial is already final (it started and
            ended after the snapshot): a whole trial of the campaign, its folder stays.
    """
    known = snapshot_trial_ids(run_dir)
    if known is None:
        return []
    moved = []
    for folder in sorted(run_dir.glob("trial_*")):
        tune_id = folder.name.removeprefix("trial_")
        if not folder.is_dir() or tune_id in known or tune_id in finished:
            continue
        dest = run_dir / ORPHAN_DIR / folder.name
        dest.parent.mkdir(exist_ok=True)
        n = 1
        while dest.exists():
            dest = run_dir / ORPHAN_DIR / f"{folder.name}.{n}"
            n += 1
        os.replace(folder, dest)
        moved.append(folder.name)
    if moved:
        logger.warning("Set aside %d orphaned trial folder(s) in %s", len(moved), ORPHAN_DIR)
    return moved
