"""Property-based fuzzing of every loader of user input: it loads, or raises our own error.

Each property feeds one loader arbitrary text, arbitrary YAML/JSON-like structures, or
random mutations of a valid input (keys dropped, values replaced or retyped). Any exception
other than :class:`tuner.errors.TunerError` (argparse's usage error for the CLI) fails the
test. Inputs that fuzzing found to crash a loader are rows of ``tests/test_bad_input.py``.

The ``test_schema_*`` properties draw campaigns, catalogs, profiles and flags from tuner's
own field definitions (``tests/schema_strategies.py``: the bounds table and the spec's
enums) and run the real ``tuner run`` (``recommend``, ``predict``) up to where Ray would
start (a valid campaign also asks its sampler for three configurations): valid inputs get
there, inputs with one field mutated exit 2 naming that field, with no traceback and
nothing under runs/. The cases each property tries are in :data:`SCHEMA_CASES` (900 in
all; with :data:`FUZZ`'s 100 for each of the 13 others, 2,200 per run); hypothesis draws
new ones on every run (no example database).

No property starts Ray or imports torch; the whole file runs in 30 to 40 s on 2 cores.
"""

from __future__ import annotations

import argparse
import copy
import csv
import io
import json
import math
import os
import shutil
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import schema_strategies as schema
from tests.conftest import files_under
from tuner.cli import _args as _argtypes
from tuner.cli import main
from tuner.cost import load_catalog, load_gpus, load_instances, load_profile
from tuner.cost._profile import Profile
from tuner.errors import SpecError, TunerError
from tuner.spec import load_campaign, load_config_file, parse_campaign, parse_duration
from tuner.spec._checks import Checker
from tuner.spec._limits import CAMPAIGN, FLAGS
from tuner.spec._parse_space import parse_space
from tuner.spec._yaml import load_yaml

FUZZ = settings(max_examples=100, deadline=None, database=None)
# Properties that write files reuse one folder per test (hypothesis calls them many times).
FILES = settings(FUZZ, suppress_health_check=[HealthCheck.function_scoped_fixture])

# ---- strategies ----

HUGE = st.sampled_from([10**400, -(10**400), 2**64, 2**32, -1, 0, 1, 1e308, 1e-320, -0.0])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    HUGE,
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["", "tpe", "asha", "float", "int", "1e-3", "6x", "1h30m", "nan", "-1"]),
    st.dates(),
)
KEYS = st.one_of(
    st.text(max_size=10),
    st.sampled_from(["type", "low", "high", "log", "step", "when", "choices", "value"]),
    st.integers(min_value=-3, max_value=3),
    st.none(),
    st.booleans(),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(KEYS, inner, max_size=4),
    ),
    max_leaves=12,
)
# Text made mostly of YAML's own punctuation, so the parser gets past the first character.
YAML_TEXT = st.one_of(
    st.text(max_size=200),
    st.text(
        alphabet=st.sampled_from(list(":-[]{},#&*!|>'\"%@`?~ \n\t\\") + list("abxy019.eE")),
        max_size=120,
    ),
)


def _dump(value: Any) -> str:
    """YAML text of a generated structure (non-string keys and dates kept)."""
    return yaml.safe_dump(value, default_flow_style=None, allow_unicode=True, sort_keys=False)


YAML_DOCS = st.one_of(YAML_TEXT, VALUES.map(_dump))


