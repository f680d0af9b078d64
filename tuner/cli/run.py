"""``tuner run`` and ``tuner resume``: start a campaign, or continue one whose driver stopped.

Ray and torch are imported only once the input is known to be good.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tuner.cli._args import (
    DEFAULT_CAMPAIGN,
    add_ray_arguments,
    add_run_arguments,
    duration_flag,
    load_campaign_file,
    ray_flags,
    tracking_from_args,
)
from tuner.cli._exit import handled
from tuner.errors import FileError

__all__ = [
    "EXIT_FAILURE_LIMIT",
    "add_resume_command",
    "add_run_command",
    "campaign_exit_code",
    "run_from_args",
]

EXIT_FAILURE_LIMIT = 3
EXIT_INTERRUPTED = 130
"""Exit status of ``tuner run``/``resume`` when the campaign stopped before it finished
because more trials failed than ``failure.max_failed_trials`` allows: its results are
valid and it can be resumed (0: finished, including a stop by its own budget, deadline or
time limit, which is what it asked for; 2: bad input; 1: a crash; 130: an interrupt)."""


def add_run_command(subparsers: Any) -> None:
    """Adds ``tuner run`` to the CLI's subparsers.

    Args:
        subparsers: What ``ArgumentParser.add_subparsers()`` returned.
    """
    run: argparse.ArgumentParser = subparsers.add_parser(
        "run",
        help="run a campaign (default: search_spaces/default.yaml)",
        description="Run a tuning campaign; results go to runs/<name>/.",
    )
    add_run_arguments(run)
    add_ray_arguments(run)
    run.set_defaults(handler=_cmd_run)


def add_resume_command(subparsers: Any) -> None:
    """Adds ``tuner resume`` to the CLI's subparsers.

    Args:
        subparsers: What ``ArgumentParser.add_subparsers()`` returned.
    """
    resume: argparse.ArgumentParser = subparsers.add_parser(
        "resume",
        help="continue a campaign whose driver stopped",
        description="Continue a campaign: finished trials are kept, unfinished ones resume "
        "from their latest checkpoint.",
    )
    resume.add_argument("run_dir", type=Path, help="the run folder, e.g. runs/digits-cnn")
    add_ray_arguments(resume)
    resume.set_defaults(handler=_cmd_resume)


def _cmd_run(args: argparse.Namespace) -> int:
    import tuner

    path = args.campaign
    if path is None:
        path = DEFAULT_CAMPAIGN
        if not path.is_file():
            raise FileError(
                str(path),
                "the default campaign file is missing (tuner is not installed from a source "
                "checkout).",
                fix="pass a campaign file: tuner run CAMPAIGN.yaml",
            )
    spec = load_campaign_file(Path(path))
    time_limit = duration_flag(args.time_limit, "--time-limit")
    deadline = duration_flag(args.deadline, "--deadline")
    storage = args.storage_path
    if storage is not None and "://" in storage:
        from tuner.rundir import check_storage_uri

        check_storage_uri(storage)  # here, to name the flag
    if args.dry_run:
        return _dry_run(args, spec, time_limit, deadline)
    result = tuner.run(
        spec,
        trials=args.trials,
        max_epochs=args.max_epochs,
        time_limit=time_limit,
        seed=args.seed,
        name=args.name,
        budget_usd=args.budget_usd,
        budget_gpu_hours=args.budget_gpu_hours,
        deadline=deadline,
        runs_dir=args.runs_dir,
        storage=storage,
        profile=args.profile,
        usd_per_gpu_hour=args.usd_per_gpu_hour,
        study_storage=args.study_storage,
        warm_start=args.warm_start,
        tracking=tracking_from_args(spec, args),
        **ray_flags(args),
    )
    return campaign_exit_code(result.summary)


def campaign_exit_code(summary: Mapping[str, Any]) -> int:
    """The exit status for a campaign that ended with ``summary`` (its summary.json)."""
    from tuner.finish import Status

    if summary.get("status") == Status.UNFINISHED:
        return EXIT_INTERRUPTED  # interrupted (SIGINT): as after Ctrl+C
    stopped = (Status.FAILURE_LIMIT, Status.STOPPED)
    return EXIT_FAILURE_LIMIT if summary.get("status") in stopped else 0


def _dry_run(
    args: argparse.Namespace, spec: Any, time_limit: float | None, deadline: float | None
) -> int:
    """``tuner run --dry-run``: the plan of the campaign as it would run; nothing more."""
    import os

    from tuner._api import _profile_of
    from tuner._plan import format_plan, make_plan

    spec = spec.with_overrides(
        usd=args.budget_usd,
        gpu_hours=args.budget_gpu_hours,
        deadline_s=deadline,
        trials=args.trials,
        max_epochs=args.max_epochs,
        time_limit_s=time_limit,
        seed=args.seed,
        name=args.name,
        study_storage=getattr(args, "study_storage", None),
        warm_start=getattr(args, "warm_start", None),
        tracking=tracking_from_args(spec, args),
    )
    plan = make_plan(
        spec,
        runs_dir=Path(args.storage_path or args.runs_dir)
        if not (args.storage_path and "://" in args.storage_path)
        else Path(args.runs_dir),
        profile=_profile_of(args.profile, spec, consequence=": predicted times will be off"),
        usd_per_gpu_hour=args.usd_per_gpu_hour,
        address=args.address or os.environ.get("RAY_ADDRESS") or None,
        num_cpus=args.num_cpus,
        num_gpus=args.num_gpus,
    )
    from tuner.warm_start import plan_warm_start

    warm = plan_warm_start(spec)  # a source that cannot seed the campaign: exit 2
    print(format_plan(plan))
    if warm is not None:
        print(f"  {warm.line()}")
    return 0


def _cmd_resume(args: argparse.Namespace) -> int:
    import tuner

    result = tuner.resume(args.run_dir, **ray_flags(args))
    return campaign_exit_code(result.summary)


def run_from_args(args: argparse.Namespace) -> int:
    """Runs a campaign from ``tuner run``'s parsed flags (``tuner/submit.py`` uses this)."""
    return handled(_cmd_run, args)
