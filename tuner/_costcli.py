"""``tuner profile`` and ``tuner recommend``: measure a trainable, then rank instance types.

Wired into :mod:`tuner.cli`; heavy imports (Ray, torch) happen only when a profile is
measured.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tuner._argtypes import positive_float, positive_int
from tuner.errors import SpecError, TunerError

__all__ = ["add_profile_command", "add_recommend_command"]

_PROFILE_EPILOG = """\
examples:
  tuner profile search_spaces/default.yaml                 3 random configs x 3 epochs
  tuner profile search_spaces/default.yaml --config runs/digits-cnn/best.yaml
  tuner profile my_campaign.yaml --out profiles/my-a100.json   (on the GPU machine)
"""

_RECOMMEND_EPILOG = """\
examples:
  tuner recommend --campaign search_spaces/default.yaml --budget 50
  tuner recommend --budget 200 --deadline 6h --profile runs/digits-cnn --spot
  tuner recommend --budget 200 --catalog my_prices.csv --emit-cluster cluster-pick.yaml

The profile (--profile: a file from `tuner profile`, or a run folder of `tuner run`) says
how long an epoch and a trial start-up take where it was measured; without one, the
trainable is measured here first. Reports go to recommendations/<campaign>/.
"""


def add_profile_command(sub: Any, ray_args: Callable[[argparse.ArgumentParser], None]) -> None:
    """Adds ``tuner profile`` to the CLI's subparsers."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "profile",
        help="measure a campaign's trainable on this machine (for `tuner recommend`)",
        description="Run a few short trials of a campaign's trainable, one at a time, and "
        "record epoch time, trial start-up, samples/s, FLOPs per sample, memory and "
        "data-loading share as JSON.",
        epilog=_PROFILE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("campaign", nargs="?", type=Path, help="campaign YAML (default: default)")
    parser.add_argument("--config", type=Path, help="measure this configuration (a best.yaml)")
    parser.add_argument("--trials", type=positive_int, default=3, help="trials to measure (3)")
    parser.add_argument("--epochs", type=positive_int, default=3, help="epochs per trial (3)")
    parser.add_argument("--out", type=Path, help="JSON file (default: profiles/<campaign>.json)")
    ray_args(parser)
    parser.set_defaults(handler=_cmd_profile)


