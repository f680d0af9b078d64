"""``tuner list`` and ``tuner status``: the campaigns under a runs folder, and one of them.

Both read each run folder's ``status.json`` (:mod:`tuner.status`), which the driver
rewrites at least every 10 seconds, so they work while campaigns run, need no Ray, and
show a driver that died as ``DIED``. ``--json`` prints the documents themselves (schema
``tuner.status/1``, documented in docs/service.md).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tuner.errors import RunFolderError, closest

__all__ = ["add_list_command", "add_status_command"]


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
    parser.set_defaults(handler=_cmd_list)


def add_status_command(subparsers: Any) -> None:
    """Adds ``tuner status`` to the CLI's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "status",
        help="one campaign's state, trials, best value and spend",
        description="One campaign's status: its state, trial counts, best value, spend "
        "against its budget, and its top trials. CAMPAIGN is a run folder, or the id "
        "(run folder name) of one under --runs-dir.",
    )
    parser.add_argument("campaign", help="a run folder, or its id under --runs-dir")
    parser.add_argument(
        "--runs-dir", type=Path, default=Path("runs"), help="parent of run folders (runs/)"
    )
    parser.add_argument("--json", action="store_true", help="print the status as JSON")
    parser.set_defaults(handler=_cmd_status)


def _statuses(runs_dir: Path) -> list[dict[str, Any]]:
    from tuner.status import read_status

    if not runs_dir.is_dir():
        return []
    found = (read_status(folder) for folder in sorted(runs_dir.iterdir()) if folder.is_dir())
    return [doc for doc in found if doc is not None]


def _cmd_list(args: argparse.Namespace) -> int:
    from tuner.status import format_list

    documents = _statuses(args.runs_dir)
    if args.json:
        print(json.dumps(documents, indent=2))
    elif not documents:
        print(f"no campaigns under {args.runs_dir}/")
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
    lines.append(f"started {doc.get('started') or '-'}, updated {doc.get('updated') or '-'}")
    lines.append(f"run folder: {doc['run_dir']}")
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
