"""``tuner list``, ``status``, ``logs`` and ``stop``: the campaigns under a runs folder,
or submitted to a cluster (``--address``), and one of them.

Locally they read each run folder's ``status.json`` (:mod:`tuner.status`), which the
driver rewrites at least every 10 seconds, so they work while campaigns run, need no Ray,
and show a driver that died as ``DIED``. With ``--address`` (or RAY_ADDRESS) they ask the
cluster's Job Submission API (:mod:`tuner._ray.jobs`). ``--json`` prints the documents
themselves (schema ``tuner.status/1``, documented in docs/service.md).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tuner.errors import RunFolderError, closest

__all__ = [
    "add_list_command",
    "add_logs_command",
    "add_status_command",
    "add_stop_command",
]


def add_list_command(subparsers: Any) -> None:
    """Adds ``tuner list`` to the CLI's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "list",
        help="list the campaigns under runs/: state, trials, best value, spend",
        description="List the campaigns whose run folders are under --runs-dir (runs/): "
        "each one's state (RUNNING, FINISHED, STOPPED, or DIED when its driver stopped "
        "without ending it), trials done of those asked for, best value and spend.",
    )
    parser.add_argument(
        "--runs-dir", type=Path, default=Path("runs"), help="parent of run folders (runs/)"
    )
    parser.add_argument("--json", action="store_true", help="print a JSON list of statuses")
    _address_argument(parser)
    parser.add_argument(
        "--study-storage",
        metavar="URL",
        help="list the campaigns whose studies are in this store instead "
        "(postgresql+psycopg://user@host/db, journal:///path)",
    )
    parser.set_defaults(handler=_cmd_list)


def add_status_command(subparsers: Any) -> None:
    """Adds ``tuner status`` to the CLI's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "status",
        help="one campaign's state, trials, best value and spend",
        description="One campaign's status: its state, trial counts, best value, spend "
        "against its budget, and its top trials. ID is the campaign's id (its run folder's "
        "name under --runs-dir, or on the cluster with --address), or a run folder.",
    )
    _campaign_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the status as JSON")
    _address_argument(parser)
    parser.set_defaults(handler=_cmd_status)


def add_logs_command(subparsers: Any) -> None:
    """Adds ``tuner logs`` to the CLI's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "logs",
        help="a campaign's driver output (the live line, budget and stop messages)",
        description="Print what a campaign's driver printed: its live line, budget "
        "messages and final table (driver.log in the run folder; with --address, the Ray "
        "job's log on the cluster).",
    )
    _campaign_argument(parser)
    parser.add_argument(
        "--follow", "-f", action="store_true", help="keep printing until the campaign ends"
    )
    _address_argument(parser)
    parser.set_defaults(handler=_cmd_logs)


def add_stop_command(subparsers: Any) -> None:
    """Adds ``tuner stop`` to the CLI's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "stop",
        help="stop a running campaign cleanly (resumable)",
        description="Ask a running campaign to stop: no new trial starts, each running "
        "trial checkpoints after its current epoch and ends, the study, ledger and report "
        "are written, and the driver exits with status 3; `tuner resume` (or `tuner submit "
        "--resume ID`) continues it. --now ends it at once instead, as a crash would "
        "(resumable too: unfinished trials go on from their last checkpoint).",
    )
    _campaign_argument(parser)
    parser.add_argument(
        "--now",
        action="store_true",
        help="end at once (SIGINT to a local driver; Ray's stop_job on a cluster)",
    )
    _address_argument(parser)
    parser.set_defaults(handler=_cmd_stop)


def _campaign_argument(parser: argparse.ArgumentParser) -> None:
    """ID (a campaign's id, or its run folder) and --runs-dir: status, logs and stop."""
    parser.add_argument(
        "campaign",
        metavar="ID",
        help="the campaign's id (from `tuner list`), or its run folder",
    )
    parser.add_argument(
        "--runs-dir", type=Path, default=Path("runs"), help="parent of run folders (runs/)"
    )


def _address_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--address",
        help="a Ray cluster's dashboard, http://HEAD:8265 (default: RAY_ADDRESS if it is "
        "http://...; else the run folders here)",
    )


