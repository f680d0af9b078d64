"""A synthetic end of a campaign, as the digits campaign ends: ten top trials with seven
parameters, predicted vs actual with no profile, a ledger, a budget that ran out. Printed by
tests/tuner/test_closing.py and, in an 80-column tmux pane, by tests/tuner/live_pane.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuner.finish import Status
from tuner.spec import CampaignSpec, load_campaign

ROOT = Path(__file__).resolve().parents[2]
RUN_DIR = Path("/tmp/a-long-runs-folder-name/for-the-team/digits-cnn-2026-12-08")


def sample_spec() -> CampaignSpec:
    return load_campaign(ROOT / "search_spaces" / "default.yaml", check_trainable=False)


def _row(i: int) -> dict[str, Any]:
    return {
        "number": 20 + i,
        "tune_trial_id": f"b8b1{i:04d}",
        "state": "COMPLETE" if i < 8 else "PRUNED",
        "value": 0.99 - i / 1000,
        "epochs": 9 if i < 8 else 3,
        "reason": None,
        "params": {
            "batch_size": 32,
            "channels": 24 + 8 * (i % 3),
            "dropout": 0.1433 + i / 97,
            "lr": 0.006487 / (i + 1),
            "optimizer": "adamw" if i % 4 else "sgd",
            "weight_decay": 1.769e-05 * (i + 1),
            **({"momentum": 0.9} if i % 4 == 0 else {}),
        },
    }


def sample_summary() -> dict[str, Any]:
    top = [_row(i) for i in range(10)]
    return {
        "metric": "val_acc",
        "top": top,
        "best": {"value": top[0]["value"], "tune_trial_id": "b8b10000", "state": "COMPLETE"},
        "status": Status.BUDGET_EXHAUSTED,
    }


def sample_cost() -> dict[str, Any]:
    return {
        "predicted": {"trial_epochs": 122.0, "trial_s": None, "gpus_per_trial": 0},
        "actual": {"trial_epochs": 184.0, "trial_s": 160.8},
        "error": {"trial_epochs": 122.0 / 184.0 - 1.0},
    }


def sample_budget() -> dict[str, Any]:
    return {
        "limits": {"usd": 5.0, "gpu_hours": 2.0},
        "usd": 5.01,
        "node_hours": 0.0262,
        "nodes": 1,
        "gpu_hours": 1.37,
        "trial_gpu_hours": 1.21,
        "gpu_node_idle_share": 0.12,
        "exhausted": "spent $5.01 of the $5.00 budget: running trials checkpointed and stopped",
    }
