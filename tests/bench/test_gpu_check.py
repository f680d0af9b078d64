"""The CPU side of bench/gpu_check.py: step runner and budgets, prerequisites, the JSON, the
prediction arithmetic, and the whole script as a CPU dry run without Ray or Optuna."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from bench import gpu_check, gpu_steps
from bench.gpu_check import (
    Step,
    blocked_steps,
    check_prerequisites,
    json_safe,
    missing_line,
    run_steps,
    subprocess_executor,
)
from bench.gpu_headline import headline, rounded
from bench.gpu_profile import campaign_for, compare, measure_profile, profile_config
from bench.gpu_steps import StepContext, gpu_test_files, outcomes_from_log, parse_junit
from bench.gpu_train import mfu, telemetry_summary

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "gpu_check.py"
OUTCOME_KEYS = {"status", "result", "checks", "error", "wall_s", "budget_s"}


class FakeClock:
    """Seconds that pass only when a fake step says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _ok(result: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"status": "ok", "result": result or {}, "checks": {"fine": True}, "error": None}


# -- the step runner and its time budget ----------------------------------------------------


def test_each_step_gets_its_budget_or_what_is_left_of_the_run() -> None:
    clock = FakeClock()
    given: dict[str, float] = {}
    took = {"a": 30.0, "b": 50.0, "c": 1.0, "d": 1.0}

    def execute(step: Step, timeout_s: float) -> dict[str, Any]:
        given[step.name] = timeout_s
        clock.now += took[step.name]
        return _ok()

    steps = [Step("a", 40), Step("b", 60), Step("c", 60), Step("d", 10)]
    outcomes = run_steps(steps, execute, blocked={}, total_s=100, clock=clock)
    # a: its 40 s; b: its 60 s (70 left); c: the 20 s left after 80 s; d: 19 s left.
    assert given == {"a": 40, "b": 60, "c": 20, "d": 10}
    assert [o["wall_s"] for o in outcomes.values()] == [30, 50, 1, 1]
    assert all(set(o) == OUTCOME_KEYS for o in outcomes.values())


def test_a_step_is_skipped_when_too_little_of_the_run_is_left() -> None:
    clock = FakeClock()

    def execute(step: Step, timeout_s: float) -> dict[str, Any]:
        clock.now += timeout_s  # ran to its budget
        return {**_ok(), "status": "timeout"}

    steps = [Step("long", 97), Step("late", 30), Step("later", 30)]
    outcomes = run_steps(steps, execute, blocked={}, total_s=100, clock=clock)
    assert outcomes["long"]["status"] == "timeout"
    assert outcomes["late"]["status"] == "skipped"
    assert outcomes["late"]["error"] == "only 3 s left of the 100 s run"
    assert outcomes["later"]["budget_s"] == pytest.approx(3)


def test_a_blocked_step_is_skipped_and_the_others_still_run() -> None:
    ran: list[str] = []

    def execute(step: Step, timeout_s: float) -> dict[str, Any]:
        ran.append(step.name)
        if step.name == "a":
            return {"status": "failed", "result": {"x": 1}, "checks": {}, "error": "boom"}
        return _ok()

    saved: list[list[str]] = []
    outcomes = run_steps(
        [Step("a", 10), Step("tests", 10), Step("c", 10)],
        execute,
        blocked={"tests": ["pytest"]},
        total_s=100,
        on_step=lambda outcomes: saved.append(list(outcomes)),
    )
    assert ran == ["a", "c"]
    assert outcomes["a"]["status"] == "failed" and outcomes["a"]["result"] == {"x": 1}
    assert outcomes["tests"]["status"] == "skipped"
    assert outcomes["tests"]["error"] == "missing prerequisite: pytest"
    assert outcomes["c"]["status"] == "ok"
    # Saved after every step, so a run cut off later keeps what came before.
    assert saved == [["a"], ["a", "tests"], ["a", "tests", "c"]]
    assert gpu_check.exit_status(outcomes) == 1
    assert gpu_check.exit_status({"c": outcomes["c"]}) == 0


def test_default_budgets_fit_five_minutes() -> None:
    assert gpu_check.DEFAULT_TOTAL_S <= 300 - 20  # the driver's own start and end
    *first, last = gpu_check.STEPS
    assert [s.name for s in first] == ["env", "train", "profile", "mfu", "nccl"]
    # The tests come last and get at least 90 s even when every other step runs to its budget.
    assert last.name == "tests"
    assert gpu_check.DEFAULT_TOTAL_S - sum(s.budget_s for s in first) >= 90


