"""The Ray glue of tuner profile's progress (tuner._ray.profile_watch): Tune's callback
events become the progress's trials and epochs; the terminal stays out of Tune's pickle.
No Ray is started: the events are called as Tune's loop calls them."""

from __future__ import annotations

import io
import pickle

from tuner._ray.profile_watch import ProfileWatch
from tuner.profile_view import ProfileProgress


def test_tune_events_become_trials_and_epochs_of_the_profile() -> None:
    out = io.StringIO()
    progress = ProfileProgress(out, campaign="c", trials=2, epochs=2, clock=lambda: 0.0)
    watch = ProfileWatch(progress)
    watch.setup()
    for _ in range(2):
        watch.on_trial_start(0, [], None)  # type: ignore[arg-type]
        for epoch in (1, 2):
            watch.on_trial_result(0, [], None, {"epoch": epoch, "val_acc": 0.5})  # type: ignore[arg-type]
    watch.on_trial_result(0, [], None, {"done": True})  # type: ignore[arg-type]  # no epoch
    state = progress.state()
    assert (state.phase, state.trial, state.epoch, state.epochs_done) == ("measuring", 2, 2, 4)
    assert out.getvalue().splitlines()[0] == "[0:00] profile c: measuring"
    assert len(out.getvalue().splitlines()) == 1 + 2 * 3

    copy = pickle.loads(pickle.dumps(watch))
    copy.on_trial_start(0, [], None)  # type: ignore[arg-type]  # restored: nothing to tell
    assert len(out.getvalue().splitlines()) == 7
