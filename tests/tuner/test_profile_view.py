"""tuner profile's progress (tuner.profile_view): plain lines off a terminal, one per phase,
trial and epoch; on a terminal a view redrawn in place that fits the width. No Ray: the
events are told as the Ray glue's ProfileWatch tells them."""

from __future__ import annotations

import io

from rich.console import Console

from tuner.profile_view import ProfileProgress, ProfileState, format_line, render


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _measure(progress: ProfileProgress, clock: _Clock) -> None:
    with progress:
        progress.phase("starting Ray")
        clock.now += 4
        progress.phase("measuring")
        for _ in range(2):
            progress.trial_started()
            for epoch in (1, 2):
                clock.now += 1.5
                progress.epoch_reported(epoch)
        progress.phase("reading results")
        progress.phase("done")


def test_off_a_terminal_one_plain_line_per_phase_trial_and_epoch() -> None:
    clock, out = _Clock(), io.StringIO()
    _measure(ProfileProgress(out, campaign="digits-cnn", trials=2, epochs=2, clock=clock), clock)
    assert out.getvalue().splitlines() == [
        "[0:00] profile digits-cnn: starting Ray",
        "[0:04] profile digits-cnn: measuring",
        "[0:04] profile digits-cnn: trial 1/2, starting (0/4 epochs)",
        "[0:06] profile digits-cnn: trial 1/2, epoch 1/2 (1/4 epochs)",
        "[0:07] profile digits-cnn: trial 1/2, epoch 2/2 (2/4 epochs)",
        "[0:07] profile digits-cnn: trial 2/2, starting (2/4 epochs)",
        "[0:08] profile digits-cnn: trial 2/2, epoch 1/2 (3/4 epochs)",
        "[0:10] profile digits-cnn: trial 2/2, epoch 2/2 (4/4 epochs)",
        "[0:10] profile digits-cnn: reading results",
        "[0:10] profile digits-cnn: done",
    ]


def test_on_a_terminal_the_view_is_redrawn_in_place_and_taken_down() -> None:
    clock, out = _Clock(), _Tty()
    _measure(ProfileProgress(out, campaign="digits-cnn", trials=2, epochs=2, clock=clock), clock)
    text = out.getvalue()
    assert "\x1b[" in text  # cursor movements: drawn in place, not line after line
    assert "profile digits-cnn: " not in text  # no plain line
    assert "4/4 trial-epochs" in text and "trial 2/2, epoch 2/2" in text


def _lines(state: ProfileState, width: int) -> list[str]:
    console = Console(width=width, file=io.StringIO(), color_system=None, legacy_windows=False)
    with console.capture() as capture:
        console.print(render(state, width=width))
    return capture.get().rstrip("\n").split("\n")


def test_the_view_fits_the_width_and_names_phase_trial_epoch_and_time() -> None:
    state = ProfileState(
        campaign="a-campaign-with-a-rather-long-name-for-its-team",
        trials=3,
        epochs=20,
        phase="measuring",
        trial=2,
        epoch=9,
        epochs_done=29,
        elapsed_s=77,
    )
    for width in (80, 40):
        lines = _lines(state, width)
        assert len(lines) == 3 and max(len(line) for line in lines) <= width, lines
    wide = _lines(state, 80)
    assert wide[0].startswith("profile a-campaign") and wide[0].endswith("1:17 elapsed")
    assert wide[1].startswith("epochs ") and wide[1].endswith(" 29/60 trial-epochs")
    assert wide[2] == "trial 2/3, epoch 9/20"
    assert _lines(ProfileState(campaign="c", trials=3, epochs=3), 80)[2] == "starting Ray"
    assert format_line(state) == (
        "[1:17] profile a-campaign-with-a-rather-long-name-for-its-team: "
        "trial 2/3, epoch 9/20 (29/60 epochs)"
    )
