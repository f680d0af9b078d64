"""What the command modules share: the parser, argument value types, flag groups and what
they give.

The value types' errors say what was expected and what was given; the flag groups are
those of ``tuner run`` (also ``tuner/submit.py``'s) and of where Ray runs. A flag that was
renamed keeps its old spelling, hidden from ``--help`` (:func:`add_old_spelling`).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.errors import FileError, SpecError
from tuner.spec._limits import CAMPAIGN, FLAGS, Limit

if TYPE_CHECKING:
    from tuner.spec import CampaignSpec, Tracking

__all__ = [
    "DEFAULT_CAMPAIGN",
    "Parser",
    "add_campaign_argument",
    "add_old_spelling",
    "add_ray_arguments",
    "add_run_arguments",
    "bounded",
    "duration_flag",
    "load_campaign_file",
    "non_negative_float",
    "positive_float",
    "positive_int",
    "ray_flags",
    "whole_number",
]

DEFAULT_CAMPAIGN = Path(__file__).resolve().parents[2] / "search_spaces" / "default.yaml"


@dataclass(frozen=True)
class _OldSpelling:
    """A renamed argument's old flag: parsed into ``hidden``'s attribute, then moved."""

    spelling: str
    current: argparse.Action
    hidden: argparse.Action
    required: bool  # current is required: by either spelling


class Parser(argparse.ArgumentParser):
    """argparse's parser that also accepts the old spellings of renamed arguments.

    After parsing, an old spelling's value is moved to the current argument's attribute,
    so both spellings give the same namespace; both given with different values is a
    usage error (exit 2), as is a required argument given by neither. Subparsers made by
    ``add_subparsers()`` are of this class too.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.old_spellings: list[_OldSpelling] = []

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        for old in self.old_spellings:
            self._take_old_spelling(parsed, old)
        missing = [
            _name(old.current)
            for old in self.old_spellings
            if old.required and getattr(parsed, old.current.dest, None) is None
        ]
        if missing:  # argparse's own message for a missing required argument
            self.error(f"the following arguments are required: {', '.join(missing)}")
        return parsed, extras

    def format_usage(self) -> str:
        with self._declared_required():
            return super().format_usage()

    def format_help(self) -> str:
        with self._declared_required():
            return super().format_help()

    @contextmanager
    def _declared_required(self) -> Iterator[None]:
        """Usage and help show a required argument with an old spelling as required
        (argparse itself must not require it: the old spelling may give it)."""
        required = [old.current for old in self.old_spellings if old.required]
        for action in required:
            action.required = True
        try:
            yield
        finally:
            for action in required:
                action.required = False

    def _take_old_spelling(self, parsed: argparse.Namespace, old: _OldSpelling) -> None:
        if not hasattr(parsed, old.hidden.dest):
            return
        value = getattr(parsed, old.hidden.dest)
        delattr(parsed, old.hidden.dest)
        given = getattr(parsed, old.current.dest, None)
        if given is None:
            setattr(parsed, old.current.dest, value)
        elif given != value:
            self.error(
                f"argument {_name(old.current)}: given as {_show(given)} and, by its old "
                f"spelling {old.spelling}, as {_show(value)}; give it once"
            )


def _name(action: argparse.Action) -> str:
    """How argparse's messages name an argument: its flags, or a positional's name."""
    return "/".join(action.option_strings) or str(action.metavar or action.dest)


def _show(value: Any) -> str:
    return repr(str(value)) if isinstance(value, str | Path) else str(value)


def add_old_spelling(
    parser: argparse.ArgumentParser, spelling: str, current: argparse.Action
) -> None:
    """Accepts ``spelling``, a flag's old name, for the argument ``current`` (a flag or a
    positional), hidden from ``--help``; see :class:`Parser`.

    Args:
        parser: The (sub)parser ``current`` belongs to; a :class:`Parser`.
        spelling: The old flag, e.g. ``--budget`` for ``--budget-usd``.
        current: What ``parser.add_argument`` returned for the current spelling. Its
            default must be None: the old spelling counts only where the new one is not
            given.
    """
    if not isinstance(parser, Parser):
        raise TypeError(f"an old spelling needs a tuner.cli._args.Parser, not {type(parser)}")
    if current.default is not None:
        raise ValueError(f"{_name(current)}: an argument with an old spelling defaults to None")
    # The current argument's value type, choices and metavar (those it has).
    same: dict[str, Any] = {
        "type": current.type,
        "choices": current.choices,
        "metavar": current.metavar,
    }
    hidden = parser.add_argument(
        spelling,
        dest=f"_old_spelling_{spelling.lstrip('-').replace('-', '_')}",
        default=argparse.SUPPRESS,  # absent from the namespace unless given
        help=argparse.SUPPRESS,
        **{key: value for key, value in same.items() if value is not None},
    )
    parser.old_spellings.append(_OldSpelling(spelling, current, hidden, current.required))
    current.required = False  # Parser checks it, after taking the old spelling


