"""Drives the real progress callback's live view on this process's terminal (run in an
80-column tmux pane by tests/tuner/test_live_tmux.py): trials start, report and finish over a
few redraws, more of them running than the pane has rows, with a PENDING warning; then the
end-of-run printout of a synthetic campaign (tests/tuner/closing_sample.py) through the
function ``tuner run`` prints it with, at this terminal's width, and ``LIVE-PANE-DONE``. No
Ray is started (Tune's trials are stand-ins)."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.conftest import live_campaign
from tests.tuner.closing_sample import (
    RUN_DIR,
    sample_budget,
    sample_cost,
    sample_spec,
    sample_summary,
)
from tuner._ray.progress import ProgressCallback
from tuner.closing import closing_text
from tuner.terminal import terminal_width


class _Guard:
    """The budget guard's live figures and forecast (the real one needs a Ray cluster)."""

    slots = 4

    def __init__(self) -> None:
        self.spent = 0.0

    def live(self) -> dict[str, Any]:
        return {
            "usd": self.spent,
            "usd_per_hour": 3.6,
            "gpu_hours": self.spent / 3.6,
            "limit_usd": 5.0,
            "limit_gpu_hours": 2.0,
            "pending_warnings": 1,
            "last_pending": "a trial waits for a GPU node: the autoscaler is adding gpu_t4 "
            "(max_workers 4 of the cluster config), 1 of them pending for 300 s",
            "exhausted": None,
        }

    def to_finish(self, *, done: int) -> dict[str, Any] | None:
        return {"trial_epochs": 40.0 - done, "wall_s": 95.0, "usd": 0.42, "gpu_hours": 0.1}


class _Trial:
    def __init__(self, trial_id: str) -> None:
        self.trial_id = trial_id
        self.status = "PENDING"
        self.last_result: dict[str, Any] = {}


def main() -> None:
    guard = _Guard()
    campaign = live_campaign(Path(tempfile.mkdtemp()), guard=guard)
    cb = ProgressCallback(
        metric="val_acc", maximize=True, total=40, max_epochs=9, campaign=campaign
    )
    cb.setup()
    trials = [_Trial(f"train_fn_with_a_long_name_{i:05d}_lr=0.0031,channels=24") for i in range(40)]
    for step in range(1, 7):
        for i, t in enumerate(trials):
            if t.status == "TERMINATED":
                continue
            if i < step * 6:
                t.status = "RUNNING" if i % 7 else "PAUSED"
                t.last_result = {
                    "epoch": 1 + step // 3,
                    "val_acc": 0.5 + i / 100 + step / 50,
                    "gpu_util_pct": 80.0 + i % 20,
                    "gpu_mem_used_gib": 3.25,
                }
        guard.spent += 0.3
        done = trials[step - 1]
        done.status = "TERMINATED"
        cb.on_trial_complete(step, trials, done)  # forces a redraw
        print(f"a line printed while the view is up, step {step}")  # goes above the view
        time.sleep(0.3)
    cb.on_experiment_end(trials)
    out = sys.stdout
    summary = sample_summary()
    closing = closing_text(
        sample_spec(), RUN_DIR, summary, cost=sample_cost(), budget=sample_budget(),
        interrupted=True, width=terminal_width(out),
    )  # fmt: skip
    out.write(closing)
    print("LIVE-PANE-DONE", flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
