"""Cross-GPU prediction arithmetic on hand-made specs, errors, and the shipped calibration."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from tests.tuner.cost._synthetic import FLAT, GPUS
from tuner.cli.cost import add_predict_command, run_predict
from tuner.cost import (
    Calibration,
    GpuSpec,
    load_calibration,
    predict_throughput,
    spec_ratio_baseline,
)
from tuner.cost._calibrate import fit_calibration, load_measurements
from tuner.errors import SpecError


def predict(sps: float, src: str, dst: str, **kwargs: object) -> float:
    result = predict_throughput(sps, src, dst, "tf32", gpus=GPUS, calibration=FLAT, **kwargs)  # type: ignore[arg-type]
    return result.samples_per_s


def test_compute_bound_scales_with_tflops() -> None:
    # 100 samples/s at 1e12 FLOPs each = all of BASE's 100 TFLOP/s
    assert predict(100, "BASE", "FAST", flops_per_sample=1e12) == pytest.approx(200)
    assert predict(100, "BASE", "WIDE", flops_per_sample=1e12) == pytest.approx(100)


def test_memory_bound_scales_with_bandwidth() -> None:
    # tiny FLOPs: the step is all memory time
    assert predict(100, "BASE", "WIDE", flops_per_sample=1.0) == pytest.approx(300, rel=1e-6)
    assert predict(100, "BASE", "FAST", flops_per_sample=1.0) == pytest.approx(100, rel=1e-6)


def test_class_split_at_ridge_point_is_half_and_half() -> None:
    result = predict_throughput(100, "BASE", "FAST", "tf32", gpus=GPUS, calibration=FLAT)
    assert result.compute_share == pytest.approx(0.5)
    assert result.target.total_s == pytest.approx(0.01 * (0.5 / 2 + 0.5))
    assert predict(100, "BASE", "FAST", workload_class="compute") == pytest.approx(200, rel=1e-6)


def test_non_scaling_part_stays_constant() -> None:
    result = predict_throughput(
        100, "BASE", "FAST", "tf32", 0.5e12, non_scaling_share=0.5, gpus=GPUS, calibration=FLAT
    )
    assert result.source.non_scaling_s == result.target.non_scaling_s == pytest.approx(0.005)
    assert result.target.compute_s == pytest.approx(0.0025)
    assert result.samples_per_s == pytest.approx(1 / 0.0075)


def test_spec_ratio_baseline() -> None:
    assert spec_ratio_baseline(100, "BASE", "FAST", "amp", gpus=GPUS) == pytest.approx(200)


def test_unknown_gpu_suggests() -> None:
    with pytest.raises(
        SpecError, match=r"to_gpu: unknown GPU model \(got 'H100-SXM6'.*Did you mean 'H100-SXM5'"
    ):
        predict_throughput(100, "A100-SXM4-40GB", "H100-SXM6", "amp")


def test_bad_inputs() -> None:
    with pytest.raises(
        SpecError, match=r"precision: unknown precision \(got 'fp16'; allowed fp32, tf32, amp\)"
    ):
        predict_throughput(100, "BASE", "FAST", "fp16", gpus=GPUS, calibration=FLAT)
    with pytest.raises(SpecError, match="samples_per_s: must be a finite number > 0"):
        predict(0, "BASE", "FAST")
    with pytest.raises(SpecError, match="non_scaling_share: out of range"):
        predict(10, "BASE", "FAST", non_scaling_share=1.0)
    with pytest.raises(SpecError, match="workload_class: unknown workload class"):
        predict(10, "BASE", "FAST", workload_class="gan")
    # A10G has no FP32/TF32 figure in the catalog
    with pytest.raises(SpecError, match=r"A10G\.tf32_tflops: no tf32 peak known"):
        predict_throughput(100, "A10G", "T4", "tf32")


def test_shipped_calibration_a100_to_h100_resnet50() -> None:
    # Lambda benchmark: A100 80GB SXM4 resnet50 amp ~ 1.4-1.9x slower than H100 SXM5
    result = predict_throughput(1200, "A100-SXM4-80GB", "H100-SXM5", "amp", workload_class="cnn")
    assert 1.3 < result.speedup < 2.5
    result = predict_throughput(800, "A100-SXM4-40GB", "H100-SXM5", "tf32", workload_class="cnn")
    assert 1.3 < result.speedup < 2.8


def test_calibration_round_trips_and_refits(tmp_path: Path) -> None:
    shipped = load_calibration()
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(shipped.to_dict()))
    assert load_calibration(path) == shipped
    refit = fit_calibration(load_measurements(), _shipped_gpus())
    assert refit.eff_compute == shipped.eff_compute
    assert all(0 < e <= 1 for e in refit.eff_mem.values())


def _shipped_gpus() -> dict[str, GpuSpec]:
    from tuner.cost import load_gpus

    return dict(load_gpus())


def test_cli(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    add_predict_command(parser.add_subparsers())
    argv = "predict --from A100-SXM4-40GB --to H100-SXM5 --precision amp --samples-per-s 1200"
    assert run_predict(parser.parse_args([*argv.split(), "--json"])) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["to_gpu"] == "H100-SXM5" and data["samples_per_s"] > 1200
    assert run_predict(parser.parse_args(argv.split())) == 0
    assert "A100-SXM4-40GB -> H100-SXM5 (amp)" in capsys.readouterr().out


def test_gpu_speed_factor_scales_both_rates_of_that_gpu() -> None:
    slow_fast = Calibration(**{**FLAT.__dict__, "gpu_speed": {"FAST": {"tf32": 0.5}}})
    # FAST's 2x peak at half its fitted speed runs like BASE, compute- or memory-bound
    for flops in (1e12, 1.0):
        result = predict_throughput(
            100, "BASE", "FAST", "tf32", flops, gpus=GPUS, calibration=slow_fast
        )
        assert result.samples_per_s == pytest.approx(100 if flops > 1 else 50, rel=1e-6)


def test_cross_gpu_discount_applies_to_other_gpus_only() -> None:
    discounted = Calibration(**{**FLAT.__dict__, "cross_gpu_discount": 0.9})
    other = predict_throughput(100, "BASE", "FAST", "tf32", 1e12, gpus=GPUS, calibration=discounted)
    same = predict_throughput(100, "BASE", "BASE", "tf32", 1e12, gpus=GPUS, calibration=discounted)
    assert other.samples_per_s == pytest.approx(200 * 0.9)
    assert same.samples_per_s == pytest.approx(100)
    with pytest.raises(SpecError, match=r"cross_gpu_discount: out of range \(got 1.5"):
        Calibration.from_dict({**FLAT.to_dict(), "cross_gpu_discount": 1.5})


def test_fit_recovers_a_synthetic_roofline() -> None:
    # Throughputs generated by the model itself (three GPUs of three generations, four
    # workloads of different intensity). Each workload its own class, so its fitted
    # intensity is kept: every pair's ratio comes back within a few percent (the weak
    # priors that pin the scale cost a little).
    from tuner.cost._calibrate import Measurement

    gpus = _shipped_gpus()
    truth = {"volta": (0.3, 0.9), "ampere": (0.6, 0.5), "hopper": (0.5, 0.4)}
    names = ("V100-SXM2-16GB", "A100-SXM4-80GB", "H100-SXM5")
    rows = []
    for workload, intensity in (("a", 10.0), ("b", 40.0), ("c", 150.0), ("d", 60.0)):
        for name in names:
            spec = gpus[name]
            e_c, e_m = truth[spec.architecture]
            seconds = intensity / (spec.fp16_bf16_tflops * e_c) + 1 / (spec.mem_bw_gb_s / 1e3 * e_m)
            rows.append(Measurement("synthetic", workload, "amp", name, 1e4 / seconds))
    cal = fit_calibration(rows, gpus, {w: w for w in "abcd"}, choose_discount=False)
    by = {(m.workload, m.gpu): m.samples_per_s for m in rows}
    errors = [
        predict_throughput(
            by[(w, a)], a, b, "amp", workload_class=w, gpus=gpus, calibration=cal
        ).samples_per_s
        / by[(w, b)]
        - 1
        for w in "abcd"
        for a in names
        for b in names
        if a != b
    ]
    assert max(abs(e) for e in errors) < 0.08
    assert sorted(abs(e) for e in errors)[len(errors) // 2] < 0.03