# -- running a step's process ---------------------------------------------------------------


def _python(code: str) -> gpu_check.CommandFor:
    """A step command that runs ``code`` with ``out`` (the step's JSON path) defined."""

    def command(step: Step, out: Path, scratch: Path, timeout_s: float) -> list[str]:
        return [sys.executable, "-c", f"out = {str(out)!r}\n" + textwrap.dedent(code)]

    return command


def test_a_step_over_its_budget_is_killed_with_its_children_and_keeps_its_figures(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "child.pid"
    execute = subprocess_executor(
        tmp_path,
        _python(
            f"""
            import json, subprocess, sys, time
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
            open({str(pid_file)!r}, "w").write(str(child.pid))
            json.dump({{"status": "running", "result": {{"epochs": 2}}, "checks": {{"a": True}}}},
                      open(out, "w"))
            time.sleep(60)
            """
        ),
    )
    started = time.monotonic()
    outcome = execute(Step("slow", 60), 2.0)
    assert time.monotonic() - started < 20
    assert outcome["status"] == "timeout"
    assert outcome["error"] == "stopped at its 2 s budget"
    assert outcome["result"] == {"epochs": 2} and outcome["checks"] == {"a": True}
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        status = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if status == "Z":  # killed, waiting for its reaper
            break
        time.sleep(0.1)
    else:
        assert not Path(f"/proc/{child}").exists()


@pytest.mark.parametrize(
    ("code", "error"),
    [
        ("import sys; sys.exit(3)", "exit status 3"),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "signal 9"),
        (
            "import json; json.dump({'status': 'running', 'result': {'x': 1}}, open(out, 'w'))",
            "exit status 0",
        ),
    ],
)
def test_a_step_process_that_ends_without_its_verdict_failed(
    code: str, error: str, tmp_path: Path
) -> None:
    outcome = subprocess_executor(tmp_path, _python(code))(Step("crash", 30), 30.0)
    assert outcome["status"] == "failed"
    assert outcome["error"] == f"the step's process ended ({error}) before it finished"


def test_a_finished_step_is_handed_back_as_it_saved_it(tmp_path: Path) -> None:
    final = {"status": "ok", "result": {"n": 1}, "checks": {}, "error": None}
    code = f"import json; json.dump({final!r}, open(out, 'w'))"
    outcome = subprocess_executor(tmp_path, _python(code))(Step("fine", 30), 30.0)
    assert outcome == {"status": "ok", "result": {"n": 1}, "checks": {}, "error": None}


# -- prerequisites --------------------------------------------------------------------------


def test_prerequisites_say_what_is_missing_what_it_stops_and_what_to_carry() -> None:
    present = {"torch", "yaml", "sklearn"}
    records = check_prerequisites(
        "cuda",
        has_module=lambda name: name in present,
        probe=lambda name, device: (name != "cuda", f"{name} probed on {device}"),
    )
    by_name = {r["name"]: r for r in records}
    assert [n for n, r in by_name.items() if not r["ok"]] == ["cuda", "pytest", "nvidia-ml-py"]
    assert by_name["cuda"]["detail"] == "cuda probed on cuda"
    assert "--device cpu" in by_name["cuda"]["fix"]
    assert "pip download" in by_name["pytest"]["fix"] and "pluggy" in by_name["pytest"]["fix"]
    assert by_name["pytest"]["detail"] == "no module named 'pytest'"
    blocked = blocked_steps(records)
    assert blocked["tests"] == ["cuda", "pytest"]
    assert blocked["nccl"] == ["cuda"]
    # nvidia-ml-py stops no step: train runs and reports its telemetry as unavailable.
    assert by_name["nvidia-ml-py"]["needed_by"] == []
    assert "nvidia-ml-py" not in blocked["train"]
    line = missing_line(by_name["nvidia-ml-py"])
    assert line.startswith("gpu_check: missing nvidia-ml-py (no module named 'pynvml'); ")
    assert "steps it stops: none; train run without it. To fix: carry wheels" in line


def test_without_torch_nothing_is_probed() -> None:
    def probe(name: str, device: str) -> tuple[bool, str]:
        raise AssertionError("torch was asked although it is missing")

    records = check_prerequisites("cpu", has_module=lambda name: False, probe=probe)
    details = {r["name"]: r["detail"] for r in records}
    assert details["cuda"] == details["torch.distributed"] == "torch is missing"
    assert blocked_steps(records)["env"] == ["torch", "cuda"]


