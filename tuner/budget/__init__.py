"""Money on a cluster: node prices, the spend ledger and the budget guard's arithmetic.

Pure modules (no Ray, no torch); the Ray glue that feeds them is ``tuner._ray.guard``.
"""

from __future__ import annotations

from tuner.budget._capacity import (
    NodeType,
    bundles_per_node,
    capacity,
    fits,
    format_request,
    infeasible,
    node_resources,
    node_types_from_config,
    pending_reason,
)
from tuner.budget._forecast import Forecast
from tuner.budget._goal import Goal, Goals
from tuner.budget._ledger import (
    LEDGER_FILE,
    Ledger,
    NodeRecord,
    NodeSeen,
    TrialRecord,
    format_spend,
    read_ledger,
)
from tuner.budget._pricing import NodePricer, NodeRate, PricingError, make_pricer
from tuner.budget._verdict import (
    Limits,
    Outlook,
    Usage,
    Verdict,
    affordable_slots,
    assess,
    expected_epochs_left,
)

__all__ = [
    "LEDGER_FILE",
    "Forecast",
    "Goal",
    "Goals",
    "Ledger",
    "Limits",
    "NodePricer",
    "NodeRate",
    "NodeRecord",
    "NodeSeen",
    "NodeType",
    "Outlook",
    "PricingError",
    "TrialRecord",
    "Usage",
    "Verdict",
    "affordable_slots",
    "assess",
    "bundles_per_node",
    "capacity",
    "expected_epochs_left",
    "fits",
    "format_request",
    "format_spend",
    "infeasible",
    "make_pricer",
    "node_resources",
    "node_types_from_config",
    "pending_reason",
    "read_ledger",
]
