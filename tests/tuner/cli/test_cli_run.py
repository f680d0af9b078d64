"""The CLI on bad input: exit 2, one clear message, no traceback, nothing under runs/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import tiny_digits_campaign
from tuner.cli import build_parser, main


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.err


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            tiny_digits_campaign(sampler={"type": "tpx"}),
            "sampler.type: unknown sampler (got 'tpx'; allowed tpe, random, grid, cmaes, gp, "
            "qmc, nsga2) Did you mean 'tpe'?",
        ),
        (
            tiny_digits_campaign(
                budget={"trials": 4, "max_epochs": 1}, scheduler={"grace_period": 2}
            ),
            "scheduler.grace_period",
        ),
        (tiny_digits_campaign(trainable="digits_cn"), "Did you mean 'digits_cnn'?"),
    ],
)
def test_bad_campaign_exits_2_with_message_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: object, expected: str
) -> None:
    path = _write(tmp_path, data)
    runs = tmp_path / "runs"
    code, err = _run(["run", str(path), "--runs-dir", str(runs)], capsys)
    assert code == 2
    assert err.startswith(f"error: {path}: ")
    assert expected in err
    assert "Traceback" not in err
    assert not runs.exists()


def test_override_below_grace_period_is_a_cli_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, tiny_digits_campaign(scheduler={"grace_period": 2}))
    code, err = _run(
        ["run", str(path), "--max-epochs", "1", "--runs-dir", str(tmp_path / "runs")], capsys
    )
    assert code == 2
    assert "<cli>: --max-epochs:" in err
    assert not (tmp_path / "runs").exists()


def test_bad_time_limit_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, tiny_digits_campaign())
    code, err = _run(
        ["run", str(path), "--time-limit", "soon", "--runs-dir", str(tmp_path)], capsys
    )
    assert code == 2
    assert "<cli>: --time-limit: not a duration (got 'soon'" in err


def test_missing_campaign_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(["run", str(tmp_path / "nope.yaml")], capsys)
    assert code == 2
    assert "no such campaign file" in err


def test_resume_of_a_folder_that_is_not_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run(["resume", str(tmp_path)], capsys)
    assert code == 2
    assert "not a tuner run folder" in err


def test_bad_flag_value_is_usage_error_exit_2(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tuner.cli", "run", "--trials", "zero"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert "--trials: expected a whole number >= 1, got 'zero'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_help_mentions_every_command() -> None:
    text = build_parser().format_help()
    for command in ("run", "resume", "show", "profile", "recommend", "predict"):
        assert command in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--usd-per-gpu-hour", "-2"], "--usd-per-gpu-hour: expected a number >= 0, got '-2'"),
        (["--profile", "nope.json"], "nope.json: file: cannot read profile"),
    ],
)
def test_run_cost_flags_are_checked_before_anything_starts(
    tmp_path: Path, args: list[str], message: str
) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tuner.cli", "run", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("status", "code"),
    [("completed", 0), ("budget exhausted", 0), ("stopped: failure limit reached", 3)],
)
def test_run_exits_3_when_the_failure_limit_stopped_the_campaign(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, status: str, code: int
) -> None:
    import tuner._ray.driver
    from tuner import atomic, rundir
    from tuner._ray.driver import CampaignResult
    from tuner.spec import CampaignSpec

    def fake_run(
        spec: CampaignSpec, run_dir: Path, *args: object, **kwargs: object
    ) -> CampaignResult:
        # A run folder as an ended campaign leaves it, without running one.
        rundir.write_yaml(run_dir / rundir.CAMPAIGN_FILE, spec.to_dict())
        summary = {"status": status, "best": None}
        atomic.write_json(run_dir / rundir.SUMMARY_FILE, summary)
        return CampaignResult(run_dir=run_dir, summary=summary)

    monkeypatch.setattr(tuner._ray.driver, "run_campaign", fake_run)
    campaign = _write(tmp_path, tiny_digits_campaign())
    assert main(["run", str(campaign), "--runs-dir", str(tmp_path / "runs")]) == code