def test_a_cuda_run_where_there_is_no_cuda_skips_every_step_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "check.json"
    # This machine has no GPU: the check itself says so instead of failing each step.
    code = gpu_check.main(["--device", "cuda", "--steps", "env,nccl", "--out", str(out)])
    assert code == 1
    printed = capsys.readouterr().out
    assert "gpu_check: missing cuda (torch" in printed and "--device cpu" in printed
    report = json.loads(out.read_text())
    assert {s["status"] for s in report["steps"].values()} == {"skipped"}
    assert report["steps"]["env"]["error"] == "missing prerequisite: cuda"


# -- the JSON and its headline --------------------------------------------------------------


def test_json_is_strict() -> None:
    data = json_safe({"a": [math.nan, 1.5, {"b": math.inf}], "c": (1, -math.inf)})
    assert data == {"a": ["nan", 1.5, {"b": "inf"}], "c": [1, "-inf"]}
    json.loads(json.dumps(data, allow_nan=False))


def test_headline_draws_the_figures_and_survives_missing_steps() -> None:
    outcomes = {
        "env": _ok({"gpu_name": "NVIDIA H100 80GB HBM3", "catalog_gpu": "H100-SXM5"}),
        "tests": _ok({"counts": {"passed": 7, "failed": 0, "error": 0, "skipped": 0}}),
        "train": _ok({"charlm/bf16": {"samples_per_s": 1234.5678, "gpu_power_w": 151.23}}),
        "profile": _ok(
            {
                "charlm": {
                    "epoch_s": compare(0.3, 0.2),
                    "mem_gib": compare(None, 1.0),
                }
            }
        ),
        "mfu": _ok({"peak_bf16_tflops": 989.0, "gpt_mini": {"achieved_tflops": 98.9, "mfu": 0.1}}),
        "nccl": {"status": "skipped", "result": {}, "checks": {}, "error": "missing"},
    }
    figures = headline(outcomes)
    assert figures["status"] == "env ok, tests ok, train ok, profile ok, mfu ok, nccl skipped"
    assert figures["gpu"] == "NVIDIA H100 80GB HBM3"
    assert figures["tests"] == "7 passed, 0 failed, 0 error, 0 skipped"
    assert figures["train.charlm/bf16"] == {"samples_per_s": 1235.0, "gpu_power_w": 151.2}
    assert figures["profile.charlm"] == {
        "measured_epoch_s": 0.2,
        "predicted_epoch_s": 0.3,
        "epoch_s_error_pct": 50.0,
        "measured_mem_gib": 1.0,
        "predicted_mem_gib": None,
    }
    assert figures["mfu.gpt_mini"] == {"achieved_tflops": 98.9, "mfu": 0.1}
    assert "nccl" not in figures
    assert headline({}) == {"status": ""}
    assert rounded(0.000123456) == 0.0001235 and rounded(0.0) == 0.0 and rounded("x") == "x"


# -- the arithmetic and parsing the steps use -----------------------------------------------


def test_prediction_against_measurement() -> None:
    assert compare(1.5, 1.0) == {"predicted": 1.5, "measured": 1.0, "ratio": 1.5, "error_pct": 50.0}
    low = compare(0.25, 1.0)
    assert low["ratio"] == 0.25 and low["error_pct"] == pytest.approx(-75.0)
    for predicted, measured in [(None, 1.0), (1.0, None), (1.0, 0.0), (math.nan, 1.0)]:
        assert compare(predicted, measured)["error_pct"] is None


def test_mfu() -> None:
    assert mfu(98.9, 989.0) == pytest.approx(0.1)
    assert mfu(1.0, None) is None and mfu(1.0, 0.0) is None