def _campaign() -> dict[str, Any]:
    """A valid campaign that uses every section."""
    return {
        "name": "fuzz",
        "description": "every section",
        "trainable": "digits_cnn",
        "metric": "val_acc",
        "mode": "max",
        "space": {
            "lr": {"type": "float", "low": 1.0e-4, "high": 0.1, "log": True},
            "wd": {"type": "float", "low": 0.0, "high": 0.1, "step": 0.01},
            "channels": {"type": "int", "low": 8, "high": 64, "step": 8},
            "layers": {"type": "int", "low": 1, "high": 8, "log": True},
            "optimizer": {"type": "categorical", "choices": ["sgd", "adam"]},
            "momentum": {"type": "float", "low": 0.0, "high": 0.99, "when": {"optimizer": "sgd"}},
            "hidden": {"value": 64},
            "depth": {"value": 2, "when": {"optimizer": ["adam"], "channels": [8, 16]}},
        },
        "budget": {
            "trials": 10,
            "max_epochs": 5,
            "time_limit": "1h",
            "usd": 5,
            "gpu_hours": 2.5,
            "deadline": "2h30m",
        },
        "scheduler": {"type": "asha", "grace_period": 1, "reduction_factor": 3},
        "sampler": {"type": "tpe", "seed": 0, "startup_trials": 4},
        "resources": {"cpu": 1, "gpu": 1, "max_concurrent": 2, "workers": 2},
        "checkpoint": {"every": 1, "keep": 2},
        "failure": {"max_retries": 2},
        "pricing": {"node_usd_per_hour": 1.5, "catalog": "mine.csv", "spot": True},
        "fixed": {"batch_size": 64, "nested": {"a": [1, 2, {"b": None}]}},
    }


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key path (dict keys and list indexes) inside ``node``."""
    items: Any = node.items() if isinstance(node, dict) else enumerate(node)
    for key, value in items:
        yield (*prefix, key)
        if isinstance(value, dict | list):
            yield from _paths(value, (*prefix, key))


def _retype(value: Any) -> list[Any]:
    """The same value in other types: what a typo or a missing quote in YAML gives."""
    return [str(value), [value], {"value": value}, None, True, 0, -1, 1.5, 10**400, float("nan")]


@st.composite
def mutated(draw: st.DrawFn, valid: Callable[[], Any], max_edits: int = 3) -> Any:
    """``valid()`` with 1..max_edits random edits at random key paths."""
    data = copy.deepcopy(valid())
    for _ in range(draw(st.integers(1, max_edits))):
        paths = list(_paths(data)) if isinstance(data, dict | list) else []
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = data
        for key in path[:-1]:
            parent = parent[key]
        last = path[-1]
        op = draw(st.sampled_from(["drop", "replace", "retype", "rename"]))
        if op == "drop":
            del parent[last]
        elif op == "replace":
            parent[last] = draw(VALUES)
        elif op == "retype":
            parent[last] = draw(st.sampled_from(_retype(parent[last])))
        elif isinstance(parent, dict):
            new_key = draw(KEYS | st.just(f"{last}x") | st.just(str(last)[:-1]))
            parent[new_key] = parent.pop(last)
    return data


def _loads_or_our_error(load: Callable[[], object], source: str | None = None) -> None:
    """Calls ``load``; a TunerError is fine (and names ``source``), anything else fails."""
    try:
        load()
    except TunerError as err:
        assert str(err)
        if source is not None:
            assert str(err).startswith(source)
        if isinstance(err, SpecError) and source is not None:
            assert err.source == source


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@pytest.fixture(scope="module")
def gpus() -> Any:
    return load_gpus()


# ---- campaign files and mappings ----


@FILES
@given(text=YAML_DOCS)
def test_load_yaml(text: str) -> None:
    _loads_or_our_error(lambda: load_yaml(text, "f.yaml"), "f.yaml")


@FILES
@given(text=st.one_of(YAML_DOCS, mutated(_campaign).map(_dump)))
def test_load_campaign_file(folder: Path, text: str) -> None:
    path = folder / "campaign.yaml"
    path.write_text(text, encoding="utf-8")
    _loads_or_our_error(lambda: load_campaign(path, check_trainable=False), str(path))


@FUZZ
@given(data=st.one_of(VALUES, mutated(_campaign), mutated(_campaign, max_edits=8)))
def test_parse_campaign(data: Any) -> None:
    spec = None

    def load() -> None:
        nonlocal spec
        spec = parse_campaign(data, "c.yaml", check_trainable=False)

    _loads_or_our_error(load, "c.yaml")
    if spec is not None:  # what loads round-trips
        assert parse_campaign(spec.to_dict(), check_trainable=False) == spec


# ---- search spaces ----

PARAM = st.dictionaries(
    st.sampled_from(["type", "low", "high", "log", "step", "when", "choices", "value", "hi"]),
    st.one_of(
        SCALARS,
        st.sampled_from(["float", "int", "categorical", "fixed", "flaot"]),
        st.lists(SCALARS, max_size=3),
        st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), SCALARS | st.lists(SCALARS)),
    ),
    max_size=6,
)
SPACES = st.dictionaries(st.sampled_from(["a", "b", "c", "d", "1x", "tuner_x"]), PARAM, max_size=4)


@FUZZ
@given(value=st.one_of(VALUES, SPACES, mutated(lambda: _campaign()["space"])))
def test_parse_space(value: Any) -> None:
    _loads_or_our_error(lambda: parse_space(Checker("s.yaml"), value), "s.yaml")


# ---- durations and CLI value types ----


@FUZZ
@given(value=st.one_of(SCALARS, VALUES, st.from_regex(r"\s*[0-9.]{0,4}\s*[dhmsx]{0,2}" * 3)))
def test_parse_duration(value: Any) -> None:
    try:
        seconds = parse_duration(value, source="<cli>", path="--deadline")
    except TunerError as err:
        assert str(err).startswith("<cli>: --deadline: ")
    else:
        assert math.isfinite(seconds) and seconds > 0


@FUZZ
@given(text=st.one_of(st.text(max_size=12), st.sampled_from(["1e400", "nan", "-0", " 3 ", "٣"])))
def test_cli_value_types(text: str) -> None:
    for parse in (
        _argtypes.positive_int,
        _argtypes.whole_number,
        _argtypes.positive_float,
        _argtypes.non_negative_float,
    ):
        try:
            parse(text)
        except argparse.ArgumentTypeError as err:
            assert repr(text) in str(err)


# ---- catalogs ----

INSTANCE_COLUMNS = [
    *("cloud", "region", "instance_type", "gpu", "gpu_count", "ondemand_usd_per_hour"),
    *("source", "as_of", "vcpus", "memory_gib", "spot_usd_per_hour", "billing", "notes"),
]
GPU_COLUMNS = [
    *("gpu", "architecture", "memory_gib", "mem_bw_gb_s", "fp32_tflops", "tf32_tflops"),
    *("fp16_bf16_tflops", "source", "as_of", "tdp_w", "aliases", "notes"),
]
CELLS = st.one_of(
    st.sampled_from(["", "0", "1", "-1", "2.5", "nan", "inf", "1e400", "²", "١", "8.0", " 3 "]),
    st.sampled_from(["T4", "A100", "H100-SXM5", "a100 40gb pcie", "hopper", "amper"]),
    st.sampled_from(["2026-01-01", "2026-13-01", "01/01/2026", "aws", "us-east-1", "x;y"]),
    st.text(max_size=8),
)


@st.composite
def csv_text(draw: st.DrawFn, columns: list[str]) -> str:
    """A CSV table: a header of mostly known columns, rows of odd and ordinary cells."""
    header = draw(
        st.lists(st.sampled_from([*columns, "gpu_cnt", ""]) | st.text(max_size=6), max_size=14)
    )
    if draw(st.booleans()):
        dropped = draw(st.sets(st.sampled_from(columns), max_size=3))
        header = [c for c in columns if c not in dropped]
    rows = draw(
        st.lists(
            st.lists(CELLS, min_size=max(0, len(header) - 1), max_size=len(header) + 1),
            max_size=4,
        )
    )
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def _shipped_rows(name: str, count: int = 3) -> list[list[str]]:
    path = Path(__file__).resolve().parents[1] / "tuner" / "data" / name
    with path.open(encoding="utf-8") as f:
        return list(csv.reader(f))[: count + 1]


@st.composite
def mutated_csv(draw: st.DrawFn, name: str) -> str:
    """The first rows of a shipped catalog with a few cells (or the header) changed."""
    table = [list(row) for row in _shipped_rows(name)]
    for _ in range(draw(st.integers(1, 4))):
        row = draw(st.integers(0, len(table) - 1))
        if not table[row]:
            continue
        col = draw(st.integers(0, len(table[row]) - 1))
        op = draw(st.sampled_from(["cell", "drop", "extra"]))
        if op == "cell":
            table[row][col] = draw(CELLS)
        elif op == "drop":
            del table[row][col]
        else:
            table[row].insert(col, draw(CELLS))
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(table)
    return out.getvalue()


CATALOG_TEXT = st.one_of(
    st.text(max_size=200), csv_text(INSTANCE_COLUMNS), mutated_csv("instances.csv")
)


@FILES
@given(text=st.one_of(st.text(max_size=200), csv_text(GPU_COLUMNS), mutated_csv("gpus.csv")))
def test_load_gpus(folder: Path, text: str) -> None:
    path = folder / "gpus.csv"
    path.write_text(text, encoding="utf-8")
    _loads_or_our_error(lambda: load_gpus(path), str(path))


@FILES
@pytest.mark.filterwarnings("ignore::tuner.cost.CatalogWarning")
@given(text=CATALOG_TEXT)
def test_load_instances(folder: Path, gpus: Any, text: str) -> None:
    path = folder / "instances.csv"
    path.write_text(text, encoding="utf-8")
    _loads_or_our_error(lambda: load_instances(path, gpus), str(path))


@FILES
@pytest.mark.filterwarnings("ignore::tuner.cost.CatalogWarning")
@given(data=st.one_of(CATALOG_TEXT.map(str.encode), st.binary(max_size=100)))
def test_load_catalog_user_file(folder: Path, data: bytes) -> None:
    path = folder / "mine.csv"
    path.write_bytes(data)
    _loads_or_our_error(lambda: load_catalog(path), str(path))


# ---- profiles and config files ----


def _profile() -> dict[str, Any]:
    trial = {
        "trial": "a",
        "config": {"lr": 0.01},
        "epochs": 3,
        "epoch_s": 2.0,
        "startup_s": 1.0,
        "cold": True,
        "total_s": 7.0,
        "metrics": {"samples_per_s": 900.0, "gpu_name": "NVIDIA A100-SXM4-40GB"},
    }
    return Profile.from_dict(
        {
            "format": 1,
            "campaign": "c",
            "trainable": "t",
            "device": "cuda",
            "precision": "amp",
            "gpu_name": "NVIDIA A100-SXM4-40GB",
            "trials": [trial, {**trial, "trial": "b"}],
        }
    ).to_dict()


def _json(value: Any) -> str:
    return json.dumps(value, default=str)


JSON_TEXT = st.one_of(
    st.text(max_size=100),
    VALUES.map(_json),
    mutated(_profile).map(_json),
    mutated(_profile, max_edits=6).map(_json),
)


@FILES
@given(text=JSON_TEXT)
def test_load_profile(folder: Path, text: str) -> None:
    path = folder / "profile.json"
    path.write_text(text, encoding="utf-8")
    _loads_or_our_error(lambda: load_profile(path), str(path))


def _best() -> dict[str, Any]:
    return {"campaign": "c", "metric": "val_acc", "config": {"lr": 0.01, "opt": "sgd"}}


@FILES
@given(
    data=st.one_of(
        YAML_DOCS.map(str.encode), mutated(_best).map(_dump).map(str.encode), st.binary(max_size=60)
    )
)
def test_load_config_file(folder: Path, data: bytes) -> None:
    path = folder / "best.yaml"
    path.write_bytes(data)
    _loads_or_our_error(lambda: load_config_file(path), str(path))


# ---- command lines ----

_CAMPAIGN_TEXT = """\
name: fuzz
trainable: fuzz_trainable:train
metric: val_acc
mode: max
space:
  lr: {type: float, low: 1.0e-4, high: 0.1, log: true}
