"""How a command ends: exit statuses, and the API's warnings printed as ``warning: ...``."""

from __future__ import annotations

import argparse
import warnings

import pytest

from tuner.cli import EXIT_FAILURE_LIMIT, build_parser, campaign_exit_code
from tuner.cli._exit import handled
from tuner.errors import FileError, TunerWarning
from tuner.finish import Status


def test_a_tuner_warning_is_one_warning_line_and_others_go_where_they_went(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    shown: list[str] = []
    monkeypatch.setattr(warnings, "showwarning", lambda message, *rest: shown.append(str(message)))

    def command(args: argparse.Namespace) -> int:
        warnings.warn("a stale price", TunerWarning, stacklevel=1)
        warnings.warn("a stale price", TunerWarning, stacklevel=1)  # each one is said
        warnings.warn("something of a library's", UserWarning, stacklevel=1)
        return 0

    assert handled(command, argparse.Namespace()) == 0
    assert capsys.readouterr().err.splitlines() == ["warning: a stale price"] * 2
    assert shown == ["something of a library's"]


def test_bad_input_exits_2_with_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    def command(args: argparse.Namespace) -> int:
        raise FileError("c.yaml", "no such campaign file.")

    assert handled(command, argparse.Namespace()) == 2
    assert capsys.readouterr().err == "error: c.yaml: no such campaign file.\n"


def test_exit_statuses_are_stated_in_help_and_match_the_code() -> None:
    help_text = build_parser().format_help()
    statuses = help_text.split("exit status:", 1)[1]
    assert f"\n  {EXIT_FAILURE_LIMIT}  stopped before that by the failure limit" in statuses
    assert "\n  0  done" in statuses and "\n  2  bad input" in statuses
    assert campaign_exit_code({"status": str(Status.FAILURE_LIMIT)}) == EXIT_FAILURE_LIMIT == 3
    for status in (Status.COMPLETED, Status.BUDGET_EXHAUSTED, Status.TIME_LIMIT, Status.HELD_BACK):
        assert campaign_exit_code({"status": str(status)}) == 0, status


def test_python_dash_m_tuner_is_the_tuner_command() -> None:
    import subprocess
    import sys
    from importlib.metadata import version

    done = subprocess.run(
        [sys.executable, "-m", "tuner", "--version"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"tuner {version('tuner')}\n"
