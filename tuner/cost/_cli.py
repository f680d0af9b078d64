"""``tuner predict``: cross-GPU throughput from a measured profile (wired in by tuner/cli.py)."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

from tuner.cost._predict import PRECISIONS, predict_throughput, spec_ratio_baseline

__all__ = ["add_predict_command", "run_predict"]

_EPILOG = """\
example:
  tuner predict --from A100-SXM4-40GB --to H100-SXM5 --precision amp --samples-per-s 1200
"""


def add_predict_command(subparsers: Any) -> argparse.ArgumentParser:
    """Adds the ``predict`` subcommand to an argparse subparsers object.

    Args:
        subparsers: What ``ArgumentParser.add_subparsers()`` returned.

    Returns:
        The new subparser (its handler is :func:`run_predict`).
    """
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "predict",
        help="predict samples/s on another GPU from a measured one",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--from", dest="from_gpu", required=True, help="measured GPU model")
    parser.add_argument("--to", dest="to_gpu", required=True, help="GPU model to predict for")
    parser.add_argument("--precision", required=True, choices=PRECISIONS)
    parser.add_argument(
        "--samples-per-s", type=float, required=True, help="measured training throughput on --from"
    )
    parser.add_argument(
        "--flops-per-sample",
        type=float,
        default=None,
        help="training FLOPs per sample (forward + backward), if measured",
    )
    parser.add_argument(
        "--workload-class",
        default="default",
        help="calibrated class for the split when FLOPs are unknown",
    )
    parser.add_argument(
        "--non-scaling-share",
        type=float,
        default=0.0,
        help="share of the measured time that does not scale (data loading)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(handler=run_predict)
    return parser


def run_predict(args: argparse.Namespace) -> int:
    """Prints the prediction for parsed ``predict`` arguments and returns 0.

    Raises:
        SpecError: Unknown GPU, precision or class, or a bad number.
    """
    prediction = predict_throughput(
        args.samples_per_s,
        args.from_gpu,
        args.to_gpu,
        args.precision,
        args.flops_per_sample,
        workload_class=args.workload_class,
        non_scaling_share=args.non_scaling_share,
    )
    baseline = spec_ratio_baseline(args.samples_per_s, args.from_gpu, args.to_gpu, args.precision)
    if args.json:
        data = dataclasses.asdict(prediction)
        data["spec_ratio_samples_per_s"] = baseline
        print(json.dumps(data, indent=2))
        return 0
    p = prediction
    print(
        f"{p.from_gpu} -> {p.to_gpu} ({p.precision}): {p.from_samples_per_s:.1f} -> "
        f"{p.samples_per_s:.1f} samples/s (x{p.speedup:.2f}; spec ratio {baseline:.1f})"
    )
    print(f"split ({p.method}): compute share {p.compute_share:.0%} of the GPU part")
    print(f"{'us/sample':<10}{'compute':>10}{'memory':>10}{'fixed':>10}{'total':>10}")
    for label, parts in ((p.from_gpu, p.source), (p.to_gpu, p.target)):
        values = (parts.compute_s, parts.memory_s, parts.non_scaling_s, parts.total_s)
        print(f"{label[:10]:<10}" + "".join(f"{v * 1e6:>10.1f}" for v in values))
    return 0