budget: {trials: 2, max_epochs: 4}
scheduler: {grace_period: 2}
"""
RUN_FLAGS = [
    *("--trials", "--max-epochs", "--time-limit", "--seed", "--name", "--budget-usd"),
    *("--budget-gpu-hours", "--deadline", "--usd-per-gpu-hour", "--num-cpus", "--num-gpus"),
    *("--profile", "--trails", "--runs-dir"),
]
FLAG_VALUES = st.one_of(
    st.sampled_from(["-1", "0", "1", "3", "2.5", "nan", "inf", "1e400", "6x", "1h30m", "abc"]),
    st.sampled_from(["", "my run", "ok-name", "-", "--", "4294967296", "nope.json"]),
    st.text(alphabet=st.characters(blacklist_characters="\x00"), max_size=8),
)
PREDICT_FLAGS = {
    "--from": st.sampled_from(["A100-SXM4-40GB", "T4", "a100", "H100-SXM6", ""]),
    "--to": st.sampled_from(["H100-SXM5", "V100-SXM2-16GB", "A100", "x"]),
    "--precision": st.sampled_from(["fp32", "tf32", "amp", "fp8"]),
    "--samples-per-s": FLAG_VALUES,
    "--flops-per-sample": FLAG_VALUES,
    "--workload-class": st.sampled_from(["default", "cnn", "", "transformer"]),
    "--non-scaling-share": FLAG_VALUES,
}


@pytest.fixture(scope="module")
def cli_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A folder with a valid campaign and its trainable; the CLI never reaches Ray."""
    root = tmp_path_factory.mktemp("cli")
    (root / "c.yaml").write_text(_CAMPAIGN_TEXT)
    (root / "fuzz_trainable.py").write_text("def train(config):\n    pass\n")
    yield root
    sys.modules.pop("fuzz_trainable", None)


