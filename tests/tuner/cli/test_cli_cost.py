"""tuner profile and tuner recommend from the command line: outputs, and bad input -> exit 2."""

from __future__ import annotations

import base64
import csv
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import run_cli
from tests.tuner.cost.test_profile import write_trial
from tuner.cli import build_parser, main
from tuner.cost import profile_from_run

ROOT = Path(__file__).resolve().parents[3]
DEFAULT = ROOT / "search_spaces" / "default.yaml"
DATA = ROOT / "tuner" / "data"
# What profile_file's trials measured: 8 s for the first epoch, 2 s for each after it.
EPOCH_S, STARTUP_S = 2.0, 8.0 - 2.0
PROVISION_S = 300.0  # --provision's default, billed per machine
DEFAULT_TRIALS = 40  # search_spaces/default.yaml's budget.trials


def _catalog() -> dict[str, dict[str, str]]:
    """The shipped instance catalog's rows by option name (cloud/region/instance_type)."""
    with (DATA / "instances.csv").open() as f:
        rows = csv.DictReader(f)
        return {f"{r['cloud']}/{r['region']}/{r['instance_type']}": r for r in rows}


def _gpu_memory() -> dict[str, float]:
    with (DATA / "gpus.csv").open() as f:
        return {r["gpu"]: float(r["memory_gib"]) for r in csv.DictReader(f)}


