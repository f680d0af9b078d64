"""``tuner profile``, ``tuner recommend`` and ``tuner predict``: measure, rank, predict.

``profile`` measures a campaign's trainable with a few short trials on this device,
``recommend`` ranks GPU instance types for a campaign, a budget and a deadline (and can
write a cluster.yaml for the pick), ``predict`` gives a measured throughput on another GPU.
Heavy imports (Ray, torch) happen only when a profile is measured.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.cli._args import (
    DEFAULT_CAMPAIGN,
    add_campaign_argument,
    add_old_spelling,
    add_ray_arguments,
    bounded,
    load_campaign_file,
    ray_flags,
)
from tuner.errors import SpecError
from tuner.spec._limits import CAMPAIGN, FLAGS

if TYPE_CHECKING:
    from tuner.cost import Profile

__all__ = [
    "add_predict_command",
    "add_profile_command",
    "add_recommend_command",
    "run_predict",
]

_PROFILE_EPILOG = """\
examples:
  tuner profile search_spaces/default.yaml                 3 random configs x 3 epochs
  tuner profile search_spaces/default.yaml --config runs/digits-cnn/best.yaml
  tuner profile my_campaign.yaml --out profiles/my-a100.json   (on the GPU machine)
"""

_RECOMMEND_EPILOG = """\
examples:
  tuner recommend search_spaces/default.yaml --budget-usd 50
  tuner recommend --budget-usd 200 --deadline 6h --profile runs/digits-cnn --spot
  tuner recommend --budget-usd 200 --catalog my_prices.csv --emit-cluster cluster-pick.yaml

The profile (--profile: a file from `tuner profile`, or a run folder of `tuner run`) says
how long an epoch and a trial start-up take where it was measured; without one, the
trainable is measured here first. Reports go to recommendations/<campaign>/.
"""

_PREDICT_EPILOG = """\
example:
  tuner predict --from A100-SXM4-40GB --to H100-SXM5 --precision amp --samples-per-s 1200