def positive_int(text: str) -> int:
    """A whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def whole_number(text: str) -> int:
    """Any whole number."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def positive_float(text: str) -> float:
    """A finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def bounded(limit: Limit) -> Callable[[str], Any]:
    """An argument type for a number in ``limit``'s range (an int for an ``int`` limit).

    Below the range or not a number: ``expected a number > 0, got '-3'``, as the plain
    types say it; above it: the bound and the reason.
    """
    whole = limit.kind == "int"
    sign = ">" if limit.low_open else ">="
    rule = f"a {'whole number' if whole else 'number'} {sign} {limit.show(limit.low)}"

    def parse(text: str) -> Any:
        try:
            value: float = int(text) if whole else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {rule}, got {text!r}") from None
        if not math.isfinite(value) or not (
            value > limit.low or (value == limit.low and not limit.low_open)
        ):
            raise argparse.ArgumentTypeError(f"expected {rule}, got {text!r}")
        if value > limit.high:
            raise argparse.ArgumentTypeError(
                f"expected at most {limit.show(limit.high)}, got {text!r}: {limit.reason}"
            )
        return value

    parse.__name__ = "whole number" if whole else "number"
    return parse


def add_campaign_argument(parser: argparse.ArgumentParser) -> argparse.Action:
    """The optional positional CAMPAIGN (a campaign file) of run, profile and recommend."""
    return parser.add_argument(
        "campaign",
        nargs="?",
        type=Path,
        help="campaign YAML file (default: search_spaces/default.yaml)",
    )


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``tuner run`` (shared with ``tuner/submit.py``)."""
    add_campaign_argument(parser)
    parser.add_argument("--trials", type=positive_int, help="override budget.trials")
    parser.add_argument("--max-epochs", type=positive_int, help="override budget.max_epochs")
    parser.add_argument("--time-limit", help="override budget.time_limit (e.g. 90s, 10m, 2h)")
    parser.add_argument("--seed", type=whole_number, help="override sampler.seed")
    parser.add_argument("--name", help="campaign name (and run folder name)")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="validate the campaign and print its plan (trials, rungs, trials at once, "
        "predicted trial-epochs, with --profile hours and dollars); start and write nothing",
    )
    parser.add_argument(
        "--runs-dir", type=Path, default=Path("runs"), help="parent of run folders (runs/)"
    )
    parser.add_argument(
        "--profile",
        type=Path,
        help="profile (tuner profile, or a run folder) to predict time and money at start",
    )
    parser.add_argument(
        "--storage-path",
        help="where Ray Tune keeps checkpoints and experiment state: a URI Ray supports "
        "(s3://bucket/path, gs://..., file://...), so trials on every node write there; the "
        "run folder (study, ledger, summary) is copied to <URI>/<name>/ at the end. A plain "
        "path (an NFS mount) is the same as --runs-dir",
    )
    parser.add_argument(
        "--study-storage",
        help="override study_storage: where the Optuna study lives, shared by campaigns "
        "(postgresql+psycopg://user@host/db, journal:///path; default study.db in the run "
        "folder)",
    )
    parser.add_argument(
        "--warm-start",
        metavar="RUN_DIR",
        help="override warm_start.from: an earlier campaign's run folder whose trials seed the "
        "sampler and whose best configurations are tried first (warm_start.top, default 3); "
        "with tuner submit, an id from `tuner list --address` too",
    )
    tracking = parser.add_argument_group(
        "experiment trackers", "each trial a run with its config, epochs, stop reason and cost"
    )
    tracking.add_argument(
        "--mlflow-uri",
        metavar="URI",
        help="log to MLflow (tracking.mlflow.tracking_uri): sqlite:///PATH/mlflow.db, "
        "http://HOST:5000, ...; the campaign is a parent run of its trials' runs",
    )
    tracking.add_argument(
        "--mlflow-experiment",
        metavar="NAME",
        help="log to MLflow, in this experiment (default: the campaign's name; store: "
        "--mlflow-uri, else mlflow.db in the run folder)",
    )
    tracking.add_argument(
        "--wandb-project", metavar="NAME", help="log to Weights & Biases, in this project"
    )
    tracking.add_argument(
        "--wandb-mode",
        choices=("online", "offline"),
        help="W&B's mode: online (needs an API key) or offline (run files in the run folder's "
        "wandb/, no network; `wandb sync` uploads them)",
    )
    parser.add_argument(
        "--budget-usd", type=positive_float, help="override budget.usd: dollars the nodes may cost"
    )
    parser.add_argument("--budget-gpu-hours", type=positive_float, help="override budget.gpu_hours")
    parser.add_argument(
        "--deadline", help="override budget.deadline: running time allowed (e.g. 6h)"
    )
    parser.add_argument(
        "--usd-per-gpu-hour",
        type=bounded(FLAGS["--usd-per-gpu-hour"]),
        default=0.0,
        help="price of a GPU-hour here, for predicted vs actual dollars (0)",
    )


