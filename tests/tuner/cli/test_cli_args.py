"""The old spellings of renamed flags (tuner/cli/_args.py): accepted, hidden from --help."""

from __future__ import annotations

import argparse

import pytest

from tuner.cli._args import Parser, add_old_spelling


def test_an_old_spelling_needs_the_tuner_parser_and_no_default() -> None:
    plain = argparse.ArgumentParser()
    with pytest.raises(TypeError):
        add_old_spelling(plain, "--old", plain.add_argument("--new"))
    parser = Parser()
    with pytest.raises(ValueError, match="defaults to None"):
        add_old_spelling(parser, "--old", parser.add_argument("--new", default=3))


def test_an_old_spelling_gives_a_required_flag_and_is_kept_out_of_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = Parser(prog="p")
    add_old_spelling(parser, "--old", parser.add_argument("--new", type=int, required=True))
    assert vars(parser.parse_args(["--old", "3"])) == vars(parser.parse_args(["--new", "3"]))
    assert "--old" not in parser.format_help()
    assert "usage: p [-h] --new NEW" in parser.format_usage()
    with pytest.raises(SystemExit) as info:
        parser.parse_args([])
    assert info.value.code == 2
    assert "p: error: the following arguments are required: --new" in capsys.readouterr().err