def _remote(args: argparse.Namespace) -> Any:
    """The cluster named by --address or an http RAY_ADDRESS, or None (local)."""
    import os

    address = args.address
    if address is None:
        env = os.environ.get("RAY_ADDRESS", "")
        address = env if env.startswith(("http://", "https://")) else None
    if address is None:
        return None
    from tuner._ray.jobs import connect

    return connect(address)


def _statuses(runs_dir: Path) -> list[dict[str, Any]]:
    from tuner.status import read_status

    if not runs_dir.is_dir():
        return []
    found = (read_status(folder) for folder in sorted(runs_dir.iterdir()) if folder.is_dir())
    return [doc for doc in found if doc is not None]


def _cmd_list(args: argparse.Namespace) -> int:
    from tuner.status import format_list

    if args.study_storage is not None:
        from tuner.rundir import check_study_storage
        from tuner.study import check_reachable

        url = check_study_storage(args.study_storage)
        check_reachable(url)
        documents = stored_statuses(url)
        print(json.dumps(documents, indent=2) if args.json else format_list(documents))
        return 0
    cluster = _remote(args)
    documents = cluster.campaigns() if cluster else _statuses(args.runs_dir)
    if args.json:
        print(json.dumps(documents, indent=2))
    elif not documents:
        print(f"no campaigns {'on ' + cluster.address if cluster else f'under {args.runs_dir}/'}")
    else:
        print(format_list(documents))
    return 0


def _run_folder(campaign: str, runs_dir: Path) -> Path:
    """The run folder CAMPAIGN names: a path, or an id under ``runs_dir``."""
    path = Path(campaign)
    if path.is_dir():
        return path
    if (runs_dir / campaign).is_dir():
        return runs_dir / campaign
    ids = sorted(folder.name for folder in runs_dir.iterdir()) if runs_dir.is_dir() else []
    near = closest(campaign, ids)
    raise RunFolderError(
        campaign,
        f"no such run folder, and no campaign with this id under {runs_dir}/"
        + (f" (there: {', '.join(ids[:10])}). Did you mean {near!r}?" if near else ""),
        fix="give a run folder (runs/NAME) or an id from `tuner list`",
    )


def _cmd_status(args: argparse.Namespace) -> int:
    from tuner.status import read_status

    cluster = _remote(args)
    if cluster is not None:
        remote = cluster.status(args.campaign)
        print(json.dumps(remote, indent=2) if args.json else _describe(remote))
        return 0
    run_dir = _run_folder(args.campaign, args.runs_dir)
    document = read_status(run_dir)
    if document is None:
        raise RunFolderError(
            str(run_dir),
            "holds no campaign status (no status.json or summary.json)",
            fix="check the path: `tuner list` shows the campaigns under runs/",
        )
    if args.json:
        print(json.dumps(document, indent=2))
        return 0
    print(_describe(document))
    top = _top_trials(run_dir)
    if top:
        print(f"\n{top}")
    return 0


def _describe(doc: dict[str, Any]) -> str:
    trials = doc["trials"]
    lines = [
        f"{doc['id']} ({doc['name']}): {doc['state']}"
        + (f", {doc['status']}" if doc["status"] not in ("running", "") else ""),
        f"trials: {trials['done']}/{trials['total']} done, {trials['running']} running, "
        f"{trials['pending']} pending, {trials['stopped_early']} stopped early, "
        f"{trials['failed']} failed",
    ]
    if doc.get("line"):
        lines.append(f"live: {doc['line'].strip()}")
    best = doc.get("best")
    if best:
        lines.append(f"best: {best['metric']}={best['value']:.4f} (trial {best['trial']})")
    spend = doc.get("spend")
    if spend and spend.get("usd") is not None:
        text = f"spend: ${spend['usd']:.2f}"
        if spend.get("limit_usd"):
            text += f" of ${spend['limit_usd']:.2f}"
        if spend.get("usd_per_hour") is not None:
            text += f" at ${spend['usd_per_hour']:.2f}/h"
        lines.append(text)
    rest = doc.get("to_finish")
    if rest:
        text = f"to finish: ~{rest['trial_epochs']:.0f} trial-epochs"
        text += f", ~{rest['wall_s'] / 60:.1f} min"
        if rest.get("usd"):
            text += f", ~${rest['usd']:.2f}"
        if rest.get("gpu_hours"):
            text += f", ~{rest['gpu_hours']:.2f} GPU-hours"
        lines.append(text + " (cost model, corrected by the epochs used so far)")
    lines.append(f"started {doc.get('started') or '-'}, updated {doc.get('updated') or '-'}")
    if doc.get("run_dir"):
        host = f" on {doc['host']}" if doc.get("host") else ""
        lines.append(f"run folder: {doc['run_dir']}{host}")
    if doc.get("job"):
        lines.append(f"Ray job: {doc['job']}")
    return "\n".join(lines)


