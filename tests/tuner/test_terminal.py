"""Text fitted to a terminal's width: prose wrapped at word boundaries, tables cut to the
columns that fit, and nothing changed off a terminal."""

from __future__ import annotations

import io

import pytest

from tuner.terminal import fit, fit_table, left_out, terminal_width, wrap


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_terminal_width_is_none_off_a_terminal_and_the_columns_on_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "64")
    assert terminal_width(io.StringIO()) is None
    assert terminal_width(_Tty()) == 64
    closed = io.StringIO()
    closed.close()
    assert terminal_width(closed) is None


def test_wrap_breaks_at_word_boundaries_and_keeps_the_indent() -> None:
    text = "short line\n  (no profile given at start: only the work was predicted; `tuner run"
    text += " --profile P` predicts time and money too)"
    lines = wrap(text, 40).splitlines()
    assert lines[0] == "short line"
    assert all(len(line) <= 40 for line in lines)
    assert lines[1].startswith("  (no profile") and lines[2].startswith("    ")
    # Words are whole: joined back, the text is the same words.
    assert " ".join(" ".join(lines).split()) == " ".join(text.split())
    assert wrap(text, None) == text


def test_fit_leaves_text_for_a_pipe_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "30")
    text = "best val_acc=0.9889 (trial b8b12582, COMPLETE); config in /tmp/runs/best.yaml"
    assert fit(text, io.StringIO()) == text
    assert max(len(line) for line in fit(text, _Tty()).splitlines()) <= 30


ROWS = [
    ["#", "trial", "alpha", "beta", "gamma"],
    ["1", "t1", "0.001", "adamw", "32"],
    ["12", "t22", "0.25", "sgd", "128"],
]


def test_fit_table_keeps_the_leading_columns_and_drops_those_that_do_not_fit() -> None:
    lines, dropped = fit_table(ROWS, keep=2, width=23)
    assert dropped == ["gamma"]
    assert lines[0].split() == ["#", "trial", "alpha", "beta"]
    assert lines[1].split() == ["--", "-----", "-----", "-----"]
    assert all(len(line) <= 23 for line in lines)
    # Without a width: every column, padded as before (trailing spaces kept).
    full, none = fit_table(ROWS, keep=2, width=None)
    assert none == [] and full[0] == "#   trial  alpha  beta   gamma"
    # Kept columns wider than the terminal are cut with an ellipsis.
    cut, dropped = fit_table(ROWS, keep=5, width=12)
    assert dropped == [] and all(len(line) <= 12 for line in cut) and cut[0].endswith("…")


def test_left_out_names_the_columns_and_how_to_see_them() -> None:
    assert left_out([], "tuner show RUN", 80) == []
    (line,) = left_out(["gamma"], "tuner show runs/x", 80)
    assert line == "+1 parameter not shown: gamma (all: tuner show runs/x)"
    lines = left_out(["a" * 10, "b" * 10, "c" * 10], "tuner show runs/x", 30)
    assert lines[0].startswith("+3 parameters not shown:") and all(len(x) <= 30 for x in lines)
