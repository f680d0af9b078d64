"""The environment a campaign sets for Tune while it runs, and gives back (no Ray needed)."""

from __future__ import annotations

import os

import optuna
import pytest

from tests.conftest import tiny_digits_campaign
from tuner._ray.build import campaign_environment, snapshot_period_s
from tuner.spec import CampaignSpec, parse_campaign

PERIOD = "TUNE_GLOBAL_CHECKPOINT_S"


def test_snapshot_period_is_a_second_for_small_campaigns_and_grows_with_large_ones() -> None:
    assert snapshot_period_s(1) == 1.0
    assert snapshot_period_s(16) == 1.0
    assert snapshot_period_s(64) == 4.0
    assert snapshot_period_s(1000) == pytest.approx(62.5)


def _spec(trials: int) -> CampaignSpec:
    return parse_campaign(tiny_digits_campaign(budget={"trials": trials}), check_trainable=False)


def test_each_campaign_sets_its_own_period_but_a_user_value_stays(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(PERIOD, raising=False)
    with campaign_environment(_spec(64)):
        assert os.environ[PERIOD] == "4"
    with campaign_environment(_spec(16)):
        assert os.environ[PERIOD] == "1"  # the next campaign's own period

    monkeypatch.setenv(PERIOD, "30")  # the user's
    with campaign_environment(_spec(64)):
        assert os.environ[PERIOD] == "30"
    assert os.environ[PERIOD] == "30"


def test_the_callers_environment_and_optuna_verbosity_come_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key in (PERIOD, "TUNE_DISABLE_STRICT_METRIC_CHECKING", "RAY_AIR_NEW_OUTPUT"):
        monkeypatch.delenv(key, raising=False)
    before = dict(os.environ)
    optuna.logging.set_verbosity(optuna.logging.DEBUG)
    try:
        with campaign_environment(_spec(8)):
            assert os.environ["TUNE_DISABLE_STRICT_METRIC_CHECKING"] == "1"
            assert optuna.logging.get_verbosity() == optuna.logging.WARNING
        assert dict(os.environ) == before
        assert optuna.logging.get_verbosity() == optuna.logging.DEBUG
    finally:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