def test_telemetry_of_a_trial() -> None:
    epochs = [
        {"telemetry": "nvml", "gpu_util_pct": 40.0, "gpu_power_w": 100.0, "gpu_energy_wh": 0.01,
         "gpu_mem_used_gib": 1.0},
        {"telemetry": "nvml", "gpu_util_pct": 60.0, "gpu_power_w": 200.0, "gpu_energy_wh": 0.02,
         "gpu_mem_used_gib": 2.0},
    ]  # fmt: skip
    assert telemetry_summary(epochs) == {
        "telemetry": ["nvml"],
        "gpu_util_pct": 50.0,
        "gpu_power_w": 150.0,
        "gpu_energy_wh": pytest.approx(0.03),
        "gpu_mem_used_gib": 2.0,
    }
    cpu = telemetry_summary([{"telemetry": "unavailable: no CUDA device for this trial"}])
    assert cpu["telemetry"] == ["unavailable: no CUDA device for this trial"]
    assert cpu["gpu_util_pct"] is None and cpu["gpu_energy_wh"] is None


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="1" failures="1" skipped="1" tests="4">
<testcase classname="tests.a" name="test_ok" time="1.5"/>
<testcase classname="tests.a" name="test_bad" time="0.2">
  <failure message="assert 1 == 2">x</failure></testcase>
<testcase classname="tests.b" name="test_skip" time="0"><skipped message="needs CUDA"/></testcase>
<testcase classname="" name="tests.c" time="0">
  <error message="collection failure">ImportError</error></testcase>