def _run_cli(argv: list[str], cwd: Path) -> tuple[int, str]:
    """``main(argv)`` in ``cwd`` with Ray replaced by a stub that reports it was reached."""
    out, err = io.StringIO(), io.StringIO()
    fake = types.ModuleType("tuner._ray.driver")
    # Reached only with input that validates; it stands for a campaign that ran.
    fake.run_campaign = lambda spec, run_dir, *a, **k: types.SimpleNamespace(run_dir=run_dir)  # type: ignore[attr-defined]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            "tuner._api.open_run",
            lambda run_dir: types.SimpleNamespace(summary={"status": "completed"}),
        )
        mp.chdir(cwd)
        mp.setattr(sys, "path", list(sys.path))
        mp.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
        mp.setitem(sys.modules, "tuner._ray.driver", fake)
        mp.setattr(sys, "stdout", out)
        mp.setattr(sys, "stderr", err)
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse: usage errors (2) and --help (0)
            code = int(exc.code or 0)
    return code, err.getvalue()


@FILES
@given(pairs=st.lists(st.tuples(st.sampled_from(RUN_FLAGS), FLAG_VALUES), max_size=4))
def test_cli_run_flags(cli_folder: Path, pairs: list[tuple[str, str]]) -> None:
    before = files_under(cli_folder)
    argv = ["run", str(cli_folder / "c.yaml")] + [x for pair in pairs for x in pair]
    code, err = _run_cli(argv, cli_folder)
    assert code in (0, 2), (argv, err)
    assert "Traceback" not in err
    if code == 2:
        assert "error: " in err
    assert files_under(cli_folder) == before  # the stub writes nothing; bad input neither


