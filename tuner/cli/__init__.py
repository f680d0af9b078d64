"""The ``tuner`` command line: run, resume and show hyperparameter tuning campaigns.

A thin layer over the Python API (:mod:`tuner`): each command parses its flags, calls the
API and prints what it returns. This module builds the parser from the command modules
(:mod:`tuner.cli.run`, :mod:`tuner.cli.show`, :mod:`tuner.cli.cost`) and turns usage errors
and a handler's errors into exit statuses; the flags the commands share are in
:mod:`tuner.cli._args`.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import NoReturn

from tuner.cli._args import DEFAULT_CAMPAIGN, Parser, add_run_arguments, ray_flags
from tuner.cli._exit import handled as _handled
from tuner.cli.cost import add_predict_command, add_profile_command, add_recommend_command
from tuner.cli.dashboard import add_dashboard_command
from tuner.cli.run import (
    EXIT_FAILURE_LIMIT,
    add_resume_command,
    add_run_command,
    campaign_exit_code,
    run_from_args,
)
from tuner.cli.schema import add_schema_command
from tuner.cli.service import (
    add_list_command,
    add_logs_command,
    add_status_command,
    add_stop_command,
)
from tuner.cli.show import add_report_command, add_show_command
from tuner.cli.submit import add_submit_command
from tuner.errors import closest

__all__ = [
    "DEFAULT_CAMPAIGN",
    "EXIT_FAILURE_LIMIT",
    "Parser",
    "add_run_arguments",
    "build_parser",
    "campaign_exit_code",
    "main",
    "ray_flags",
    "run_from_args",
]

_EPILOG = """\
examples:
  tuner run                                   the default campaign (CNN on 8x8 digits)
  tuner run search_spaces/tabular_mlp.yaml --trials 8 --max-epochs 5
  tuner run my_campaign.yaml --address auto   join a running Ray cluster
  tuner resume runs/digits-cnn                continue a killed campaign
  tuner show runs/digits-cnn                  top trials of a run
  tuner list                                  the campaigns under runs/, running or not
  tuner status digits-cnn                     one campaign: state, trials, best, spend
  tuner stop digits-cnn                       stop cleanly (trials checkpoint); resumable
  tuner submit my_campaign.yaml --address http://127.0.0.1:8265
                                              send it to a Ray cluster as a job, detached
  tuner list --address http://127.0.0.1:8265  the campaigns on that cluster
  tuner profile search_spaces/default.yaml    measure the trainable here (JSON profile)
  tuner recommend --budget-usd 50             rank GPU instance types, default campaign
  tuner recommend my_campaign.yaml --budget-usd 200 --deadline 6h --profile runs/my-run
  tuner predict --from A100-SXM4-40GB --to H100-SXM5 --precision amp --samples-per-s 1200
  tuner schema > campaign.schema.json         the campaign file's JSON Schema (editors)

exit status:
  0  done: the campaign finished, or its own budget, deadline or time limit ended it
  3  stopped before that by the failure limit or `tuner stop`: results valid,
     `tuner resume` continues
  2  bad input (campaign file, flags, run folder): nothing was started or written
  1  a crash (a bug: please report it with the traceback)
  130  interrupted (Ctrl+C, `tuner stop --now`): `tuner resume` continues the campaign
"""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (public for tests and docs)."""
    parser = Parser(
        prog="tuner",
        description="Hyperparameter tuning campaigns for PyTorch on Ray Tune + Optuna + ASHA.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"tuner {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_run_command(sub)
    add_resume_command(sub)
    add_show_command(sub)
    add_submit_command(sub)
    add_list_command(sub)
    add_status_command(sub)
    add_logs_command(sub)
    add_stop_command(sub)
    add_report_command(sub)
    add_dashboard_command(sub)
    add_profile_command(sub)
    add_recommend_command(sub)
    add_predict_command(sub)
    add_schema_command(sub)
    return parser


def _version() -> str:
    """The installed distribution's version (``unknown`` when run from a bare checkout)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tuner")
    except PackageNotFoundError:
        return "unknown (not installed)"


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
    flags = [  # not the hidden old spellings
        flag
        for action in sub._actions
        if action.help is not argparse.SUPPRESS
        for flag in action.option_strings
    ]
    message = f"unrecognized arguments: {' '.join(unknown)}"
    first = next((arg for arg in unknown if arg.startswith("-")), None)
    suggestion = closest(first.split("=", 1)[0], flags) if first else None
    if suggestion is not None:
        message += f". Did you mean {suggestion!r}?"
    sub.error(message)
