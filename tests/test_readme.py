"""The README's commands stay true: it opens with the two commands a newcomer runs, stays
short, every `tuner` command in its code blocks parses with today's flags, and every
relative link points at a file that exists."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tuner.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def _blocks(text: str) -> list[str]:
    return re.findall(r"```(?:bash|sh)?\n(.*?)```", text, flags=re.S)


def test_the_readme_opens_with_make_run_and_make_test_and_stays_short() -> None:
    text = README.read_text()
    first = _blocks(text)[0].splitlines()
    assert [line.split()[:2] for line in first] == [["make", "run"], ["make", "test"]]
    assert len(text.splitlines()) <= 200


def test_every_tuner_command_in_the_readme_parses() -> None:
    commands = [
        line.split("#")[0].strip()
        for block in _blocks(README.read_text())
        for line in block.splitlines()
        if line.strip().startswith(".venv/bin/tuner ")
    ]
    assert len(commands) >= 5
    parser = build_parser()
    for command in commands:
        argv = shlex.split(command)[1:]
        try:
            parser.parse_args(argv)
        except SystemExit as exc:  # argparse's usage error
            pytest.fail(f"{command!r} does not parse (exit {exc.code})")


def test_relative_links_in_the_readme_and_docs_resolve() -> None:
    broken = []
    for doc in [README, *sorted((ROOT / "docs").rglob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(ROOT)}: {target}")
    assert broken == []
