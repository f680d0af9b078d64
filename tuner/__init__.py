"""tuner: hyperparameter tuning campaigns for PyTorch on Ray Tune, Optuna and ASHA, for a
known amount of money, and which GPU instances to rent for it.

The Python API (the CLI is a thin layer over it)::

    import tuner

    campaign = tuner.load_campaign("search_spaces/default.yaml")
    result = tuner.run(campaign, trials=8, max_epochs=3)
    print(result.status, result.best.value, result.best.config)

    result = tuner.open_run("runs/digits-cnn")      # any run folder, ended or not
    result = tuner.resume("runs/digits-cnn")        # continue a stopped campaign
    advice = tuner.recommend(campaign, budget_usd=50, deadline="2h")

Bad input raises a :class:`TunerError` subclass that names the file, the key path, the
value, what is allowed and the closest valid name. See docs/api.md.

Importing tuner is cheap (every trial imports it, for the trainable contract): the names
below load on first use, and Ray and torch only when a campaign runs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tuner._api import (
        load_campaign,
        predict,
        profile,
        recommend,
        resume,
        run,
    )
    from tuner.cost import Prediction, Profile
    from tuner.errors import (
        ClusterError,
        FileError,
        RunFolderError,
        SpecError,
        SpecErrors,
        TunerError,
        TunerWarning,
    )
    from tuner.finish import Status
    from tuner.results import (
        Best,
        CostCheck,
        ParetoPoint,
        Result,
        Spend,
        TrialRow,
        open_run,
    )
    from tuner.spec import CampaignSpec

# Where each public name is defined (loaded on first use: see the module docstring).
_HOMES = {
    "Best": "tuner.results",
    "CampaignSpec": "tuner.spec",
    "ClusterError": "tuner.errors",
    "CostCheck": "tuner.results",
    "FileError": "tuner.errors",
    "ParetoPoint": "tuner.results",
    "Prediction": "tuner.cost",
    "Profile": "tuner.cost",
    "Result": "tuner.results",
    "RunFolderError": "tuner.errors",
    "Spend": "tuner.results",
    "SpecError": "tuner.errors",
    "SpecErrors": "tuner.errors",
    "Status": "tuner.finish",
    "TrialRow": "tuner.results",
    "TunerError": "tuner.errors",
    "TunerWarning": "tuner.errors",
    "load_campaign": "tuner._api",
    "open_run": "tuner.results",
    "predict": "tuner._api",
    "profile": "tuner._api",
    "recommend": "tuner._api",
    "resume": "tuner._api",
    "run": "tuner._api",
}

__all__ = [
    "Best",
    "CampaignSpec",
    "ClusterError",
    "CostCheck",
    "FileError",
    "ParetoPoint",
    "Prediction",
    "Profile",
    "Result",
    "RunFolderError",
    "SpecError",
    "SpecErrors",
    "Spend",
    "Status",
    "TrialRow",
    "TunerError",
    "TunerWarning",
    "load_campaign",
    "open_run",
    "predict",
    "profile",
    "recommend",
    "resume",
    "run",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'tuner' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