def add_ray_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags that say where Ray runs (read by :func:`ray_flags`)."""
    parser.add_argument(
        "--address",
        help='Ray cluster to join ("auto", host:port, ray://...); default: RAY_ADDRESS, '
        "else an embedded local Ray",
    )
    parser.add_argument(
        "--num-cpus", type=bounded(FLAGS["--num-cpus"]), help="CPUs of the embedded Ray"
    )
    parser.add_argument(
        "--num-gpus",
        type=bounded(FLAGS["--num-gpus"]),
        help="GPUs of the embedded Ray (logical GPUs work on CPU)",
    )
    parser.add_argument(
        "--worker-logs", action="store_true", help="show the trials' own output here"
    )
    parser.add_argument(
        "--cluster-config",
        type=Path,
        help="the cluster's autoscaler config (node types, max_workers); on a head made by "
        "`ray up`, ~/ray_bootstrap_config.yaml is used by itself",
    )


def ray_flags(args: argparse.Namespace) -> dict[str, Any]:
    """Where Ray runs, from the ``--address``/``--num-cpus``/``--num-gpus``/
    ``--worker-logs``/``--cluster-config`` flags, as keyword arguments of the API."""
    return {
        "address": args.address,
        "num_cpus": args.num_cpus,
        "num_gpus": args.num_gpus,
        "worker_logs": args.worker_logs,
        "cluster_config": args.cluster_config,
    }


def duration_flag(
    value: str | None, flag: str, limit: Limit = CAMPAIGN["budget.deadline"]
) -> float | None:
    """A duration flag's seconds (None when not given); SpecError naming the flag."""
    from tuner.spec import parse_duration

    if value is None:
        return None
    try:
        return parse_duration(value, limit=limit)
    except SpecError as err:
        # "0" and "-5" are durations, just not positive ones.
        problem = "not a duration" if err.problem == "must be a duration" else err.problem
        raise SpecError(
            "<cli>",
            flag,
            problem,
            got=value,
            allowed=None if err.fix else "seconds or 90s, 10m, 2h, 1h30m",
            fix=err.fix,  # a duration above the limit: the bound and the reason
        ) from err


def load_campaign_file(path: Path) -> CampaignSpec:
    """Loads a campaign file (its ``module:function`` trainable is looked up in the
    campaign's own folder and the working directory; see :func:`tuner.load_campaign`).

    Raises:
        FileError: No such file.
        SpecError: The campaign is not valid.
    """
    import tuner

    if not path.is_file():
        raise FileError(
            str(path),
            "no such campaign file.",
            fix="pass a YAML file such as search_spaces/default.yaml.",
        )
    return tuner.load_campaign(path)


def tracking_from_args(spec: CampaignSpec, args: argparse.Namespace) -> Tracking | None:
    """The campaign's ``tracking`` section with ``--mlflow-*`` and ``--wandb-*`` applied."""
    from tuner.spec._tracking import tracking_flags

    return tracking_flags(
        spec.tracking,
        mlflow_uri=getattr(args, "mlflow_uri", None),
        mlflow_experiment=getattr(args, "mlflow_experiment", None),
        wandb_project=getattr(args, "wandb_project", None),
        wandb_mode=getattr(args, "wandb_mode", None),
    )
