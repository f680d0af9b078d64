"""tuner profile and tuner recommend from the command line: outputs, and bad input -> exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_cli
from tests.tuner.cost.test_profile import write_trial
from tuner.cost import profile_from_run

ROOT = Path(__file__).resolve().parents[3]
DEFAULT = ROOT / "search_spaces" / "default.yaml"


@pytest.fixture
def profile_file(tmp_path: Path) -> Path:
    """A profile of the default campaign's trainable as if measured on an A100."""
    run = tmp_path / "measured"
    for i, name in enumerate("ab"):
        write_trial(run, name, pid=1, start=10 * i, iters=[8.0, 2.0, 2.0],
                    epoch_time_s=1.8, train_time_s=1.5, data_wait_share=0.05,
                    samples_per_s=900.0, flops_per_sample=3e6, peak_mem_gib=1.2,
                    tuner_device="cuda:0", gpu_name="NVIDIA A100-SXM4-40GB",
                    precision="amp")  # fmt: skip
    path = tmp_path / "profile.json"
    profile_from_run(run, campaign="digits-cnn", trainable="digits_cnn").write(path)
    return path


def test_recommend_writes_reports_and_a_valid_cluster(tmp_path: Path, profile_file: Path) -> None:
    out = tmp_path / "rec"
    cluster = tmp_path / "pick.yaml"
    args = ["recommend", "--campaign", str(DEFAULT), "--budget", "20", "--deadline", "2h",
            "--profile", str(profile_file), "--out", str(out),
            "--emit-cluster", str(cluster)]  # fmt: skip
    proc = run_cli(args, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Cheapest within the deadline:" in proc.stdout
    assert "relative" not in proc.stderr
    data = json.loads((out / "recommend.json").read_text())
    assert data["profile"]["gpu_name"] == "NVIDIA A100-SXM4-40GB"
    pick = data["cheapest_within_deadline"]
    assert pick is not None and f"| {pick} |" in (out / "recommend.md").read_text()
    assert "data:image/png;base64," in (out / "recommend.html").read_text()
    config = yaml.safe_load(cluster.read_text())
    assert config["available_node_types"]["gpu_worker"]["min_workers"] == 0 or (
        config["provider"]["type"] == "local"
    )
    from tuner._ray.cluster import validate_cluster

    validate_cluster(config)


def test_recommend_json_output(tmp_path: Path, profile_file: Path) -> None:
    args = ["recommend", "--budget", "5", "--spot", "--clouds", "aws",
            "--profile", str(profile_file), "--out", str(tmp_path / "o"), "--json"]  # fmt: skip
    proc = run_cli(args, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["spot"] is True
    assert {p["option"]["cloud"] for p in data["plans"]} == {"aws"}
    # p5 and the Azure H100s carry no spot price in the catalog
    assert all(p["fits"] or p["reason"] for p in data["plans"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--budget", "-3"], "argument --budget: expected a number > 0, got '-3'"),
        (["--budget", "10", "--deadline", "soon"], "<cli>: --deadline: "),
        (["--budget", "10", "--profile", "nope.json"], "nope.json: file: cannot read profile"),
        (["--budget", "10", "--clouds", "awz"], "--clouds: no instance in the catalog"),
        (["--budget", "10", "--catalog", "nope.csv"], "nope.csv: file: cannot read catalog"),
        (["--budget", "10", "--campaign", "nope.yaml"], "nope.yaml: no such campaign file"),
        (["--budget", "10", "--max-instances", "0"], "expected a whole number >= 1, got '0'"),
        (["--budget", "10", "--precision", "fp8"], "invalid choice: 'fp8'"),
    ],
)
def test_recommend_bad_input(
    tmp_path: Path, profile_file: Path, args: list[str], message: str
) -> None:
    if "--profile" not in args:
        args = [*args, "--profile", str(profile_file)]
    proc = run_cli(["recommend", *args, "--out", "rec"], cwd=tmp_path, timeout=60)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "rec").exists()  # nothing half-written


def test_profile_bad_config_file(tmp_path: Path) -> None:
    (tmp_path / "best.yaml").write_text("- just\n- a list\n")
    proc = run_cli(["profile", str(DEFAULT), "--config", "best.yaml"], cwd=tmp_path, timeout=60)
    assert proc.returncode == 2
    assert "best.yaml: config: expected a mapping of hyperparameter names" in proc.stderr
    assert not (tmp_path / "profiles").exists()


@pytest.mark.ray
def test_profile_measures_a_configuration(tmp_path: Path) -> None:
    (tmp_path / "best.yaml").write_text(
        "campaign: tabular-mlp\nconfig:\n  lr: 0.01\n  optimizer: adam\n  hidden: 32\n"
        "  layers: 2\n  dropout: 0.1\n  lr_schedule: constant\n  batch_size: 64\n"
    )
    campaign = ROOT / "search_spaces" / "tabular_mlp.yaml"
    args = ["profile", str(campaign), "--config", "best.yaml", "--trials", "2", "--epochs", "2",
            "--num-cpus", "2", "--out", "p.json"]  # fmt: skip
    proc = run_cli(args, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "profile of tabular-mlp on cpu (fp32), 2 trials" in proc.stdout
    data = json.loads((tmp_path / "p.json").read_text())
    first, second = data["trials"]
    assert first["config"] == second["config"]
    assert first["config"]["hidden"] == 32 and first["config"]["batch_size"] == 64
    assert (first["cold"], second["cold"]) == (True, False)  # one worker, reused
    assert first["metrics"]["flops_per_sample"] > 0 and first["metrics"]["est_mem_gib"] > 0
    assert data["summary"]["epoch_s"] > 0 and data["summary"]["cold_start_s"] > 0
