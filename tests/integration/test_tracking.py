"""One small campaign logged to MLflow (its run folder's SQLite store) and W&B (offline),
through the real CLI flags, read back: MLflow has one parent run and a child run per trial
with its per-epoch metrics, stop reason and cost; W&B's offline run files (read with
tests/wandb_records.py) hold the same, and the campaign's own W&B run in the trials' group
holds the best configuration, the totals and the report as an artifact; optuna-dashboard,
started by `tuner dashboard` on the run folder, serves the study with each trial's cost among
its user attributes. A resumed trial's MLflow run is found again under its parent (driven
without Ray, in the same store)."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import optuna
import pytest
import yaml
from mlflow.tracking import MlflowClient
from tensorboardX.proto.event_pb2 import Event

from tests.conftest import run_cli, tiny_digits_campaign
from tests.ports import free_port
from tests.processes import reap, spawn
from tests.wandb_records import read_run
from tuner import rundir
from tuner._ray.campaign import Campaign
from tuner._ray.tracking import TRIAL_TAG, TrialRunsMLflow
from tuner.study import COST_ATTR, STOP_REASON_ATTR, TUNE_TRIAL_ID_ATTR
from tuner.tracking import PARENT_TAG, TRACKING_FILE, ParentRun
from tuner.tracking_wandb import CAMPAIGN_JOB

pytestmark = [pytest.mark.ray, pytest.mark.slow]

TRIALS, EPOCHS = 3, 2


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The campaign's run folder: 3 trials x <= 2 epochs, nodes priced at $3.60/h so that
    trials cost something, W&B from the file, MLflow from the flags, with the report."""
    tmp = tmp_path_factory.mktemp("tracking")
    data = tiny_digits_campaign(
        name="tracked",
        budget={"trials": TRIALS, "max_epochs": EPOCHS},
        pricing={"node_usd_per_hour": 3.6},
        tracking={"wandb": {"project": "tuner-test", "mode": "offline"}},
    )
    (tmp / "c.yaml").write_text(yaml.safe_dump(data))
    argv = ["run", "c.yaml", "--runs-dir", "runs", "--num-cpus", "2"]
    argv += ["--mlflow-experiment", "tiny"]
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TUNER_NO_REPORT", "0")  # the report is attached to the parent run
        proc = run_cli(argv, cwd=tmp, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return tmp / "runs" / "tracked"


def _study(run_dir: Path) -> optuna.Study:
    return optuna.load_study(study_name="tracked", storage=rundir.study_url(run_dir))


def _by_tune_id(run_dir: Path) -> dict[str, optuna.trial.FrozenTrial]:
    return {str(t.user_attrs[TUNE_TRIAL_ID_ATTR]): t for t in _study(run_dir).trials}


def _client(run_dir: Path) -> MlflowClient:
    return MlflowClient(tracking_uri=f"sqlite:///{run_dir / 'mlflow.db'}")


def test_mlflow_has_a_parent_run_and_one_child_per_trial(run_dir: Path) -> None:
    trials = _by_tune_id(run_dir)
    assert len(trials) == TRIALS
    client = _client(run_dir)
    experiment = client.get_experiment_by_name("tiny")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if PARENT_TAG not in r.data.tags]
    children = [r for r in runs if PARENT_TAG in r.data.tags]
    assert len(parents) == 1 and len(children) == TRIALS
    parent = parents[0]
    assert {c.data.tags[PARENT_TAG] for c in children} == {parent.info.run_id}
    assert json.loads((run_dir / TRACKING_FILE).read_text())["mlflow"]["run_id"] == (
        parent.info.run_id
    )
    for child in children:
        assert child.info.status == "FINISHED"
        tune_id = child.data.tags["trial_name"].removeprefix("trial_")
        trial = trials[tune_id]
        # The sampled parameters and the fixed batch size; no reserved keys.
        assert child.data.params == {
            **{k: str(v) for k, v in trial.params.items()},
            "batch_size": "64",
        }
        history = client.get_metric_history(child.info.run_id, "val_acc")
        assert {m.step: m.value for m in history} == trial.intermediate_values
        assert child.data.tags["stop_reason"] == trial.user_attrs[STOP_REASON_ATTR]
        assert child.data.metrics["cost_usd"] == trial.user_attrs[COST_ATTR]
        assert child.data.metrics["cost_usd"] > 0
        assert child.data.metrics["epochs"] == len(trial.intermediate_values)
    print(
        f"mlflow: {len(parents)} parent + {len(children)} trial runs; epochs per trial run:",
        sorted(len(client.get_metric_history(c.info.run_id, "val_acc")) for c in children),
    )