def _check_plans(data: dict[str, Any], rows: dict[str, dict[str, str]], *, spot: bool) -> None:
    """Every plan's figures against the catalog rows and the profile they came from."""
    memory = _gpu_memory()
    assert [p["option"]["name"] for p in data["plans"]] == list(rows)
    for plan in data["plans"]:
        option, row = plan["option"], rows[plan["option"]["name"]]
        assert option["gpu"] == row["gpu"] and option["gpu_count"] == int(row["gpu_count"])
        assert option["usd_per_hour_ondemand"] == float(row["ondemand_usd_per_hour"])
        spot_price = float(row["spot_usd_per_hour"]) if row["spot_usd_per_hour"] else None
        assert option["usd_per_hour_spot"] == spot_price
        assert option["gpu_mem_gib"] == memory[row["gpu"]]
        if row["gpu"] == "A100-SXM4-40GB":  # the profiled GPU: its measured epoch
            assert option["predicted_epoch_s"] == pytest.approx(EPOCH_S, rel=1e-9)
        if spot and spot_price is None:
            assert (plan["fits"], plan["reason"]) == (False, "no spot price")
            continue
        assert plan["fits"], plan
        price = spot_price if spot else float(row["ondemand_usd_per_hour"])
        assert price is not None
        # Billed by the machine-hour: machines x hours x the row's price.
        assert plan["usd"] == pytest.approx(plan["instances"] * plan["wall_h"] * price, rel=1e-9)
        # One GPU per trial (the campaign asks for none): a trial per GPU of each machine.
        assert plan["workers"] == min(DEFAULT_TRIALS, plan["instances"] * option["gpu_count"])
        assert plan["within_budget"] == (plan["usd"] <= data["budget_usd"])
        if plan["within_budget"]:
            assert plan["trials_bought"] == DEFAULT_TRIALS
        if plan["workers"] == 1:
            # One trial at a time: the trials back to back, each its start-up and its
            # epochs, after the machine's provisioning; on spot, stretched by the lost
            # share of each hour (SpotRisk's defaults: 0.05 preemptions an hour, each
            # losing half an epoch and a 180 s restart). 1 %: the work model draws each
            # trial's epoch time around the predicted one (log-normal spread), and its
            # mean over the simulated runs is off by 0.1-0.2 % here.
            epoch = option["predicted_epoch_s"]
            wall_s = plan["trial_epochs_bought"] * epoch + DEFAULT_TRIALS * STARTUP_S + PROVISION_S
            if spot:
                wall_s /= 1 - 0.05 * (epoch / 2 + 180) / 3600
            assert plan["wall_h"] * 3600 == pytest.approx(wall_s, rel=0.01), option["name"]
    fits = [p for p in data["plans"] if p["fits"]]
    # The Pareto flags: a plan is on the front iff no other is as cheap and as fast, and
    # strictly better in one.
    for plan in fits:
        dominated = any(
            o["usd"] <= plan["usd"]
            and o["wall_h"] <= plan["wall_h"]
            and (o["usd"] < plan["usd"] or o["wall_h"] < plan["wall_h"])
            for o in fits
        )
        assert plan["pareto"] == (not dominated), plan["option"]["name"]
    deadline = data["deadline_h"]
    on_time = [p for p in fits if deadline is None or p["wall_h"] <= deadline]
    cheapest = min(on_time, key=lambda p: (p["usd"], p["wall_h"]))
    assert data["cheapest_within_deadline"] == cheapest["option"]["name"]
    affordable = [p for p in fits if p["usd"] <= data["budget_usd"]]
    quickest = min(p["wall_h"] for p in affordable)
    fastest = min(  # within 2 % of the quickest counts as as fast: the cheaper of those
        (p for p in affordable if p["wall_h"] <= quickest * 1.02),
        key=lambda p: (p["usd"], p["wall_h"]),
    )
    assert data["fastest_within_budget"] == fastest["option"]["name"]


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
    args = ["recommend", str(DEFAULT), "--budget-usd", "20", "--deadline", "2h",
            "--profile", str(profile_file), "--out", str(out),
            "--emit-cluster", str(cluster)]  # fmt: skip
    proc = run_cli(args, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "relative" not in proc.stderr
    data = json.loads((out / "recommend.json").read_text())
    assert data["profile"]["gpu_name"] == "NVIDIA A100-SXM4-40GB"
    assert (data["profile"]["epoch_s"], data["profile"]["startup_s"]) == (EPOCH_S, STARTUP_S)
    assert (data["trials"], data["budget_usd"], data["deadline_h"], data["spot"]) == (
        DEFAULT_TRIALS, 20.0, 2.0, False,
    )  # fmt: skip
    _check_plans(data, _catalog(), spot=False)

    pick = data["cheapest_within_deadline"]
    plan = next(p for p in data["plans"] if p["option"]["name"] == pick)
    assert (
        f"Cheapest within the deadline: {pick}, {plan['instances']} machine(s) x "
        f"{plan['option']['gpu_count']} {plan['option']['gpu']}, {plan['workers']} trial(s) "
        f"at once: ~{plan['wall_h']:.3g} h, ~$"
    ) in proc.stdout
    md_row = next(r for r in (out / "recommend.md").read_text().splitlines() if f"| {pick} |" in r)
    assert "| cheapest" in md_row and f"| {plan['wall_h']:.3g} |" in md_row
    page = (out / "recommend.html").read_text()
    inlined = re.search(r"data:image/png;base64,([A-Za-z0-9+/=]+)", page)
    assert inlined is not None
    assert base64.b64decode(inlined[1])[:8] == b"\x89PNG\r\n\x1a\n"
    config = yaml.safe_load(cluster.read_text())
    worker = config["available_node_types"]["gpu_worker"]
    # The pick's machines: up to as many as its plan rents, with the row's GPUs.
    assert (worker["min_workers"], worker["max_workers"]) == (0, plan["instances"])
    assert worker["resources"]["GPU"] == plan["option"]["gpu_count"]
    from tuner._ray.cluster import validate_cluster

    validate_cluster(config)


def test_recommend_json_output(tmp_path: Path, profile_file: Path) -> None:
    args = ["recommend", "--budget-usd", "5", "--spot", "--clouds", "aws",
            "--profile", str(profile_file), "--out", str(tmp_path / "o"), "--json"]  # fmt: skip
    proc = run_cli(args, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert (data["trials"], data["budget_usd"], data["deadline_h"], data["spot"]) == (
        DEFAULT_TRIALS, 5.0, None, True,
    )  # fmt: skip
    aws = {name: row for name, row in _catalog().items() if row["cloud"] == "aws"}
    assert aws  # the shipped catalog has AWS rows to check against
    _check_plans(data, aws, spot=True)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--budget-usd", "-3"], "argument --budget-usd: expected a number > 0, got '-3'"),
        (["--budget-usd", "10", "--deadline", "soon"], "<cli>: --deadline: "),
        (["--budget-usd", "10", "--profile", "nope.json"], "nope.json: file: cannot read profile"),
        (["--budget-usd", "10", "--clouds", "awz"], "--clouds: no instance in the catalog"),
        (["--budget-usd", "10", "--catalog", "nope.csv"], "nope.csv: file: cannot read catalog"),
        (["nope.yaml", "--budget-usd", "10"], "nope.yaml: no such campaign file"),
        (["--budget", "10", "--campaign", "nope.yaml"], "nope.yaml: no such campaign file"),  # old
        (["--budget-usd", "10", "--max-instances", "0"], "expected a whole number >= 1, got '0'"),
        (["--budget-usd", "10", "--precision", "fp8"], "invalid choice: 'fp8'"),
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
    best = yaml.safe_load((tmp_path / "best.yaml").read_text())["config"]
    assert first["config"] == second["config"] == best
    assert (first["cold"], second["cold"]) == (True, False)  # one worker, reused
    assert (first["epochs"], second["epochs"]) == (2, 2)
    # Training FLOPs of a 30 -> 32 -> 32 -> 2 MLP per sample: forward 2*(30*32 + 32*32 +
    # 32*2) = 4,096, the weight gradients the same, and 2*(32*32 + 32*2) = 2,176 for the
    # input gradients of layers 2 and 3 (see tests/trainables/test_measure.py).
    assert first["metrics"]["flops_per_sample"] == 2 * 4_096 + 2_176
    assert first["metrics"]["param_count"] == 30 * 32 + 32 + 32 * 32 + 32 + 32 * 2 + 2
    summary = data["summary"]
    # The headline figures from the two trials: mean epoch, the warm trial's start-up, and
    # what the cold one paid on top (imports of a fresh worker).
    assert summary["epoch_s"] == pytest.approx((first["epoch_s"] + second["epoch_s"]) / 2)
    assert summary["startup_s"] == pytest.approx(second["startup_s"])
    assert summary["cold_start_s"] == pytest.approx(
        max(0.0, first["startup_s"] - second["startup_s"])
    )
    assert f"  epoch            {summary['epoch_s']:.4g} s" in proc.stdout


# ---- recommend's old spellings: --campaign FILE and --budget USD still work, unlisted ----

NEW_AND_OLD = [  # (current spellings, old or mixed ones)
    ("c.yaml --budget-usd 50", "--campaign c.yaml --budget 50"),
    ("c.yaml --budget-usd 50", "--campaign=c.yaml --budget=50"),
    ("c.yaml --budget-usd 50", "--budget 50 --campaign c.yaml"),
    ("c.yaml --budget-usd 50", "c.yaml --budget 50"),
    ("c.yaml --budget-usd 50", "--campaign c.yaml --budget-usd 50"),
    ("--budget-usd 7.5 --spot", "--spot --budget 7.5"),
    # Both spellings with the same value: no conflict.
    ("c.yaml --budget-usd 50", "c.yaml --campaign ./c.yaml --budget-usd 50 --budget 50.0"),
]


@pytest.mark.parametrize(("new", "old"), NEW_AND_OLD)
def test_recommend_old_spellings_parse_as_the_new_ones(new: str, old: str) -> None:
    parsed_new = build_parser().parse_args(["recommend", *new.split()])
    parsed_old = build_parser().parse_args(["recommend", *old.split()])
    assert vars(parsed_old) == vars(parsed_new)
    assert parsed_new.budget_usd in (50.0, 7.5)
    assert parsed_new.campaign == (Path("c.yaml") if "c.yaml" in new else None)
    assert not [name for name in vars(parsed_old) if "old_spelling" in name]


def test_recommend_help_shows_only_the_new_spellings(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["recommend", "--help"], ["--help"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 0
        out = capsys.readouterr().out
        assert "--campaign" not in out, argv
        assert re.search(r"--budget(?![-\w])", out) is None, argv
    assert "tuner recommend --budget-usd 50" in out  # the examples use the new spellings
    with pytest.raises(SystemExit):
        main(["recommend", "--help"])
    out = capsys.readouterr().out
    # Still required (the old spelling gives it too), and the campaign is positional.
    assert " --budget-usd BUDGET_USD " in out and "[--budget-usd" not in out
    assert re.search(r"\[campaign\]\n", out)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["a.yaml", "--campaign", "b.yaml", "--budget-usd", "5"],
            "tuner recommend: error: argument campaign: given as 'a.yaml' and, by its old "
            "spelling --campaign, as 'b.yaml'; give it once",
        ),
        (
            ["--budget", "5", "--budget-usd", "6"],
            "tuner recommend: error: argument --budget-usd: given as 6.0 and, by its old "
            "spelling --budget, as 5.0; give it once",
        ),
        (["--campaign", "a.yaml"], "error: the following arguments are required: --budget-usd"),
    ],
)
def test_recommend_spellings_that_disagree_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    out = tmp_path / "rec"
    with pytest.raises(SystemExit) as info:  # argparse's usage error, before anything runs
        main(["recommend", *argv, "--out", str(out)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: tuner recommend")
    assert err.endswith(message + "\n")
    assert "Traceback" not in err
    assert not out.exists()


def test_a_typo_is_not_answered_with_an_old_spelling(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["recommend", "--budget-usd", "5", "--budgett", "3"])
    assert info.value.code == 2
    assert "Did you mean '--budget-usd'?" in capsys.readouterr().err
