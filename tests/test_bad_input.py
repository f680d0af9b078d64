"""Bad input, one table: every malformed file or command line and the exact error it gets.

Each row is ``(id, kind, input, expected)``. The kinds and what a row's input is:

- ``campaign``: a campaign file's text (``bytes`` for a non-UTF-8 file, ``None`` for no
  file), read by :func:`tuner.spec.load_campaign`;
- ``space``: the ``space:`` section alone as a YAML file, validated by ``parse_space``;
- ``catalog``: a user instance CSV merged over the shipped catalog by ``load_catalog``;
- ``gpus``: a GPU CSV read by ``load_gpus``;
- ``profile``: a profile JSON read by ``load_profile``;
- ``config``: a ``tuner profile --config`` file read by ``load_config_file``;
- ``cli``: a :class:`Cli` (argv and the files it names) run in-process through
  :func:`tuner.cli.main`: exit status 2, the message at the end of stderr, no traceback,
  and nothing written.

``expected`` is the whole message, ``str(err)`` (for ``cli``: the end of stderr). In it,
``{path}`` stands for the input file, ``{tmp}`` for the test's folder and ``{gpus}`` for
the shipped GPU names; argv uses ``{tmp}`` too. No row starts Ray or imports torch.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import files_under
from tuner.cli import main
from tuner.cost import load_catalog, load_gpus, load_profile
from tuner.errors import SpecError, TunerError
from tuner.spec import load_campaign, load_config_file
from tuner.spec._checks import Checker
from tuner.spec._parse_space import parse_space
from tuner.spec._yaml import load_yaml

pytestmark = pytest.mark.usefixtures("pinned_builtins")

CAMPAIGN = """\
name: demo
trainable: digits_cnn
metric: val_acc
mode: max
space:
  lr: {type: float, low: 1.0e-4, high: 0.1, log: true}
  optimizer: {choices: [sgd, adam]}
  momentum: {type: float, low: 0.0, high: 0.9, when: {optimizer: sgd}}
budget:
  trials: 4
  max_epochs: 3
