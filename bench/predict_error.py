"""Leave-one-workload-out error of cross-GPU throughput prediction vs the spec-ratio baseline.

For each workload: fit the calibration on all other workloads, then predict every GPU's
measured samples/s from every other GPU measured in the same software set and precision.
Prints per-workload and overall median / p90 absolute % error.

    .venv/bin/python bench/predict_error.py [--write]   # --write refreshes calibration.json
"""

from __future__ import annotations

import argparse
import statistics

from tuner.cost._calibrate import (
    WORKLOAD_CLASSES,
    fit_calibration,
    group,
    load_measurements,
    regenerate_calibration,
)
from tuner.cost._catalog import load_gpus
from tuner.cost._predict import predict_throughput, spec_ratio_baseline


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="refit on all data and write")
    args = parser.parse_args()
    gpus = load_gpus()
    measurements = load_measurements()
    groups = group(measurements, gpus)
    ours_all: list[float] = []
    base_all: list[float] = []
    print(
        f"{'workload':<20}{'prec':<6}{'pairs':>6}{'ours med':>10}{'ours p90':>10}"
        f"{'spec med':>10}{'spec p90':>10}"
    )
    for workload in sorted({w for _, w, _ in groups}):
        cal = fit_calibration([m for m in measurements if m.workload != workload], gpus)
        cls = WORKLOAD_CLASSES.get(workload, "default")
        cls = cls if cls in cal.intensity_flop_per_byte else "default"
        for (_, w, precision), by_gpu in sorted(groups.items()):
            if w != workload:
                continue
            ours: list[float] = []
            base: list[float] = []
            for src, sps in by_gpu.items():
                for dst, observed in by_gpu.items():
                    if src == dst:
                        continue
                    pred = predict_throughput(
                        sps, src, dst, precision, workload_class=cls, gpus=gpus, calibration=cal
                    ).samples_per_s
                    naive = spec_ratio_baseline(sps, src, dst, precision, gpus=gpus)
                    ours.append(abs(pred / observed - 1) * 100)
                    base.append(abs(naive / observed - 1) * 100)
            print(
                f"{workload:<20}{precision:<6}{len(ours):>6}{statistics.median(ours):>9.1f}%"
                f"{_p90(ours):>9.1f}%{statistics.median(base):>9.1f}%{_p90(base):>9.1f}%"
            )
            ours_all += ours
            base_all += base
    print(
        f"{'ALL':<26}{len(ours_all):>6}{statistics.median(ours_all):>9.1f}%"
        f"{_p90(ours_all):>9.1f}%{statistics.median(base_all):>9.1f}%{_p90(base_all):>9.1f}%"
    )
    print("target: median <= 15%, p90 <= 35% (ours)")
    if args.write:
        regenerate_calibration()
        print("wrote tuner/data/calibration.json")


if __name__ == "__main__":
    main()
