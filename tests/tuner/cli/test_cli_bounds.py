"""Every numeric flag is bounded: above its bound it exits 2 naming the flag, the bound and
the reason, with no traceback and nothing written; the API's arguments are bounded alike."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import tuner
from tests.tuner.spec.test_spec_validation import edited
from tuner.cli import main
from tuner.errors import SpecError
from tuner.spec._limits import CAMPAIGN, FLAGS

pytestmark = pytest.mark.usefixtures("pinned_builtins")

PREDICT = ["predict", "--from", "A100-SXM4-40GB", "--to", "H100-SXM5", "--precision", "amp"]


def _exit(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's usage errors
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--trials", "100001"],
            "<cli>: --trials: must be at most 100000 (got 100001)\n  To fix: use at most "
            "100000: " + CAMPAIGN["budget.trials"].reason,
        ),
        (["--max-epochs", "1" + "0" * 30], "<cli>: --max-epochs: must be at most 100000"),
        (["--time-limit", "9999999h"], "<cli>: --time-limit: must be at most 365d"),
        (["--deadline", "400d"], "<cli>: --deadline: must be at most 365d (got '400d')"),
        (["--budget-usd", "1e12"], "<cli>: --budget-usd: must be at most 10000000"),
        (["--budget-gpu-hours", "1e300"], "<cli>: --budget-gpu-hours: must be at most"),
        (["--seed", "99999999999"], "<cli>: --seed: must be an integer <= 4294967295"),
        (["--num-cpus", "5000"], "argument --num-cpus: expected at most 4096, got '5000': "),
        (["--num-gpus", "1e9"], "argument --num-gpus: expected at most 256, got '1e9'"),
        (["--usd-per-gpu-hour", "inf"], "argument --usd-per-gpu-hour: expected a number >= 0"),
        (["--usd-per-gpu-hour", "5000"], "argument --usd-per-gpu-hour: expected at most 1000"),
    ],
)
def test_run_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(edited({})))
    runs = tmp_path / "runs"
    code, err = _exit(["run", str(path), "--runs-dir", str(runs), *argv], capsys)
    assert code == 2
    assert message in err
    assert "Traceback" not in err
    assert not runs.exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--budget-usd", "1e8"], "argument --budget-usd: expected at most 10000000, got '1e8'"),
        (["--budget-usd", "nan"], "argument --budget-usd: expected a number > 0, got 'nan'"),
        (["--budget", "1e8"], "argument --budget: expected at most 10000000"),  # old spelling
        (["--budget-usd", "9", "--max-instances", "10**9"], "argument --max-instances: expected"),
        (["--budget-usd", "9", "--max-instances", "1001"], "expected at most 1000, got '1001'"),
        (["--budget-usd", "9", "--gpus-per-trial", "0.00001"], "expected a number >= 0.0001"),
        (["--budget-usd", "9", "--gpus-per-trial", "20000"], "expected at most 16384"),
        (["--budget-usd", "9", "--provision", "2d"], "<cli>: --provision: must be at most 1d"),
        (["--budget-usd", "9", "--deadline", "2y"], "<cli>: --deadline: must be a duration"),
        (["--budget-usd", "9", "--deadline", "9" * 400 + "d"], "<cli>: --deadline: must be a"),
    ],
)
def test_recommend_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    out = tmp_path / "rec"
    code, err = _exit(["recommend", *argv, "--out", str(out)], capsys)
    assert code == 2
    assert message in err
    assert "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--samples-per-s", "1e10"], "argument --samples-per-s: expected at most 1000000000"),
        (["--samples-per-s=-inf"], "argument --samples-per-s: expected a number > 0"),
        (["--samples-per-s", "9", "--flops-per-sample", "1e19"], "expected at most 1e+18"),
        (["--samples-per-s", "9", "--non-scaling-share", "1"], "expected at most 0.999999999"),
        (["--samples-per-s", "9", "--non-scaling-share", "-0.1"], "expected a number >= 0"),
    ],
)
def test_predict_flags(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    code, err = _exit([*PREDICT, *argv], capsys)
    assert code == 2
    assert message in err
    assert "Traceback" not in err


def test_profile_and_show_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _exit(["profile", "--trials", "100001", "--out", str(tmp_path / "p")], capsys)
    assert (code, "argument --trials: expected at most 100000" in err) == (2, True)
    code, err = _exit(["show", str(tmp_path), "--top", "1e6"], capsys)
    assert (code, "argument --top: expected a whole number >= 1, got '1e6'" in err) == (2, True)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("call", "path"),
    [
        (lambda: tuner.predict(1e12, from_gpu="T4", to_gpu="T4", precision="amp"), "samples_per_s"),
        (
            lambda: tuner.predict(10**400, from_gpu="T4", to_gpu="T4", precision="amp"),
            "samples_per_s",
        ),
        (
            lambda: tuner.predict(
                9.0, from_gpu="T4", to_gpu="T4", precision="amp", flops_per_sample=1e30
            ),
            "flops_per_sample",
        ),
        (
            lambda: tuner.predict(
                9.0, from_gpu="T4", to_gpu="T4", precision="amp", non_scaling_share="x"
            ),
            "non_scaling_share",
        ),
        (lambda: tuner.recommend(edited({}), budget_usd=1e9, profile="p.json"), "budget_usd"),
        (
            lambda: tuner.recommend(edited({}), budget_usd=9, max_instances=10**6, profile="p"),
            "max_instances",
        ),
        (lambda: tuner.recommend(edited({}), budget_usd=9, provision=-1, profile="p"), "provision"),
        (lambda: tuner.profile(edited({}), trials=10**9), "trials"),
        (lambda: tuner.run(edited({}), usd_per_gpu_hour=1e6, runs_dir="/nonexistent"), None),
    ],
)
def test_api_arguments_are_bounded(call: object, path: str | None) -> None:
    with pytest.raises(SpecError) as info:
        call()  # type: ignore[operator]
    if path is not None:
        assert info.value.path == path
    assert "must be" in str(info.value) or "out of range" in str(info.value)


def test_flag_limits_have_reasons() -> None:
    for flag, limit in FLAGS.items():
        assert flag.startswith("--") and limit.reason
