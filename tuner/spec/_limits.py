"""The bounds of every number a user gives tuner, and why each upper bound is where it is.

One table, read by the campaign parser, the command-line flags, the catalog and profile
loaders, and the fuzz tests that generate inputs from it. Each upper bound is one a real
campaign can need; a larger number is a typo (a digit too many, a unit mix-up), and the
arithmetic on user numbers (the cost model, ASHA's rungs, the grid) is checked for the
largest values allowed. Sizes (string lengths, list lengths, nesting) are bounded too, so
that nothing allocates in proportion to a number in a file.

Pure data: no imports from the rest of tuner.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

__all__ = [
    "CAMPAIGN",
    "CATALOG",
    "FLAGS",
    "PROFILE",
    "SIZES",
    "Limit",
]

_YEAR_S = 365 * 86400


@dataclass(frozen=True, slots=True)
class Limit:
    """The range one number may take.

    Attributes:
        kind: ``"int"`` (a whole number), ``"number"`` (a finite int or float) or
            ``"duration"`` (seconds; files and flags may write ``"90m"``, ``"2h"``...).
        low: The smallest value allowed; with ``low_open`` the value must be above it.
        high: The largest value allowed.
        reason: Why ``high`` is where it is; error messages show it.
        low_open: Whether ``low`` itself is excluded (``> low`` rather than ``>= low``).
    """

    kind: Literal["int", "number", "duration"]
    low: float
    high: float
    reason: str
    low_open: bool = False

    def allows(self, value: float) -> bool:
        """Whether ``value`` (a finite number) is within the range."""
        above = value > self.low if self.low_open else value >= self.low
        return above and value <= self.high

    def show(self, value: float) -> str:
        """``value`` as a message writes it: ``100000``, ``0.5``, ``365d``."""
        if self.kind == "duration":
            return _duration_text(value)
        if float(value).is_integer() and abs(value) < 1e16:
            return str(int(value))
        return f"{value:.12g}"

    def fix(self) -> str:
        """The ``To fix:`` line of a value above the range: the bound and the reason."""
        return f"use at most {self.show(self.high)}: {self.reason}"


def _duration_text(seconds: float) -> str:
    """``31536000`` -> ``365d`` (the spec's own format_duration, without the import)."""
    if seconds != int(seconds):
        return f"{seconds:g}s"
    rest, out = int(seconds), ""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, rest = divmod(rest, size)
        if count:
            out += f"{count}{unit}"
    return out or "0s"


# ---- campaign files (and the flags that override them) ----

TRIALS = Limit(
    "int",
    1,
    100_000,
    "Ray Tune keeps every trial in the driver's memory, and its own scalability "
    "benchmarks stop at 10,000 trials",
)
EPOCHS = Limit(
    "int",
    1,
    100_000,
    "a trial reports once per epoch; more than 100,000 reports of one trial is a typo",
)
# The shortest duration: seconds are counted to the millisecond (and divided by 3,600
# without falling to 0).
MIN_DURATION_S = 0.001
DURATION = Limit("duration", MIN_DURATION_S, _YEAR_S, "no campaign runs for more than a year")
USD = Limit(
    "number",
    0,
    10_000_000,
    "ten million dollars buys millions of GPU-hours; a larger budget is a digit too many",
    low_open=True,
)
GPU_HOURS = Limit("number", 0, 10_000_000, "that is 1,000 GPUs for over a year", low_open=True)
GOAL = Limit(
    "number",
    -1e15,
    1e15,
    "a metric is a float the trainable reports; beyond 1e15 it is no score a run can reach",
)
REDUCTION_FACTOR = Limit(
    "number",
    1,
    100,
    "ASHA keeps 1/reduction_factor of the trials at each rung; beyond 100 hardly a trial "
    "reaches a second rung",
    low_open=True,
)
MIN_PEERS = Limit("int", 0, TRIALS.high, "a rung holds no more results than there are trials")
SEED = Limit("int", 0, 2**32 - 1, "numpy, and so every Optuna sampler, takes seeds below 2**32")
CPU = Limit(
    "number",
    0,
    1024,
    "one worker's CPUs must be on one machine, and the largest have under 1,000",
    low_open=True,
)
GPU = Limit("number", 0, 16, "one worker's GPUs must be on one machine, and the largest hold 16")
WORKERS = Limit(
    "int",
    1,
    1024,
    "a data-parallel trial on more than 1,024 workers is a training job, not one trial of many",
)
MAX_CONCURRENT = Limit(
    "int", 1, 10_000, "that is as many trials as Ray Tune's largest benchmark runs in all"
)
CHECKPOINTS_KEPT = Limit(
    "int", 1, 1000, "each kept checkpoint is a copy of the trial's state on disk"
)
RETRIES = Limit("int", 0, 100, "a trial that failed 100 times in a row will fail again")
NODE_USD_PER_HOUR = Limit(
    "number", 0, 10_000, "the dearest machine in the shipped catalog costs about 100 USD/h"
)
# Ray counts CPUs and GPUs in units of 0.0001: a request below one unit is none.
RESOURCE_UNIT = 0.0001
# ASHA makes log(max_epochs / grace_period) / log(reduction_factor) rungs.
MIN_REDUCTION_FACTOR = 1.01
SAFE_INT = 2**53
PARAM_BOUND = Limit(
    "number",
    -SAFE_INT,
    SAFE_INT,
    "Optuna's samplers compute in floats, which hold every whole number only up to 2**53",
)
STEPS = Limit(
    "int",
    1,
    SAFE_INT,
    "Optuna rounds a value to its step in floats, which count steps exactly only up to 2**53",
)
# warm_start.top: checked against budget.trials, and kept out of CAMPAIGN (whose every
# field the limit tests set alone) because it needs warm_start.from beside it.
WARM_START_TOP = Limit("int", 0, TRIALS.high, "it is at most budget.trials")
GRID_POINTS = Limit(
    "int",
    1,
    1_000_000,
    "Optuna's grid sampler lists every combination in memory, and a campaign runs at most "
    "100,000 trials",
)

CAMPAIGN: Mapping[str, Limit] = MappingProxyType(
    {
        "budget.trials": TRIALS,
        "budget.max_epochs": EPOCHS,
        "budget.time_limit": DURATION,
        "budget.usd": USD,
        "budget.gpu_hours": GPU_HOURS,
        "budget.goal": GOAL,
        "budget.deadline": DURATION,
        "scheduler.grace_period": Limit("int", 1, EPOCHS.high, "it is at most budget.max_epochs"),
        "scheduler.reduction_factor": REDUCTION_FACTOR,
        "scheduler.min_peers": MIN_PEERS,
        "sampler.seed": SEED,
        "sampler.startup_trials": Limit("int", 0, TRIALS.high, "it is at most budget.trials"),
        "resources.cpu": CPU,
        "resources.gpu": GPU,
        "resources.workers": WORKERS,
        "resources.max_concurrent": MAX_CONCURRENT,
        "resources.pending_warning": DURATION,
        "checkpoint.every": Limit("int", 1, EPOCHS.high, "it is at most budget.max_epochs"),
        "checkpoint.keep": CHECKPOINTS_KEPT,
        "failure.max_retries": RETRIES,
        "failure.max_failed_trials": Limit("int", 0, TRIALS.high, "it is at most budget.trials"),
        "pricing.node_usd_per_hour": NODE_USD_PER_HOUR,
        # space.<name>.low / high / step of an int or float parameter:
        "space.*.low": PARAM_BOUND,
        "space.*.high": PARAM_BOUND,
        "space.*.step": Limit("number", 0, SAFE_INT, PARAM_BOUND.reason, low_open=True),
    }
)

# Sizes: how long a string or list, how deep a nesting may be.
SIZES: Mapping[str, Limit] = MappingProxyType(
    {
        "file": Limit(
            "int", 0, 1 << 20, "a campaign file is a few kilobytes; 1 MiB is a generated file"
        ),
        "name": Limit(
            "int",
            1,
            100,
            "a name becomes a folder, a column or a key; file systems allow 255 bytes",
        ),
        "text": Limit(
            "int",
            0,
            10_000,
            "a description, a path or a fixed value is a line or a paragraph, not a document",
        ),
        "objectives": Limit(
            "int",
            2,
            4,
            "with more than four metrics nearly every trial is on the Pareto front, which then "
            "tells nothing",
        ),
        "space": Limit("int", 1, 1000, "Optuna's samplers model every parameter at every trial"),
        "space.*.choices": Limit("int", 1, 10_000, "a sampler weighs every choice at every trial"),
        "grid": GRID_POINTS,
        "gp_values": Limit(
            "int",
            1,
            1_000_000,
            "Optuna's GP sampler lists every value of each int and stepped parameter at every "
            "trial",
        ),
        "steps": STEPS,
        "depth": Limit(
            "int",
            0,
            32,
            "fixed values are configuration: lists and mappings a few levels deep",
        ),
    }
)

# ---- command-line flags (besides those that override a campaign field) ----

FLAGS: Mapping[str, Limit] = MappingProxyType(
    {
        "--num-cpus": Limit("int", 1, 4096, "the embedded Ray runs on this one machine"),
        "--num-gpus": Limit("number", 0, 256, "the embedded Ray runs on this one machine"),
        "--usd-per-gpu-hour": Limit(
            "number", 0, 1000, "the dearest GPU in the shipped catalog costs about 12 USD/h"
        ),
        "--budget-usd": USD,
        "--gpus-per-trial": Limit(
            "number",
            RESOURCE_UNIT,
            GPU.high * WORKERS.high,
            "resources.gpu per worker times resources.workers is at most 16 x 1,024",
        ),
        "--max-instances": Limit(
            "int", 1, 1000, "a recommendation prices up to this many machines of each type"
        ),
        "--provision": Limit(
            "duration",
            MIN_DURATION_S,
            86400,
            "booting a machine and running its setup takes minutes, not days",
        ),
        "--samples-per-s": Limit(
            "number",
            0,
            1e9,
            "a billion training samples a second on one GPU is beyond any model",
            low_open=True,
        ),
        "--flops-per-sample": Limit(
            "number",
            0,
            1e18,
            "a 175-billion-parameter model's 2,048-token sample takes about 2e15",
            low_open=True,
        ),
        "--top": Limit("int", 1, TRIALS.high, "a run has at most 100,000 trials"),
        "--non-scaling-share": Limit(
            "number", 0, 1 - 1e-9, "a share of the measured time, below 1"
        ),
    }
)

# ---- catalogs (GPU and instance CSV files) ----

_PRICE = Limit(
    "number",
    0,
    NODE_USD_PER_HOUR.high,
    "the dearest machine in the shipped catalog costs about 100 USD/h",
    low_open=True,
)
CATALOG: Mapping[str, Limit] = MappingProxyType(
    {
        "gpu_count": Limit("int", 1, GPU.high, "the largest machines hold 16 GPUs"),
        "vcpus": Limit("int", 0, 4096, "the largest machines have under 1,000 vCPUs"),
        "memory_gib": Limit("number", 0, 65536, "the largest machines have 32 TiB of memory"),
        "ondemand_usd_per_hour": _PRICE,
        "spot_usd_per_hour": _PRICE,
        # gpus.csv
        "gpu.memory_gib": Limit(
            "number", 0, 1024, "the largest GPUs have under 300 GiB", low_open=True
        ),
        "mem_bw_gb_s": Limit(
            "number",
            0,
            100_000,
            "the fastest GPU memory moves under 10,000 GB/s",
            low_open=True,
        ),
        "tflops": Limit(
            "number",
            0,
            100_000,
            "the fastest GPUs do a few thousand dense TFLOP/s",
            low_open=True,
        ),
        "tdp_w": Limit("number", 0, 10_000, "the hungriest GPUs draw about 1,000 W", low_open=True),
    }
)

# ---- profiles (JSON files from `tuner profile` or a run folder) ----

_MEASURED_S = Limit(
    "number", 0, _YEAR_S, "a trial is measured within a campaign, which lasts under a year"
)
PROFILE: Mapping[str, Limit] = MappingProxyType(
    {
        "trials": Limit("int", 1, TRIALS.high, "it is at most budget.trials"),
        "trials[].epochs": EPOCHS,
        "trials[].epoch_s": Limit(
            "number",
            0,
            _YEAR_S,
            "an epoch is measured within a campaign, which lasts under a year",
            low_open=True,
        ),
        "trials[].startup_s": _MEASURED_S,
        "trials[].total_s": _MEASURED_S,
        "samples_per_s": FLAGS["--samples-per-s"],
        "flops_per_sample": FLAGS["--flops-per-sample"],
        "bytes_per_sample": Limit(
            "number", 0, 1e15, "a petabyte moved per training sample is beyond any model"
        ),
        "ops_per_batch": Limit(
            "number", 0, 1e9, "a billion kernel launches per batch is beyond any model"
        ),
        "weight_bytes_per_batch": Limit(
            "number", 0, 1e15, "a petabyte of weights read per batch is beyond any model"
        ),
        "param_count": Limit(
            "number", 0, 1e13, "ten trillion parameters is beyond any model trained today"
        ),
        "est_mem_gib": Limit("number", 0, 1e6, "no GPU has a million GiB"),
        "peak_mem_gib": Limit("number", 0, 1e6, "no GPU has a million GiB"),
        "batch_size": Limit("number", 0, 1e9, "a billion samples per batch is a typo"),
        "grad_accum": Limit("number", 0, 1e6, "a million accumulated steps is a typo"),
        "train_samples": Limit("number", 0, 1e13, "ten trillion samples per epoch is a typo"),
        "workers": WORKERS,
        "step_time_s": _MEASURED_S,
        "epoch_time_s": _MEASURED_S,
        "train_time_s": _MEASURED_S,
        "data_wait_share": Limit("number", 0, 1, "a share of the training time"),
    }
)


def within(limit: Limit, value: float) -> bool:
    """Whether ``value`` is a finite number in ``limit``'s range (huge ints included)."""
    try:
        return math.isfinite(value) and limit.allows(value)
    except OverflowError:  # an int beyond the float range
        return False
