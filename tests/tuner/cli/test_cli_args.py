"""One spelling per concept across the commands, and the old spellings' mechanism
(tuner/cli/_args.py): the campaign file and the run folder are positional wherever a
command takes one, dollars are --budget-usd, and a renamed flag's old spelling is hidden."""

from __future__ import annotations

import argparse

import pytest

from tuner.cli import build_parser
from tuner.cli._args import Parser, add_old_spelling


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _visible(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.help is not argparse.SUPPRESS]


def test_the_campaign_file_and_the_run_folder_are_positional_everywhere() -> None:
    commands = _commands()
    for name in ("run", "profile", "recommend"):
        (positional,) = [a for a in commands[name]._actions if not a.option_strings]
        assert (positional.dest, positional.nargs) == ("campaign", "?"), name
    for name in ("resume", "show", "report"):
        (positional,) = [a for a in commands[name]._actions if not a.option_strings]
        assert positional.dest == "run_dir", name
    # The service commands name a campaign by its id (here or on a cluster) or run folder.
    for name in ("status", "logs", "stop"):
        (positional,) = [a for a in commands[name]._actions if not a.option_strings]
        assert (positional.dest, positional.metavar) == ("campaign", "ID"), name


def test_one_spelling_per_flag_across_the_commands() -> None:
    dests: dict[str, set[str]] = {}
    for name, parser in _commands().items():
        for action in _visible(parser):
            for flag in action.option_strings:
                dests.setdefault(flag, set()).add(action.dest)
                assert flag not in ("--campaign", "--budget"), (name, flag)
    assert all(len(found) == 1 for found in dests.values()), dests
    assert {"run", "recommend"} <= {
        name
        for name, parser in _commands().items()
        if any("--budget-usd" in a.option_strings for a in _visible(parser))
    }


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
