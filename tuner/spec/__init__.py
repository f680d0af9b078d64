"""Campaign specs: load and validate campaign files into typed, frozen objects.

Pure: imports neither Ray nor Optuna, and torch only when a trainable is resolved.

Example:
    >>> spec = load_campaign("search_spaces/digits_cnn.yaml")  # doctest: +SKIP
    >>> spec.with_overrides(trials=4, max_epochs=3).budget  # doctest: +SKIP
    Budget(trials=4, max_epochs=3, time_limit_s=600.0)
"""

from __future__ import annotations

from tuner.spec._campaign import (
    Budget,
    CampaignSpec,
    CheckpointPolicy,
    FailurePolicy,
    Mode,
    Objective,
    Pricing,
    Resources,
    SamplerSpec,
    SamplerType,
    SchedulerSpec,
    SchedulerType,
)
from tuner.spec._checks import RESERVED_PREFIX
from tuner.spec._durations import format_duration, parse_duration
from tuner.spec._frozen import FrozenDict, thaw
from tuner.spec._params import (
    CategoricalParam,
    Condition,
    FixedParam,
    FloatParam,
    IntParam,
    Param,
    Space,
)
from tuner.spec._parse import parse_campaign
from tuner.spec._schema import campaign_schema
from tuner.spec._tracking import MlflowTracking, Tracking, WandbMode, WandbTracking
from tuner.spec._trainable import resolve_trainable
from tuner.spec._warm_start import WarmStart
from tuner.spec._yaml import load_campaign, load_config_file

__all__ = [
    "RESERVED_PREFIX",
    "Budget",
    "CampaignSpec",
    "CategoricalParam",
    "CheckpointPolicy",
    "Condition",
    "FailurePolicy",
    "FixedParam",
    "FloatParam",
    "FrozenDict",
    "IntParam",
    "MlflowTracking",
    "Mode",
    "Objective",
    "Param",
    "Pricing",
    "Resources",
    "SamplerSpec",
    "SamplerType",
    "SchedulerSpec",
    "SchedulerType",
    "Space",
    "Tracking",
    "WandbMode",
    "WandbTracking",
    "WarmStart",
    "campaign_schema",
    "format_duration",
    "load_campaign",
    "load_config_file",
    "parse_campaign",
    "parse_duration",
    "resolve_trainable",
    "thaw",
]
