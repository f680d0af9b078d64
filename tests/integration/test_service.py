"""Campaigns as a service on a real Ray head (loopback only, its own token), through the
CLI a laptop would use: submit two campaigns -> list shows both -> status --json has trials
and spend -> logs show the live line -> stop -> the study has no RUNNING trial and the run
folder is complete -> submit --resume -> finished with exactly the trials asked for, no
trial-epoch lost or run twice. Also: a submit to an address with nothing listening fails in
seconds with exit 2; a bad campaign file is refused before anything is sent."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from tests.conftest import tiny_digits_campaign
from tests.ray_head import RayHead, running_head
from tuner import rundir

pytestmark = [pytest.mark.ray, pytest.mark.slow]

TRIALS = 8


@pytest.fixture(scope="module")
def head() -> Iterator[RayHead]:
    with running_head(num_cpus=3) as h:
        yield h


def _tuner(
    args: list[str], *, env: dict[str, str], cwd: Path, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tuner", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )


def _client_env(head: RayHead, home: Path) -> dict[str, str]:
    """A laptop's environment: the head's address and token file, no other Ray setting,
    a HOME without ~/.ray/auth_token."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(head.client_env())
    env.pop("RAY_AUTH_MODE")  # tuner asks the cluster whether it wants a token
    return {**env, "HOME": str(home)}


