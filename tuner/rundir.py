"""The run folder: one directory holds everything a campaign writes and needs to resume.

Layout of ``runs/<name>/``::

    campaign.yaml          the validated campaign, overrides applied (what resume reads)
    run.json               where the campaign's code is imported from (code_dirs)
    study.db               the Optuna study (SQLite; ``optuna-dashboard sqlite:///study.db``)
    scheduler_state.json   ASHA rungs and finished trials (survive a driver crash)
    summary.json           outcome counts, best trial, top trials (written at the end)
    best.yaml              the winning configuration, reusable as fixed settings
    ledger.json            what the nodes cost while the campaign ran, and each trial's
                           GPU-seconds (the budget guard's books; a resume continues them)
    profile.json           what the trials measured (epoch and start-up time, FLOPs,
                           memory), for `tuner recommend --profile`
    trial_<id>/            Ray Tune trial folders: result.json, progress.csv, checkpoints
    .snapshot/             last intact copies of Tune's snapshot files (see tuner/_ray/snapshot.py)
    .orphaned/             folders of trials started after Tune's last snapshot before a crash
    experiment_state-*.json, tuner.pkl, searcher-state-*.pkl   Ray Tune's own state
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

import yaml

from tuner import atomic
from tuner.errors import RunFolderError, SpecError
from tuner.terminal import fit

CAMPAIGN_FILE = "campaign.yaml"
RUN_FILE = "run.json"
STUDY_FILE = "study.db"
SCHEDULER_STATE_FILE = "scheduler_state.json"
SUMMARY_FILE = "summary.json"
BEST_FILE = "best.yaml"
PROFILE_FILE = "profile.json"
DRIVER_LOG_FILE = "driver.log"
DEFAULT_RUNS_ROOT = Path("runs")


def check_storage_uri(uri: str, *, source: str = "<cli>", path: str = "--storage-path") -> str:
    """Refuses a storage URI that carries credentials (``s3://KEY:SECRET@bucket``).

    The URI is written to run.json and to Ray Tune's experiment state, and printed: a
    secret in it would end up in the run folder and in logs. pyarrow and Ray read
    credentials from the environment or the cloud's own config files instead.

    Raises:
        SpecError: The URI has a user or password part; the message shows it redacted.
    """
    from urllib.parse import urlsplit

    parts = urlsplit(uri)
    if parts.username is None and parts.password is None:
        return uri
    redacted = parts._replace(netloc="***@" + (parts.hostname or "")).geturl()
    raise SpecError(
        source,
        path,
        "the storage URI carries credentials, which would be written to run.json, Ray "
        "Tune's experiment state and the logs",
        got=redacted,
        fix="drop the user:password part and give the credentials the cloud's usual way "
        "(AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or ~/.aws for s3://, "
        "GOOGLE_APPLICATION_CREDENTIALS or gcloud auth for gs://)",
    )


STUDY_SCHEMES = ("sqlite", "postgresql", "mysql", "journal")
"""URL schemes of ``study_storage`` (``postgresql+psycopg://`` names a driver too)."""


def check_study_storage(url: str, *, source: str = "<cli>", path: str = "--study-storage") -> str:
    """Checks a study storage URL's form (nothing is contacted here); returns it.

    ``sqlite:///PATH``, ``postgresql[+driver]://[user@]host[:port]/db``,
    ``mysql[+driver]://...`` (Optuna's RDB storage) or ``journal:///PATH`` (Optuna's
    journal on a file, the store Optuna recommends on NFS). A password in the URL is
    refused: the URL is written to the run folder (campaign.yaml, run.json) and printed;
    PostgreSQL's PGPASSWORD or ~/.pgpass carries it instead.

    Raises:
        SpecError: Another scheme, no database or file, or a password in the URL.
    """
    from urllib.parse import urlsplit

    from tuner.errors import closest

    parts = urlsplit(url)
    scheme = parts.scheme.split("+", 1)[0]
    if scheme not in STUDY_SCHEMES:
        raise SpecError(
            source,
            path,
            "unknown study storage",
            got=url.split("://", 1)[0] + "://..." if "://" in url else url,
            allowed=[f"{s}://" for s in STUDY_SCHEMES],
            suggestion=closest(scheme, STUDY_SCHEMES),
            fix="e.g. postgresql+psycopg://user@host:5432/db or journal:///shared/studies.log",
        )
    if parts.password is not None:
        port = f":{parts.port}" if parts.port else ""
        redacted = parts._replace(netloc=f"{parts.username}:***@{parts.hostname or ''}{port}")
        raise SpecError(
            source,
            path,
            "the study storage URL carries a password, which would be written to the run "
            "folder and printed",
            got=redacted.geturl(),
            fix="drop it from the URL and set PGPASSWORD or a ~/.pgpass entry (PostgreSQL), "
            "or MYSQL_PWD (MySQL)",
        )
    if not parts.path.strip("/"):
        raise SpecError(
            source,
            path,
            "names no database or file",
            got=url,
            fix="end the URL with the database (.../tuner) or the file (journal:///path)",
        )
    return url


def study_url(run_dir: Path) -> str:
    """SQLAlchemy URL of the run's Optuna study."""
    return f"sqlite:///{(run_dir / STUDY_FILE).resolve()}"


def new_run_dir(runs_root: Path, name: str) -> Path:
    """Returns ``runs_root/name``, or ``name-2``, ``name-3``... if taken. Creates nothing."""
    candidate = runs_root / name
    n = 2
    while candidate.exists():
        candidate = runs_root / f"{name}-{n}"
        n += 1
    return candidate


def check_resumable(run_dir: Path) -> Path:
    """Checks that ``run_dir`` is a campaign folder; returns its campaign file."""
    if not run_dir.is_dir():
        raise RunFolderError(
            str(run_dir),
            "no such run folder.",
            fix="pass a folder under runs/ that `tuner run` created (see `ls runs/`).",
        )
    campaign = run_dir / CAMPAIGN_FILE
    if not campaign.is_file():
        raise RunFolderError(
            str(run_dir),
            f"not a tuner run folder (no {CAMPAIGN_FILE} inside).",
            fix="pass the folder `tuner run` printed at start, e.g. runs/<name>.",
        )
    return campaign


def add_code_dirs(code_dirs: list[str]) -> None:
    """Puts folders on this process's import path and on that of the Ray it starts.

    A user trainable ``my_module:train`` next to the campaign file imports in the driver
    (validation) and in local Ray workers, which inherit PYTHONPATH from the driver.
    """
    existing = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    for folder in reversed(code_dirs):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    merged = [*code_dirs, *(p for p in existing if p not in code_dirs)]
    os.environ["PYTHONPATH"] = os.pathsep.join(merged)


@contextmanager
def code_dirs_on_path(code_dirs: list[str]) -> Iterator[None]:
    """:func:`add_code_dirs` for the block; afterwards the folders it added to the import
    path are taken off again and PYTHONPATH is as it was (modules imported meanwhile stay
    imported)."""
    added = [folder for folder in code_dirs if folder not in sys.path]
    saved_env = os.environ.get("PYTHONPATH")
    add_code_dirs(code_dirs)
    try:
        yield
    finally:
        for folder in added:
            if folder in sys.path:
                sys.path.remove(folder)
        if saved_env is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved_env


def read_run_record(run_dir: Path) -> dict[str, Any]:
    """The run's record (run.json), written once when it started; empty without one."""
    path = run_dir / RUN_FILE
    if not path.is_file():
        return {}
    record: dict[str, Any] = json.loads(path.read_text())
    return record


def read_code_dirs(run_dir: Path) -> list[str]:
    """The code folders a run was started with (empty for folders without run.json)."""
    dirs: list[str] = read_run_record(run_dir).get("code_dirs", [])
    return dirs


def write_yaml(path: Path, data: Any) -> None:
    """Atomically writes block-style YAML, keys in insertion order."""
    atomic.write_text(path, yaml.safe_dump(data, sort_keys=False, default_flow_style=False))


def is_uri(storage: str | None) -> bool:
    """Whether ``storage`` is a URI (s3://, gs://, file://...) rather than a local path."""
    return storage is not None and "://" in storage


def storage_folder(storage: str, run_dir: Path) -> str:
    """Where a run's experiment lives under a storage URI: ``<storage>/<run folder name>``."""
    return f"{storage.rstrip('/')}/{run_dir.name}"


def upload(run_dir: Path, storage: str | None, stream: TextIO | None) -> None:
    """Copies the run folder's own files next to Tune's in the storage URI."""
    if storage is None or not is_uri(storage):
        return
    import pyarrow.fs  # type: ignore[import-untyped]  # Ray's dependency

    target = storage_folder(storage, run_dir)
    fs, path = pyarrow.fs.FileSystem.from_uri(target)
    pyarrow.fs.copy_files(
        str(run_dir.resolve()),
        path,
        source_filesystem=pyarrow.fs.LocalFileSystem(),
        destination_filesystem=fs,
    )
    out = stream or sys.stdout
    print(fit(f"run folder copied to {target}", out), file=out)
