"""Cost model: catalogs, cross-GPU throughput prediction, ASHA campaign work, recommendations.

Pure modules: no Ray or torch imports, so importing this package takes milliseconds.
"""

from __future__ import annotations

from tuner.cost._catalog import (
    Catalog,
    CatalogWarning,
    GpuSpec,
    Instance,
    find_gpu,
    load_catalog,
    load_gpus,
    load_instances,
)
from tuner.cost._predict import (
    PRECISIONS,
    Calibration,
    Prediction,
    StepParts,
    load_calibration,
    peak_tflops,
    predict_throughput,
    spec_ratio_baseline,
)
from tuner.cost._profile import Profile, TrialProfile, load_profile, profile_from_run
from tuner.cost._profile_spec import profile_spec
from tuner.cost._recommend import (
    CampaignNeeds,
    InstanceOption,
    OptionPlan,
    Recommendation,
    recommend,
)
from tuner.cost._work import (
    AshaGeometry,
    CampaignCost,
    SpotRisk,
    WorkEstimate,
    cost_to_finish,
    estimate_work,
    naive_trial_epochs,
    price_work,
)

__all__ = [
    "PRECISIONS",
    "AshaGeometry",
    "Calibration",
    "CampaignCost",
    "CampaignNeeds",
    "Catalog",
    "CatalogWarning",
    "GpuSpec",
    "Instance",
    "InstanceOption",
    "OptionPlan",
    "Prediction",
    "Profile",
    "Recommendation",
    "SpotRisk",
    "StepParts",
    "TrialProfile",
    "WorkEstimate",
    "cost_to_finish",
    "estimate_work",
    "find_gpu",
    "load_calibration",
    "load_catalog",
    "load_gpus",
    "load_instances",
    "load_profile",
    "naive_trial_epochs",
    "peak_tflops",
    "predict_throughput",
    "price_work",
    "profile_from_run",
    "profile_spec",
    "recommend",
    "spec_ratio_baseline",
]