def _listed(env: dict[str, str], cwd: Path) -> dict[str, dict[str, Any]]:
    done = _tuner(["list", "--json"], env=env, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return {doc["id"]: doc for doc in json.loads(done.stdout)}


def _wait(env: dict[str, str], cwd: Path, ident: str, test: Any, what: str, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        doc = _listed(env, cwd).get(ident)
        if doc is not None and test(doc):
            return doc
        assert time.monotonic() < deadline, f"{ident}: not {what} after {timeout} s: {doc}"
        time.sleep(0.5)


def _epochs(run_dir: Path, name: str) -> dict[int, list[int]]:
    study = optuna.load_study(study_name=name, storage=rundir.study_url(run_dir))
    assert not [t.number for t in study.trials if t.state is TrialState.RUNNING]
    return {t.number: sorted(t.intermediate_values) for t in study.trials}


def test_submit_list_status_logs_stop_resume(head: RayHead, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "runs").mkdir()  # left out of the job's working_dir
    (project / "runs" / "big.bin").write_bytes(b"\0" * 1_000_000)
    # Every trial runs all its epochs (FIFO), with small batches: slow enough to stop it
    # mid-way on any machine (about 5 s per trial here).
    big = tiny_digits_campaign(
        name="svc-a", budget={"trials": TRIALS, "max_epochs": 10}, fixed={"batch_size": 8}
    )
    big["scheduler"] = {"type": "fifo"}
    small = tiny_digits_campaign(name="svc-b", budget={"trials": 2, "max_epochs": 2})
    (project / "a.yaml").write_text(yaml.safe_dump(big))
    (project / "b.yaml").write_text(yaml.safe_dump(small))
    env = _client_env(head, tmp_path / "home")
    head_runs = str(tmp_path / "head-runs")  # the head is this machine

    started = time.monotonic()
    submit = _tuner(["submit", "a.yaml", "--runs-dir", head_runs, "--json"], env=env, cwd=project)
    submit_s = time.monotonic() - started
    assert submit.returncode == 0, submit.stdout + submit.stderr
    a = json.loads(submit.stdout)["id"]
    print(f"\ntuner submit returned in {submit_s:.2f} s (inside: {submit.stdout.strip()})")
    assert submit_s <= 5.0
    second = _tuner(["submit", "b.yaml", "--runs-dir", head_runs], env=env, cwd=project)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "tuner logs " in second.stdout and "--follow" in second.stdout
    b = second.stdout.split()[1]
    assert a.startswith("svc-a-") and b.startswith("svc-b-") and a != b

    running = _wait(
        env,
        project,
        a,
        lambda d: d["state"] == "RUNNING" and d["trials"]["running"] + d["trials"]["done"] > 0,
        "running a trial",
        timeout=180,
    )
    assert b in _listed(env, project), "the second campaign is listed on its own"
    assert running["run_dir"] and running["job"] == a
    status = _tuner(["status", a, "--json"], env=env, cwd=project)
    assert status.returncode == 0, status.stderr
    document = json.loads(status.stdout)
    assert document["schema"] == "tuner.status/1"
    assert set(document["trials"]) >= {"total", "done", "running", "stopped_early", "failed"}
    assert document["trials"]["total"] == TRIALS
    assert "usd" in document["spend"]
    assert " trials done | " in (document["line"] or ""), document  # the live line

    stop = _tuner(["stop", a], env=env, cwd=project)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert "stop requested" in stop.stdout
    stopped = _wait(env, project, a, lambda d: d["state"] != "RUNNING", "ended", timeout=180)
    assert stopped["state"] == "STOPPED", stopped
    run_dir = Path(stopped["run_dir"])
    logs = _tuner(["logs", a], env=env, cwd=project)
    assert logs.returncode == 0, logs.stderr
    assert " trials done | " in logs.stdout and "stopped by tuner stop" in logs.stdout, logs.stdout
    # (No report.html: the test suite sets TUNER_NO_REPORT, which the head passes on.)
    for name in ("summary.json", "ledger.json", "best.yaml", "driver.log", "study.db"):
        assert (run_dir / name).is_file(), name
    before = _epochs(run_dir, a)
    assert 0 < len(before) <= TRIALS

    resume = _tuner(["submit", "--resume", a], env=env, cwd=project)
    assert resume.returncode == 0, resume.stdout + resume.stderr
    finished = _wait(
        env, project, a, lambda d: d["state"] not in ("RUNNING",), "finished", timeout=300
    )
    assert finished["state"] == "FINISHED", finished
    after = _epochs(run_dir, a)
    assert len(after) == TRIALS, after  # exactly the trials asked for
    for number, epochs in before.items():  # nothing lost, nothing run twice
        assert after[number] == epochs, (number, epochs, after[number])
    for number, epochs in after.items():
        assert epochs == list(range(1, len(epochs) + 1)), (number, epochs)
    print(
        f"stop -> resume: {sum(map(len, before.values()))} trial-epochs in {len(before)} "
        f"trials before the stop, all kept; {sum(map(len, after.values()))} in {len(after)} "
        "trials at the end; none run twice"
    )
    assert _wait(env, project, b, lambda d: d["state"] != "RUNNING", "ended", 300)["state"] == (
        "FINISHED"
    )
    listing = _tuner(["list"], env=env, cwd=project)
    print(listing.stdout)

    # The jobs' working_dir, as Ray unpacked it on the head: the campaign files, no runs/.
    shipped = [p for p in Path(head.dir).rglob("_ray_pkg_*") if p.is_dir()]
    assert shipped, "no working_dir unpacked on the head"
    for folder in shipped:
        assert (folder / "a.yaml").is_file() and not (folder / "runs").exists(), folder


def test_bad_campaign_is_refused_before_anything_is_sent(head: RayHead, tmp_path: Path) -> None:
    env = _client_env(head, tmp_path / "home")
    before = len(head.client().list_jobs())
    (tmp_path / "bad.yaml").write_text("name: bad\ntrainable: digits_cnn\nbudget: {trials: 0}\n")
    done = _tuner(["submit", "bad.yaml"], env=env, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "bad.yaml" in done.stderr, done.stderr
    assert len(head.client().list_jobs()) == before


def test_a_wrong_token_gets_one_clear_line(head: RayHead, tmp_path: Path) -> None:
    env = _client_env(head, tmp_path / "home")
    wrong = tmp_path / "wrong_token"
    wrong.write_text("0" * 32)
    done = _tuner(["list"], env={**env, "RAY_AUTH_TOKEN_PATH": str(wrong)}, cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"refused the token from {wrong}" in done.stderr
    missing = {k: v for k, v in env.items() if k != "RAY_AUTH_TOKEN_PATH"}
    done = _tuner(["list"], env=missing, cwd=tmp_path)
    assert done.returncode == 2 and "wants a token and none was found" in done.stderr


def test_nothing_listening_fails_in_seconds(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a free loopback port: nothing answers there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(tiny_digits_campaign()))
    started = time.monotonic()
    done = _tuner(
        ["submit", "c.yaml", "--address", f"http://127.0.0.1:{port}"],
        env={k: v for k, v in os.environ.items() if not k.startswith("RAY_")},
        cwd=tmp_path,
    )
    took = time.monotonic() - started
    assert done.returncode == 2, done.stdout + done.stderr
    assert "no Ray dashboard answers there" in done.stderr and "Traceback" not in done.stderr
    assert took < 10, took