def add_recommend_command(sub: Any, ray_args: Callable[[argparse.ArgumentParser], None]) -> None:
    """Adds ``tuner recommend`` to the CLI's subparsers."""
    from tuner.cost._predict import PRECISIONS

    parser: argparse.ArgumentParser = sub.add_parser(
        "recommend",
        help="rank GPU instance types for a campaign, a budget and a deadline",
        description="Predict a campaign's hours and dollars on every instance type of the "
        "price catalog from a measured profile; mark the cost-vs-time Pareto front and "
        "pick the cheapest within the deadline and the fastest within the budget.",
        epilog=_RECOMMEND_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--campaign", type=Path, help="campaign YAML (default: default)")
    parser.add_argument("--budget", type=positive_float, required=True, help="USD available")
    parser.add_argument("--deadline", help="wall-clock time available (e.g. 90m, 6h)")
    parser.add_argument("--profile", type=Path, help="profile JSON or run folder")
    parser.add_argument("--spot", action="store_true", help="price on spot instances")
    parser.add_argument("--catalog", type=Path, help="your instance CSV (adds or overrides)")
    parser.add_argument("--clouds", help="only these clouds, e.g. aws,gcp")
    parser.add_argument(
        "--gpus-per-trial",
        type=positive_float,
        help="GPUs per trial (default: the campaign's resources, 1 if it asks for none)",
    )
    parser.add_argument("--precision", choices=PRECISIONS, help="math to predict for")
    parser.add_argument(
        "--max-instances", type=positive_int, default=8, help="most machines of a type (8)"
    )
    parser.add_argument(
        "--provision",
        default="5m",
        help="billed time per machine to boot and run setup before trials start (5m)",
    )
    parser.add_argument("--out", type=Path, help="report folder (recommendations/<campaign>/)")
    parser.add_argument("--emit-cluster", type=Path, help="write a cluster.yaml for the pick")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    ray_args(parser)
    parser.set_defaults(handler=_cmd_recommend)


def _load_spec(path: Path | None) -> Any:
    from tuner.cli import DEFAULT_CAMPAIGN
    from tuner.rundir import add_code_dirs
    from tuner.spec import load_campaign

    path = path or DEFAULT_CAMPAIGN
    if not path.is_file():
        raise TunerError(
            f"{path}: no such campaign file.\n  To fix: pass a YAML file such as "
            "search_spaces/default.yaml."
        )
    code_dirs = list(dict.fromkeys([str(path.resolve().parent), str(Path.cwd())]))
    add_code_dirs(code_dirs)
    return load_campaign(path), code_dirs


def _measure(spec: Any, code_dirs: list[str], args: argparse.Namespace, **kw: Any) -> Any:
    from tuner._profiler import profile_campaign
    from tuner.cli import ray_options

    return profile_campaign(spec, options=ray_options(args), code_dirs=code_dirs, **kw)


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
    from tuner._profiler import load_config_file

    spec, code_dirs = _load_spec(args.campaign)
    config = load_config_file(args.config) if args.config is not None else None
    out = args.out or Path("profiles") / f"{spec.name}.json"
    profile = _measure(spec, code_dirs, args, trials=args.trials, epochs=args.epochs, config=config)
    profile.write(out)
    _print_profile(profile, out)
    return 0


def _gpus_per_trial(spec: Any, flag: float | None) -> float:
    """``--gpus-per-trial``, else the campaign's, else 1 (a campaign that asks for none is
    priced as if each trial had one GPU)."""
    if flag is not None:
        return flag
    return float(spec.resources.gpus_per_trial) or 1.0


def _cmd_recommend(args: argparse.Namespace) -> int:
    from tuner.cost import AshaGeometry, load_catalog, load_profile
    from tuner.cost._advise import advise
    from tuner.spec import parse_duration

    deadline_h = None
    if args.deadline is not None:
        deadline_h = parse_duration(args.deadline, source="<cli>", path="--deadline") / 3600
    provision_s = parse_duration(args.provision, source="<cli>", path="--provision")
    spec, code_dirs = _load_spec(args.campaign)
    out_dir = args.out or Path("recommendations") / spec.name
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        catalog = load_catalog(args.catalog)
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    clouds = [c.strip() for c in (args.clouds or "").split(",") if c.strip()]
    if args.profile is not None:
        profile = load_profile(args.profile)
        if profile.trainable != spec.trainable:
            print(
                f"warning: {args.profile} profiles {profile.trainable!r}, but the campaign "
                f"trains {spec.trainable!r}",
                file=sys.stderr,
            )
    else:
        print(
            f"no --profile: measuring {spec.trainable} here first (3 trials x 3 epochs; "
            "pass --profile to reuse one)",
            file=sys.stderr,
        )
        profile = _measure(spec, code_dirs, args, trials=3, epochs=3)
        profile.write(out_dir / "profile.json")
    advice = advise(
        spec.name,
        AshaGeometry.from_spec(spec),
        profile,
        catalog,
        budget_usd=args.budget,
        deadline_h=deadline_h,
        spot=args.spot,
        gpus_per_trial=_gpus_per_trial(spec, args.gpus_per_trial),
        cpus_per_trial=float(spec.resources.cpus_per_trial),
        precision=args.precision,
        clouds=clouds,
        max_instances=args.max_instances,
        provision_s=provision_s,
    )
    files = advice.write(out_dir)
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
    from tuner.cost._advise import option_name
    from tuner.cost._cluster import cluster_config, validate_cluster

    rec = advice.recommendation
    pick = rec.cheapest_within_deadline or rec.fastest_within_budget
    plan = rec.plan(pick)
    if plan is None:
        raise SpecError(
            "<cli>",
            "--emit-cluster",
            "no option fits this campaign, budget and deadline, so there is no pick",
            fix="raise --budget or --deadline, or add instances with --catalog",
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
