"""Profiles read from synthetic trial folders, one comment per trial."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tuner.cost import Profile, load_profile, profile_from_run
from tuner.errors import SpecError


def write_trial(
    run_dir: Path,
    name: str,
    *,
    pid: int,
    start: float,
    iters: list[float],
    config: dict[str, Any] | None = None,
    **metrics: Any,
) -> None:
    """A Ray Tune trial folder: params.json and one result line per epoch."""
    folder = run_dir / f"trial_{name}"
    folder.mkdir(parents=True)
    (folder / "params.json").write_text(json.dumps({**(config or {}), "tuner_seed": 0}))
    total, lines = 0.0, []
    for epoch, it in enumerate(iters, 1):
        total += it
        row = {
            "trial_id": name,
            "pid": pid,
            "epoch": epoch,
            "time_this_iter_s": it,
            "time_total_s": total,
            "timestamp": int(start + total),
            **metrics,
        }
        lines.append(json.dumps(row))
    (folder / "result.json").write_text("\n".join(lines) + "\n")


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    # worker 1's first trial: 5 s of imports and set-up before its 1 s epochs
    write_trial(run, "a", pid=1, start=0, iters=[6.0, 1.0, 1.0], config={"lr": 0.1},
                samples_per_s=100.0, flops_per_sample=1e6, est_mem_gib=0.5,
                tuner_device="cpu", precision="fp32")  # fmt: skip
    # worker 1 again, reused: 0.5 s set-up, 2 s epochs
    write_trial(run, "b", pid=1, start=10, iters=[2.5, 2.0, 2.0], config={"lr": 0.01},
                samples_per_s=50.0, flops_per_sample=3e6, est_mem_gib=1.5,
                tuner_device="cpu", precision="fp32")  # fmt: skip
    # stopped at its first epoch (ASHA): start-up from its own epoch_time_s
    write_trial(run, "c", pid=1, start=20, iters=[1.6], epoch_time_s=1.5,
                samples_per_s=100.0, tuner_device="cpu", precision="fp32")  # fmt: skip
    # a trial that died before reporting: no result lines, ignored
    (run / "trial_d").mkdir()
    (run / "trial_d" / "result.json").write_text("")
    return run


def test_profile_splits_epoch_start_up_and_cold_start(run_dir: Path) -> None:
    profile = profile_from_run(run_dir, campaign="c", trainable="t")
    a, b, c = profile.trials
    assert (a.trial, a.cold, a.epoch_s, a.startup_s) == ("a", True, 1.0, 5.0)
    assert (b.cold, b.epoch_s, b.startup_s) == (False, 2.0, 0.5)
    assert (c.epochs, c.epoch_s) == (1, 1.5)
    assert c.startup_s == pytest.approx(0.1)
    assert a.config == {"lr": 0.1}  # service keys dropped
    assert a.total_s == 8.0
    assert profile.epoch_s == pytest.approx((1.0 + 2.0 + 1.5) / 3)
    assert profile.startup_s == pytest.approx((0.5 + 0.1) / 2)  # warm trials only
    assert profile.cold_start_s == pytest.approx(5.0 - 0.3)
    assert profile.mem_gib == 1.5  # the largest estimate
    assert profile.mean("flops_per_sample") == 2e6  # over the trials that reported it
    assert profile.device == "cpu" and profile.precision == "fp32"


def test_cuda_peak_memory_wins_over_the_estimate(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_trial(run, "a", pid=1, start=0, iters=[2.0, 1.0], est_mem_gib=3.0, peak_mem_gib=4.0,
                tuner_device="cuda:0", gpu_name="NVIDIA A100-SXM4-40GB",
                precision="amp")  # fmt: skip
    profile = profile_from_run(run, campaign="c", trainable="t")
    assert profile.mem_gib == 4.0 and profile.summary()["mem_measured"]
    assert (profile.device, profile.gpu_name, profile.precision) == (
        "cuda",
        "NVIDIA A100-SXM4-40GB",
        "amp",
    )
    # With only cold trials there is no warm start-up to subtract.
    assert profile.cold_start_s == 0.0 and profile.startup_s == 1.0


def test_profile_round_trips_through_json(run_dir: Path, tmp_path: Path) -> None:
    profile = profile_from_run(run_dir, campaign="c", trainable="t", source="tuner profile")
    path = tmp_path / "p.json"
    profile.write(path)
    assert load_profile(path) == profile
    assert json.loads(path.read_text())["summary"]["trials"] == 3
    (run_dir / "profile.json").write_text(path.read_text())
    assert load_profile(run_dir) == profile  # a run folder stands for its profile.json


def test_empty_run_has_nothing_to_profile(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="no trial reported an epoch"):
        profile_from_run(tmp_path, campaign="c", trainable="t")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", r"p.json: file: not JSON"),
        ("[]", r"p.json: <root>: a profile is a JSON object"),
        ('{"format": 9}', r"format: unsupported profile format \(got 9; allowed 1\)"),
        ('{"format": 1, "campaign": "c"}', r"trainable: missing key"),
        (
            '{"format": 1, "campaign": "c", "trainable": "t", "device": "cpu", '
            '"precision": "fp32", "trials": []}',
            r"trials: no trial measured",
        ),
        (
            '{"format": 1, "campaign": "c", "trainable": "t", "device": "cpu", '
            '"precision": "fp32", "trials": [{"trial": "a", "epochs": 1, "epoch_s": -1, '
            '"startup_s": 0}]}',
            r"trials\[0\].epoch_s: must be a number > 0 \(got -1\)",
        ),
        (
            '{"format": 1, "campaign": "c", "trainable": "t", "device": "cpu", '
            '"precision": "fp32", "trials": [{"trial": "a"}]}',
            r"trials\[0\].epochs: missing key",
        ),
    ],
)
def test_bad_profile_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "p.json"
    path.write_text(text)
    with pytest.raises(SpecError, match=message):
        load_profile(path)


def test_missing_profile_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"nope.json: file: cannot read profile"):
        load_profile(tmp_path / "nope.json")


def test_profile_is_a_frozen_record(run_dir: Path) -> None:
    profile = profile_from_run(run_dir, campaign="c", trainable="t")
    assert isinstance(profile, Profile)
    assert Profile.from_dict(profile.to_dict()) == profile
