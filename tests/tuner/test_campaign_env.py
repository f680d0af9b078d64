"""The environment a campaign sets for Tune before it starts (no Ray needed)."""

from __future__ import annotations

import pytest

from tuner._ray import build
from tuner._ray.build import snapshot_period_s


def test_snapshot_period_is_a_second_for_small_campaigns_and_grows_with_large_ones() -> None:
    assert snapshot_period_s(1) == 1.0
    assert snapshot_period_s(16) == 1.0
    assert snapshot_period_s(64) == 4.0
    assert snapshot_period_s(1000) == pytest.approx(62.5)


def test_each_campaign_sets_its_own_period_but_a_user_value_stays(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = "TUNE_GLOBAL_CHECKPOINT_S"
    monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(build, "_ENV_SET_HERE", {})
    build._set_env_unless_user_set(key, "4")
    build._set_env_unless_user_set(key, "1")
    assert build.os.environ[key] == "1"  # ours: replaced by the next campaign's value

    monkeypatch.setenv(key, "30")  # the user's
    build._set_env_unless_user_set(key, "2")
    assert build.os.environ[key] == "30"
