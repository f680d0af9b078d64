"""``tuner show`` and ``tuner report``: a run folder's top trials, and its campaign report."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tuner.cli._args import bounded
from tuner.errors import RunFolderError
from tuner.spec._limits import FLAGS

__all__ = ["add_report_command", "add_show_command"]


def add_show_command(subparsers: Any) -> None:
    """Adds ``tuner show`` to the CLI's subparsers.

    Args:
        subparsers: What ``ArgumentParser.add_subparsers()`` returned.
    """
    show: argparse.ArgumentParser = subparsers.add_parser(
        "show", help="print the top trials of a run folder"
    )
    show.add_argument("run_dir", type=Path, help="the run folder, e.g. runs/digits-cnn")
    show.add_argument("--top", type=bounded(FLAGS["--top"]), default=10, help="rows to show (10)")
    show.add_argument("--json", action="store_true", help="print the summary as JSON")
    show.set_defaults(handler=_cmd_show)


def add_report_command(subparsers: Any) -> None:
    """Adds ``tuner report`` to the CLI's subparsers.

    Args:
        subparsers: What ``ArgumentParser.add_subparsers()`` returned.
    """
    report: argparse.ArgumentParser = subparsers.add_parser(
        "report",
        help="write the campaign report of a run folder (report.md, report.html, report.json)",
        description="Write the report of a run folder: best trial and its configuration, top "
        "trials, Optuna's plots (optimization history, learning curves with the ASHA rungs, "
        "parallel coordinates, slice, contours, EDF), hyperparameter importances per rung, "
        "spend against the budget, predicted vs actual, GPU utilization, and trial "
        "outcomes. report.html is one self-contained interactive page (plotly.js inlined, "
        "opens offline); report.md the same with PNG plots; report.json the figures.",
    )
    report.add_argument("run_dir", type=Path, help="the run folder, e.g. runs/digits-cnn")
    report.set_defaults(handler=_cmd_report)


def _cmd_show(args: argparse.Namespace) -> int:
    import tuner
    from tuner.summary import format_failures, format_table, summarize

    result = tuner.open_run(args.run_dir)
    try:
        study = result.study()
    except FileNotFoundError:
        raise RunFolderError(str(args.run_dir), "no study.db yet (no trial has started).") from None
    summary = summarize(
        study,
        metric=result.metric,
        maximize=result.mode == "max",
        max_epochs=int(result.summary["max_epochs"]),
        top=args.top,
    )
    warm = result.summary.get("warm_start")
    if warm is not None:
        summary["warm_start"] = warm
    if result.multi_objective:
        summary |= _front(result, study)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    states = ", ".join(f"{n} {s}" for s, n in summary["states"].items()) or "none"
    print(f"{result.campaign}: {summary['trials']} trials ({states})")
    if warm is not None:
        print(
            f"warm start from {warm['from']}: {warm['seeded']} of its trials seeded the sampler "
            f"(not counted above), its {warm['tried_first']} best were tried first"
        )
    print(format_table(summary, limit=args.top))
    if result.multi_objective:
        from tuner.front import format_front

        print(f"\n{format_front(summary['pareto_front'], [m for m, _ in result.objectives])}")
    failures = format_failures(summary, limit=args.top)
    if failures:
        print(f"\n{failures}")
    cost = result.summary.get("cost")
    if cost:
        from tuner.cost._reality import format_comparison

        print(f"\n{format_comparison(cost)}")
    return 0


def _front(result: Any, study: Any) -> dict[str, Any]:
    """A multi-objective run's objectives and Pareto front, from its study as it stands."""
    from tuner.front import front_rows

    metrics = [m for m, _ in result.objectives]
    maximize = [mode == "max" for _, mode in result.objectives]
    return {
        "objectives": [{"metric": m, "mode": mode} for m, mode in result.objectives],
        "pareto_front": front_rows(study, metrics, maximize),
    }


def _cmd_report(args: argparse.Namespace) -> int:
    from tuner.report import write_report
    from tuner.rundir import check_resumable

    check_resumable(args.run_dir)
    if not (args.run_dir / "study.db").is_file():
        raise RunFolderError(str(args.run_dir), "no study.db yet (no trial has started).")
    written = write_report(args.run_dir)
    for kind, path in written.items():
        print(f"{kind:8s} {path}")
    return 0
