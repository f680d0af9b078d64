"""Keeps a consistent copy of Ray Tune's experiment snapshot, so a crash loses nothing.

Tune writes ``experiment_state-*.json`` (in place), ``searcher-state-*.pkl`` and
``search_gen_state-*.json`` to a staging folder of the driver, one after the other in the
driver's thread, then copies them, with every trial's ``result.json`` and ``progress.csv``,
into the run folder in a background thread, file by file and in place. A driver killed at
the wrong moment leaves the run folder with an empty or torn file (``Tuner.restore`` then
silently starts afresh), with files of two different snapshots (the search generator's
trial counter of a newer one with the trial list of an older one makes the resumed
campaign run fewer trials than asked for), or with a snapshot whose trials' results had
not arrived yet (a restored trial with a checkpoint and no ``result.json``).

This callback copies the staging folder's files at the moment Tune has written them, from
inside Tune's snapshot (Tune asks callbacks for their state right after writing the
experiment and searcher state, before it starts the copy to the run folder), into one of
two slots under ``.snapshot/``, with the trials' result logs of that same moment (only
those changed since that slot was written are copied), and then points
``.snapshot/current`` at that slot (written atomically). Before a resume,
:func:`repair_snapshot` puts the current slot's files back in place of the run folder's,
all of them, and extends each trial's result logs with the rows of that snapshot that
Tune's copy had not carried over: the restored experiment is always one whole snapshot,
at worst one snapshot period older than the newest, which the searcher's reconciliation
and the persistent scheduler already handle like any crash. Rows a trial reported are
never taken away; the results of trials that ended after that snapshot are taken from the
dead driver's staging folder where it is still on disk (:func:`recover_trial_logs`).
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

from tuner import atomic

logger = logging.getLogger(__name__)

BACKUP_DIR = ".snapshot"
CURRENT_FILE = "current"
SUPERSEDED_DIR = "superseded"
LOGS_DIR = "logs"  # in a slot: <trial folder>/result.json and progress.csv
STAGING_FILE = "staging"  # the path of the driver's staging folder, as last seen
# The files Ray's JSON and CSV loggers write per trial (and copy back from storage when a
# trial restarts).
TRIAL_LOGS = ("result.json", "progress.csv")
_SLOTS = ("a", "b")
# Tune snapshots once a second or less often (campaign.snapshot_period_s); looking twice as
# often keeps the copy at most one snapshot behind without listing the staging folder on
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


def _state_files(folder: Path) -> list[Path]:
    return [p for pattern in _PATTERNS for p in folder.glob(pattern)]


def current_slot(run_dir: Path) -> Path | None:
    """The slot of ``.snapshot/`` holding the last whole snapshot, or None."""
    try:
        name = (run_dir / BACKUP_DIR / CURRENT_FILE).read_text().strip()
    except FileNotFoundError:
        return None
    slot = run_dir / BACKUP_DIR / name
    return slot if name in _SLOTS and slot.is_dir() else None


def save_generation(source: Path, run_dir: Path) -> list[str]:
    """Copies the snapshot files in ``source`` (whole, of one snapshot) and its trials'
    result logs into the slot not in use, then makes it the current one; returns the names
    of the snapshot files copied.

    The slot is brought up to date in place: its snapshot files are replaced, and of the
    result logs only those that changed since that slot was written (two generations ago)
    are copied, so a generation costs a few stats per trial (Tune takes a snapshot after
    most checkpoints when it keeps few). ``current`` points at the other slot meanwhile.
    """
    files = _state_files(source)
    if not files:
        return []
    backup = run_dir / BACKUP_DIR
    current = current_slot(run_dir)
    slot = backup / (_SLOTS[1] if current is not None and current.name == _SLOTS[0] else _SLOTS[0])
    slot.mkdir(parents=True, exist_ok=True)
    names = {p.name for p in files}
    for stale in _state_files(slot):
        if stale.name not in names:
            stale.unlink()
    for path in files:
        shutil.copyfile(path, slot / path.name)
    _save_trial_logs(source, slot)
    # The slot counts only once it is complete.
    atomic.write_text(backup / CURRENT_FILE, slot.name, durable=False)
    return sorted(names)


def _save_trial_logs(source: Path, slot: Path) -> None:
    """Each trial's result logs in ``source`` into ``slot/logs``, copied (with their mtime)
    where the slot's copy differs in size or mtime (Ray only appends to them)."""
    for name in TRIAL_LOGS:
        for log in source.glob(f"*/{name}"):
            dest = slot / LOGS_DIR / log.relative_to(source)
            try:
                stat = log.stat()
            except FileNotFoundError:
                continue
            try:
                kept = dest.stat()
                if (kept.st_size, kept.st_mtime_ns) == (stat.st_size, stat.st_mtime_ns):
                    continue
            except FileNotFoundError:
                dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                atomic.copy_file(log, dest)
            except FileNotFoundError:
                continue