def test_the_parent_run_has_the_best_config_and_the_report(run_dir: Path) -> None:
    summary = json.loads((run_dir / rundir.SUMMARY_FILE).read_text())
    client = _client(run_dir)
    parent = client.get_run(json.loads((run_dir / TRACKING_FILE).read_text())["mlflow"]["run_id"])
    assert parent.info.status == "FINISHED"
    assert parent.data.params == {f"best.{k}": str(v) for k, v in summary["best"]["params"].items()}
    assert parent.data.metrics["best_value"] == pytest.approx(summary["best"]["value"])
    assert parent.data.metrics["cost_usd"] == pytest.approx(summary["budget"]["usd"])
    assert parent.data.tags["tuner.status"] == summary["status"]
    attached = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"campaign.yaml", "summary.json", "best.yaml", "report.html", "report.md"} <= attached
    # The artifacts are beside the run folder's database, not wherever the driver ran.
    assert (run_dir / "mlartifacts").is_dir()


def test_a_resume_reopens_the_same_parent_run(run_dir: Path) -> None:
    from tuner.spec import load_campaign
    from tuner.tracking import close_parent_run, open_parent_run

    spec = load_campaign(run_dir / rundir.CAMPAIGN_FILE, check_trainable=False)
    recorded = json.loads((run_dir / TRACKING_FILE).read_text())["mlflow"]["run_id"]
    parent = open_parent_run(spec, run_dir)
    assert parent is not None and parent.run_id == recorded
    client = _client(run_dir)
    assert client.get_run(recorded).info.status == "RUNNING"
    close_parent_run(parent, run_dir, json.loads((run_dir / rundir.SUMMARY_FILE).read_text()))
    assert client.get_run(recorded).info.status == "FINISHED"
    experiment = client.get_experiment_by_name("tiny")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    assert sum(PARENT_TAG not in r.data.tags for r in runs) == 1


def _wandb_runs(run_dir: Path) -> list[dict[str, Any]]:
    return [read_run(p) for p in sorted((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))]


def _tensorboard_steps(trial_dir: Path, tag: str) -> set[int]:
    """The steps of ``tag``'s scalars in a trial folder's TensorBoard event files (TFRecord
    framing: length, its CRC, an Event proto, its CRC)."""
    steps = set()
    for path in trial_dir.glob("events.out.tfevents.*"):
        data, at = path.read_bytes(), 0
        while at < len(data):
            (size,) = struct.unpack("<Q", data[at : at + 8])
            event = Event.FromString(data[at + 12 : at + 12 + size])
            at += 12 + size + 4
            steps |= {event.step for v in event.summary.value if v.tag == tag}
    return steps


def test_tensorboard_events_are_still_written_beside_the_trackers(run_dir: Path) -> None:
    for tune_id, trial in _by_tune_id(run_dir).items():
        steps = _tensorboard_steps(run_dir / f"trial_{tune_id}", "ray/tune/val_acc")
        assert steps == set(trial.intermediate_values), tune_id


def test_wandb_offline_run_files_hold_each_trial(run_dir: Path) -> None:
    trials = _by_tune_id(run_dir)
    runs = [r for r in _wandb_runs(run_dir) if r["job_type"] != CAMPAIGN_JOB]
    assert len(runs) == TRIALS
    for run in runs:
        trial = trials[run["id"]]
        assert run["project"] == "tuner-test" and run["group"] == "tracked"
        config = run["config"]
        assert {k: config[k] for k in trial.params} == trial.params
        assert not [k for k in config if k.startswith("tuner_")]
        assert config["stop_reason"] == trial.user_attrs[STOP_REASON_ATTR]
        assert config["cost_usd"] == trial.user_attrs[COST_ATTR]
        epochs = {int(row["epoch"]): row["val_acc"] for row in run["history"] if "val_acc" in row}
        assert epochs == trial.intermediate_values


def test_wandb_has_the_campaign_run_in_the_trials_group_with_the_report(run_dir: Path) -> None:
    summary = json.loads((run_dir / rundir.SUMMARY_FILE).read_text())
    runs = _wandb_runs(run_dir)
    campaigns = [r for r in runs if r["job_type"] == CAMPAIGN_JOB]
    assert len(campaigns) == 1 and len(runs) == TRIALS + 1
    run = campaigns[0]
    assert (run["project"], run["group"], run["name"]) == ("tuner-test", "tracked", "tracked")
    assert run["id"] == json.loads((run_dir / TRACKING_FILE).read_text())["wandb"]["run_id"]
    assert run["id"] not in _by_tune_id(run_dir)
    assert run["config"]["best"] == summary["best"]["params"]
    assert run["summary"]["best_value"] == pytest.approx(summary["best"]["value"])
    assert run["summary"]["best_trial"] == summary["best"]["tune_trial_id"]
    assert run["summary"]["cost_usd"] == pytest.approx(summary["budget"]["usd"])
    assert summary["budget"]["usd"] > 0
    assert run["summary"]["status"] == summary["status"]
    assert run["summary"]["trials_run"] == summary["trials_run"] == TRIALS
    assert run["summary"]["trials_finished"] == summary["trials_finished"]
    [artifact] = run["artifacts"]
    assert artifact["type"] == "report" and artifact["name"] == "tracked-report"
    files = artifact["files"]
    assert {"report.html", "report.md", "summary.json", "best.yaml"} <= set(files)
    for name, entry in files.items():
        # Each file W&B will upload is a copy inside the run folder's wandb/, as it was.
        local = Path(entry["local_path"])
        assert local.is_relative_to((run_dir / "wandb").resolve()), local
        assert local.read_bytes() == (run_dir / name).read_bytes()
        digest = base64.b64encode(hashlib.md5(local.read_bytes()).digest()).decode()
        assert entry["digest"] == digest


