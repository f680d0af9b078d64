"""The ``tuner`` command line: run, resume and show hyperparameter tuning campaigns."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from tuner._argtypes import non_negative_float, positive_float, positive_int, whole_number
from tuner.errors import SpecError, TunerError, closest

if TYPE_CHECKING:
    from tuner._ray.cluster import RayOptions

DEFAULT_CAMPAIGN = Path(__file__).resolve().parent.parent / "search_spaces" / "default.yaml"

_EPILOG = """\
examples:
  tuner run                                   the default campaign (CNN on 8x8 digits)
  tuner run search_spaces/tabular_mlp.yaml --trials 8 --max-epochs 5
  tuner run my_campaign.yaml --address auto   join a running Ray cluster
  tuner resume runs/digits-cnn                continue a killed campaign
  tuner show runs/digits-cnn                  top trials of a run
  tuner profile search_spaces/default.yaml     measure the trainable here (JSON profile)
  tuner recommend --budget 50 --deadline 2h   rank GPU instance types for the default campaign
  tuner predict --from A100-SXM4-40GB --to H100-SXM5 --precision amp --samples-per-s 1200
"""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (public for tests and docs)."""
    parser = argparse.ArgumentParser(
        prog="tuner",
        description="Hyperparameter tuning campaigns for PyTorch on Ray Tune + Optuna + ASHA.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    run = sub.add_parser(
        "run",
        help="run a campaign (default: search_spaces/default.yaml)",
        description="Run a tuning campaign; results go to runs/<name>/.",
    )
    add_run_arguments(run)
    _ray_args(run)
    run.set_defaults(handler=_cmd_run)

    resume = sub.add_parser(
        "resume",
        help="continue a campaign whose driver stopped",
        description="Continue a campaign: finished trials are kept, unfinished ones resume "
        "from their latest checkpoint.",
    )
    resume.add_argument("run_dir", type=Path, help="the run folder, e.g. runs/digits-cnn")
    _ray_args(resume)
    resume.set_defaults(handler=_cmd_resume)

    show = sub.add_parser("show", help="print the top trials of a run folder")
    show.add_argument("run_dir", type=Path, help="the run folder, e.g. runs/digits-cnn")
    show.add_argument("--top", type=positive_int, default=10, help="rows to show (10)")
    show.add_argument("--json", action="store_true", help="print the summary as JSON")
    show.set_defaults(handler=_cmd_show)

    report = sub.add_parser(
        "report",
        help="write the campaign report of a run folder (report.md, report.html, report.json)",
        description="Write the report of a run folder: best trial and its configuration, top "
        "trials, optimization history, learning curves with the ASHA rungs, hyperparameter "
        "importances, spend against the budget, predicted vs actual, GPU utilization, and "
        "trial outcomes. report.html is one self-contained page; report.json the figures.",
    )
    report.add_argument("run_dir", type=Path, help="the run folder, e.g. runs/digits-cnn")
    report.set_defaults(handler=_cmd_report)

    from tuner._costcli import add_profile_command, add_recommend_command
    from tuner.cost._cli import add_predict_command

    add_profile_command(sub, _ray_args)
    add_recommend_command(sub, _ray_args)
    add_predict_command(sub)
    return parser


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``tuner run`` (shared with ``tuner/submit.py``)."""
    parser.add_argument("campaign", nargs="?", type=Path, help="campaign YAML file")
    parser.add_argument("--trials", type=positive_int, help="override budget.trials")
    parser.add_argument("--max-epochs", type=positive_int, help="override budget.max_epochs")
    parser.add_argument("--time-limit", help="override budget.time_limit (e.g. 90s, 10m, 2h)")
    parser.add_argument("--seed", type=whole_number, help="override sampler.seed")
    parser.add_argument("--name", help="campaign name (and run folder name)")
    parser.add_argument(
        "--runs-dir", type=Path, default=Path("runs"), help="parent of run folders (runs/)"
    )
    parser.add_argument(
        "--profile",
        type=Path,
        help="profile (tuner profile, or a run folder) to predict time and money at start",
    )
    parser.add_argument(
        "--storage-path",
        help="where Ray Tune keeps checkpoints and experiment state: a URI Ray supports "
        "(s3://bucket/path, gs://..., file://...), so trials on every node write there; the "
        "run folder (study, ledger, summary) is copied to <URI>/<name>/ at the end. A plain "
        "path (an NFS mount) is the same as --runs-dir",
    )
    parser.add_argument(
        "--budget-usd", type=positive_float, help="override budget.usd: dollars the nodes may cost"
    )
    parser.add_argument("--budget-gpu-hours", type=positive_float, help="override budget.gpu_hours")
    parser.add_argument(
        "--deadline", help="override budget.deadline: running time allowed (e.g. 6h)"
    )
    parser.add_argument(
        "--usd-per-gpu-hour",
        type=non_negative_float,
        default=0.0,
        help="price of a GPU-hour here, for predicted vs actual dollars (0)",
    )


def _ray_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--address",
        help='Ray cluster to join ("auto", host:port, ray://...); default: RAY_ADDRESS, '
        "else an embedded local Ray",
    )
    parser.add_argument("--num-cpus", type=positive_int, help="CPUs of the embedded Ray")
    parser.add_argument(
        "--num-gpus",
        type=non_negative_float,
        help="GPUs of the embedded Ray (logical GPUs work on CPU)",
    )
    parser.add_argument(
        "--worker-logs", action="store_true", help="show the trials' own output here"
    )
    parser.add_argument(
        "--cluster-config",
        type=Path,
        help="the cluster's autoscaler config (node types, max_workers); on a head made by "
        "`ray up`, ~/ray_bootstrap_config.yaml is used by itself",
    )


def _cmd_run(args: argparse.Namespace) -> int:
    from tuner.rundir import new_run_dir
    from tuner.spec import load_campaign

    path = args.campaign
    if path is None:
        path = DEFAULT_CAMPAIGN
        if not path.is_file():
            raise TunerError(
                f"{path}: the default campaign file is missing (tuner is not installed from "
                "a source checkout).\n  To fix: pass a campaign file: tuner run CAMPAIGN.yaml"
            )
    if not Path(path).is_file():
        raise TunerError(
            f"{path}: no such campaign file.\n  To fix: pass a YAML file such as "
            "search_spaces/default.yaml."
        )
    from tuner.rundir import add_code_dirs

    # The campaign's own folder and the working directory, so `module:function` trainables
    # next to the campaign (or in the project being tuned) import; nothing else is added.
    code_dirs = list(dict.fromkeys([str(Path(path).resolve().parent), str(Path.cwd())]))
    add_code_dirs(code_dirs)
    spec = load_campaign(path)
    time_limit = _duration_flag(args.time_limit, "--time-limit")
    deadline = _duration_flag(args.deadline, "--deadline")
    spec = spec.with_overrides(
        usd=args.budget_usd,
        gpu_hours=args.budget_gpu_hours,
        deadline_s=deadline,
        trials=args.trials,
        max_epochs=args.max_epochs,
        time_limit_s=time_limit,
        seed=args.seed,
        name=args.name,
    )
    storage = args.storage_path
    runs_dir = args.runs_dir
    if storage is not None and "://" in storage:
        from tuner.rundir import check_storage_uri

        check_storage_uri(storage)  # here too, to name the flag
    elif storage is not None:
        runs_dir, storage = Path(storage), None  # a shared folder: the run folder goes there
    run_dir = new_run_dir(runs_dir, spec.name)
    # Heavy imports (ray, torch) only once the input is known to be good.
    from tuner._ray.driver import run_campaign

    profile = None
    if args.profile is not None:
        from tuner.cost import load_profile

        profile = load_profile(args.profile)
        if profile.trainable != spec.trainable:
            print(
                f"warning: {args.profile} profiles {profile.trainable!r}, but the campaign "
                f"trains {spec.trainable!r}: predicted times will be off",
                file=sys.stderr,
            )
    result = run_campaign(
        spec,
        run_dir,
        ray_options(args),
        code_dirs=code_dirs,
        profile=profile,
        usd_per_gpu_hour=args.usd_per_gpu_hour,
        storage=storage,
    )
    return campaign_exit_code(result.summary)


EXIT_FAILURE_LIMIT = 1
"""Exit status of ``tuner run``/``resume`` when more trials failed than
``failure.max_failed_trials`` allows (2 is bad input, 130 an interrupt). A campaign the
budget or its time limit ended exits 0: those stops are what the campaign asked for."""


def campaign_exit_code(summary: dict[str, Any]) -> int:
    """The exit status for a campaign that ended with ``summary``."""
    from tuner._ray.failures import STATUS_FAILURES

    return EXIT_FAILURE_LIMIT if summary.get("status") == STATUS_FAILURES else 0


def _duration_flag(value: str | None, flag: str) -> float | None:
    """A duration flag's seconds (None when not given); SpecError naming the flag."""
    from tuner.spec import parse_duration

    if value is None:
        return None
    try:
        return parse_duration(value)
    except SpecError as err:
        # "0" and "-5" are durations, just not positive ones.
        problem = "not a duration" if err.problem == "must be a duration" else err.problem
        raise SpecError(
            "<cli>", flag, problem, got=value, allowed="seconds or 90s, 10m, 2h, 1h30m"
        ) from err