class SnapshotGuard(Callback):
    """Copies each Tune snapshot, as one, from the driver's staging folder to
    ``run_dir/.snapshot`` (see the module docstring).

    The copy is made from :meth:`get_state`, which Tune calls while it takes the snapshot,
    after the experiment and searcher state are written and before they are copied to the
    run folder; the guard keeps no state of its own (returns None, so Tune writes no file
    for it). A check at the end of the controller's step, every ``check_every_s``, copies
    any snapshot that call missed.
    """

    def __init__(self, run_dir: str, check_every_s: float = CHECK_EVERY_S) -> None:
        self._run_dir = run_dir
        self._check_every_s = check_every_s
        self._seen: dict[str, int] = {}
        self._last_check = 0.0
        self._staging: Path | None = None

    def on_step_begin(self, iteration: int, trials: list[Any], **info: Any) -> None:
        if self._staging is None:
            staging = _staging_dir(trials)
            if staging is not None:
                # Before Tune's first upload of this session (at the end of this step).
                drop_run_files(staging)
            self._note_staging(staging)

    def get_state(self) -> dict[str, Any] | None:
        if self._staging is not None:
            self._copy(self._staging)
        return None

    def on_step_end(self, iteration: int, trials: list[Any], **info: Any) -> None:
        now = time.monotonic()
        if now - self._last_check < self._check_every_s:
            return
        self._last_check = now
        staging = _staging_dir(trials)
        if staging is not None:
            self._note_staging(staging)
            self._copy(staging)

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        staging = _staging_dir(trials)
        if staging is not None:
            self._copy(staging)

    def _note_staging(self, staging: Path | None) -> None:
        """Remembers the staging folder, and writes its path to ``.snapshot/staging`` for a
        resume after this driver dies (:func:`recover_trial_logs`)."""
        if staging is None or staging == self._staging:
            return
        self._staging = staging
        backup = Path(self._run_dir) / BACKUP_DIR
        backup.mkdir(parents=True, exist_ok=True)
        atomic.write_text(backup / STAGING_FILE, str(staging), durable=False)

    def _copy(self, staging: Path) -> None:
        seen: dict[str, int] = {}
        for path in _state_files(staging):
            try:
                seen[path.name] = path.stat().st_mtime_ns
            except FileNotFoundError:
                continue
        if seen and seen != self._seen:
            save_generation(staging, Path(self._run_dir))
            self._seen = seen


class KeepTrialLogs(Callback):
    """Keeps a restarted trial's newest results.

    When Tune starts a trial again from its checkpoint (a trial ASHA paused at a rung, a
    retry after an error), Ray's loggers first copy its ``result.json`` and
    ``progress.csv`` back from storage over the driver's own copies. Storage gets those
    files with the experiment snapshot, up to a snapshot period late, so the results
    reported since were lost (a trial resumed a second after it paused lost the epoch it
    paused at). Listed before Ray's loggers, this pushes the driver's copies to storage
    first; after a driver restart there are none, and storage's are restored as before.
    """

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        if not trial.checkpoint:
            return  # a first start: Ray restores nothing
        import pyarrow.fs  # type: ignore[import-untyped]  # Ray's dependency

        for name in TRIAL_LOGS:
            local = Path(trial.local_path, name)
            if local.is_file():
                pyarrow.fs.copy_files(
                    str(local),
                    Path(trial.storage.trial_fs_path, name).as_posix(),
                    destination_filesystem=trial.storage.storage_filesystem,
                )


# Tune's own files at the top of its staging folder; anything else there is a copy of a
# run-folder file of tuner's that Tune's restore downloaded (below).
_TUNE_FILES = (*_PATTERNS, "basic-variant-state-*.json", "tuner.pkl", "trainable.pkl")


def drop_run_files(staging: Path) -> list[str]:
    """Deletes from Tune's staging folder the copies of tuner's own run-folder files.

    Restoring, Tune copies every ``*.json`` and ``*.pkl`` of the run folder into its staging
    folder (``sync_down_experiment_state``: ``ledger.json``, ``status.json``,
    ``scheduler_state.json``, ``run.json``... as they were at the resume), and each of its
    snapshot uploads then copies the whole staging folder back over the run folder, file by
    file and in place: the stale copies overwrite what the guard, the scheduler and the
    status writer wrote since, and a driver killed during that copy leaves the file torn
    (an empty ``ledger.json`` failed the next resume). Tune needs none of them; deleting
    them from the staging folder leaves the run folder's files alone (an upload copies,
    it never deletes). Returns the names deleted.
    """
    dropped = []
    for path in sorted(staging.glob("*")):
        if not path.is_file() or path.suffix not in (".json", ".pkl"):
            continue
        if any(path.match(pattern) for pattern in _TUNE_FILES):
            continue
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        dropped.append(path.name)
    if dropped:
        logger.debug("dropped run-folder copies from Tune's staging folder: %s", dropped)
    return dropped


def _staging_dir(trials: list[Any]) -> Path | None:
    """Where this driver's Tune writes its snapshot before syncing it (None: no trial yet)."""
    for trial in trials:
        storage = getattr(trial, "storage", None)
        if storage is not None:
            return Path(storage.experiment_driver_staging_path)
    return None