class FakeTrial:
    """What the callback reads of a Tune trial; a resumed driver has a new object."""

    def __init__(self, trial_id: str, config: dict[str, Any]) -> None:
        self.trial_id = trial_id
        self.config = config

    def __str__(self) -> str:
        return f"train_{self.trial_id}"


def _callback(parent: ParentRun, ended: dict[str, Any]) -> TrialRunsMLflow:
    callback = TrialRunsMLflow(parent, cast(Campaign, SimpleNamespace(ended=ended)))
    callback.setup()
    return callback


def test_a_resumed_trial_goes_on_in_its_own_run_under_its_parent(
    run_dir: Path, tmp_path: Path
) -> None:
    """TrialRunsMLflow driven through Tune's logger callback protocol by two drivers (the
    crashed one and the resumed one), with a stand-in for Tune's Trial, no Ray: in an
    experiment of its own in the campaign's MLflow store (no second store to create)."""
    client = _client(run_dir)
    uri = f"sqlite:///{run_dir / 'mlflow.db'}"
    experiment = client.create_experiment("resume", artifact_location=tmp_path.as_uri())
    parent = client.create_run(experiment, run_name="campaign").info.run_id
    other = client.create_run(experiment, run_name="another campaign").info.run_id
    # Another campaign in the same experiment has a trial of the same name.
    decoy = client.create_run(
        experiment, tags={TRIAL_TAG: "train_t0", PARENT_TAG: other}, run_name="train_t0"
    ).info.run_id
    runs = ParentRun(uri, experiment, "resume", parent)
    config = {"lr": 0.01, "tuner_seed": 3}

    before = _callback(runs, ended={})  # the driver that crashed after epoch 1
    trial = FakeTrial("t0", config)
    before.log_trial_start(cast(Any, trial))
    before.log_trial_result(1, cast(Any, trial), {"training_iteration": 1, "val_acc": 0.5})

    ended = {"t0": {"stop_reason": "completed", "epochs": 2, "cost_usd": 0.25}}
    after = _callback(runs, ended=ended)  # the resumed driver: new callback, new trial object
    trial = FakeTrial("t0", config)
    after.log_trial_start(cast(Any, trial))
    after.log_trial_result(2, cast(Any, trial), {"training_iteration": 2, "val_acc": 0.7})
    after.log_trial_end(cast(Any, trial))

    mine = client.search_runs([experiment], filter_string=f"tags.`{PARENT_TAG}` = '{parent}'")
    assert len(mine) == 1
    run = client.get_run(mine[0].info.run_id)
    assert run.info.status == "FINISHED" and run.data.tags[TRIAL_TAG] == "train_t0"
    history = client.get_metric_history(run.info.run_id, "val_acc")
    assert {m.step: m.value for m in history} == {1: 0.5, 2: 0.7}
    assert run.data.params == {"lr": "0.01"}  # the reserved keys are left out
    assert run.data.tags["stop_reason"] == "completed"
    assert run.data.metrics["cost_usd"] == 0.25 and run.data.metrics["epochs"] == 2
    assert client.get_run(decoy).info.status == "RUNNING"  # the other campaign's, untouched
    assert client.get_metric_history(decoy, "val_acc") == []


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


@pytest.fixture
def dashboard(run_dir: Path, tmp_path: Path) -> Iterator[str]:
    """`tuner dashboard RUN_DIR` on a free loopback port, stopped by its PID at the end."""
    port = free_port()
    log = (tmp_path / "dashboard.log").open("wb")
    proc = spawn(
        [sys.executable, "-m", "tuner", "dashboard", str(run_dir), "--port", str(port)], log
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _get(f"{base}/api/studies")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError((tmp_path / "dashboard.log").read_text()) from None
                time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        reap(proc)
        log.close()


def test_tuner_dashboard_serves_the_study_with_each_trials_cost(
    run_dir: Path, dashboard: str
) -> None:
    trials = _by_tune_id(run_dir)
    studies = _get(f"{dashboard}/api/studies")["study_summaries"]
    assert [s["study_name"] for s in studies] == ["tracked"]
    detail = _get(f"{dashboard}/api/studies/{studies[0]['study_id']}")
    assert len(detail["trials"]) == TRIALS
    for served in detail["trials"]:
        attrs = {a["key"]: a["value"] for a in served["user_attrs"]}
        trial = trials[attrs[TUNE_TRIAL_ID_ATTR]]
        assert attrs[STOP_REASON_ATTR] == trial.user_attrs[STOP_REASON_ATTR]
        assert float(attrs[COST_ATTR]) == trial.user_attrs[COST_ATTR] > 0