def _cmd_resume(args: argparse.Namespace) -> int:
    from tuner._ray.driver import resume_campaign
    from tuner.rundir import add_code_dirs, check_resumable, read_code_dirs

    check_resumable(args.run_dir)
    add_code_dirs(read_code_dirs(args.run_dir))
    result = resume_campaign(args.run_dir, ray_options(args))
    return campaign_exit_code(result.summary)


def _cmd_show(args: argparse.Namespace) -> int:
    from tuner.rundir import check_resumable
    from tuner.spec import load_campaign
    from tuner.summary import format_failures, format_table, open_study, summarize

    spec = load_campaign(check_resumable(args.run_dir), check_trainable=False)
    try:
        study = open_study(args.run_dir)
    except FileNotFoundError:
        raise TunerError(f"{args.run_dir}: no study.db yet (no trial has started).") from None
    summary = summarize(
        study,
        metric=spec.metric,
        maximize=spec.mode.value == "max",
        max_epochs=spec.budget.max_epochs,
        top=args.top,
    )
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    states = ", ".join(f"{n} {s}" for s, n in summary["states"].items()) or "none"
    print(f"{spec.name}: {summary['trials']} trials ({states})")
    print(format_table(summary, limit=args.top))
    failures = format_failures(summary, limit=args.top)
    if failures:
        print(f"\n{failures}")
    written = args.run_dir / "summary.json"
    if written.is_file():
        cost = json.loads(written.read_text()).get("cost")
        if cost:
            from tuner.cost._reality import format_comparison

            print(f"\n{format_comparison(cost)}")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from tuner.report import write_report
    from tuner.rundir import check_resumable

    check_resumable(args.run_dir)
    if not (args.run_dir / "study.db").is_file():
        raise TunerError(f"{args.run_dir}: no study.db yet (no trial has started).")
    written = write_report(args.run_dir)
    for kind, path in written.items():
        print(f"{kind:8s} {path}")
    return 0