"""


def add_profile_command(subparsers: Any) -> None:
    """Adds ``tuner profile`` to the CLI's subparsers.

    Args:
        subparsers: What ``ArgumentParser.add_subparsers()`` returned.
    """
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "profile",
        help="measure a campaign's trainable on this machine (for `tuner recommend`)",
        description="Run a few short trials of a campaign's trainable, one at a time, and "
        "record epoch time, trial start-up, samples/s, FLOPs per sample, memory and "
        "data-loading share as JSON. Progress (phase, trial and epoch of how many, elapsed "
        "time) goes to stderr: redrawn in place on a terminal, one line per step elsewhere.",
        epilog=_PROFILE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_campaign_argument(parser)
    parser.add_argument("--config", type=Path, help="measure this configuration (a best.yaml)")
    parser.add_argument(
        "--trials",
        type=bounded(CAMPAIGN["budget.trials"]),
        default=3,
        help="trials to measure (3)",
    )
    parser.add_argument(
        "--epochs",
        type=bounded(CAMPAIGN["budget.max_epochs"]),
        default=3,
        help="epochs per trial (3)",
    )
    parser.add_argument("--out", type=Path, help="JSON file (default: profiles/<campaign>.json)")
    add_ray_arguments(parser)
    parser.set_defaults(handler=_cmd_profile)


def add_recommend_command(subparsers: Any) -> None:
    """Adds ``tuner recommend`` to the CLI's subparsers.

    Args:
        subparsers: What ``ArgumentParser.add_subparsers()`` returned.
    """
    from tuner.cost._predict import PRECISIONS

    parser: argparse.ArgumentParser = subparsers.add_parser(
        "recommend",
        help="rank GPU instance types for a campaign, a budget and a deadline",
        description="Predict a campaign's hours and dollars on every instance type of the "
        "price catalog from a measured profile; mark the cost-vs-time Pareto front and "
        "pick the cheapest within the deadline and the fastest within the budget.",
        epilog=_RECOMMEND_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # Old spellings, still accepted: --campaign FILE (the campaign is positional, as in
    # run and profile) and --budget (dollars are --budget-usd, as in run).
    add_old_spelling(parser, "--campaign", add_campaign_argument(parser))
    budget = parser.add_argument(
        "--budget-usd",
        type=bounded(FLAGS["--budget-usd"]),
        required=True,
        help="dollars available for the campaign",
    )
    add_old_spelling(parser, "--budget", budget)
    parser.add_argument("--deadline", help="wall-clock time available (e.g. 90m, 6h)")
    parser.add_argument("--profile", type=Path, help="profile JSON or run folder")
    parser.add_argument("--spot", action="store_true", help="price on spot instances")
    parser.add_argument("--catalog", type=Path, help="your instance CSV (adds or overrides)")
    parser.add_argument("--clouds", help="only these clouds, e.g. aws,gcp")
    parser.add_argument(
        "--gpus-per-trial",
        type=bounded(FLAGS["--gpus-per-trial"]),
        help="GPUs per trial (default: the campaign's resources, 1 if it asks for none)",
    )
    parser.add_argument("--precision", choices=PRECISIONS, help="math to predict for")
    parser.add_argument(
        "--max-instances",
        type=bounded(FLAGS["--max-instances"]),
        default=8,
        help="most machines of a type (8)",
    )
    parser.add_argument(
        "--provision",
        default="5m",
        help="billed time per machine to boot and run setup before trials start (5m)",
    )
    parser.add_argument("--out", type=Path, help="report folder (recommendations/<campaign>/)")
    parser.add_argument("--emit-cluster", type=Path, help="write a cluster.yaml for the pick")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    add_ray_arguments(parser)
    parser.set_defaults(handler=_cmd_recommend)


def add_predict_command(subparsers: Any) -> argparse.ArgumentParser:
    """Adds ``tuner predict`` to the CLI's subparsers.

    Args:
        subparsers: What ``ArgumentParser.add_subparsers()`` returned.

    Returns:
        The new subparser (its handler is :func:`run_predict`).
    """
    from tuner.cost._predict import PRECISIONS

    parser: argparse.ArgumentParser = subparsers.add_parser(
        "predict",
        help="predict samples/s on another GPU from a measured one",
        epilog=_PREDICT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--from", dest="from_gpu", required=True, help="measured GPU model")
    parser.add_argument("--to", dest="to_gpu", required=True, help="GPU model to predict for")
    parser.add_argument("--precision", required=True, choices=PRECISIONS)
    parser.add_argument(
        "--samples-per-s",
        type=bounded(FLAGS["--samples-per-s"]),
        required=True,
        help="measured training throughput on --from",
    )
    parser.add_argument(
        "--flops-per-sample",
        type=bounded(FLAGS["--flops-per-sample"]),
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
        type=bounded(FLAGS["--non-scaling-share"]),
        default=0.0,
        help="share of the measured time that does not scale (data loading)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(handler=run_predict)
    return parser


def _print_profile(profile: Any, out: Path) -> None:
    s = profile.summary()
    where = profile.gpu_name or profile.device
    mem = s["mem_gib"]
    print(f"profile of {profile.campaign} on {where} ({profile.precision}), {s['trials']} trials:")
    print(f"  epoch            {s['epoch_s']:.4g} s")
    print(
        f"  trial start-up   {s['startup_s']:.4g} s (+{s['cold_start_s']:.3g} s on a fresh worker)"
    )
    if s["samples_per_s"] is not None:
        print(f"  samples/s        {s['samples_per_s']:.4g}")
    if s["flops_per_sample"] is not None:
        print(f"  FLOPs/sample     {s['flops_per_sample']:.4g}")
    if s["data_wait_share"] is not None:
        print(f"  data loading     {s['data_wait_share']:.1%} of training time")
    if mem is not None:
        print(
            f"  memory           {mem:.3g} GiB ({'measured' if s['mem_measured'] else 'estimated'})"
        )
    print(f"wrote {out}")


def _cmd_profile(args: argparse.Namespace) -> int:
    import tuner

    spec = load_campaign_file(args.campaign or DEFAULT_CAMPAIGN)
    out = args.out or Path("profiles") / f"{spec.name}.json"
    profile = tuner.profile(
        spec,
        trials=args.trials,
        epochs=args.epochs,
        config=args.config,
        progress=sys.stderr,  # apart from the results on stdout
        **ray_flags(args),
    )
    profile.write(out)
    _print_profile(profile, out)
    return 0


def _cmd_recommend(args: argparse.Namespace) -> int:
    import tuner
    from tuner.cost import load_catalog
    from tuner.report import write_recommendation
    from tuner.spec import parse_duration

    deadline_s = None
    if args.deadline is not None:
        deadline_s = parse_duration(args.deadline, source="<cli>", path="--deadline")
    provision_s = parse_duration(
        args.provision, source="<cli>", path="--provision", limit=FLAGS["--provision"]
    )
    spec = load_campaign_file(args.campaign or DEFAULT_CAMPAIGN)
    out_dir = args.out or Path("recommendations") / spec.name
    catalog = load_catalog(args.catalog)  # the --emit-cluster pick is looked up in it too
    clouds = [c.strip() for c in (args.clouds or "").split(",") if c.strip()]
    profile: Profile | Path | None = args.profile
    if profile is None:
        print(
            f"no --profile: measuring {spec.trainable} here first (3 trials x 3 epochs; "
            "pass --profile to reuse one)",
            file=sys.stderr,
        )
        profile = tuner.profile(spec, trials=3, epochs=3, progress=sys.stderr, **ray_flags(args))
        profile.write(out_dir / "profile.json")
    advice = tuner.recommend(
        spec,
        budget_usd=args.budget_usd,
        deadline=deadline_s,
        profile=profile,
        catalog=catalog,
        spot=args.spot,
        clouds=clouds,
        gpus_per_trial=args.gpus_per_trial,
        precision=args.precision,
        max_instances=args.max_instances,
        provision=provision_s,
    )
    files = write_recommendation(advice, out_dir)
    rec = advice.recommendation
    if args.json:
        print(json.dumps(advice.to_dict(), indent=2))
    else:
        print(rec.table())
        print()
        for line in rec.findings():
            print(line)
        for note in advice.notes:
            print(note)
        print(f"reports: {files['markdown']}, {files['html']}, {files['json']}")
    if args.emit_cluster is not None:
        _emit_cluster(advice, catalog, args.emit_cluster, spot=args.spot)
    return 0


def _emit_cluster(advice: Any, catalog: Any, path: Path, *, spot: bool) -> None:
    import yaml

    from tuner import atomic
    from tuner._ray.cluster import validate_cluster
    from tuner.cost._advise import option_name
    from tuner.cost._cluster import cluster_config

    rec = advice.recommendation
    pick = rec.cheapest_within_deadline or rec.fastest_within_budget
    plan = rec.plan(pick)
    if plan is None:
        raise SpecError(
            "<cli>",
            "--emit-cluster",
            "no option fits this campaign, budget and deadline, so there is no pick",
            fix="raise --budget-usd or --deadline, or add instances with --catalog",
        )
    instance = next(i for i in catalog.instances if option_name(i) == pick)
    config = cluster_config(
        instance, workers=max(1, plan.instances), campaign=advice.campaign, spot=spot
    )
    validate_cluster(config)
    header = (
        f"# Ray cluster for campaign {advice.campaign}: {pick} (tuner recommend).\n"
        "# Fill in the placeholders in <...> (and the hosts of a local provider), then:\n"
        "#   ray up THIS_FILE && ray submit THIS_FILE <script> <campaign args>\n"
    )
    atomic.write_text(path, header + yaml.safe_dump(config, sort_keys=False))
    print(
        f"wrote {path} ({pick}, up to {plan.instances} GPU worker(s)); Ray's validator accepts it"
    )


def run_predict(args: argparse.Namespace) -> int:
    """Prints the prediction for parsed ``predict`` arguments and returns 0.

    Raises:
        SpecError: Unknown GPU, precision or class, or a bad number.
    """
    import tuner
    from tuner.cost import spec_ratio_baseline

    prediction = tuner.predict(
        args.samples_per_s,
        from_gpu=args.from_gpu,
        to_gpu=args.to_gpu,
        precision=args.precision,
        flops_per_sample=args.flops_per_sample,
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