@FILES
@given(flags=st.fixed_dictionaries({}, optional=PREDICT_FLAGS))
def test_cli_predict(cli_folder: Path, flags: dict[str, str]) -> None:
    argv = ["predict"] + [x for item in flags.items() for x in item]
    code, err = _run_cli(argv, cli_folder)
    assert code in (0, 2), (argv, err)
    assert "Traceback" not in err


# ---- from the schema: the real `tuner run` (recommend, predict) up to where Ray would start ----
#
# Inputs are drawn from tuner's own field definitions (tests/schema_strategies.py reads the
# bounds table and the spec's enums): valid ones must get as far as starting Ray, where a
# stand-in for ray_session stops them; ones with one field mutated (a wrong type, a number
# beyond its bound or below its range, a non-finite number, a huge string, a deep nesting,
# an unknown key) must exit 2 with an error naming that field's key path, no traceback, and
# nothing under runs/. Cases per property are in SCHEMA_CASES.

SCHEMA_CASES = {
    "valid_campaign": 60,
    "mutated_campaign": 300,
    "valid_catalog": 40,
    "mutated_catalog": 120,
    "valid_profile": 40,
    "mutated_profile": 150,
    "valid_recommend": 10,
    "mutated_recommend": 60,
    "valid_predict": 60,
    "mutated_predict": 60,
}


