"""The budget guard on a real local Ray: money runs out, trials checkpoint and stop.

Nodes are priced by the campaign's ``pricing.node_usd_per_hour`` (the local node has no
labels or accelerators), so a few seconds of a $36/h "node" exhaust a 12-cent budget.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.trial import TrialState

from tests.conftest import tiny_digits_campaign
from tuner import rundir
from tuner._ray.cluster import RayOptions
from tuner._ray.driver import resume_campaign, run_campaign
from tuner.errors import TunerError
from tuner.finish import Status
from tuner.spec import parse_campaign

pytestmark = pytest.mark.ray

RATE = 36.0  # $/h: one cent a second
BUDGET = 0.12
POLL_S = 0.5  # the budget guard's node watcher reads Ray's node table this often


def _assert_budget_stop(summary: dict[str, Any]) -> None:
    """The campaign ended for its budget: spent (the limit reached while trials ran), or
    held back (what is left affords no further trial, so none starts and the campaign
    ends before spending it). Which one depends on how the last trials' epochs fall."""
    budget = summary["budget"]
    if summary["status"] == Status.BUDGET_EXHAUSTED:
        assert budget["exhausted"].startswith("budget exhausted: $"), budget
    else:
        assert summary["status"] == Status.HELD_BACK, summary["status"]
        assert budget["held_back"].startswith("usd: $"), budget
        assert budget["held_back"].endswith("no new trials"), budget


def test_budget_exhausted_ends_cleanly_and_survives_resume(tmp_path: Path) -> None:
    data = tiny_digits_campaign(
        # More trials than 12 seconds can run on any machine, so the budget binds first
        # (40 once all finished inside it on a fast day).
        budget={"trials": 400, "max_epochs": 4, "usd": BUDGET},
        pricing={"node_usd_per_hour": RATE},
    )
    spec = parse_campaign(data, "budget.yaml")
    run_dir = tmp_path / "runs" / spec.name
    before = time.time()
    result = run_campaign(spec, run_dir, RayOptions(num_cpus=2))
    after = time.time()
    summary = result.summary

    _assert_budget_stop(summary)
    assert 0 < summary["trials_run"] < spec.budget.trials
    ledger = json.loads((run_dir / "ledger.json").read_text())
    spent = ledger["totals"]["usd"]
    # What the spend must be, from the ledger's inputs: the one local node, priced at the
    # campaign's rate, for the time the driver's session ran. The session lies within the
    # test's own clock readings around the run, and every epoch the trials reported (their
    # result.json) ended inside it.
    (node,) = ledger["nodes"]
    assert (node["usd_per_hour"], node["rate_source"]) == (RATE, "pricing.node_usd_per_hour")
    ((start, end),) = ledger["sessions"]
    assert before <= start < end <= after
    epoch_ends = [
        json.loads(line)["tuner_epoch_end_unix_s"]
        for path in run_dir.glob("trial_*/result.json")
        for line in path.read_text().splitlines()
    ]
    assert epoch_ends and start < min(epoch_ends) and max(epoch_ends) < end
    # The node is billed from the session's start (Ray's start time for it, earlier, is
    # clamped to the session) to the ledger's last write, just after the session ended;
    # POLL_S (the node watcher's interval) covers a first observation standing in for
    # Ray's start time. Half a cent at one cent a second: 4 % of the budget.
    assert spent == pytest.approx(RATE * (end - start) / 3600, abs=RATE * POLL_S / 3600)
    if summary["status"] == Status.BUDGET_EXHAUSTED:
        # Declared exhausted once the spend plus a stop lead (the mean epoch so far, at
        # most the longest one reported, plus the 1 s check period) reached the limit; the
        # reason's figure is rounded to the cent.
        declared = float(re.match(r"budget exhausted: \$([\d.]+) of", ledger["exhausted"])[1])
        longest = max(
            json.loads(line)["time_this_iter_s"]
            for path in run_dir.glob("trial_*/result.json")
            for line in path.read_text().splitlines()
        )
        assert declared + RATE * (longest + 1.0) / 3600 >= BUDGET - 0.005, (declared, longest)
        assert declared <= spent + 0.005
    else:
        # Held back: the running trials' expected cost plus a new trial's would have
        # passed the limit, so none started and the campaign ended under it.
        assert 0 < spent <= BUDGET, spent

    study = optuna.load_study(study_name=spec.name, storage=rundir.study_url(run_dir))
    assert TrialState.RUNNING not in {t.state for t in study.trials}
    for trial in study.trials:
        if trial.state is TrialState.COMPLETE:
            assert sorted(trial.intermediate_values) == [1, 2, 3, 4]
    stopped = [
        t for t in study.trials if str(t.user_attrs.get("stop_reason", "")).startswith("budget")
    ]
    # Every trial that trained an epoch left a checkpoint (checkpoint.every is 1).
    for trial in study.trials:
        if trial.intermediate_values:
            folder = run_dir / f"trial_{trial.user_attrs['tune_trial_id']}"
            assert list(folder.glob("checkpoint_*")), f"{folder} has no checkpoint"
    assert all(t.state in (TrialState.PRUNED, TrialState.FAIL) for t in stopped)

    # Resumed, the ledger carries on: still exhausted, nothing new runs, nothing reset.
    again = resume_campaign(run_dir, RayOptions(num_cpus=2))
    _assert_budget_stop(again.summary)
    assert again.summary["trials_run"] == summary["trials_run"]
    resumed = json.loads((run_dir / "ledger.json").read_text())
    assert len(resumed["sessions"]) == 2
    (_, (start2, end2)) = resumed["sessions"]
    first, second = resumed["nodes"]  # the resume started a Ray node of its own
    assert first["node_id"] == node["node_id"] and second["node_id"] != node["node_id"]
    # The first node is billed up to its last observation in the first session (it was
    # gone when the resume looked), the second for the resume's session, as above.
    assert first["end"] == node["last_seen"]
    first_usd = RATE * (node["last_seen"] - node["start"]) / 3600
    assert resumed["totals"]["usd"] == pytest.approx(
        first_usd + RATE * (end2 - start2) / 3600, abs=RATE * POLL_S / 3600
    )


def test_request_no_node_fits_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    data = tiny_digits_campaign(resources={"cpu": 1, "gpu": 1})
    spec = parse_campaign(data, "gpu.yaml")
    run_dir = tmp_path / "runs" / spec.name
    with pytest.raises(TunerError) as info:
        run_campaign(spec, run_dir, RayOptions(num_cpus=2, num_gpus=0))
    message = str(info.value)
    assert "each trial asks for {GPU: 1, CPU: 1}, but no node type fits {GPU: 1, CPU: 1}" in message
    assert "To fix" in message
    assert not run_dir.exists()


def test_pending_trial_is_reported_with_its_reason(tmp_path: Path) -> None:
    # Two trials at once but one (logical) GPU: the second waits for the first.
    data = tiny_digits_campaign(
        budget={"trials": 2, "max_epochs": 4},
        scheduler="fifo",
        resources={"cpu": 1, "gpu": 1, "max_concurrent": 2, "pending_warning": 1},
    )
    spec = parse_campaign(data, "pending.yaml")
    run_dir = tmp_path / "runs" / spec.name
    result = run_campaign(spec, run_dir, RayOptions(num_cpus=2, num_gpus=1))
    assert result.summary["status"] == "completed"
    warnings = json.loads((run_dir / "ledger.json").read_text())["pending_warnings"]
    assert warnings, "no PENDING warning"
    assert "every node that fits {GPU: 1, CPU: 1} is busy" in warnings[0]["reason"]
