"""The live view's rendering (tuner.live), pure: a snapshot drawn into an 80-column rich
console and read back line by line."""

from __future__ import annotations

import io

from rich.console import Console

from tuner.live import (
    LiveState,
    LiveView,
    TrialRow,
    compact_counts,
    format_duration,
    gpu_text,
    render,
    rung_label,
)

MONEY = {
    "usd": 1.25,
    "usd_per_hour": 3.6,
    "gpu_hours": 0.5,
    "limit_usd": 5.0,
    "limit_gpu_hours": None,
    "pending_warnings": 1,
    "last_pending": "waiting for the autoscaler to add a node (gpu_t4) " * 3,
    "exhausted": None,
}


def _state(running: int, **fields: object) -> LiveState:
    rows = tuple(
        TrialRow(f"trial_{i:05d}_with_a_name_longer_than_its_column", i % 9, 0.9 + i / 1e4, "1/3")
        for i in range(running)
    )
    base: dict[str, object] = {
        "name": "digits-cnn-with-a-long-campaign-name " * 3,
        "elapsed_s": 125.0,
        "metric": "val_acc",
        "counts": compact_counts(
            done=12, total=40, running=running, pending=3, waiting=2, stopped_early=5, failed=1
        ),
        "epochs_done": 57,
        "epochs_total": 142.4,
        "eta_s": 3723.0,
        "usd_to_finish": 0.42,
        "money": MONEY,
        "best": (0.97, "trial_00003"),
        "running": rows,
    }
    base.update(fields)
    return LiveState(**base)  # type: ignore[arg-type]


def _lines(renderable: object, *, width: int = 80, height: int = 24) -> list[str]:
    console = Console(width=width, height=height, file=io.StringIO(), record=True)
    console.print(renderable)
    return console.export_text().splitlines()


def test_view_fits_80_columns_and_the_height_with_no_repeated_line() -> None:
    lines = _lines(render(_state(30), width=80, height=24))
    assert max(len(line) for line in lines) <= 80
    assert len(lines) == 24
    assert len(set(lines)) == len(lines), lines
    # 24 lines: title, counts, epochs, money, best, header, 16 rows, "+14 more", PENDING.
    assert lines[-2] == "+14 more running"
    assert lines[-1].startswith("PENDING: waiting for the autoscaler") and lines[-1].endswith("…")
    assert sum(1 for line in lines if line.lstrip().startswith("trial_")) == 16


def test_view_shows_epochs_against_the_predicted_total_eta_and_dollars_to_finish() -> None:
    lines = _lines(render(_state(2), width=80, height=24))
    [epochs] = [line for line in lines if line.startswith("epochs ")]
    assert epochs.endswith("57/~142 trial-epochs  ETA 1:02:03  $0.42 to finish"), epochs
    assert any(line.startswith("money ") and "$1.25 of $5.00 at $3.60/h" in line for line in lines)
    assert "best val_acc=0.9700 (trial_00003)" in lines
    header = next(line for line in lines if line.lstrip().startswith("trial "))
    assert header.split() == ["trial", "epoch", "val_acc", "rung", "GPU"]
    assert not any("more running" in line for line in lines)


def test_unknown_forecast_shows_dashes() -> None:
    state = _state(0, epochs_total=None, eta_s=None, usd_to_finish=None, money=None, best=None)
    lines = _lines(render(state, width=80, height=24))
    [epochs] = [line for line in lines if line.startswith("epochs ")]
    assert epochs.endswith("57/- trial-epochs  ETA -  - to finish"), epochs
    assert "best val_acc: - (no trial finished yet)" in lines
    assert "no trial running" in lines
    assert not any(line.startswith(("money", "PENDING")) for line in lines)


def test_money_without_a_dollar_limit_is_a_line_not_a_bar() -> None:
    money = {**MONEY, "limit_usd": None, "last_pending": None}
    lines = _lines(render(_state(1, money=money), width=80, height=24))
    assert "money  $1.25 at $3.60/h (no dollar limit)" in lines


def test_live_view_draws_at_the_console_size_one_line_short() -> None:
    # The renderable the terminal gets: a narrower, lower console gets a smaller view.
    lines = _lines(LiveView(_state(30)), width=60, height=15)
    assert max(len(line) for line in lines) <= 60
    assert len(lines) == 14


def test_rung_labels() -> None:
    marks = (1, 3, 9)
    assert rung_label(0, marks) == "0/3 next 1"
    assert rung_label(2, marks) == "1/3 next 3"
    assert rung_label(9, marks) == "3/3"
    assert rung_label(3, marks, waiting=True) == "waits 3"
    assert rung_label(4, ()) == "-"


def test_gpu_text_duration_and_counts() -> None:
    assert gpu_text({"gpu_util_pct": 87.4, "gpu_mem_used_gib": 3.14}) == "87% 3.1G"
    assert gpu_text({"telemetry": "unavailable: no GPU"}) == "-"
    assert format_duration(65) == "1:05" and format_duration(None) == "-"
    counts = compact_counts(
        done=1, total=4, running=2, pending=1, waiting=0, stopped_early=0, failed=0
    )
    assert counts == "1/4 done | 2 running | 1 pending | 0 stopped early | 0 failed"