def _schema(cases: str) -> Any:
    return settings(FILES, max_examples=SCHEMA_CASES[cases])


class _RayWouldStart(Exception):
    """Raised where `tuner run` starts Ray: the input got past every check."""


@pytest.fixture(scope="module")
def schema_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A folder with the campaigns' trainable; each case writes its files here."""
    root = tmp_path_factory.mktemp("schema")
    (root / "schema_trainable.py").write_text("def train(config):\n    pass\n")
    yield root
    sys.modules.pop("schema_trainable", None)


TRAINABLE = "schema_trainable:train"


def _run_to_ray(argv: list[str], cwd: Path) -> tuple[int | str, str]:
    """``main(argv)`` in ``cwd`` with Ray's start replaced by :class:`_RayWouldStart`:
    ``("ray", output)`` when the input got that far, else the exit status and output."""
    import tuner._ray.driver as driver

    def ray_session(options: object) -> None:
        raise _RayWouldStart

    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(driver, "ray_session", ray_session)
        mp.chdir(cwd)
        mp.setattr(sys, "path", list(sys.path))
        mp.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
        mp.setattr(sys, "stdout", out)
        mp.setattr(sys, "stderr", err)
        try:
            code: int | str = main(argv)
        except _RayWouldStart:
            code = "ray"
        except SystemExit as exc:  # argparse's usage errors
            code = int(exc.code or 0)
    return code, err.getvalue() + out.getvalue()


def _names(output: str, source: str, path: str) -> bool:
    """Whether an error line of ``output`` names ``path`` in ``source`` (or a key inside it:
    a deep nesting is reported where it is too deep)."""
    return any(
        line.startswith(f"error: {source}: {path}")
        and line[len(f"error: {source}: {path}") :][:1] in (":", "[", ".")
        for line in output.splitlines()
    )


def _refused(code: int | str, output: str, runs: Path) -> None:
    assert code == 2, output[-2000:]
    assert "Traceback" not in output
    assert not runs.exists()


def _write_yaml(path: Path, data: Any) -> None:
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")


def _write_csv(path: Path, table: list[list[str]]) -> None:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(table)
    path.write_text(out.getvalue(), encoding="utf-8")


@_schema("valid_campaign")
@given(campaign=schema.campaigns(TRAINABLE), profile=schema.profiles(TRAINABLE))
def test_schema_valid_campaigns_reach_ray(
    schema_folder: Path, campaign: tuple[dict[str, Any], Any], profile: tuple[dict[str, Any], Any]
) -> None:
    from tuner.cost import AshaGeometry
    from tuner.cost._profile import Profile
    from tuner.cost._reality import predict_cost

    doc, runs = campaign[0], schema_folder / "runs"
    _write_yaml(schema_folder / "c.yaml", doc)
    (schema_folder / "p.json").write_text(json.dumps(profile[0]))
    argv = ["run", "c.yaml", "--runs-dir", str(runs), "--profile", "p.json"]
    code, output = _run_to_ray(argv, schema_folder)
    assert code == "ray", output[-2000:]
    assert not runs.exists()
    # What the driver computes once Ray is up, the run folder just made: the prediction.
    spec = parse_campaign(doc, check_trainable=False)
    predicted = predict_cost(
        AshaGeometry.from_spec(spec),
        workers=spec.resources.max_concurrent or 1,
        gpus_per_trial=spec.resources.gpus_per_trial,
        usd_per_gpu_hour=1000.0,
        profile=Profile.from_dict(profile[0]),
        runs=2,
    )
    assert all(math.isfinite(predicted[k]) for k in ("trial_epochs", "trial_s", "usd"))
    # And what the first trials ask the sampler for (a model-based one after one trial).
    _sample(spec, trials=3)