def ray_options(args: argparse.Namespace) -> RayOptions:
    """Where Ray runs, from the ``--address``/``--num-cpus``/``--num-gpus`` flags."""
    from tuner._ray.cluster import RayOptions

    return RayOptions(
        address=args.address,
        num_cpus=args.num_cpus,
        num_gpus=args.num_gpus,
        worker_logs=args.worker_logs,
        cluster_config=args.cluster_config,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tuner`` console script; returns the exit code."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        _reject_unknown(parser, args.command, unknown)
    return _handled(args.handler, args)


def _reject_unknown(parser: argparse.ArgumentParser, command: str, unknown: list[str]) -> NoReturn:
    """argparse's "unrecognized arguments" usage error (exit 2), from the subcommand's
    parser and with the closest flag it has (``--trails`` -> ``--trials``)."""
    sub = parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            sub = action.choices[command]
    flags = [flag for action in sub._actions for flag in action.option_strings]
    message = f"unrecognized arguments: {' '.join(unknown)}"
    first = next((arg for arg in unknown if arg.startswith("-")), None)
    suggestion = closest(first.split("=", 1)[0], flags) if first else None
    if suggestion is not None:
        message += f". Did you mean {suggestion!r}?"
    sub.error(message)


def run_from_args(args: argparse.Namespace) -> int:
    """Runs a campaign from ``tuner run``'s parsed flags (``tuner/submit.py`` uses this)."""
    return _handled(_cmd_run, args)


def _handled(handler: Any, args: argparse.Namespace) -> int:
    try:
        return int(handler(args))
    except TunerError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted; `tuner resume <run folder>` continues the campaign.", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
