"""The run's Optuna study: SQLite in write-ahead-log mode, and what each trial records there.

Every trial of a campaign carries user attributes beside Optuna's own state and values: its
Tune trial id, why it stopped, the epochs it trained and, for a FAIL, the kind of failure and
a message (the ``*_ATTR`` names below). The searcher writes them; summaries, reports and
resumes read them.

Optuna commits every report, parameter and state change on its own; in SQLite's default
rollback-journal mode each commit waits for an fsync (about 2.6 ms here), and the Tune
driver, which makes them, is single-threaded: 64 trivial ASHA trials made 1,085 commits,
2.8 s of driver time that no trial could use. In WAL mode with ``synchronous=NORMAL`` a
commit appends to ``study.db-wal`` without an fsync. A killed driver loses nothing it
committed (SQLite recovers the log on the next open); only an OS crash or power loss can
drop the last commits, never corrupt the file. Readers (``tuner show``, optuna-dashboard)
do not block the writer. WAL needs a local file system (not NFS) for the study, which is
where the run folder lives; remote storage gets a copy (:func:`checkpoint_study` first).
"""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path

import optuna

from tuner.rundir import STUDY_FILE, study_url

BUSY_TIMEOUT_S = 30

TUNE_TRIAL_ID_ATTR = "tune_trial_id"
STOP_REASON_ATTR = "stop_reason"
EPOCHS_ATTR = "epochs"
FAILURE_ATTR = "failure"
FAILURE_MESSAGE_ATTR = "failure_message"
ORPHAN_REASON = "orphaned: started after Tune's last snapshot before the driver died; not resumable"
"""The stop reason of a trial the dead driver asked for but Tune's last snapshot never had."""


def _connect(path: str) -> sqlite3.Connection:
    # check_same_thread=False is what SQLAlchemy's own pysqlite connect passes for a file
    # database in its connection pool.
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def study_storage(run_dir: Path) -> optuna.storages.RDBStorage:
    """The Optuna storage of ``run_dir/study.db`` (created if missing), in WAL mode."""
    path = str((run_dir / STUDY_FILE).resolve())
    return optuna.storages.RDBStorage(
        study_url(run_dir), engine_kwargs={"creator": functools.partial(_connect, path)}
    )


def checkpoint_study(run_dir: Path) -> None:
    """Folds ``study.db-wal`` into ``study.db``, so a copy of the one file is the whole study."""
    path = run_dir / STUDY_FILE
    if not path.exists():
        return
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def open_study(run_dir: Path) -> optuna.Study:
    """Loads the run's study (the single study in ``study.db``)."""
    url = study_url(run_dir)
    if not (run_dir / STUDY_FILE).exists():
        raise FileNotFoundError(f"{run_dir / STUDY_FILE} does not exist")
    names = optuna.get_all_study_names(storage=url)
    return optuna.load_study(study_name=names[0], storage=url)
