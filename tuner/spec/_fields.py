"""The campaign file's shape: each section's keys, which are required, and what each holds.

One table, read by the parser (:mod:`tuner.spec._parse`: the keys a section allows and
requires come from here, so a key missing here is an "unknown key" in every file) and by the
JSON Schema generator (:mod:`tuner.spec._schema`, ``tuner schema``). The ranges of numbers
are in :mod:`tuner.spec._limits` (``CAMPAIGN``), found by the field's key path; the choices
of a closed set are the spec's enums. Rules between fields (``grace_period <=
max_epochs``, ``when:`` conditions, a grid's size) are the parser's alone.

A new section: add its :class:`Section` to :data:`SECTIONS` and a ``section`` field for it to
the top level (its numbers' ranges to ``CAMPAIGN``); the parser then accepts the key and
the schema describes it.

Pure data: no imports from the rest of tuner but the limits and enums.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from tuner.spec._enums import Mode, SamplerType, SchedulerType
from tuner.spec._limits import WARM_START_TOP, Limit

__all__ = ["PARAM_KEYS", "SECTIONS", "Field", "Section"]

Kind = Literal[
    "int",  # a whole number in CAMPAIGN[<path>]'s range
    "number",  # a finite number in CAMPAIGN[<path>]'s range
    "duration",  # seconds, or a string like "90m", in CAMPAIGN[<path>]'s range
    "bool",
    "text",  # a string of at most SIZES["text"] characters
    "name",  # a campaign name (NAME_PATTERN, SIZES["name"])
    "choice",  # one of ``choices``
    "section",  # the mapping SECTIONS[<path>] (None: its defaults)
    "trainable",  # a built-in name or 'package.module:function'
    "metric",  # a metric name, or a list of 2-4 (multi-objective)
    "mode",  # min or max, or a list of them (one per metric)
    "goal",  # a number, or a list of them (one per metric)
    "space",  # parameter name -> parameter (PARAM_KEYS)
    "fixed",  # name -> any plain YAML value
    "source",  # warm_start.from: a run folder, or the section warm_start.from
]


@dataclass(frozen=True, slots=True)
class Field:
    """One key of a section: what its value is (``kind``), for ``choice`` the values, and
    its range where CAMPAIGN does not hold it."""

    kind: Kind
    choices: tuple[str, ...] = ()
    description: str = ""
    limit: Limit | None = None  # a range not in CAMPAIGN (which the limit tests walk)


@dataclass(frozen=True, slots=True)
class Section:
    """A mapping with a closed set of keys.

    Attributes:
        fields: Its keys, in the order the docs list them.
        required: The keys it must have.
        optional: Whether the key may be left out or null (its defaults apply).
        shorthand: A bare string value stands for ``{type: <string>}`` (scheduler,
            sampler) or ``{from: <string>}`` (warm_start): the key it fills.
        description: One line for the schema (and an editor's hover).
    """

    fields: Mapping[str, Field]
    required: tuple[str, ...] = ()
    optional: bool = True
    shorthand: str | None = None
    description: str = ""

    @property
    def allowed(self) -> tuple[str, ...]:
        return tuple(self.fields)


def _choices(enum: type[Mode] | type[SamplerType] | type[SchedulerType]) -> tuple[str, ...]:
    return tuple(member.value for member in enum)


_TOP = Section(
    {
        "name": Field("name", description="the campaign's name: its run folder and study"),
        "description": Field("text"),
        "trainable": Field("trainable", description="a built-in or 'package.module:function'"),
        "metric": Field("metric", description="the reported metric to optimize (or 2-4 of them)"),
        "mode": Field("mode", description="min or max (one per metric)"),
        "space": Field("space", description="the hyperparameters: name -> parameter"),
        "budget": Field("section"),
        "scheduler": Field("section"),
        "sampler": Field("section"),
        "resources": Field("section"),
        "checkpoint": Field("section"),
        "failure": Field("section"),
        "pricing": Field("section"),
        "fixed": Field("fixed", description="settings every trial gets as they are"),
        "study_storage": Field("text", description="an Optuna storage URL shared by campaigns"),
        "warm_start": Field("section"),
        "tracking": Field("section"),
    },
    required=("name", "trainable", "metric", "mode", "space", "budget"),
    optional=False,
    description="A tuner campaign file",
)

SECTIONS: Mapping[str, Section] = MappingProxyType(
    {
        "": _TOP,
        "budget": Section(
            {
                "trials": Field("int"),
                "max_epochs": Field("int"),
                "time_limit": Field("duration"),
                "usd": Field("number"),
                "gpu_hours": Field("number"),
                "deadline": Field("duration"),
                "goal": Field("goal"),
            },
            required=("trials", "max_epochs"),
            optional=False,
            description="how many trials, how long each, and what the campaign may spend",
        ),
        "scheduler": Section(
            {
                "type": Field("choice", _choices(SchedulerType)),
                "grace_period": Field("int"),
                "reduction_factor": Field("number"),
                "min_peers": Field("int"),
            },
            shorthand="type",
            description="ASHA (early stopping at rungs) or FIFO",
        ),
        "sampler": Section(
            {
                "type": Field("choice", _choices(SamplerType)),
                "seed": Field("int"),
                "startup_trials": Field("int"),
            },
            shorthand="type",
            description="the Optuna sampler that proposes each trial",
        ),
        "resources": Section(
            {
                "cpu": Field("number"),
                "gpu": Field("number"),
                "max_concurrent": Field("int"),
                "workers": Field("int"),
                "pending_warning": Field("duration"),
            },
            description="what one trial holds, and how many run at once",
        ),
        "checkpoint": Section(
            {"every": Field("int"), "keep": Field("int")},
            description="how often trials checkpoint and how many checkpoints are kept",
        ),
        "failure": Section(
            {"max_retries": Field("int"), "max_failed_trials": Field("int")},
            description="retries of a failed trial and failed trials the campaign stands",
        ),
        "pricing": Section(
            {
                "node_usd_per_hour": Field("number"),
                "catalog": Field("text"),
                "spot": Field("bool"),
            },
            description="what a node costs when the catalog does not say",
        ),
        "warm_start": Section(
            {"from": Field("source"), "top": Field("int", limit=WARM_START_TOP)},
            required=("from",),
            shorthand="from",
            description="start from the best configurations of an earlier campaign",
        ),
        "tracking": Section(
            {"mlflow": Field("section"), "wandb": Field("section")},
            description="the experiment trackers each trial is logged to (MLflow, W&B)",
        ),
        "tracking.mlflow": Section(
            {
                "tracking_uri": Field(
                    "text", description="MLflow's store (default: the run folder's mlflow.db)"
                ),
                "experiment": Field("text", description="default: the campaign's name"),
            },
            description="an MLflow parent run for the campaign, a child run per trial",
        ),
        "tracking.wandb": Section(
            {
                "project": Field("text"),
                "mode": Field("choice", ("online", "offline")),
                "group": Field("text"),
                "dir": Field("text"),
            },
            required=("project",),
            description="a W&B run per trial (offline: files in the run folder only)",
        ),
        "warm_start.from": Section(
            {"storage": Field("text"), "study": Field("text")},
            required=("storage", "study"),
            optional=False,
        ),
    }
)

# The keys of each parameter type in ``space``.
PARAM_KEYS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "float": ("type", "low", "high", "log", "step", "when"),
        "int": ("type", "low", "high", "log", "step", "when"),
        "categorical": ("type", "choices", "when"),
        "fixed": ("type", "value", "when"),
    }
)