def _sample(spec: Any, trials: int) -> None:
    """Asks ``spec``'s sampler for ``trials`` configurations, as the searcher does."""
    import dataclasses
    import warnings

    import optuna

    from tuner.space import make_sampler, suggest

    sampler_spec = spec.sampler
    if sampler_spec.type.value in schema.STARTUP_SAMPLERS:
        sampler_spec = dataclasses.replace(sampler_spec, startup_trials=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # experimental samplers, partial support
        study = optuna.create_study(sampler=make_sampler(sampler_spec, spec.space))
        for i in range(trials):
            trial = study.ask()
            suggest(trial, spec.space)
            if sampler_spec.type.value == "grid":
                break  # told, it stops a study whose grid is used up (the searcher allows it)
            study.tell(trial, float(i))


@_schema("mutated_campaign")
@given(case=schema.mutated(schema.campaigns(TRAINABLE)))
def test_schema_mutated_campaigns_exit_2_naming_the_key(
    schema_folder: Path, case: tuple[Any, Any, str]
) -> None:
    doc, _, path = case
    runs = schema_folder / "runs"
    _write_yaml(schema_folder / "c.yaml", doc)
    code, output = _run_to_ray(["run", "c.yaml", "--runs-dir", str(runs)], schema_folder)
    _refused(code, output, runs)
    assert _names(output, "c.yaml", path), (path, output[-2000:])


def _minimal_campaign(**extra: Any) -> dict[str, Any]:
    return {
        "name": "schema",
        "trainable": TRAINABLE,
        "metric": "val_acc",
        "mode": "max",
        "space": {"lr": {"type": "float", "low": 1.0e-4, "high": 0.1, "log": True}},
        "budget": {"trials": 4, "max_epochs": 4},
        **extra,
    }


@pytest.fixture(scope="module")
def gpu_names() -> list[str]:
    return sorted(load_gpus())


@_schema("valid_catalog")
@pytest.mark.filterwarnings("ignore::tuner.cost.CatalogWarning")
@given(data=st.data())
def test_schema_valid_catalogs_reach_ray(
    schema_folder: Path, gpu_names: list[str], data: st.DataObject
) -> None:
    table, _ = data.draw(schema.catalogs(gpu_names))
    _write_csv(schema_folder / "mine.csv", table)
    _write_yaml(schema_folder / "c.yaml", _minimal_campaign(pricing={"catalog": "mine.csv"}))
    runs = schema_folder / "runs"
    code, output = _run_to_ray(["run", "c.yaml", "--runs-dir", str(runs)], schema_folder)
    assert code == "ray", output[-2000:]
    assert not runs.exists()


@_schema("mutated_catalog")
@given(data=st.data())
def test_schema_mutated_catalogs_exit_2_naming_the_field(
    schema_folder: Path, gpu_names: list[str], data: st.DataObject
) -> None:
    table, _, where = data.draw(schema.mutated(data.draw(schema.catalogs(gpu_names))))
    _write_csv(schema_folder / "mine.csv", table)
    _write_yaml(schema_folder / "c.yaml", _minimal_campaign(pricing={"catalog": "mine.csv"}))
    runs = schema_folder / "runs"
    code, output = _run_to_ray(["run", "c.yaml", "--runs-dir", str(runs)], schema_folder)
    _refused(code, output, runs)
    source = "mine.csv"  # as the campaign names it
    named = where in output if where == schema.UNKNOWN else _names(output, source, where)
    assert named, (where, output[-2000:])


@_schema("valid_profile")
@given(profile=schema.profiles(TRAINABLE))
def test_schema_valid_profiles_reach_ray(
    schema_folder: Path, profile: tuple[dict[str, Any], Any]
) -> None:
    (schema_folder / "p.json").write_text(json.dumps(profile[0]))
    _write_yaml(schema_folder / "c.yaml", _minimal_campaign())
    runs = schema_folder / "runs"
    argv = ["run", "c.yaml", "--runs-dir", str(runs), "--profile", "p.json"]
    code, output = _run_to_ray(argv, schema_folder)
    assert code == "ray", output[-2000:]


@_schema("mutated_profile")
@given(case=schema.mutated(schema.profiles(TRAINABLE)))
def test_schema_mutated_profiles_exit_2_naming_the_key(
    schema_folder: Path, case: tuple[Any, Any, str]
) -> None:
    profile, _, path = case
    (schema_folder / "p.json").write_text(json.dumps(profile))
    _write_yaml(schema_folder / "c.yaml", _minimal_campaign())
    runs = schema_folder / "runs"
    argv = ["run", "c.yaml", "--runs-dir", str(runs), "--profile", "p.json"]
    code, output = _run_to_ray(argv, schema_folder)
    _refused(code, output, runs)
    assert _names(output, "p.json", path), (path, output[-2000:])


RECOMMEND_FLAGS = {
    flag: FLAGS[flag]
    for flag in ("--budget-usd", "--gpus-per-trial", "--max-instances", "--provision")
} | {"--deadline": CAMPAIGN["budget.deadline"]}
PREDICT_LIMITS = {
    flag: FLAGS[flag] for flag in ("--samples-per-s", "--flops-per-sample", "--non-scaling-share")
}


def _recommend(
    folder: Path, flags: dict[str, str], extra: Sequence[str] = ("--clouds", "aws")
) -> tuple[int | str, str, Path]:
    (folder / "p.json").write_text(json.dumps(_profile()))
    _write_yaml(folder / "c.yaml", _minimal_campaign())
    out = folder / "rec"
    argv = ["recommend", "c.yaml", "--profile", "p.json", *extra]
    argv += ["--out", str(out)] + [f"{flag}={value}" for flag, value in flags.items()]
    code, output = _run_to_ray(argv, folder)
    return code, output, out


@_schema("valid_recommend")
@pytest.mark.filterwarnings("ignore::tuner.cost.CatalogWarning")
@given(flags=schema.flags(RECOMMEND_FLAGS), spot=st.booleans(), data=st.data())
def test_schema_valid_recommend_flags_are_accepted(
    schema_folder: Path,
    gpu_names: list[str],
    flags: dict[str, str],
    spot: bool,
    data: st.DataObject,
) -> None:
    # Priced on a catalog drawn from its field definitions too (its clouds only).
    table, _ = data.draw(schema.catalogs(gpu_names))
    _write_csv(schema_folder / "mine.csv", table)
    clouds = ",".join(sorted({row[0] for row in table[1:]}))
    extra = ["--catalog", "mine.csv", "--clouds", clouds] + (["--spot"] if spot else [])
    code, output, out = _recommend(schema_folder, flags, extra)
    assert code == 0, output[-2000:]
    assert (out / "recommend.json").is_file()
    shutil.rmtree(out)


@_schema("mutated_recommend")
@pytest.mark.filterwarnings("ignore::tuner.cost.CatalogWarning")
@given(flags=schema.flags(RECOMMEND_FLAGS), bad=schema.bad_flag(RECOMMEND_FLAGS))
def test_schema_mutated_recommend_flags_exit_2_naming_the_flag(
    schema_folder: Path, flags: dict[str, str], bad: tuple[str, str]
) -> None:
    code, output, out = _recommend(schema_folder, {**flags, bad[0]: bad[1]})
    assert code == 2, output[-2000:]
    assert "Traceback" not in output
    assert f"argument {bad[0]}:" in output or f"<cli>: {bad[0]}:" in output, output[-2000:]
    assert not out.exists()


PREDICT_ARGV = ["predict", "--from", "A100-SXM4-40GB", "--to", "H100-SXM5", "--precision", "amp"]


@_schema("valid_predict")
@given(flags=schema.flags(PREDICT_LIMITS))
def test_schema_valid_predict_flags_are_accepted(
    schema_folder: Path, flags: dict[str, str]
) -> None:
    argv = PREDICT_ARGV + [f"{flag}={value}" for flag, value in flags.items()]
    code, output = _run_to_ray(argv, schema_folder)
    assert code == 0, output[-2000:]


@_schema("mutated_predict")
@given(flags=schema.flags(PREDICT_LIMITS), bad=schema.bad_flag(PREDICT_LIMITS))
def test_schema_mutated_predict_flags_exit_2_naming_the_flag(
    schema_folder: Path, flags: dict[str, str], bad: tuple[str, str]
) -> None:
    argv = PREDICT_ARGV + [f"{flag}={value}" for flag, value in {**flags, bad[0]: bad[1]}.items()]
    code, output = _run_to_ray(argv, schema_folder)
    assert code == 2, output[-2000:]
    assert "Traceback" not in output
    assert f"argument {bad[0]}:" in output, output[-2000:]