def _top_trials(run_dir: Path) -> str:
    """The top trials from the study (the study is the truth; empty before the first)."""
    import tuner
    from tuner.summary import format_table, summarize

    result = tuner.open_run(run_dir)
    try:
        study = result.study()
    except FileNotFoundError:
        return ""
    summary = summarize(
        study,
        metric=result.metric,
        maximize=result.mode == "max",
        max_epochs=int(result.summary["max_epochs"]),
        top=5,
    )
    return format_table(summary, limit=5)


def _cmd_logs(args: argparse.Namespace) -> int:
    import sys
    import time

    from tuner.rundir import DRIVER_LOG_FILE
    from tuner.status import State, read_status

    cluster = _remote(args)
    if cluster is not None:
        if args.follow:
            cluster.follow(args.campaign)
        else:
            sys.stdout.write(cluster.logs(args.campaign))
        return 0
    run_dir = _run_folder(args.campaign, args.runs_dir)
    path = run_dir / DRIVER_LOG_FILE
    if not path.is_file():
        raise RunFolderError(
            str(run_dir),
            f"holds no {DRIVER_LOG_FILE} (written by tuner's driver since this version)",
            fix="`tuner status` shows the campaign's state; `tuner show` its trials",
        )
    with path.open() as log:
        while True:
            sys.stdout.write(log.read())
            sys.stdout.flush()
            if not args.follow:
                return 0
            document = read_status(run_dir)
            if document is None or document["state"] != State.RUNNING:
                sys.stdout.write(log.read())
                return 0
            time.sleep(0.5)


def _cmd_stop(args: argparse.Namespace) -> int:
    import os
    import signal
    import socket

    from tuner.status import State, read_status
    from tuner.stop import request_stop

    cluster = _remote(args)
    if cluster is not None:
        print(cluster.stop(args.campaign, now=args.now))
        return 0
    run_dir = _run_folder(args.campaign, args.runs_dir)
    document = read_status(run_dir)
    if document is None or document["state"] != State.RUNNING:
        state = document["state"] if document else "never started"
        raise RunFolderError(
            str(run_dir),
            f"the campaign is not running ({state})",
            fix=f"`tuner resume {run_dir}` continues a stopped campaign",
        )
    if args.now:
        if document.get("host") != socket.gethostname():
            raise RunFolderError(
                str(run_dir),
                f"its driver runs on {document.get('host')}, not here",
                fix="run `tuner stop --now` there, or stop it cleanly (without --now)",
            )
        os.kill(int(document["pid"]), signal.SIGINT)
        print(
            f"sent SIGINT to the driver (pid {document['pid']}): it ends at once; "
            f"`tuner resume {run_dir}` continues it"
        )
        return 0
    request_stop(run_dir)
    print(
        f"stop requested for {document['id']}: no new trial starts, running trials "
        f"checkpoint after their current epoch and end; `tuner resume {run_dir}` continues it"
    )
    return 0


def stored_statuses(url: str) -> list[dict[str, Any]]:
    """The status documents of the campaigns whose studies are in the store at ``url``
    (the ``tuner_status`` user attribute each driver keeps); studies that tuner did not
    write are left out."""
    import optuna

    from tuner.status import STATUS_ATTR, published_status
    from tuner.study import storage_for

    documents = []
    for summary in optuna.get_all_study_summaries(storage_for(url), include_best_trial=False):
        document = summary.user_attrs.get(STATUS_ATTR)
        if isinstance(document, dict):
            documents.append({**published_status(document), "study": summary.study_name})
    return documents
