"""Cross-GPU throughput prediction error on held-out measurements, against the spec ratio.

Leave one workload out: for each workload, fit the calibration on the other nine
(efficiencies, per-GPU offsets, and the cross-GPU discount chosen by a leave-one-workload-
out inside those nine only), then predict every GPU's measured samples/s from every other
GPU measured in the same software set and precision. Two paths: "default" knows nothing
about the workload (what `tuner predict` does without --workload-class), "class" uses the
workload's class intensity. Leave one GPU out does the same for each GPU (its offset is
then unknown: it gets its generation's efficiencies). The spec-ratio baseline scales by
the ratio of datasheet peak TFLOPS. Errors are |predicted / measured - 1|.

    .venv/bin/python bench/predict_error.py [--write]   # --write refreshes calibration.json
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict

from tuner.cost._calibrate import (
    WORKLOAD_CLASSES,
    fit_calibration,
    group,
    leave_one_workload_out,
    load_measurements,
    regenerate_calibration,
)
from tuner.cost._catalog import load_gpus
from tuner.cost._predict import predict_throughput, spec_ratio_baseline


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


def _row(label: str, errors: list[float]) -> str:
    pct = [100 * e for e in errors]
    return f"{label:<34}{len(pct):>6}{statistics.median(pct):>9.1f}%{_p90(pct):>9.1f}%"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="refit on all data and write")
    args = parser.parse_args()
    started = time.monotonic()
    gpus = load_gpus()
    measurements = load_measurements()
    groups = group(measurements, gpus)

    default = leave_one_workload_out(measurements, gpus, choose_discount=True)
    by_class = leave_one_workload_out(measurements, gpus, use_class=True, choose_discount=True)
    baseline = [
        abs(spec_ratio_baseline(by_gpu[src], src, dst, p, gpus=gpus) / by_gpu[dst] - 1)
        for (_, _, p), by_gpu in groups.items()
        for src in by_gpu
        for dst in by_gpu
        if src != dst
    ]
    held_gpu: dict[str, list[float]] = defaultdict(list)
    for gpu in sorted({g for by_gpu in groups.values() for g in by_gpu}):
        others = [m for m in measurements if m.gpu not in _spellings(gpus, gpu, measurements)]
        cal = fit_calibration(others, gpus)
        for (_, _, p), by_gpu in groups.items():
            for src, sps in by_gpu.items():
                for dst, observed in by_gpu.items():
                    if src != dst and gpu in (src, dst):
                        pred = predict_throughput(sps, src, dst, p, gpus=gpus, calibration=cal)
                        held_gpu[gpu].append(abs(pred.samples_per_s / observed - 1))

    print(f"{len(measurements)} measurements, {len(groups)} workload x precision groups\n")
    print(f"{'':<34}{'n':>6}{'median':>10}{'p90':>10}")
    print(_row("leave one workload out, default", [abs(r - 1) for *_, r in default]))
    print(_row("leave one workload out, class", [abs(r - 1) for *_, r in by_class]))
    print(_row("leave one GPU out, default", [e for v in held_gpu.values() for e in v]))
    print(_row("spec-ratio baseline", baseline))
    print("target: median <= 15%, p90 <= 35% (held-out workloads)\n")

    per_workload: dict[str, list[float]] = defaultdict(list)
    for w, *_, r in default:
        per_workload[w].append(abs(r - 1))
    print("held-out workload (default path):")
    for w, errors in sorted(per_workload.items()):
        print("  " + _row(f"{w} ({WORKLOAD_CLASSES.get(w, '-')})", errors))
    print("held-out GPU (its pairs, default path):")
    for gpu, errors in sorted(held_gpu.items()):
        print("  " + _row(gpu, errors))
    print(f"\n{time.monotonic() - started:.0f} s")
    if args.write:
        regenerate_calibration()
        print("wrote tuner/data/calibration.json")


def _spellings(gpus: object, name: str, measurements: list) -> set[str]:  # type: ignore[type-arg]
    """The names the measurement file uses for catalog GPU ``name``."""
    from tuner.cost._catalog import resolve_gpu

    found = set()
    for m in measurements:
        spec = resolve_gpu(gpus, m.gpu)  # type: ignore[arg-type]
        if spec is not None and spec.name == name:
            found.add(m.gpu)
    return found


if __name__ == "__main__":
    main()