"""

SPACE = """\
lr: {type: float, low: 1.0e-4, high: 0.1, log: true}
layers: {type: int, low: 1, high: 4}
optimizer: {choices: [sgd, adam]}
momentum: {type: float, low: 0.0, high: 0.9, when: {optimizer: sgd}}
"""

INSTANCES = "cloud,region,instance_type,gpu,gpu_count,ondemand_usd_per_hour,source,as_of\n"
ROW = "acme,eu-1,box.1,T4,1,0.50,invoice,2026-11-01\n"
GPUS = (
    "gpu,architecture,memory_gib,mem_bw_gb_s,fp32_tflops,tf32_tflops,fp16_bf16_tflops,"
    "source,as_of\n"
)
GPU_ROW = "X1,hopper,80,3350,67,495,989,datasheet,2026-01-01\n"

PROFILE = {"format": 1, "campaign": "c", "trainable": "t", "device": "cpu", "precision": "fp32"}
TRIAL = {"trial": "a", "epochs": 3, "epoch_s": 2.0, "startup_s": 1.0}

# A trainable next to the CLI rows' campaign: `tuner run` imports it from the campaign's
# folder, so a valid campaign loads without torch.
TRAINABLE_MODULE = "bad_input_trainable"
OK_CAMPAIGN = CAMPAIGN.replace("digits_cnn", f"{TRAINABLE_MODULE}:train")


def edit(text: str, old: str, new: str) -> str:
    """``text`` with ``old`` (which must occur once) replaced by ``new``."""
    assert text.count(old) == 1, old
    return text.replace(old, new)


def campaign(old: str, new: str) -> str:
    return edit(CAMPAIGN, old, new)


def space(old: str, new: str) -> str:
    return edit(SPACE, old, new)


def profile(**changes: Any) -> str:
    return json.dumps({**PROFILE, "trials": [TRIAL], **changes})


@dataclass(frozen=True)
class Cli:
    """A command line; ``files`` (name -> text) are written to the test's folder first.

    ``ok.yaml`` (a valid campaign) and its trainable are always there.
    """

    argv: list[str]
    files: dict[str, str | bytes] = field(default_factory=dict)


RECOMMEND = ["recommend", "{tmp}/ok.yaml", "--out", "{tmp}/rec"]
PREDICT = ["predict", "--from", "A100-SXM4-40GB", "--to", "H100-SXM5", "--precision", "amp"]
RUN_USAGE_ERROR = "tuner run: error: "

ROWS: list[tuple[str, str, Any, str]] = [
    # ---- campaign files: YAML syntax ----
    (
        "yaml_unclosed_flow_mapping",
        "campaign",
        campaign("  optimizer: {choices: [sgd, adam]}", "  optimizer: {choices: [sgd, adam]"),
        "{path}: line 8, column 3: invalid YAML: expected ',' or '}', but got '<scalar>'",
    ),
    (
        "yaml_bad_indentation",
        "campaign",
        campaign("  max_epochs: 3", "   max_epochs: 3"),
        "{path}: line 11, column 14: invalid YAML: mapping values are not allowed here",
    ),
    (
        "yaml_impossible_date",  # was: ValueError from PyYAML's timestamp constructor
        "campaign",
        campaign("name: demo", "name: demo\ndescription: 2024-13-45"),
        "{path}: line 2, column 14: invalid YAML: cannot read '2024-13-45' as timestamp: "
        "month must be in 1..12\n"
        "  To fix: quote the value to keep it a string, or write a valid timestamp",
    ),
    (
        "yaml_bad_explicit_tag",  # was: ValueError from int()
        "campaign",
        campaign("trials: 4", "trials: !!int four"),
        "{path}: line 10, column 11: invalid YAML: cannot read 'four' as int: invalid literal "
        "for int() with base 10: 'four'\n"
        "  To fix: quote the value to keep it a string, or write a valid int",
    ),
    (
        "yaml_recursive_alias",  # was: RecursionError
        "campaign",
        CAMPAIGN + "fixed: &f {inner: *f}\n",
        "{path}: fixed.inner: an alias refers to a mapping or list that contains it "
        "(a recursive value)\n"
        "  To fix: replace the alias by a copy of the values it should stand for",
    ),
    (
        "yaml_control_character",  # was: yaml.reader.ReaderError
        "campaign",
        campaign("metric: val_acc", "metric: val_acc\x00"),
        "{path}: line 3, column 16: invalid YAML: unacceptable character #x0000 (control "
        "characters are not allowed)\n  To fix: delete the character",
    ),
    (
        "yaml_nested_too_deeply",  # was: RecursionError
        "campaign",
        CAMPAIGN + "fixed: {deep: " + "[" * 1000 + "]" * 1000 + "}\n",
        "{path}: top level: invalid YAML: nested too deeply\n"
        "  To fix: flatten the nesting of lists and mappings",
    ),
    (
        "yaml_duplicate_parameter",
        "campaign",
        campaign("budget:", "  optimizer: {choices: [adamw]}\nbudget:"),
        "{path}: space.optimizer: duplicate key 'optimizer' on line 9 (first defined on "
        "line 7)\n  To fix: keep one of the two entries",
    ),
    (
        "not_utf8",
        "campaign",
        CAMPAIGN.replace("val_acc", "val_acc_\xe9").encode("latin-1"),
        "{path}: cannot read campaign file: 'utf-8' codec can't decode byte 0xe9 in position "
        "49: invalid continuation byte\n  To fix: save it with UTF-8 encoding",
    ),
    (
        "campaign_is_a_string",
        "campaign",
        "just some text\n",
        "{path}: top level: must be a mapping of campaign keys (got 'just some text')\n"
        "  To fix: see search_spaces/ for example campaign files",
    ),
    ("missing_file", "campaign", None, "{path}: no such campaign file"),
    # ---- campaign files: schema ----
    (
        "unknown_top_key",
        "campaign",
        CAMPAIGN + "sampelr: tpe\n",
        "{path}: sampelr: unknown key (allowed name, description, trainable, metric, mode, "
        "space, budget, scheduler, sampler, resources, checkpoint, failure, pricing, fixed, "
        "study_storage, warm_start, tracking) Did you mean 'sampler'?",
    ),
    (
        "missing_metric",
        "campaign",
        campaign("metric: val_acc\n", ""),
        "{path}: metric: required key is missing",
    ),
    (
        "mode_typo",
        "campaign",
        campaign("mode: max", "mode: maxx"),
        "{path}: mode: unknown mode (got 'maxx'; allowed min, max) Did you mean 'max'?\n"
        "  To fix: min to minimize val_acc, max to maximize it",
    ),
    (
        "trials_not_a_number",
        "campaign",
        campaign("trials: 4", "trials: four"),
        "{path}: budget.trials: must be an integer >= 1 (got 'four')",
    ),
    (
        "trials_beyond_any_campaign",  # was: OverflowError in the cost prediction, exit 1,
        "campaign",  # after the run folder was written
        campaign("trials: 4", "trials: 1000000000000000000000000000000"),
        "{path}: budget.trials: must be at most 100000 (got 1000000000000000000000000000000)\n"
        "  To fix: use at most 100000: Ray Tune keeps every trial in the driver's memory, "
        "and its own scalability benchmarks stop at 10,000 trials",
    ),
    (
        "max_epochs_beyond_float",  # was: OverflowError from ASHA's rungs (int / int)
        "campaign",
        campaign("max_epochs: 3", "max_epochs: 1" + "0" * 400),
        "{path}: budget.max_epochs: must be at most 100000 (got 1" + "0" * 400 + ")\n"
        "  To fix: use at most 100000: a trial reports once per epoch; more than 100,000 "
        "reports of one trial is a typo",
    ),
    (
        "campaign_with_several_errors",  # each is reported, not only the first
        "campaign",
        campaign("trials: 4", "trials: 0").replace("mode: max", "mode: maxx"),
        "{path}: mode: unknown mode (got 'maxx'; allowed min, max) Did you mean 'max'?\n"
        "  To fix: min to minimize val_acc, max to maximize it\n"
        "{path}: budget.trials: must be an integer >= 1 (got 0)",
    ),
    (
        "gp_sampler_int_range_it_would_list",  # was: MemoryError in Optuna's GP sampler,
        "campaign",  # at the first trial, after the run folder was written
        campaign("  max_epochs: 3", "  max_epochs: 3\nsampler: {type: gp}").replace(
            "  optimizer: {choices: [sgd, adam]}",
            "  optimizer: {choices: [sgd, adam]}\n  units: {type: int, low: 1, high: 100000000}",
        ),
        "{path}: sampler.type: the GP sampler would list 100000000 values of int and stepped "
        "parameters; at most 1000000 are allowed (got 'gp')\n"
        "  To fix: Optuna's GP sampler lists every value of each int and stepped parameter at "
        "every trial: use fewer values (a larger step, fewer choices) or another sampler",
    ),
    (
        "budget_usd_negative",
        "campaign",
        campaign("max_epochs: 3", "max_epochs: 3\n  usd: -5"),
        "{path}: budget.usd: must be a number > 0 (got -5)",
    ),
    (
        "budget_usd_beyond_float",  # was: OverflowError from math.isfinite
        "campaign",
        campaign("max_epochs: 3", "max_epochs: 3\n  usd: 1" + "0" * 400),
        "{path}: budget.usd: must be a finite number (got 1" + "0" * 400 + ")",
    ),
    (
        "deadline_unknown_unit",
        "campaign",
        campaign("max_epochs: 3", "max_epochs: 3\n  deadline: 6x"),
        "{path}: budget.deadline: must be a duration (got '6x'; allowed seconds as a number, "
        "or a string like '90s', '10m', '2h', '1h30m', '1.5h')",
    ),
    (
        "time_limit_beyond_float",  # was: OverflowError from float()
        "campaign",
        campaign("max_epochs: 3", "max_epochs: 3\n  time_limit: 1" + "0" * 400),
        "{path}: budget.time_limit: must be a positive duration (got 1" + "0" * 400 + ")",
    ),
    (
        "trainable_typo",
        "campaign",
        campaign("trainable: digits_cnn", "trainable: digits_cn"),
        "{path}: trainable: unknown built-in trainable (got 'digits_cn'; allowed digits_cnn, "
        "tabular_mlp) Did you mean 'digits_cnn'?\n"
        "  To fix: use a built-in name, or 'package.module:function' for your own trainable",
    ),
    (
        "trainable_malformed_reference",
        "campaign",
        campaign("trainable: digits_cnn", "trainable: 'my trainer:train'"),
        "{path}: trainable: malformed trainable reference (got 'my trainer:train'; allowed "
        "'package.module:function')",
    ),
    (
        "scheduler_typo",
        "campaign",
        CAMPAIGN + "scheduler: ashaa\n",
        "{path}: scheduler.type: unknown scheduler (got 'ashaa'; allowed asha, fifo) "
        "Did you mean 'asha'?",
    ),
    (
        "scheduler_key_typo",
        "campaign",
        CAMPAIGN + "scheduler: {type: asha, grace_perod: 2}\n",
        "{path}: scheduler.grace_perod: unknown key (allowed type, grace_period, reduction_factor, "
        "min_peers) Did you mean 'grace_period'?",
    ),
    (
        "sampler_upper_case",
        "campaign",
        CAMPAIGN + "sampler: {type: TPE}\n",
        "{path}: sampler.type: unknown sampler (got 'TPE'; allowed tpe, random, grid, cmaes, "
        "gp, qmc, nsga2) Did you mean 'tpe'?",
    ),
    (
        "grace_period_above_max_epochs",
        "campaign",
        CAMPAIGN + "scheduler: {grace_period: 5}\n",
        "{path}: scheduler.grace_period: must be <= budget.max_epochs=3 (got 5)\n"
        "  To fix: ASHA first compares trials after grace_period epochs: lower it or raise "
        "budget.max_epochs",
    ),
    (
        "resources_not_a_mapping",
        "campaign",
        CAMPAIGN + "resources: [1, 0]\n",
        "{path}: resources: must be a mapping (got [1, 0])",
    ),
    (
        "fixed_key_also_in_space",
        "campaign",
        CAMPAIGN + "fixed: {lr: 0.01}\n",
        "{path}: fixed.lr: is also a parameter in space\n"
        "  To fix: keep it in one place: remove it from fixed, or from space",
    ),
    (
        "spot_not_boolean",
        "campaign",
        CAMPAIGN + "pricing: {spot: sometimes}\n",
        "{path}: pricing.spot: must be true or false (got 'sometimes')",
    ),
    # ---- search spaces ----
    (
        "int_low_above_high",
        "space",
        space("{type: int, low: 1, high: 4}", "{type: int, low: 4, high: 1}"),
        "{path}: space.layers.high: must be greater than low=4 (got 1)",
    ),
    (
        "float_log_low_zero",
        "space",
        space("low: 1.0e-4, high: 0.1, log: true", "low: 0.0, high: 0.1, log: true"),
        "{path}: space.lr.low: must be > 0 with log: true (got 0.0)\n"
        "  To fix: use a positive low such as 1.0e-5, or drop log: true",
    ),
    (
        "int_log_low_negative",
        "space",
        space("{type: int, low: 1, high: 4}", "{type: int, low: -1, high: 4, log: true}"),
        "{path}: space.layers.low: must be >= 1 with log: true (got -1)",
    ),
    (
        "exponent_without_dot",  # YAML 1.1 reads 1e-4 as a string; the fix line is new
        "space",
        space("low: 1.0e-4", "low: 1e-4"),
        "{path}: space.lr.low: must be a number (got '1e-4')\n"
        "  To fix: write 1.0e-4: YAML reads 1e-4 (no '.' before the exponent) as text",
    ),
    (
        "choices_empty",
        "space",
        space("{choices: [sgd, adam]}", "{choices: []}"),
        "{path}: space.optimizer.choices: must be a non-empty list (got [])",
    ),
    (
        "choices_not_a_list",
        "space",
        space("{choices: [sgd, adam]}", "{choices: sgd}"),
        "{path}: space.optimizer.choices: must be a non-empty list (got 'sgd')",
    ),
    (
        "type_typo",
        "space",
        space("{type: int, low: 1", "{type: itn, low: 1"),
        "{path}: space.layers.type: unknown parameter type (got 'itn'; allowed float, int, "
        "categorical, fixed) Did you mean 'int'?",
    ),
    (
        "type_is_a_list",  # was: TypeError (unhashable type: 'list')
        "space",
        space("{type: int, low: 1", "{type: [int], low: 1"),
        "{path}: space.layers.type: unknown parameter type (got ['int']; allowed float, int, "
        "categorical, fixed)",
    ),
    (
        "range_key_typo",
        "space",
        space("{type: int, low: 1, high: 4}", "{type: int, low: 1, hihg: 4}"),
        "{path}: space.layers.hihg: unknown key (allowed type, low, high, log, step, when) "
        "Did you mean 'high'?",
    ),
    (
        "when_unknown_parent",
        "space",
        space("when: {optimizer: sgd}", "when: {optimiser: sgd}"),
        "{path}: space.momentum.when.optimiser: unknown parameter 'optimiser' (allowed lr, "
        "layers, optimizer) Did you mean 'optimizer'?",
    ),
    (
        "when_value_not_a_choice",
        "space",
        space("when: {optimizer: sgd}", "when: {optimizer: rmsprop}"),
        "{path}: space.momentum.when.optimizer: not a value 'optimizer' can take (got "
        "'rmsprop'; allowed 'sgd', 'adam')",
    ),
    (
        "when_float_parent",
        "space",
        space("when: {optimizer: sgd}", "when: {lr: 0.01}"),
        "{path}: space.momentum.when.lr: cannot depend on float parameter 'lr'\n"
        "  To fix: condition on a categorical, int or fixed parameter",
    ),
    (
        "when_cycle",
        "space",
        space("{choices: [sgd, adam]}", "{choices: [sgd, adam], when: {layers: 2}}").replace(
            "{type: int, low: 1, high: 4}", "{type: int, low: 1, high: 4, when: {optimizer: sgd}}"
        ),
        "{path}: space.layers.when: conditions form a cycle: layers -> optimizer -> layers\n"
        "  To fix: remove one of the when: conditions in the cycle",
    ),
    (
        "step_too_small",  # was: OverflowError from round(inf)
        "space",
        space("high: 0.9,", "high: 0.9, step: 1.0e-320,"),
        "{path}: space.momentum.step: is too small for high - low = 0.9 (more than 2**53 "
        "grid points) (got 1e-320)\n"
        "  To fix: use a larger step, or drop step for a continuous range: Optuna rounds a "
        "value to its step in floats, which count steps exactly only up to 2**53",
    ),
    (
        "space_is_a_list",
        "space",
        "[lr, layers]\n",
        "{path}: space: must be a mapping (got ['lr', 'layers'])\n"
        "  To fix: write {type: float, low: ..., high: ...}, {type: int, low: ..., high: ...}, "
        "{choices: [...]} or {value: ...}",
    ),
    # ---- user catalogs (instances) and GPU tables ----
    (
        "unknown_gpu_model",
        "catalog",
        INSTANCES + ROW.replace(",T4,", ",H100-SXM6,"),
        "{path}: line 2.gpu: unknown GPU model (got 'H100-SXM6'; allowed {gpus}) Did you mean "
        "'H100-SXM5'?\n"
        "  To fix: use a name from tuner/data/gpus.csv or add a row for the model there",
    ),
    (
        "ambiguous_gpu_model",
        "catalog",
        INSTANCES + ROW.replace(",T4,", ",A100,"),
        "{path}: line 2.gpu: ambiguous GPU model (got 'A100'; allowed A100-SXM4-40GB, "
        "A100-SXM4-80GB, A100-PCIE-40GB, A100-PCIE-80GB)\n"
        "  To fix: name the variant, e.g. A100-SXM4-40GB",
    ),
    (
        "negative_price",
        "catalog",
        INSTANCES + ROW.replace("0.50", "-0.50"),
        "{path}: line 2.ondemand_usd_per_hour: out of range (got '-0.50'; allowed a number > 0)",
    ),
    (
        "price_with_currency_sign",
        "catalog",
        INSTANCES + ROW.replace("0.50", "$0.50"),
        "{path}: line 2.ondemand_usd_per_hour: not a number (got '$0.50'; allowed a decimal "
        "number)",
    ),
    (
        "missing_column",
        "catalog",
        INSTANCES.replace(",gpu_count", "") + ROW.replace(",1,", ","),
        "{path}: line 1: missing required column(s) (got ['cloud', 'region', 'instance_type', "
        "'gpu', 'ondemand_usd_per_hour', 'source', 'as_of']; allowed cloud, region, "
        "instance_type, gpu, gpu_count, ondemand_usd_per_hour, source, as_of)\n"
        "  To fix: add the column(s) gpu_count to the header",
    ),
    (
        "column_typo",
        "catalog",
        INSTANCES.replace("ondemand_usd_per_hour", "ondemand_usd_per_hr") + ROW,
        "{path}: line 1: unknown column (got 'ondemand_usd_per_hr'; allowed cloud, region, "
        "instance_type, gpu, gpu_count, ondemand_usd_per_hour, source, as_of, vcpus, "
        "memory_gib, spot_usd_per_hour, billing, notes) Did you mean 'ondemand_usd_per_hour'?",
    ),
    (
        "duplicate_column",  # was: the last of the two columns silently won
        "catalog",
        INSTANCES.replace(",source", ",gpu,source") + ROW.replace(",invoice", ",A10G,invoice"),
        "{path}: line 1: duplicate column (got 'gpu')\n  To fix: keep one of the two columns",
    ),
    (
        "unquoted_comma",  # was: the extra field was silently dropped
        "catalog",
        INSTANCES + ROW.replace("0.50", "1,250.00"),
        "{path}: line 2: more fields than the header's 8 columns (got ['2026-11-01'])\n"
        '  To fix: quote fields that contain a comma, e.g. "a, b"',
    ),
    (
        "gpu_count_unicode_digit",  # was: ValueError from int('²')
        "catalog",
        INSTANCES + ROW.replace(",1,", ",²,"),
        "{path}: line 2.gpu_count: not a whole number (got '²'; allowed 0, 1, 2, ...)",
    ),
    (
        "gpu_count_zero",
        "catalog",
        INSTANCES + ROW.replace(",1,", ",0,"),
        "{path}: line 2.gpu_count: out of range (got 0; allowed an integer >= 1)",
    ),
    (
        "gpu_count_beyond_any_machine",
        "catalog",
        INSTANCES + ROW.replace(",1,", ",64,"),
        "{path}: line 2.gpu_count: must be at most 16 (got '64')\n"
        "  To fix: use at most 16: the largest machines hold 16 GPUs",
    ),
    (
        "gpu_count_of_thirty_digits",  # int() of thousands of digits would fail
        "catalog",
        INSTANCES + ROW.replace(",1,", "," + "9" * 30 + ","),
        "{path}: line 2.gpu_count: must be at most 16 (got '" + "9" * 30 + "')\n"
        "  To fix: use at most 16: the largest machines hold 16 GPUs",
    ),
    (
        "price_beyond_any_machine",
        "catalog",
        INSTANCES + ROW.replace("0.50", "5e9"),
        "{path}: line 2.ondemand_usd_per_hour: must be at most 10000 (got '5e9')\n"
        "  To fix: use at most 10000: the dearest machine in the shipped catalog costs about "
        "100 USD/h",
    ),
    (
        "catalog_with_several_errors",  # every row and field is checked; all are reported
        "catalog",
        INSTANCES
        + ROW.replace(",1,", ",0,").replace("0.50", "x")
        + ROW.replace("box.1", "box.2").replace("2026-11-01", "soon"),
        "{path}: line 2.gpu_count: out of range (got 0; allowed an integer >= 1)\n"
        "{path}: line 2.ondemand_usd_per_hour: not a number (got 'x'; allowed a decimal "
        "number)\n"
        "{path}: line 3.as_of: not a date (got 'soon'; allowed YYYY-MM-DD)",
    ),
    (
        "date_not_iso",
        "catalog",
        INSTANCES + ROW.replace("2026-11-01", "01/11/2026"),
        "{path}: line 2.as_of: not a date (got '01/11/2026'; allowed YYYY-MM-DD)",
    ),
    (
        "duplicate_instance",
        "catalog",
        INSTANCES + ROW + ROW.replace("0.50", "0.40"),
        "{path}: line 3: duplicate cloud/region/instance_type (got 'acme/eu-1/box.1')\n"
        "  To fix: keep one row per instance type",
    ),
    (
        "catalog_not_utf8",  # was: UnicodeDecodeError
        "catalog",
        (INSTANCES + ROW.replace("invoice", "factur\xe9")).encode("latin-1"),
        "{path}: file: not a UTF-8 text file (got \"'utf-8' codec can't decode byte 0xe9 in "
        'position 108: invalid continuation byte")\n'
        "  To fix: save the catalog as CSV with UTF-8 encoding",
    ),
    (
        "field_too_large",  # was: _csv.Error
        "catalog",
        INSTANCES + ROW.replace("invoice", '"' + "x" * 200_000 + '"'),
        "{path}: line 2: malformed CSV (got 'field larger than field limit (131072)')",
    ),
    (
        "architecture_typo",
        "gpus",
        GPUS + GPU_ROW.replace("hopper", "hoper"),
        "{path}: line 2.architecture: unknown architecture (got 'hoper'; allowed ada, ampere, "
        "blackwell, hopper, pascal, turing, volta) Did you mean 'hopper'?",
    ),
    (
        "memory_zero",
        "gpus",
        GPUS + GPU_ROW.replace(",80,", ",0,"),
        "{path}: line 2.memory_gib: out of range (got '0'; allowed a number > 0)",
    ),
    (
        "tflops_beyond_any_gpu",
        "gpus",
        GPUS + GPU_ROW.replace(",989,", ",1e9,"),
        "{path}: line 2.fp16_bf16_tflops: must be at most 100000 (got '1e9')\n"
        "  To fix: use at most 100000: the fastest GPUs do a few thousand dense TFLOP/s",
    ),
    (
        "duplicate_gpu",
        "gpus",
        GPUS + GPU_ROW + GPU_ROW,
        "{path}: line 3.gpu: duplicate GPU model (got 'X1')",
    ),
    # ---- profiles ----
    (
        "profile_not_json",
        "profile",
        "{",
        "{path}: file: not JSON (got 'Expecting property "
        "name enclosed in double quotes: line 1 column 2 (char 1)')",
    ),
    (
        "profile_format",
        "profile",
        profile(format=2),
        "{path}: format: unsupported profile format (got 2; allowed 1)\n"
        "  To fix: measure it again with `tuner profile CAMPAIGN`",
    ),
    (
        "profile_trials_not_a_list",  # was: TypeError ('int' object is not iterable)
        "profile",
        profile(trials=3),
        "{path}: trials: must be a list of trial records (got 'int')\n  To fix: measure it again",
    ),
    (
        "profile_epoch_beyond_float",  # was: OverflowError from float()
        "profile",
        profile(trials=[{**TRIAL, "epoch_s": 10**400}]),
        "{path}: trials[0].epoch_s: must be a finite number (got 1" + "0" * 400 + ")",
    ),
    (
        "profile_epochs_text",
        "profile",
        profile(trials=[{**TRIAL, "epochs": "three"}]),
        "{path}: trials[0].epochs: must be an integer >= 1 (got 'three')",
    ),
    (
        "profile_key_typo",
        "profile",
        profile(trails=[]),
        "{path}: trails: unknown key (allowed format, campaign, trainable, source, device, "
        "gpu_name, precision, trials, summary) Did you mean 'trials'?\n"
        "  To fix: measure it again with `tuner profile CAMPAIGN`",
    ),
    (
        "profile_epoch_beyond_a_year",
        "profile",
        profile(trials=[{**TRIAL, "epoch_s": 1e9}]),
        "{path}: trials[0].epoch_s: must be at most 31536000 (got 1000000000.0)\n"
        "  To fix: use at most 31536000: an epoch is measured within a campaign, which lasts "
        "under a year",
    ),
    (
        "profile_with_several_errors",
        "profile",
        profile(
            trials=[
                {**TRIAL, "epochs": 0, "metrics": {"samples_per_s": float("inf")}},
                {**TRIAL, "cold": "yes"},
            ]
        ),
        "{path}: trials[0].epochs: must be an integer >= 1 (got 0)\n"
        "{path}: trials[0].metrics.samples_per_s: must be a finite number (got inf)\n"
        "{path}: trials[1].cold: must be true or false (got 'yes')",
    ),
    # ---- tuner profile --config files ----
    (
        "config_is_a_list",
        "config",
        "- lr\n- 0.01\n",
        "{path}: config: expected a mapping of hyperparameter names to values (got 'list')\n"
        "  To fix: pass a best.yaml written by `tuner run`, or a YAML mapping like `lr: 0.01`",
    ),
    (
        "config_empty",  # was: "expected a mapping ... (got 'dict')" for an empty mapping
        "config",
        "campaign: digits-cnn\nconfig: {}\n",
        "{path}: config: names no hyperparameter (got {})\n"
        "  To fix: pass a best.yaml written by `tuner run`, or a YAML mapping like `lr: 0.01`",
    ),
    (
        "config_yaml_error",
        "config",
        "config:\n  lr: [0.01\n",
        "{path}: line 3, column 1: invalid YAML: expected ',' or ']', but got '<stream end>'",
    ),
    (
        "config_not_utf8",  # was: UnicodeDecodeError
        "config",
        "optimizer: s\xe9d\n".encode("latin-1"),
        "{path}: file: not a UTF-8 text file (got \"'utf-8' codec can't decode byte 0xe9 in "
        'position 12: invalid continuation byte")\n'
        "  To fix: save the config file as YAML with UTF-8 encoding",
    ),
    (
        "config_missing",
        "config",
        None,
        "{path}: file: cannot read config file (got 'No such file or directory')",
    ),
    # ---- command lines ----
    (
        "run_negative_budget",
        "cli",
        Cli(["run", "{tmp}/ok.yaml", "--budget-usd", "-1"]),
        RUN_USAGE_ERROR + "argument --budget-usd: expected a number > 0, got '-1'",
    ),
    (
        "run_trials_zero",
        "cli",
        Cli(["run", "{tmp}/ok.yaml", "--trials", "0"]),
        RUN_USAGE_ERROR + "argument --trials: expected a whole number >= 1, got '0'",
    ),
    (
        "run_trials_beyond_any_campaign",
        "cli",
        Cli(["run", "{tmp}/ok.yaml", "--trials", "100000000000000000000"]),
        "error: <cli>: --trials: must be at most 100000 (got 100000000000000000000)\n"
        "  To fix: use at most 100000: Ray Tune keeps every trial in the driver's memory, "
        "and its own scalability benchmarks stop at 10,000 trials",
    ),
    (
        "run_gpu_hours_nan",
        "cli",
        Cli(["run", "{tmp}/ok.yaml", "--budget-gpu-hours", "nan"]),
        RUN_USAGE_ERROR + "argument --budget-gpu-hours: expected a number > 0, got 'nan'",
    ),
    (
        "run_num_gpus_negative",  # was: accepted, and Ray failed at start
        "cli",
        Cli(["run", "{tmp}/ok.yaml", "--num-gpus", "-1"]),
        RUN_USAGE_ERROR + "argument --num-gpus: expected a number >= 0, got '-1'",
    ),
    (
        "run_flag_typo",  # the suggestion is new
        "cli",
        Cli(["run", "{tmp}/ok.yaml", "--trails", "3"]),
        RUN_USAGE_ERROR + "unrecognized arguments: --trails 3. Did you mean '--trials'?",
    ),
    (
        "run_deadline_not_a_duration",
        "cli",
        Cli(["run", "{tmp}/ok.yaml", "--deadline", "abc"]),
        "error: <cli>: --deadline: not a duration (got 'abc'; allowed seconds or 90s, 10m, "
        "2h, 1h30m)",
    ),
    (
        "run_deadline_zero",  # was: "not a duration" for a duration that is not positive
        "cli",
        Cli(["run", "{tmp}/ok.yaml", "--deadline", "0"]),
        "error: <cli>: --deadline: must be a positive duration (got '0'; allowed seconds or "
        "90s, 10m, 2h, 1h30m)",
    ),
    (
        "run_time_limit_unknown_unit",
        "cli",
        Cli(["run", "{tmp}/ok.yaml", "--time-limit", "6x"]),
        "error: <cli>: --time-limit: not a duration (got '6x'; allowed seconds or 90s, 10m, "
        "2h, 1h30m)",
    ),
    (
        "run_bad_name",
        "cli",
        Cli(["run", "{tmp}/ok.yaml", "--name", "my run"]),
        "error: <cli>: --name: must start with a letter or digit and contain only letters, "
        "digits, '_', '.', '-' (got 'my run')\n"
        "  To fix: it names the run folder, e.g. 'digits-cnn' or 'mlp_v2'",
    ),
    (
        "run_missing_campaign",
        "cli",
        Cli(["run", "{tmp}/nope.yaml"]),
        "error: {tmp}/nope.yaml: no such campaign file.\n"
        "  To fix: pass a YAML file such as search_spaces/default.yaml.",
    ),
    (
        "run_bad_campaign",
        "cli",
        Cli(["run", "{tmp}/c.yaml"], {"c.yaml": OK_CAMPAIGN + "sampler: randon\n"}),
        "error: {tmp}/c.yaml: sampler.type: unknown sampler (got 'randon'; allowed tpe, "
        "random, grid, cmaes, gp, qmc, nsga2) Did you mean 'random'?",
    ),
    (
        "run_missing_profile",
        "cli",
        Cli(["run", "{tmp}/ok.yaml", "--profile", "{tmp}/nope.json"]),
        "error: {tmp}/nope.json: file: cannot read profile (got 'No such file or directory')\n"
        "  To fix: pass a file written by `tuner profile`, or a run folder of `tuner run`",
    ),
    (
        "unknown_command",
        "cli",
        Cli(["rnu"]),
        "tuner: error: argument COMMAND: invalid choice: 'rnu' (choose from 'run', 'resume', "
        "'show', 'submit', 'list', 'status', 'logs', 'stop', 'report', 'dashboard', 'profile', "
        "'recommend', 'predict', 'schema')",
    ),
    (
        "resume_missing_folder",
        "cli",
        Cli(["resume", "{tmp}/runs/demo"]),
        "error: {tmp}/runs/demo: no such run folder.\n"
        "  To fix: pass a folder under runs/ that `tuner run` created (see `ls runs/`).",
    ),
    (
        "show_broken_run_campaign",
        "cli",
        Cli(["show", "{tmp}/runs/demo"], {"runs/demo/campaign.yaml": "name: [demo\n"}),
        "error: {tmp}/runs/demo/campaign.yaml: line 2, column 1: invalid YAML: expected ',' "
        "or ']', but got '<stream end>'",
    ),
    (
        "recommend_without_budget",
        "cli",
        Cli(RECOMMEND),
        "tuner recommend: error: the following arguments are required: --budget-usd",
    ),
    (
        "recommend_deadline_unknown_unit",
        "cli",
        Cli([*RECOMMEND, "--budget-usd", "50", "--deadline", "6x"]),
        "error: <cli>: --deadline: must be a duration (got '6x'; allowed seconds as a number, "
        "or a string like '90s', '10m', '2h', '1h30m', '1.5h')",
    ),
    (
        "recommend_deadline_below_a_millisecond",  # was: ValueError (5e-324 s / 3600 is 0 h)
        "cli",
        Cli([*RECOMMEND, "--budget-usd", "50", "--deadline", "5e-324"]),
        "error: <cli>: --deadline: must be at least 0.001s (got '5e-324')\n"
        "  To fix: durations are counted to the millisecond",
    ),
    (
        "recommend_catalog_negative_price",
        "cli",
        Cli(
            [*RECOMMEND, "--budget-usd", "50", "--catalog", "{tmp}/mine.csv"],
            {"mine.csv": INSTANCES + ROW.replace("0.50", "-1")},
        ),
        "error: {tmp}/mine.csv: line 2.ondemand_usd_per_hour: out of range (got '-1'; "
        "allowed a number > 0)",
    ),
    (
        "recommend_catalog_unknown_gpu",
        "cli",
        Cli(
            [*RECOMMEND, "--budget-usd", "50", "--catalog", "{tmp}/mine.csv"],
            {"mine.csv": INSTANCES + ROW.replace(",T4,", ",RTX-4090X,")},
        ),
        "error: {tmp}/mine.csv: line 2.gpu: unknown GPU model (got 'RTX-4090X'; allowed "
        "{gpus}) Did you mean 'RTX-4090'?\n"
        "  To fix: use a name from tuner/data/gpus.csv or add a row for the model there",
    ),
    (
        "recommend_missing_campaign",
        "cli",
        Cli(["recommend", "{tmp}/nope.yaml", "--budget-usd", "50"]),
        "error: {tmp}/nope.yaml: no such campaign file.\n"
        "  To fix: pass a YAML file such as search_spaces/default.yaml.",
    ),
    (
        "recommend_missing_campaign_old_spelling",  # --campaign and --budget still work
        "cli",
        Cli(["recommend", "--budget", "50", "--campaign", "{tmp}/nope.yaml"]),
        "error: {tmp}/nope.yaml: no such campaign file.\n"
        "  To fix: pass a YAML file such as search_spaces/default.yaml.",
    ),
    (
        "recommend_campaign_given_twice",  # positional and its old spelling, differing
        "cli",
        Cli([*RECOMMEND, "--campaign", "{tmp}/other.yaml", "--budget-usd", "50"]),
        "tuner recommend: error: argument campaign: given as '{tmp}/ok.yaml' and, by its "
        "old spelling --campaign, as '{tmp}/other.yaml'; give it once",
    ),
    (
        "recommend_budget_given_twice",  # --budget-usd and its old spelling, differing
        "cli",
        Cli([*RECOMMEND, "--budget-usd", "50", "--budget", "60"]),
        "tuner recommend: error: argument --budget-usd: given as 50.0 and, by its old "
        "spelling --budget, as 60.0; give it once",
    ),
    (
        "profile_config_not_utf8",
        "cli",
        Cli(
            ["profile", "{tmp}/ok.yaml", "--config", "{tmp}/best.yaml", "--out", "{tmp}/p.json"],
            {"best.yaml": b"optimizer: \xe9\n"},
        ),
        "error: {tmp}/best.yaml: file: not a UTF-8 text file (got \"'utf-8' codec can't "
        'decode byte 0xe9 in position 11: invalid continuation byte")\n'
        "  To fix: save the config file as YAML with UTF-8 encoding",
    ),
    (
        "predict_unknown_gpu",
        "cli",
        Cli([*PREDICT[:4], "H100-SXM4", *PREDICT[5:], "--samples-per-s", "100"]),
        "error: <predict>: to_gpu: unknown GPU model (got 'H100-SXM4'; allowed {gpus}) "
        "Did you mean 'H100-SXM5'?\n"
        "  To fix: use a name from tuner/data/gpus.csv or add a row for the model there",
    ),
    (
        "predict_precision_choice",
        "cli",
        Cli([*PREDICT[:-1], "fp8", "--samples-per-s", "100"]),
        "tuner predict: error: argument --precision: invalid choice: 'fp8' (choose from "
        "'fp32', 'tf32', 'amp')",
    ),
    (
        "predict_zero_throughput",
        "cli",
        Cli([*PREDICT, "--samples-per-s", "0"]),
        "tuner predict: error: argument --samples-per-s: expected a number > 0, got '0'",
    ),
]


def _fill(text: str, *, path: Path | None = None, tmp: Path | None = None) -> str:
    if path is not None:
        text = text.replace("{path}", str(path))
    if tmp is not None:
        text = text.replace("{tmp}", str(tmp))
    if "{gpus}" in text:
        text = text.replace("{gpus}", ", ".join(sorted(load_gpus())))
    return text


def _write(path: Path, content: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")


def _load(kind: str, path: Path) -> object:
    if kind == "campaign":
        return load_campaign(path, check_trainable=False)
    if kind == "space":
        return parse_space(Checker(str(path)), load_yaml(path.read_text(), str(path)))
    if kind == "catalog":
        return load_catalog(path)
    if kind == "gpus":
        return load_gpus(path)
    if kind == "profile":
        return load_profile(path)
    assert kind == "config", kind
    return load_config_file(path)


_SUFFIX = {"campaign": ".yaml", "space": ".yaml", "config": ".yaml", "profile": ".json"}


@pytest.fixture
def cli_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The CLI's working folder, with a valid campaign; Ray and profiling are fenced off.

    ``tuner run`` puts the campaign's folder on sys.path and PYTHONPATH: both are restored.
    """
    _write(tmp_path / "ok.yaml", OK_CAMPAIGN)
    _write(tmp_path / f"{TRAINABLE_MODULE}.py", "def train(config):\n    pass\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("bad input got as far as starting Ray")

    fake_campaign = types.ModuleType("tuner._ray.driver")
    fake_campaign.run_campaign = refuse  # type: ignore[attr-defined]
    fake_campaign.resume_campaign = refuse  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tuner._ray.driver", fake_campaign)
    monkeypatch.setattr("tuner._api._measure", refuse)
    yield tmp_path
    sys.modules.pop(TRAINABLE_MODULE, None)


@pytest.mark.parametrize(
    ("kind", "given", "expected"),
    [pytest.param(kind, given, expected, id=name) for name, kind, given, expected in ROWS],
)
def test_bad_input(
    kind: str,
    given: Any,
    expected: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if kind == "cli":
        _check_cli(given, expected, request.getfixturevalue("cli_sandbox"), capsys)
        return
    path = tmp_path / f"input{_SUFFIX.get(kind, '.csv')}"
    if given is not None:
        _write(path, given)
    with pytest.raises(TunerError) as info:
        _load(kind, path)
    assert str(info.value) == _fill(expected, path=path)
    if isinstance(info.value, SpecError):
        assert info.value.source == str(path)


def _check_cli(cli: Cli, expected: str, tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name, content in cli.files.items():
        _write(tmp / name, content)
    before = files_under(tmp)
    capsys.readouterr()
    try:
        code = main([_fill(arg, tmp=tmp) for arg in cli.argv])
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2
    assert err.endswith(_fill(expected, tmp=tmp) + "\n"), err
    assert "Traceback" not in err and "Traceback" not in out
    assert files_under(tmp) == before  # no run folder, report, profile or cluster file


def test_table_is_large_and_ids_are_unique() -> None:
    names = [row[0] for row in ROWS]
    assert len(names) >= 40
    assert len(set(names)) == len(names)
    kinds = {row[1] for row in ROWS}
    assert kinds == {"campaign", "space", "catalog", "gpus", "profile", "config", "cli"}


def test_catalog_with_a_byte_order_mark_loads(tmp_path: Path) -> None:
    """Spreadsheet programs write CSV with a BOM; its first column is still ``cloud``."""
    path = tmp_path / "mine.csv"
    path.write_text("\ufeff" + INSTANCES + ROW, encoding="utf-8")
    catalog = load_catalog(path)
    assert catalog.instances[-1].key == ("acme", "eu-1", "box.1")


def test_yaml_aliases_that_repeat_are_checked_once(tmp_path: Path) -> None:
    """Many aliases of one anchor (a "billion laughs" file) load, walked once each."""
    layers = ["a0: &a0 [x, x, x, x, x, x, x, x]"]
    layers += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 8)}]" for i in range(1, 9)]
    text = textwrap.indent("\n".join(layers), "  ")
    data = load_yaml("fixed:\n" + text + "\n", "f.yaml")
    assert len(data["fixed"]["a8"]) == 8
