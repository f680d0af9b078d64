"""Campaign + profile + catalog -> recommendation and report files; a tiny synthetic catalog."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from tests.tuner.cost._synthetic import FLAT
from tuner.cost import AshaGeometry, Catalog, GpuSpec, Instance, Profile, TrialProfile
from tuner.cost._advise import advise, option_name
from tuner.errors import SpecError
from tuner.report import write_recommendation

DAY = date(2026, 12, 1)


def gpu(name: str, tflops: float, mem: float) -> GpuSpec:
    return GpuSpec(name, "ampere", mem, 1000, tflops, tflops, tflops, None, "test", DAY)


def instance(name: str, gpu_name: str, usd: float, *, count: int = 1, vcpus: int = 8,
             cloud: str = "aws") -> Instance:  # fmt: skip
    return Instance(cloud, "r1", name, gpu_name, count, vcpus, 64, usd, usd / 3, "", "test", DAY)


CATALOG = Catalog(
    gpus={
        "SLOW": gpu("SLOW", tflops=100, mem=40),
        "FAST": gpu("FAST", tflops=400, mem=40),
        "TINY": gpu("TINY", tflops=400, mem=4),
    },
    instances=(
        # the profile's own GPU at $1/h: cheapest per campaign when time allows
        instance("slow.1", "SLOW", 1.0),
        # 4x the compute for 3x the price: faster and cheaper per epoch
        instance("fast.1", "FAST", 3.0),
        # four FAST GPUs on one machine: four trials at once
        instance("fast.4", "FAST", 12.0, count=4, vcpus=32),
        # FAST compute on a host with 1 vCPU: no slot for a 2-CPU trial
        instance("fast.thin", "FAST", 2.0, vcpus=1),
        # 4 GiB of GPU memory: a 10 GiB trial does not fit
        instance("tiny.1", "TINY", 0.5),
        # another cloud, for the filter
        instance("slow.gcp", "SLOW", 0.9, cloud="gcp"),
    ),
)
# Measured on SLOW: 100 s epochs, all device time, compute-bound; 10 GiB peak.
PROFILE = Profile(
    "c", "t", "tuner profile", "cuda", "SLOW", "tf32",
    (
        TrialProfile(
            "a", {}, 3, 100.0, 10.0, False, 320.0,
            {"epoch_time_s": 100.0, "train_time_s": 100.0, "samples_per_s": 100.0,
             "flops_per_sample": 1e12, "peak_mem_gib": 10.0},
        ),
    ),
)  # fmt: skip
GEOMETRY = AshaGeometry(16, 9, 1, 3)


def _advise(**kwargs: object):  # type: ignore[no-untyped-def]
    kwargs.setdefault("budget_usd", 100.0)
    return advise(
        "c", GEOMETRY, PROFILE, CATALOG, cpus_per_trial=2, runs=50, calibration=FLAT, **kwargs
    )  # type: ignore[arg-type]


def _plan(advice, name: str):  # type: ignore[no-untyped-def]
    return advice.recommendation.plan(f"aws/r1/{name}")


def test_each_option_gets_the_profile_moved_to_its_gpu() -> None:
    advice = _advise()
    slow, fast = _plan(advice, "slow.1"), _plan(advice, "fast.1")
    assert slow.option.predicted_epoch_s == pytest.approx(100.0)
    assert fast.option.predicted_epoch_s == pytest.approx(25.0)
    assert fast.wall_h < slow.wall_h / 3
    assert _plan(advice, "fast.4").workers == 4
    assert "relative from SLOW, tf32" in fast.option.note


def test_memory_and_vcpus_rule_options_out() -> None:
    advice = _advise()
    assert not _plan(advice, "tiny.1").fits
    assert "needs 10 GiB > 4 GiB" in _plan(advice, "tiny.1").reason
    assert not _plan(advice, "fast.thin").fits
    assert _plan(advice, "fast.thin").reason == "1 vCPUs < 2 per trial"


def test_picks_and_what_a_small_budget_buys() -> None:
    advice = _advise(budget_usd=1000.0)
    rec = advice.recommendation
    assert rec.cheapest_within_deadline == "aws/r1/fast.1"  # 1/4 the hours at 3x the price
    assert rec.fastest_within_budget == "aws/r1/fast.4"
    tight = _advise(budget_usd=0.3).recommendation
    assert tight.fastest_within_budget is None
    assert any("The most it buys:" in line for line in tight.findings())


def test_cloud_filter() -> None:
    only = _advise(clouds=["gcp"]).recommendation
    assert [p.option.name for p in only.plans] == ["gcp/r1/slow.gcp"]
    with pytest.raises(
        SpecError, match=r"--clouds: no instance .* \(got 'azure'; allowed aws, gcp\)"
    ):
        _advise(clouds=["azure"])


def test_reports_are_written(tmp_path: Path) -> None:
    advice = _advise(deadline_h=10.0)
    files = write_recommendation(advice, tmp_path / "out")
    data = json.loads(files["json"].read_text())
    assert data["campaign"] == "c" and data["profile"]["gpu_name"] == "SLOW"
    assert data["cheapest_within_deadline"] == "aws/r1/fast.1"
    md = files["markdown"].read_text()
    assert "| aws/r1/fast.1 |" in md and "Profile: 1 trial(s) measured by tuner profile" in md
    page = files["html"].read_text()
    assert 'id="cost-vs-time" src="data:image/png;base64,' in page


def test_option_names_are_cloud_region_type() -> None:
    assert option_name(CATALOG.instances[0]) == "aws/r1/slow.1"
