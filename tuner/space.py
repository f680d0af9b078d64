"""Translate a :class:`tuner.spec.Space` into Optuna: define-by-run, grids, samplers.

The only module of the spec layer that imports Optuna; it does not import Ray. Ray's
``OptunaSearch(space=DefineByRun(space))`` calls :class:`DefineByRun` with a trial that
records every ``suggest_*`` call and merges the returned constants into the config.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, Protocol

import optuna

from tuner.spec import (
    CategoricalParam,
    FixedParam,
    FloatParam,
    IntParam,
    SamplerSpec,
    SamplerType,
    Space,
    thaw,
)

__all__ = ["DefineByRun", "grid_space", "make_sampler", "sample_configs", "suggest"]

_logger = logging.getLogger(__name__)
DEFAULT_STARTUP_TRIALS = 10


class TrialLike(Protocol):
    """The part of ``optuna.trial.Trial`` used here (Ray passes a recording wrapper)."""

    def suggest_float(
        self, name: str, low: float, high: float, *, step: float | None = ..., log: bool = ...
    ) -> float: ...

    def suggest_int(
        self, name: str, low: int, high: int, *, step: int = ..., log: bool = ...
    ) -> int: ...

    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any: ...


def suggest(trial: TrialLike, space: Space) -> dict[str, Any]:
    """Suggest every active parameter of ``space`` on ``trial``.

    Parameters are visited in topological order; one whose ``when`` conditions do not
    hold for the values chosen so far is skipped (and so absent from the result).

    Args:
        trial: An Optuna trial, or anything with its ``suggest_*`` methods.
        space: The search space.

    Returns:
        The full config of active parameters: suggested values and fixed values
        (as plain lists and dicts).
    """
    config: dict[str, Any] = {}
    for param in space:
        if not param.is_active(config):
            continue
        if isinstance(param, FloatParam):
            config[param.name] = trial.suggest_float(
                param.name, param.low, param.high, step=param.step, log=param.log
            )
        elif isinstance(param, IntParam):
            config[param.name] = trial.suggest_int(
                param.name, param.low, param.high, step=param.step, log=param.log
            )
        elif isinstance(param, CategoricalParam):
            config[param.name] = trial.suggest_categorical(param.name, list(param.choices))
        else:
            config[param.name] = thaw(param.value)
    return config


class DefineByRun:
    """Picklable define-by-run function for ``ray.tune.search.optuna.OptunaSearch``.

    Args:
        space: The search space to suggest from.
    """

    def __init__(self, space: Space) -> None:
        self.space = space

    def __call__(self, trial: TrialLike) -> dict[str, Any]:
        """Suggest active parameters on ``trial``; return the active fixed values.

        Ray records the suggested values itself and merges the returned constants in.
        """
        config = suggest(trial, self.space)
        return {
            name: value
            for name, value in config.items()
            if isinstance(self.space[name], FixedParam)
        }

    def __repr__(self) -> str:
        return f"DefineByRun({list(self.space.names)})"


def sample_configs(space: Space, n: int, seed: int | None = None) -> list[dict[str, Any]]:
    """Draw ``n`` random valid configs from an in-memory Optuna study (no Ray).

    Args:
        space: The search space.
        n: Number of configs.
        seed: Seed of Optuna's RandomSampler.

    Returns:
        ``n`` configs as :func:`suggest` returns them.
    """
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    configs = []
    for _ in range(n):
        trial = study.ask()
        configs.append(suggest(trial, space))
        study.tell(trial, 0.0)
    return configs


def _float_grid(low: float, high: float, step: float) -> list[float]:
    # Decimal arithmetic keeps 0.1 + 2 * 0.1 at 0.3, not 0.30000000000000004.
    low_d, step_d = Decimal(repr(low)), Decimal(repr(step))
    count = round((high - low) / step) + 1
    return [float(low_d + i * step_d) for i in range(count)]


def grid_space(space: Space) -> dict[str, list[Any]]:
    """Every value of every searched parameter, for ``optuna.samplers.GridSampler``.

    Fixed parameters are left out. Conditional parameters are included: the grid is
    the product over all of them, and an inactive one is simply not asked for.

    Raises:
        ValueError: A float parameter has no step (campaign validation prevents this
            for ``sampler: grid``).
    """
    grid: dict[str, list[Any]] = {}
    for param in space:
        if isinstance(param, FloatParam):
            if param.step is None:
                raise ValueError(f"float parameter {param.name!r} needs a step for a grid")
            grid[param.name] = _float_grid(param.low, param.high, param.step)
        elif isinstance(param, IntParam):
            grid[param.name] = list(range(param.low, param.high + 1, param.step))
        elif isinstance(param, CategoricalParam):
            grid[param.name] = list(param.choices)
    return grid


def make_sampler(spec: SamplerSpec, space: Space) -> optuna.samplers.BaseSampler:
    """Build the Optuna sampler a campaign asks for.

    TPE is multivariate and grouped (it models conditional parameters jointly) with a
    constant liar for parallel trials; it handles several objectives (MOTPE), as NSGA-II
    (``startup_trials`` is its population size), random, grid, QMC and GP do. Samplers
    that model a fixed joint space (CMA-ES, GP, QMC) fall back to random sampling for
    categorical or conditional parameters.

    Args:
        spec: The campaign's sampler settings.
        space: The search space (the grid sampler enumerates it).

    Returns:
        A new sampler.
    """
    startup = spec.startup_trials if spec.startup_trials is not None else DEFAULT_STARTUP_TRIALS
    if spec.type in (SamplerType.CMAES, SamplerType.GP, SamplerType.QMC):
        _warn_partial_support(spec.type, space)
    with warnings.catch_warnings():
        # group=True (TPE) and QMCSampler are experimental in Optuna; we chose them.
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if spec.type is SamplerType.TPE:
            return optuna.samplers.TPESampler(
                seed=spec.seed,
                multivariate=True,
                group=True,
                constant_liar=True,
                n_startup_trials=startup,
            )
        if spec.type is SamplerType.RANDOM:
            return optuna.samplers.RandomSampler(seed=spec.seed)
        if spec.type is SamplerType.GRID:
            return optuna.samplers.GridSampler(grid_space(space), seed=spec.seed)
        if spec.type is SamplerType.CMAES:
            return optuna.samplers.CmaEsSampler(
                seed=spec.seed, n_startup_trials=startup, warn_independent_sampling=False
            )
        if spec.type is SamplerType.GP:
            return optuna.samplers.GPSampler(
                seed=spec.seed, n_startup_trials=startup, warn_independent_sampling=False
            )
        if spec.type is SamplerType.NSGA2:
            # startup_trials is its population: the first generation is random.
            return optuna.samplers.NSGAIISampler(seed=spec.seed, population_size=startup)
        return optuna.samplers.QMCSampler(seed=spec.seed, warn_independent_sampling=False)


def _warn_partial_support(kind: SamplerType, space: Space) -> None:
    """Say once, at build time, which parameters a sampler will only sample randomly."""
    random_only = [
        p.name
        for p in space
        if not isinstance(p, FixedParam)
        and (p.when or (isinstance(p, CategoricalParam) and kind is SamplerType.CMAES))
    ]
    if random_only:
        _logger.warning(
            "sampler %s samples %s at random (conditional%s parameters are outside its model)",
            kind.value,
            ", ".join(random_only),
            " or categorical" if kind is SamplerType.CMAES else "",
        )