</testsuite></testsuites>"""


def test_junit_report_is_read_per_test() -> None:
    parsed = parse_junit(JUNIT)
    assert parsed["counts"] == {"passed": 1, "failed": 1, "error": 1, "skipped": 1}
    assert parsed["tests"][0] == {"id": "tests.a::test_ok", "outcome": "passed", "time_s": 1.5}
    assert parsed["tests"][1]["message"] == "assert 1 == 2"
    assert parsed["tests"][2]["message"] == "needs CUDA"


def test_tests_read_from_pytest_verbose_output_as_far_as_it_got() -> None:
    log = (
        "tests/a.py::test_x PASSED                      [ 33%]\n"
        "tests/a.py::test_y[always] FAILED              [ 66%]\n"
        "tests/b.py::test_z SKIPPED (needs CUDA)        [100%]\n"
        "PASSED tests/a.py::test_x\n"  # a summary line is no test line
    )
    assert outcomes_from_log(log) == {
        "tests/a.py::test_x": "passed",
        "tests/a.py::test_y[always]": "failed",
        "tests/b.py::test_z": "skipped",
    }


def test_pytest_is_stopped_before_the_step_budget_and_says_so(tmp_path: Path) -> None:
    # 10 s of margin leave pytest 0.5 s here: too little to import torch.
    ctx = StepContext("cpu", True, None, REPO, tmp_path, tmp_path / "tests.json", budget_s=10.5)
    started = time.monotonic()
    gpu_steps.tests(ctx)
    assert time.monotonic() - started < 10
    assert ctx.checks == {"pytest finished within the step's budget": False}
    assert ctx.result["returncode"] is None and ctx.result["finished"] == {}
    assert "test_efficiency.py" in " ".join(ctx.result["files"])


def test_only_files_with_cuda_tests_are_collected(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "test_marked.py").write_text("@pytest.mark.gpu\ndef test_x(): ...\n")
    (tmp_path / "test_skipif.py").write_text("skipif(not torch.cuda.is_available())\n")
    (tmp_path / "test_ray.py").write_text("import ray\n")
    (tmp_path / "helper_gpu.py").write_text("@pytest.mark.gpu\n")
    found = [p.relative_to(tmp_path).as_posix() for p in gpu_test_files(tmp_path)]
    assert found == ["sub/test_marked.py", "test_skipif.py"]
    real = {p.name for p in gpu_test_files(REPO / "tests")}
    assert {"test_efficiency.py", "test_loop.py", "test_measure.py"} <= real
    assert "test_data_parallel.py" not in real  # it needs Ray


def test_profile_measured_as_tuner_profile_reads_it(tmp_path: Path) -> None:
    from trainables import tabular
    from tuner.contract import MAX_EPOCHS_KEY
    from tuner.cost._transfer import estimate_epoch

    spec = campaign_for("tabular_mlp", REPO / "search_spaces")
    config = profile_config(spec, epochs=2)
    assert config[MAX_EPOCHS_KEY] == 2 and config["batch_size"] == 32  # the campaign's fixed
    profile = measure_profile(
        tabular.train,
        config,
        campaign=spec.name,
        trainable="tabular_mlp",
        trials=2,
        device="cpu",
        cpus=1,
        root=tmp_path,
    )
    assert (profile.device, profile.precision, len(profile.trials)) == ("cpu", "fp32", 2)
    # One process ran both trials, as one reused Ray worker would: only the first is cold.
    assert [t.cold for t in profile.trials] == [True, False]
    first = profile.trials[0]
    assert first.epochs == 2 and first.epoch_s > 0 and first.config["batch_size"] == 32
    assert not any(key.startswith("tuner_") for key in first.config)
    assert first.number("flops_per_sample") and first.number("train_samples")
    # The cost model predicts a GPU epoch from it (its path from a CPU profile).
    estimate = estimate_epoch(profile, "H100-SXM5", precision="amp")
    assert estimate.method == "absolute" and estimate.epoch_s > 0
    with pytest.raises(ValueError, match=r"no campaign file in .* trains 'nope'"):
        campaign_for("nope", REPO / "search_spaces")


# -- the whole script, as its CPU dry run ---------------------------------------------------


def _no_ray_env(tmp_path: Path) -> dict[str, str]:
    """An environment where ``import ray`` and ``import optuna`` fail, as on a lent GPU."""
    blocker = tmp_path / "blocked"
    for name in ("ray", "optuna"):
        (blocker / name).mkdir(parents=True)
        (blocker / name / "__init__.py").write_text(
            f"raise ImportError('{name} is not installed on the GPU machine')\n"
        )
    path = os.pathsep.join([str(blocker), str(REPO), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}


def _dry_run(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], Any]:
    out = tmp_path / "gpu_check.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--quick", "--out", str(out), *args],
        cwd=tmp_path,
        env=_no_ray_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc, json.loads(out.read_text()) if out.is_file() else None


def test_dry_run_of_some_steps(tmp_path: Path) -> None:
    proc, report = _dry_run(tmp_path, "--steps", "env,nccl")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert list(report["steps"]) == ["env", "nccl"]
    env, nccl = report["steps"]["env"], report["steps"]["nccl"]
    assert env["result"]["catalog_gpu"] == "H100-SXM5"  # the dry run's prediction target
    assert env["result"]["matmul"]["tflops"] > 0
    assert nccl["result"]["backend"] == "gloo" and nccl["result"]["world_size"] == 1
    assert all(nccl["checks"].values()) and len(nccl["checks"]) == 4
    assert "gpu_check: env ok in" in proc.stdout and "gpu_check: wrote" in proc.stdout


@pytest.mark.slow
def test_cpu_dry_run_end_to_end_without_ray_or_optuna(tmp_path: Path) -> None:
    started = time.monotonic()
    proc, report = _dry_run(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert time.monotonic() - started < 240
    assert report["format"] == 1 and report["device"] == "cpu" and report["quick"] is True
    assert {r["name"] for r in report["prerequisites"]} >= {"torch", "pytest", "pyyaml"}
    assert all(r["ok"] for r in report["prerequisites"])
    steps = report["steps"]
    assert list(steps) == ["env", "train", "profile", "mfu", "nccl", "tests"]
    for name, step in steps.items():
        assert set(step) == OUTCOME_KEYS, name
        assert step["status"] == "ok", (name, step["error"])
        assert step["wall_s"] <= step["budget_s"]
        assert step["checks"]["imports neither ray nor optuna"]
    # The CUDA tests were collected and skipped on this CPU, none failed.
    tests = steps["tests"]["result"]
    assert tests["counts"]["skipped"] >= 5 and tests["counts"]["failed"] == 0
    train = steps["train"]["result"]
    assert sorted(train) == sorted(
        f"{t}/{m}"
        for t in ("digits_cnn", "tabular_mlp", "charlm")
        for m in ("bf16", "fp16", "tf32")
    )
    assert train["charlm/bf16"]["telemetry"] == ["unavailable: no CUDA device for this trial"]
    for name in ("digits_cnn", "tabular_mlp", "charlm"):
        entry = steps["profile"]["result"][name]
        assert entry["epoch_s"]["ratio"] > 0 and entry["predicted_from_cpu"]["gpu"] == "H100-SXM5"
        assert entry["profiles"]["measured"]["source"].startswith("bench/gpu_check")
    assert steps["mfu"]["result"]["charlm"]["achieved_tflops"] > 0
    assert steps["mfu"]["result"]["charlm"]["mfu"] is None  # no GPU peak for a CPU
    assert report["headline"]["status"].count(" ok") == 6
    json.loads(Path(tmp_path / "gpu_check.json").read_text(), parse_constant=pytest.fail)
