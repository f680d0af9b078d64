"""``tuner run --dry-run``: the plan, with nothing started and nothing written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import files_under, tiny_digits_campaign
from tuner.cli import main
from tuner.cost import AshaGeometry, Profile, TrialProfile, estimate_work


def _campaign(tmp_path: Path, **budget: object) -> Path:
    data = tiny_digits_campaign(budget={"trials": 12, "max_epochs": 9, **budget})
    data["resources"] = {"cpu": 1, "gpu": 0.5}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_plan_is_printed_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    campaign = _campaign(tmp_path, usd=20)
    before = files_under(tmp_path)
    code = main(
        ["run", str(campaign), "--dry-run", "--runs-dir", str(tmp_path / "runs"),
         "--num-cpus", "8", "--num-gpus", "2", "--trials", "10"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert files_under(tmp_path) == before  # no runs/, no run folder, nothing else
    # 2 GPUs at 0.5 a trial and 8 CPUs at 1: 4 trials at once; --trials overrides the file.
    assert "  at once     4 (this machine: 8 CPUs, 2 GPUs)" in out
    assert "  trials      10 x <= 9 epochs; ASHA rungs at epochs 1, 2, 4, 8" in out
    expected = estimate_work(
        AshaGeometry(10, 9, 1, 2.0), epoch_s=1.0, startup_s=0.0, cold_start_s=0.0, workers=4,
        runs=500,
    )  # fmt: skip
    assert f"  work        {expected.trial_epochs:.0f} trial-epochs predicted" in out
    assert "  budget      $20" in out and "not created" in out


def test_with_a_profile_the_plan_has_hours_and_dollars(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    campaign = _campaign(tmp_path)
    trials = (TrialProfile("0", {}, 3, 2.0, 1.0, True, 7.0),)
    profile = Profile("tiny-digits", "digits_cnn", "campaign run", "cuda", "A100", "amp", trials)
    (tmp_path / "p.json").write_text(json.dumps(profile.to_dict()))
    code = main(
        ["run", str(campaign), "--dry-run", "--runs-dir", str(tmp_path / "runs"),
         "--num-cpus", "2", "--num-gpus", "1", "--profile", str(tmp_path / "p.json"),
         "--usd-per-gpu-hour", "4"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert "  at once     2 (this machine: 2 CPUs, 1 GPUs)" in out
    money = next(line for line in out.splitlines() if line.startswith("  money"))
    gpu_h = float(money.split()[1])
    assert money == f"  money       {gpu_h:.3g} GPU-hours, ${gpu_h * 4:.2f}"
    assert "at 2 s/epoch" in out
    assert not (tmp_path / "runs").exists()


def test_a_dry_run_starts_no_ray() -> None:
    code = (
        "import sys; from tuner.cli import main; "
        "rc = main(['run', 'search_spaces/default.yaml', '--dry-run', '--num-cpus', '2']); "
        "assert 'ray' not in sys.modules, 'ray imported'; sys.exit(rc)"
    )
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "plan for campaign digits-cnn" in done.stdout
