"""The end-of-run printout of ``tuner run`` (tuner.closing): on a terminal it fits the
width (parameter columns left out and named, prose wrapped at word boundaries); off a
terminal (width None) every column and every line as it was."""

from __future__ import annotations

from tests.tuner.closing_sample import (
    RUN_DIR,
    sample_budget,
    sample_cost,
    sample_spec,
    sample_summary,
)
from tuner.closing import closing_text


def _text(width: int | None) -> str:
    return closing_text(
        sample_spec(),
        RUN_DIR,
        sample_summary(),
        cost=sample_cost(),
        budget=sample_budget(),
        interrupted=True,
        width=width,
    )


def test_closing_text_fits_80_columns_and_names_what_it_left_out() -> None:
    lines = _text(80).splitlines()
    assert max(len(line) for line in lines) <= 80, "\n".join(lines)
    head = next(line for line in lines if line.startswith("#   trial"))
    assert head.split()[:5] == ["#", "trial", "state", "val_acc", "epochs"]
    shown = head.split()[5:]
    assert shown and "weight_decay" not in shown
    note = next(i for i, line in enumerate(lines) if line.startswith("+"))
    hidden = " ".join(lines[note : note + 3])
    assert "parameters not shown:" in hidden and "weight_decay" in hidden
    assert f"(all: tuner show {RUN_DIR})" in " ".join(hidden.split())
    # Prose is wrapped by us at word boundaries: its words are all there, in order.
    text = " ".join(_text(80).split())
    for words in (
        f"best val_acc=0.9900 (trial b8b10000, COMPLETE); config in {RUN_DIR}/best.yaml",
        "`tuner run --profile P` predicts time and money too)",
        "ledger: spent $5.01 of $5.00; 0.0262 node-hours on 1 node(s)",
        f"interrupted; `tuner resume {RUN_DIR}` continues the campaign",
    ):
        assert words in text


def test_closing_text_off_a_terminal_has_every_column_and_unwrapped_lines() -> None:
    text = _text(None)
    lines = text.splitlines()
    head = next(line for line in lines if line.startswith("#   trial"))
    assert head.split()[5:] == [
        "batch_size",
        "channels",
        "dropout",
        "lr",
        "momentum",
        "optimizer",
        "weight_decay",
    ]
    assert not any(line.startswith("+") for line in lines)
    assert f"best val_acc=0.9900 (trial b8b10000, COMPLETE); config in {RUN_DIR}/best.yaml" in lines
    assert text.startswith("\n#   trial") and text.endswith("continues the campaign\n")
