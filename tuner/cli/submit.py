"""``tuner submit``: a campaign sent to a Ray cluster as a Ray job, detached.

The campaign is checked here first (a bad file is refused before anything is sent); the
job runs ``python -m tuner run CAMPAIGN ... --address auto`` on the head, with the project
folder (the campaign file, the user's trainables) as its working_dir less bulky folders
(:data:`tuner._ray.jobs.EXCLUDES`). The command returns at once with the campaign's id and the
commands that follow it. ``--resume ID`` continues a stopped or dead campaign there.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from tuner.cli._args import (
    DEFAULT_CAMPAIGN,
    add_run_arguments,
    duration_flag,
    load_campaign_file,
    tracking_from_args,
)
from tuner.errors import FileError

__all__ = ["add_submit_command"]

# tuner run's flags that go to the driver as given (values that are not paths).
_FORWARDED = (
    "trials",
    "max_epochs",
    "time_limit",
    "seed",
    "budget_usd",
    "budget_gpu_hours",
    "deadline",
    "usd_per_gpu_hour",
    "storage_path",
    "study_storage",
    "warm_start",
    "mlflow_uri",
    "mlflow_experiment",
    "wandb_project",
    "wandb_mode",
)


def add_submit_command(subparsers: Any) -> None:
    """Adds ``tuner submit`` to the CLI's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "submit",
        help="send a campaign to a Ray cluster as a job and return at once",
        description="Send a campaign to a running Ray cluster through Ray's Job Submission "
        "API and return at once with its id. The job runs `tuner run` on the head, "
        "joining the cluster; its run folder is on the head under --runs-dir "
        "(~/tuner-runs). The project folder (--working-dir, default .) is shipped as the "
        "job's working_dir, without runs/, .venv/, profiles/, .git/ and caches. Follow it "
        "with `tuner list/status/logs/stop --address ...`.",
    )
    add_run_arguments(parser)
    parser.set_defaults(runs_dir=Path(DEFAULT_RUNS))
    parser.add_argument(
        "--address",
        help="the cluster's dashboard, http://HEAD:8265 (default: RAY_ADDRESS); reach it "
        "through an SSH tunnel or `ray dashboard cluster.yaml`",
    )
    parser.add_argument(
        "--working-dir",
        type=Path,
        default=Path("."),
        help="the project folder shipped to the job: the campaign file and trainables (.)",
    )
    parser.add_argument(
        "--resume", metavar="ID", help="continue the submitted campaign ID on the cluster"
    )
    parser.add_argument("--json", action="store_true", help="print the id and job as JSON")
    parser.set_defaults(handler=_cmd_submit)


DEFAULT_RUNS = "~/tuner-runs"


def _cmd_submit(args: argparse.Namespace) -> int:
    from tuner._ray.jobs import campaign_id, connect

    started = time.monotonic()
    if args.resume:
        return _resume(args, started)
    working_dir = args.working_dir.expanduser().resolve()
    if not working_dir.is_dir():
        raise FileError(str(args.working_dir), "no such folder", fix="--working-dir FOLDER")
    campaign = _campaign_in(args.campaign or DEFAULT_CAMPAIGN, working_dir)
    spec = load_campaign_file(working_dir / campaign)  # bad input: exit 2, nothing sent
    duration_flag(args.time_limit, "--time-limit")
    duration_flag(args.deadline, "--deadline")
    tracking_from_args(spec, args)  # a bad tracker flag: exit 2, nothing sent
    ident = campaign_id(args.name or spec.name)
    if args.warm_start is not None:
        args.warm_start = source_on_head(args.warm_start, args.runs_dir)
    argv = ["run", campaign.as_posix(), "--name", ident, "--address", "auto"]
    argv += ["--runs-dir", str(args.runs_dir)]
    for key in _FORWARDED:
        value = getattr(args, key)
        if value is not None and not (key == "usd_per_gpu_hour" and value == 0.0):
            argv += [f"--{key.replace('_', '-')}", str(value)]
    if args.profile is not None:
        argv += ["--profile", _campaign_in(args.profile, working_dir).as_posix()]
    if args.dry_run:
        from tuner.cli.run import _dry_run

        address = connect(args.address).address  # the cluster answers, the token is taken
        print(f"would submit to {address} (nothing sent):")
        print(f"  python -m tuner {' '.join(argv)}")
        print(f"  working_dir {working_dir}\n")
        args.address, args.num_cpus, args.num_gpus = None, None, None
        if args.warm_start is not None:  # the source is on the head: checked there
            print(f"  warm start from {args.warm_start} (checked on the head)\n")
            args.warm_start = None
        time_limit = duration_flag(args.time_limit, "--time-limit")
        return _dry_run(args, spec, time_limit, duration_flag(args.deadline, "--deadline"))
    cluster = connect(args.address)
    job = cluster.submit(submission_id=ident, name=spec.name, argv=argv, working_dir=working_dir)
    _say(args, cluster.address, ident, job, time.monotonic() - started)
    return 0


def source_on_head(warm_start: str, runs_dir: str | Path) -> str:
    """``--warm-start`` for a job: an id from ``tuner list --address`` is the run folder of
    that campaign on the head, under ``--runs-dir``; a path is left as it is."""
    return warm_start if "/" in warm_start else f"{runs_dir}/{warm_start}"


def _resume(args: argparse.Namespace, started: float) -> int:
    from tuner._ray.jobs import connect

    cluster = connect(args.address)
    document = cluster.status(args.resume)
    if document.get("state") in ("RUNNING",):
        from tuner.errors import ServiceError

        raise ServiceError(
            cluster.address,
            f"campaign {args.resume!r} is running",
            fix=f"`tuner stop {args.resume} --address {cluster.address}` first",
        )
    run_dir = document.get("run_dir") or f"{args.runs_dir}/{args.resume}"
    working_dir = args.working_dir.expanduser().resolve()
    job = cluster.submit(
        submission_id=f"{args.resume}-resume-{int(time.time())}",
        name=str(document.get("name") or args.resume),
        argv=["resume", str(run_dir), "--address", "auto"],
        working_dir=working_dir,
        kind="resume",
        campaign=args.resume,
    )
    _say(args, cluster.address, args.resume, job, time.monotonic() - started)
    return 0


def _campaign_in(path: Path, working_dir: Path) -> Path:
    """``path`` relative to the working_dir shipped with the job (where the job sees it)."""
    absolute = path.expanduser().resolve()
    if not absolute.is_file():
        raise FileError(str(path), "no such file", fix="check the path")
    try:
        return absolute.relative_to(working_dir)
    except ValueError:
        raise FileError(
            str(path),
            f"is outside the working_dir shipped with the job ({working_dir})",
            fix="move it into the project folder, or pass --working-dir a folder holding it",
        ) from None


def _say(args: argparse.Namespace, address: str, ident: str, job: str, took_s: float) -> None:
    if args.json:
        print(json.dumps({"id": ident, "job": job, "address": address, "submit_s": took_s}))
        return
    flag = f"--address {address}"
    print(
        f"submitted {ident} to {address} (Ray job {job}, {took_s:.1f} s)\n"
        f"  tuner status {ident} {flag}\n"
        f"  tuner logs {ident} {flag} --follow\n"
        f"  tuner stop {ident} {flag}\n"
        f"  tuner list {flag}"
    )
