"""The closed sets of a campaign file: the direction, the sampler and the scheduler."""

from __future__ import annotations

from enum import Enum

__all__ = ["Mode", "SamplerType", "SchedulerType"]


class Mode(str, Enum):
    """Whether the campaign minimizes or maximizes its metric."""

    MIN = "min"
    MAX = "max"


class SamplerType(str, Enum):
    """Optuna sampler that proposes configurations."""

    TPE = "tpe"
    RANDOM = "random"
    GRID = "grid"
    CMAES = "cmaes"
    GP = "gp"
    QMC = "qmc"
    NSGA2 = "nsga2"


class SchedulerType(str, Enum):
    """Ray Tune trial scheduler: ASHA stops poor trials early, FIFO runs all to the end."""

    ASHA = "asha"
    FIFO = "fifo"
