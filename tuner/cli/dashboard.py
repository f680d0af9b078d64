"""``tuner dashboard``: optuna-dashboard on a campaign's study, or on a shared study store.

optuna-dashboard's own server (``optuna_dashboard.run_server``) on the run folder's study
(``study.db``, or the shared store its ``run.json`` names), or on ``--study-storage``. It
binds the loopback interface unless told otherwise: the dashboard can change studies (notes,
trial states) and has no login. Every trial of a campaign carries its Tune trial id, stop
reason, epochs and cost as user attributes (:mod:`tuner.study`), which the dashboard shows.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tuner.errors import RunFolderError, SpecError

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "add_dashboard_command", "dashboard_storage"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080


def add_dashboard_command(subparsers: Any) -> None:
    """Adds ``tuner dashboard`` to the CLI's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "dashboard",
        help="open optuna-dashboard on a campaign's study or a shared study store",
        description="Serve optuna-dashboard on a run folder's study (RUN_DIR) or on every "
        "campaign of a study store (--study-storage). Trials show their Tune trial id, stop "
        "reason, epochs and cost as user attributes. Stop it with Ctrl+C.",
    )
    parser.add_argument("run_dir", type=Path, nargs="?", help="the run folder, e.g. runs/digits")
    parser.add_argument(
        "--study-storage",
        metavar="URL",
        help="a study store instead of a run folder (postgresql+psycopg://user@host/db, "
        "journal:///path, sqlite:///path)",
    )
    parser.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"interface to listen on ({DEFAULT_HOST}: this machine only; the dashboard has "
        "no login)",
    )
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port ({DEFAULT_PORT})")
    parser.set_defaults(handler=_cmd_dashboard)


def dashboard_storage(run_dir: Path | None, study_storage: str | None) -> str:
    """The storage URL the dashboard opens: ``--study-storage``, else the run folder's.

    Raises:
        SpecError: Neither or both are given, or the URL is malformed.
        RunFolderError: The run folder has no study.
    """
    from tuner.rundir import check_study_storage

    if (run_dir is None) == (study_storage is None):
        raise SpecError(
            "<cli>",
            "--study-storage" if study_storage is not None else "RUN_DIR",
            "give a run folder or --study-storage, one of them",
            fix="tuner dashboard runs/<campaign>, or tuner dashboard --study-storage URL",
        )
    if study_storage is not None or run_dir is None:
        return check_study_storage(str(study_storage))
    from tuner.rundir import RUN_FILE, STUDY_FILE
    from tuner.study import study_location

    url, name = study_location(run_dir)
    if name is None and not (run_dir / STUDY_FILE).is_file():
        raise RunFolderError(
            str(run_dir),
            f"no {STUDY_FILE} here and no shared store named in {RUN_FILE}",
            fix="pass a campaign's run folder (runs/<name>) once a trial has started",
        )
    return url


def _cmd_dashboard(args: argparse.Namespace) -> int:
    from tuner.tracking import require

    url = dashboard_storage(args.run_dir, args.study_storage)
    if not 0 < args.port < 65536:
        raise SpecError("<cli>", "--port", "must be a TCP port, 1 to 65535", got=args.port)
    dashboard = require("optuna_dashboard", "dashboard", "tuner dashboard")
    from tuner.study import storage_for

    print(f"optuna-dashboard on {url}: http://{args.host}:{args.port}/ (Ctrl+C stops it)")
    dashboard.run_server(storage_for(url), host=args.host, port=args.port)
    return 0
