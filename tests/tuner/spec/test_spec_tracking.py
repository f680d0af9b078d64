"""The tracking: section: its shape, its errors, its round trip and the flags over it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import tiny_digits_campaign
from tuner.errors import SpecError
from tuner.spec import MlflowTracking, Tracking, WandbMode, WandbTracking, parse_campaign
from tuner.spec._tracking import tracking_flags


def _spec(tracking: Any) -> Any:
    return parse_campaign(tiny_digits_campaign(tracking=tracking), check_trainable=False)


def test_both_trackers_parse_and_round_trip_through_the_campaign_file() -> None:
    spec = _spec(
        {
            "mlflow": {"tracking_uri": "sqlite:///m.db", "experiment": "e"},
            "wandb": {"project": "p", "mode": "offline", "group": "g", "dir": "/w"},
        }
    )
    assert spec.tracking == Tracking(
        mlflow=MlflowTracking("sqlite:///m.db", "e"),
        wandb=WandbTracking("p", WandbMode.OFFLINE, "g", "/w"),
    )
    assert parse_campaign(spec.to_dict(), check_trainable=False) == spec
    assert spec.to_dict()["tracking"]["wandb"]["mode"] == "offline"


def test_a_bare_mlflow_key_means_the_run_folders_store_and_wandb_defaults_online() -> None:
    spec = _spec({"mlflow": None, "wandb": {"project": "p"}})
    assert spec.tracking == Tracking(MlflowTracking(), WandbTracking("p", WandbMode.ONLINE))
    assert parse_campaign(spec.to_dict(), check_trainable=False) == spec
    assert "tracking" not in _spec(None).to_dict()


@pytest.mark.parametrize(
    ("tracking", "message"),
    [
        (
            {"mlfow": {}},
            "<dict>: tracking.mlfow: unknown key (allowed mlflow, wandb) Did you mean 'mlflow'?",
        ),
        ({"wandb": {"mode": "offline"}}, "<dict>: tracking.wandb.project: required key is missing"),
        (
            {"wandb": {"project": "p", "mode": "ofline"}},
            "<dict>: tracking.wandb.mode: unknown W&B mode (got 'ofline'; allowed online, "
            "offline) Did you mean 'offline'?",
        ),
        (
            {"mlflow": {"tracking_uri": "sqlit:///m.db"}},
            "<dict>: tracking.mlflow.tracking_uri: unknown MLflow tracking URI scheme (got "
            "'sqlit:///m.db';",
        ),
        ("mlflow", "<dict>: tracking: must be a mapping (got 'mlflow')"),
    ],
)
def test_bad_sections_name_the_key_the_value_and_what_is_allowed(
    tracking: Any, message: str
) -> None:
    with pytest.raises(SpecError) as err:
        _spec(tracking)
    assert str(err.value).startswith(message)


def test_flags_turn_a_tracker_on_and_override_the_files_values() -> None:
    base = Tracking(wandb=WandbTracking("p", WandbMode.ONLINE, group="g"))
    assert tracking_flags(base) is base
    flagged = tracking_flags(base, mlflow_experiment="e", wandb_mode="offline")
    assert flagged == Tracking(
        mlflow=MlflowTracking(None, "e"), wandb=WandbTracking("p", WandbMode.OFFLINE, group="g")
    )
    assert tracking_flags(None, wandb_project="q") == Tracking(wandb=WandbTracking("q"))


def test_bad_flags_name_the_flag() -> None:
    with pytest.raises(SpecError, match=r"<cli>: --wandb-mode: needs a W&B project"):
        tracking_flags(None, wandb_mode="offline")
    with pytest.raises(SpecError, match=r"<cli>: --mlflow-uri: unknown MLflow tracking URI"):
        tracking_flags(None, mlflow_uri="mlfow://x")
