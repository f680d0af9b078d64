"""Run a campaign on the Ray cluster this script lands on.

    ray up cluster.yaml
    ray submit cluster.yaml tuner/submit.py search_spaces/default.yaml --budget-usd 20
    ray down cluster.yaml

``ray submit`` copies this file to the head node and runs it there with the head's Python,
where the cluster's setup commands installed tuner (see cluster.yaml). The campaign joins
the running cluster (``--address auto``) and writes its run folder on the head
(``runs/<name>``, under the home folder), unless ``--runs-dir`` points elsewhere (an NFS
mount, for instance). A relative campaign path that does not exist on the head is looked
up in the project that cluster.yaml shipped there (``~/tuner``).

Detached, through Ray's Job Submission API, from the project folder on your machine (the
dashboard reached through ``ray dashboard cluster.yaml``; docs/service.md):

    tuner submit search_spaces/default.yaml --budget-usd 20 --address http://127.0.0.1:8265
    tuner list --address http://127.0.0.1:8265

``ray submit cluster.yaml --tmux tuner/submit.py ...`` detaches too, in a tmux session on
the head; ``ray attach cluster.yaml --tmux`` reattaches.

All flags are those of ``tuner run``; ``--help`` lists them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent


def _importable() -> None:
    """Makes ``import tuner`` work when this file runs as a script from any folder.

    Python puts the script's own folder (``tuner/``) first on the path, which would make
    the package's modules importable under wrong names; it is dropped. When tuner is not
    installed, the project this file sits in is used.
    """
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
    try:
        import tuner.cli  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(_HERE.parent))


def _resolve_campaign(argv: list[str]) -> list[str]:
    """A relative campaign path missing here is taken from the installed project."""
    if not argv or argv[0].startswith("-"):
        return argv
    path = Path(argv[0]).expanduser()
    if path.is_file() or path.is_absolute():
        return argv
    import tuner

    project = Path(tuner.__file__).resolve().parent.parent
    shipped = project / path
    return [str(shipped), *argv[1:]] if shipped.is_file() else argv


def main(argv: list[str] | None = None) -> int:
    """Parses ``tuner run`` flags (address defaults to the cluster here) and runs."""
    _importable()
    import argparse

    from tuner.cli import Parser, add_run_arguments, run_from_args

    parser = Parser(
        prog="submit.py",
        description="Run a tuning campaign on the Ray cluster this runs on (for `ray submit "
        "cluster.yaml tuner/submit.py CAMPAIGN ...` and `ray job submit`); results go to "
        "runs/<name>/ on this node.",
        epilog=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_run_arguments(parser)
    parser.add_argument(
        "--address",
        default=os.environ.get("RAY_ADDRESS", "auto"),
        help='Ray cluster to join (default: RAY_ADDRESS, else "auto": the one on this node)',
    )
    parser.add_argument(
        "--cluster-config",
        type=Path,
        help="the autoscaler config (default: ~/ray_bootstrap_config.yaml on a `ray up` head)",
    )
    args = parser.parse_args(_resolve_campaign(list(sys.argv[1:] if argv is None else argv)))
    args.num_cpus = args.num_gpus = None
    args.worker_logs = False
    return run_from_args(args)


if __name__ == "__main__":
    sys.exit(main())