def repair_snapshot(run_dir: Path) -> list[str]:
    """Puts the last whole snapshot back in place of Tune's files in ``run_dir``.

    Files of newer sessions than that snapshot's (a resume that crashed before its first
    copy) are moved to ``.snapshot/superseded/``, so Tune restores the whole snapshot and
    nothing newer. Run folders of older versions (no slots) get each damaged file replaced
    by its last intact copy.

    Returns:
        The names of the files that changed.
    """
    slot = current_slot(run_dir)
    if slot is None:
        return _repair_each(run_dir)
    changed = []
    saved = {p.name: p for p in _state_files(slot)}
    newest = {
        pattern: max((n for n in saved if Path(n).match(pattern)), default="")
        for pattern in _PATTERNS
    }
    for path in _state_files(run_dir):
        if path.name in saved:
            continue
        kind = next(p for p in _PATTERNS if path.match(p))
        if path.name > newest[kind]:  # a newer session than the snapshot kept
            aside = run_dir / BACKUP_DIR / SUPERSEDED_DIR
            aside.mkdir(parents=True, exist_ok=True)
            os.replace(path, aside / path.name)
            changed.append(path.name)
    for name, good in saved.items():
        target = run_dir / name
        if target.is_file() and target.read_bytes() == good.read_bytes():
            continue
        atomic.copy_file(good, target)
        changed.append(name)
    changed += _restore_trial_logs(slot, run_dir)
    if changed:
        logger.warning("Restored Tune's last whole snapshot: %s", sorted(changed))
    return sorted(changed)


def _restore_trial_logs(slot: Path, run_dir: Path) -> list[str]:
    """Extends each trial's result logs in its folder with what the slot's snapshot knew
    and Tune's copy had not carried over (see :func:`_extend_log`)."""
    changed = []
    for good in sorted((slot / LOGS_DIR).glob("*/*")):
        if good.name not in TRIAL_LOGS or not good.is_file():
            continue
        folder = run_dir / good.parent.name
        if folder.is_dir() and _extend_log(good, folder / good.name):
            changed.append(f"{folder.name}/{good.name}")
    return changed


def _extend_log(source: Path, target: Path) -> bool:
    """Makes ``target`` (a trial's result log, only ever appended to) the longer of the two
    copies; returns whether it changed.

    ``target`` becomes ``source`` where it is missing or a beginning of it (Tune's copy
    was cut short by the kill); a torn last line (a copy killed mid-write) is dropped first.
    A ``target`` that holds more than ``source``, or other rows (written by a later
    session), is kept: rows a trial reported are never taken away.
    """
    try:
        text = source.read_bytes()
    except FileNotFoundError:
        return False
    try:
        kept = target.read_bytes()
    except FileNotFoundError:
        kept = b""
    whole = kept[: kept.rfind(b"\n") + 1]
    if len(text) > len(whole) and text.startswith(whole):
        whole = text
    if whole == kept and target.exists():
        return False
    atomic.write_bytes(target, whole, durable=False)
    return True


def recover_trial_logs(run_dir: Path, trial_ids: Set[str]) -> list[str]:
    """Takes the result logs of ``trial_ids`` from the staging folder of the driver that
    died, where it is still on this machine (a driver killed on a head node that lives on).

    A trial that ended after Tune's last snapshot has its results only there: Tune copies
    them to the run folder with the next snapshot, which never came. Only trials that ended
    (the study's final ones, which never run again) are taken: a trial Tune restores from
    its snapshot reruns the epochs since, and its log stays as that snapshot knew it.

    Returns:
        ``<trial folder>/<log>`` of each log extended.
    """
    try:
        staging = Path((run_dir / BACKUP_DIR / STAGING_FILE).read_text().strip())
    except FileNotFoundError:
        return []
    if not staging.is_dir():
        return []
    changed = []
    for trial_id in sorted(trial_ids):
        folder = f"trial_{trial_id}"
        for name in TRIAL_LOGS:
            source = staging / folder / name
            if not source.is_file():
                continue
            (run_dir / folder).mkdir(exist_ok=True)
            if _extend_log(source, run_dir / folder / name):
                changed.append(f"{folder}/{name}")
    if changed:
        logger.warning("Recovered %d trial result log(s) from %s", len(changed), staging)
    return changed


def _repair_each(run_dir: Path) -> list[str]:
    """Run folders without slots: replaces damaged files with their last intact copies."""
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


def reopen_search(run_dir: Path) -> bool:
    """Lets the restored Tune run ask its searcher for new trials again.

    A campaign that ``tuner stop`` ended closed its searcher: Tune's ``SearchGenerator``
    saves ``finished: True`` in ``search_gen_state-*.json`` (a cloudpickle, despite the
    name) and restores it, so a resume would start no trial. The flag is cleared in the
    file Tune restores (the greatest name); the count of trials created stays, so the
    resume asks for exactly those left. Returns whether the file was changed.
    """
    import ray.cloudpickle as cloudpickle

    files = sorted(run_dir.glob("search_gen_state-*.json"))
    if not files:
        return False
    newest = files[-1]
    state = cloudpickle.loads(newest.read_bytes())
    if not state.get("finished"):
        return False
    state["finished"] = False
    atomic.write_bytes(newest, cloudpickle.dumps(state))
    return True
