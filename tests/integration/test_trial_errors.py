"""Trial errors on a real local Ray: OOM, raises, silence and a missing metric.

One campaign over a grid where every kind of failure has its region (see
``failing_trainable``): each ends FAIL with its reason and a message naming the trial and its
config, the OOM ones are not retried (the ValueError one is, per ``failure.max_retries``),
the campaign finishes every requested trial, and the report shows where failures cluster.
A second campaign with ``failure.max_failed_trials: 2`` stops after its third failure.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest
import ray
from optuna.trial import TrialState

from tuner import rundir
from tuner._ray.cluster import RayOptions, init_ray
from tuner._ray.driver import run_campaign
from tuner.cli import campaign_exit_code
from tuner.finish import Status
from tuner.spec import parse_campaign

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[2]


def _campaign(name: str, calls: Path, **failure: Any) -> dict[str, Any]:
    return {
        "name": name,
        "trainable": "tests.integration.failing_trainable:train",
        "metric": "val_loss",
        "mode": "min",
        "space": {
            "width": {"type": "categorical", "choices": [16, 256]},
            "kind": {"type": "categorical", "choices": ["ok", "raise", "silent", "nometric"]},
        },
        "budget": {"trials": 8, "max_epochs": 3},
        "scheduler": {"type": "fifo"},
        "sampler": {"type": "grid", "seed": 0},
        "resources": {"cpu": 1, "gpu": 0, "max_concurrent": 2},
        "checkpoint": {"every": 1, "keep": 1},
        "failure": {"max_retries": 1, **failure},
        "fixed": {"calls_dir": str(calls)},
    }


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """One embedded Ray (2 CPUs) for both campaigns: the project's own ray.init."""
    rundir.add_code_dirs([str(ROOT)])  # before Ray starts: its workers import the trainable
    started = init_ray(RayOptions(num_cpus=2))
    yield
    if started:
        ray.shutdown()


def test_failures_end_trials_with_reasons_and_the_campaign_goes_on(
    tmp_path: Path, local_ray: None
) -> None:
    calls = tmp_path / "calls"
    spec = parse_campaign(_campaign("trial-errors", calls), "errors.yaml")
    run_dir = tmp_path / "runs" / spec.name
    out = io.StringIO()
    start = time.monotonic()
    result = run_campaign(spec, run_dir, stream=out)
    took = time.monotonic() - start
    printed = out.getvalue()

    summary = result.summary
    assert summary["status"] == "completed", printed
    assert summary["trials_finished"] == 8
    assert campaign_exit_code(summary) == 0

    study = optuna.load_study(study_name=spec.name, storage=rundir.study_url(run_dir))
    trials = {(t.params["width"], t.params["kind"]): t for t in study.trials}
    assert len(trials) == 8, "the grid: every (width, kind) once"
    for (width, kind), t in trials.items():
        if width == 16 and kind == "ok":
            assert t.state is TrialState.COMPLETE
            continue
        assert t.state is TrialState.FAIL, (width, kind, t.user_attrs)
        if width == 256:
            assert t.user_attrs["stop_reason"] == "oom"
            assert t.user_attrs["failure"] == "oom"
            assert t.user_attrs["epochs"] == 1
    assert trials[16, "raise"].user_attrs["stop_reason"] == (
        "error: ValueError: width 16 does not fit kind 'raise'"
    )
    assert trials[16, "silent"].user_attrs["failure"] == "never reported"
    assert trials[16, "nometric"].user_attrs["failure"] == "no metric"

    # Messages: the trial, its config, what was missing; printed and in the study.
    def message(width: int, kind: str) -> str:
        t = trials[width, kind]
        text = str(t.user_attrs["failure_message"])
        assert text.startswith(
            f"trial {t.user_attrs['tune_trial_id']} (width={width}, kind={kind}): "
        )
        assert f"trial failed ({t.user_attrs['failure']}): {text}" in printed
        return text

    assert message(16, "nometric").endswith(
        ": reported no 'val_loss' at epoch 3 (it reported: loss); the campaign's metric is val_loss"
    )
    assert "never reported a result" in message(16, "silent")
    assert message(16, "raise").endswith(
        "raised ValueError: width 16 does not fit kind 'raise' (after its retries)"
    )
    assert "ran out of GPU memory at epoch 1 (torch.OutOfMemoryError: CUDA out of memory." in (
        message(256, "ok")
    )

    # OOM is not retried; the ValueError is, once (failure.max_retries: 1).
    runs = {p.name: len(p.read_text().splitlines()) for p in calls.iterdir()}
    assert runs["256-ok"] == runs["256-raise"] == runs["256-nometric"] == 1, runs
    assert runs["16-raise"] == 2, runs

    # summary.json: each failed trial with its message; where failures cluster.
    written = json.loads((run_dir / rundir.SUMMARY_FILE).read_text())
    failures = written["failures"]
    assert failures["count"] == 7
    assert failures["by_reason"] == {"oom": 4, "error": 1, "never reported": 1, "no metric": 1}
    assert all(t["message"] for t in failures["trials"])
    width = next(r for r in failures["regions"] if r["param"] == "width")
    assert {g["group"]: (g["failed"], g["total"]) for g in width["groups"]} == {
        "16": (3, 4),
        "256": (4, 4),
    }
    assert "where they failed (failed/total):" in printed
    assert "  width: 16: 3/4, 256: 4/4" in printed
    print(f"first campaign took {took:.1f} s")


def test_failure_limit_stops_the_campaign(tmp_path: Path, local_ray: None) -> None:
    spec = parse_campaign(
        _campaign("trial-errors-limit", tmp_path / "calls", max_failed_trials=2), "limit.yaml"
    )
    run_dir = tmp_path / "runs" / spec.name
    out = io.StringIO()
    result = run_campaign(spec, run_dir, stream=out)
    printed = out.getvalue()

    summary = json.loads((run_dir / rundir.SUMMARY_FILE).read_text())
    assert summary["status"] == Status.FAILURE_LIMIT == result.summary["status"], printed
    assert summary["failure_limit"]["limit_reached"] is True
    assert summary["failure_limit"]["max_failed_trials"] == 2
    assert summary["failure_limit"]["failed"] >= 3
    # No trial started after the third failure: the two running then (at most) finish.
    assert summary["trials_run"] < 8
    assert summary["failures"]["count"] == summary["failure_limit"]["failed"]
    study = optuna.load_study(study_name=spec.name, storage=rundir.study_url(run_dir))
    assert not [t for t in study.trials if t.state is TrialState.RUNNING]
    assert "failure limit reached: 3 trials failed, more than failure.max_failed_trials=2" in (
        printed
    )
    assert "status: stopped: failure limit reached" in printed
    assert campaign_exit_code(summary) == 3  # `tuner run` exits 3: stopped, resumable
