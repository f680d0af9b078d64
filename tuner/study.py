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
import json
import sqlite3
import time
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.rundir import RUN_FILE, STUDY_FILE, study_url

BUSY_TIMEOUT_S = 30
CONNECT_TIMEOUT_S = 5  # seconds to reach a study database server

TUNE_TRIAL_ID_ATTR = "tune_trial_id"
STOP_REASON_ATTR = "stop_reason"
EPOCHS_ATTR = "epochs"
FAILURE_ATTR = "failure"
FAILURE_MESSAGE_ATTR = "failure_message"
COST_ATTR = "cost_usd"
"""A finished trial's share of the campaign's spend in dollars, by its share of the
trial-seconds when it ended (:meth:`tuner.budget.Ledger.trial_usd`)."""
ORPHAN_REASON = "orphaned: started after Tune's last snapshot before the driver died; not resumable"
"""The stop reason of a trial the dead driver asked for but Tune's last snapshot never had."""
SEED_ATTR = "warm_start_seed"
"""User attribute of a trial copied from an earlier campaign to seed the sampler
(:mod:`tuner.warm_start`): ``<source>#<its number there>``. Not a trial of the campaign."""


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


def storage_for(url: str) -> optuna.storages.BaseStorage:
    """The Optuna storage a ``study_storage`` URL names (see
    :func:`tuner.rundir.check_study_storage`): Optuna's journal on a file for
    ``journal:///PATH``, else its RDB storage (connections checked before use, as a shared
    server may drop idle ones)."""
    if url.startswith("journal://"):
        from optuna.storages.journal import JournalFileBackend

        path = url.split("://", 1)[1]
        return optuna.storages.JournalStorage(JournalFileBackend(path))
    kwargs: dict[str, object] = {"pool_pre_ping": True}
    if url.startswith("postgresql"):
        kwargs["connect_args"] = {"connect_timeout": CONNECT_TIMEOUT_S}
    from sqlalchemy.exc import IntegrityError, ProgrammingError

    for attempt in range(3):
        try:
            return optuna.storages.RDBStorage(url, engine_kwargs=kwargs)
        except (IntegrityError, ProgrammingError) as err:
            # Two drivers creating Optuna's tables in an empty database at once: one wins
            # (PostgreSQL: UniqueViolation on CREATE TYPE), the other finds them next time.
            if attempt == 2 or ("already exists" not in str(err) and "duplicate" not in str(err)):
                raise
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


def check_reachable(url: str, *, source: str = "<cli>", path: str = "--study-storage") -> None:
    """Opens the store once (within seconds), so an unreachable database is an error
    before the campaign starts. SpecError naming the URL (it holds no password)."""
    from tuner.errors import SpecError

    try:
        storage_for(url).get_all_studies()
    except Exception as err:  # drivers raise their own classes; the text says why
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise SpecError(
            source,
            path,
            f"the study storage cannot be opened ({type(err).__name__}: {first})",
            got=url,
            fix="check that the database server runs and that host, port, database and user "
            "are right (the password comes from PGPASSWORD or ~/.pgpass)",
        ) from None


def campaign_trials(
    study: optuna.Study, states: tuple[TrialState, ...] | None = None
) -> list[FrozenTrial]:
    """The study's trials that belong to its campaign: all but warm-start seeds.

    Every count, summary, report and resume reads trials through this, so an earlier
    campaign's trials that seed the sampler are never counted as this campaign's.
    """
    return [
        t for t in study.get_trials(deepcopy=False, states=states) if SEED_ATTR not in t.user_attrs
    ]


def name_metrics(study: optuna.Study, metrics: list[str]) -> None:
    """Names the study's objectives (optuna-dashboard shows them; Optuna calls the API
    experimental and warns about it, which is silenced here)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.set_metric_names(metrics)


def study_location(run_dir: Path) -> tuple[str, str | None]:
    """Where the run's study is: its storage URL and study name (None: the single study
    of the run folder's ``study.db``)."""
    try:
        info = json.loads((run_dir / RUN_FILE).read_text())
    except (FileNotFoundError, ValueError):
        info = {}
    url = info.get("study_storage")
    if url:
        return str(url), str(info["study_name"])
    return study_url(run_dir), None


def open_study(run_dir: Path) -> optuna.Study:
    """Loads the run's study: from its study storage (run.json names it), else the single
    study in ``study.db``. FileNotFoundError when it has none yet."""
    url, name = study_location(run_dir)
    if name is not None:
        try:
            return optuna.load_study(study_name=name, storage=storage_for(url))
        except KeyError:
            raise FileNotFoundError(f"no study {name!r} in {url}") from None
    if not (run_dir / STUDY_FILE).exists():
        raise FileNotFoundError(f"{run_dir / STUDY_FILE} does not exist")
    names = optuna.get_all_study_names(storage=url)
    if not names:  # the file exists (a storage opened it) but no study was created yet
        raise FileNotFoundError(f"{run_dir / STUDY_FILE} holds no study yet")
    return optuna.load_study(study_name=names[0], storage=url)
