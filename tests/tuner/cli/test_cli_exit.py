"""How a command ends: exit statuses, and the API's warnings printed as ``warning: ...``."""

from __future__ import annotations

import argparse
import warnings

import pytest

from tuner.cli._exit import handled
from tuner.errors import FileError, TunerWarning


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
