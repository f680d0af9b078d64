"""Instance recommendation against a tiny synthetic catalog, one comment per row."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tuner.cost._recommend import (
    CampaignNeeds,
    InstanceOption,
    OptionPlan,
    Recommendation,
    recommend,
)
from tuner.cost._work import AshaGeometry
from tuner.report._recommendation import render_html


def _option(
    name: str, *, usd: float, epoch_s: float, mem: float = 80.0, gpus: int = 1,
    spot: float | None = None,
) -> InstanceOption:  # fmt: skip
    return InstanceOption(name, "test", "r1", "G", gpus, usd, spot, mem, epoch_s)


OPTIONS = [
    # Slow but cheap per campaign: the cheapest pick when time allows; Pareto.
    _option("slow-cheap", usd=1.0, epoch_s=360.0, spot=0.3),
    # Fast and pricey: the fastest pick; Pareto; no spot price (excluded on spot).
    _option("fast-pricey", usd=10.0, epoch_s=60.0),
    # Slower and pricier than fast-pricey: dominated, never on the Pareto front.
    _option("dominated", usd=12.0, epoch_s=200.0, spot=4.0),
    # Cheapest of all, but 8 GiB is below the 16 GiB a trial needs: excluded.
    _option("small-mem", usd=0.5, epoch_s=100.0, mem=8.0, spot=0.1),
]
NEEDS = CampaignNeeds(AshaGeometry(8, 4, 1, 2), startup_s=0.0, mem_gib_per_gpu=16.0)


def _run(**kwargs: Any) -> Recommendation:
    kwargs.setdefault("budget_usd", 100.0)
    return recommend(OPTIONS, NEEDS, runs=60, **kwargs)


def _plan(rec: Recommendation, name: str) -> OptionPlan:
    return next(p for p in rec.plans if p.option.name == name)


def test_pareto_front_and_picks() -> None:
    rec = _run()
    assert [p.option.name for p in rec.plans if p.pareto] == ["slow-cheap", "fast-pricey"]
    slow, fast = _plan(rec, "slow-cheap"), _plan(rec, "fast-pricey")
    assert slow.usd < fast.usd and fast.wall_h < slow.wall_h
    assert rec.cheapest_within_deadline == "slow-cheap"
    assert rec.fastest_within_budget == "fast-pricey"
    assert all(p.trials_bought == 8 for p in rec.plans if p.fits)


def test_memory_that_does_not_fit_is_excluded() -> None:
    plan = _plan(_run(), "small-mem")
    assert not plan.fits and not plan.pareto
    assert plan.reason == "needs 16 GiB > 8 GiB"
    assert plan.usd is None and plan.wall_h is None


def test_deadline_adds_machines_then_picks_by_cost() -> None:
    slow_1 = _plan(_run(), "slow-cheap")
    rec = _run(deadline_h=slow_1.wall_h * 0.6, max_instances=4)
    slow = _plan(rec, "slow-cheap")
    assert slow.instances >= 2 and slow.meets_deadline
    assert slow.workers == slow.instances
    assert rec.cheapest_within_deadline == "slow-cheap"


def test_deadline_that_nothing_meets() -> None:
    rec = _run(deadline_h=0.01, max_instances=1)
    assert rec.cheapest_within_deadline is None
    assert not any(p.meets_deadline for p in rec.plans)
    assert rec.fastest_within_budget == "fast-pricey"  # the budget pick ignores deadlines


def test_budget_that_does_not_buy_the_campaign() -> None:
    full = _run()
    slow_usd, fast_usd = _plan(full, "slow-cheap").usd, _plan(full, "fast-pricey").usd
    budget = (slow_usd + fast_usd) / 2
    rec = _run(budget_usd=budget)
    fast = _plan(rec, "fast-pricey")
    assert not fast.within_budget
    assert 0 < fast.trials_bought < 8
    assert 0 < fast.trial_epochs_bought < rec.trial_epochs
    assert rec.fastest_within_budget == "slow-cheap"
    broke = _run(budget_usd=0.01)
    assert broke.fastest_within_budget is None
    assert all(p.trials_bought == 0 for p in broke.plans)


def test_spot_excludes_options_without_a_spot_price() -> None:
    rec = _run(spot=True)
    assert _plan(rec, "fast-pricey").reason == "no spot price"
    assert _plan(rec, "slow-cheap").usd < _plan(_run(), "slow-cheap").usd
    assert rec.fastest_within_budget == "dominated"


def test_bad_budget_is_rejected() -> None:
    with pytest.raises(ValueError, match="budget_usd > 0"):
        _run(budget_usd=0.0)


def test_outputs_json_table_markdown_html() -> None:
    rec = _run(deadline_h=5.0)
    data = json.loads(rec.to_json())
    assert [p["option"]["name"] for p in data["plans"]] == [o.name for o in OPTIONS]
    assert data["cheapest_within_deadline"] == "slow-cheap"
    table, markdown = rec.table(), rec.markdown()
    for option in OPTIONS:
        assert option.name in table
        assert f"| {option.name} |" in markdown
    page = render_html(rec)
    assert '<img id="cost-vs-time" src="data:image/png;base64,' in page
    assert "Cheapest within the deadline: slow-cheap" in page
    for option in OPTIONS:
        assert f"<td>{option.name}</td>" in page


def test_options_that_tie_on_the_pareto_front_are_plotted() -> None:
    # Found by fuzzing recommend's flags: two options with the same hours and dollars are both
    # on the front, and sorting the front compared their plans (TypeError).
    from tuner.report._recommendation import plot_png

    twins = [_option("twin-a", usd=2.0, epoch_s=60.0), _option("twin-b", usd=2.0, epoch_s=60.0)]
    rec = recommend(twins, NEEDS, budget_usd=100.0, runs=5)
    assert [p.pareto for p in rec.plans] == [True, True]
    assert plot_png(rec).startswith(b"\x89PNG")


def test_a_price_that_rounds_to_zero_dollars_is_plotted() -> None:
    # Found by trying the bounds: a catalog price of 5e-324 USD/h gives 0 dollars, and the
    # plot divided by the smallest cost to choose a log axis (ZeroDivisionError).
    from tuner.report._recommendation import plot_png

    options = [_option("free", usd=5e-324, epoch_s=60.0), _option("paid", usd=2.0, epoch_s=30.0)]
    rec = recommend(options, NEEDS, budget_usd=100.0, runs=5)
    assert _plan(rec, "free").usd == 0.0
    assert plot_png(rec).startswith(b"\x89PNG")
