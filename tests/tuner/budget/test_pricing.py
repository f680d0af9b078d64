"""Node prices from labels, GPUs and a tiny synthetic catalog."""

from __future__ import annotations

from datetime import date

import pytest

from tests.tuner.cost._synthetic import gpu
from tuner.budget import NodePricer, PricingError
from tuner.cost import Instance


def _row(cloud: str, region: str, name: str, gpu_name: str, n: int, od: float, spot: float | None):
    return Instance(
        cloud, region, name, gpu_name, n, 8, 32.0, od, spot, "instance", "test", date(2026, 1, 1)
    )


GPUS = {"A100-40GB": gpu("A100-40GB", 1555, 156), "A100-80GB": gpu("A100-80GB", 2039, 156)}
ROWS = [
    _row("aws", "us-east-1", "p.8x", "A100-40GB", 8, 32.0, 9.6),  # $4.00 per GPU on demand
    _row("aws", "us-west-2", "p.8x", "A100-40GB", 8, 24.0, None),  # same type, cheaper region
    _row("gcp", "us-central1", "a2.1x", "A100-80GB", 1, 3.5, 1.0),  # $3.50 per GPU
]


@pytest.fixture
def pricer() -> NodePricer:
    return NodePricer(ROWS, GPUS, default_usd_per_hour=0.25)


def test_rate_label_wins_over_everything(pricer: NodePricer) -> None:
    rate = pricer.price({"GPU": 8, "accelerator_type:A100": 1}, {"tuner.io/usd-per-hour": "1.37"})
    assert rate.usd_per_hour == 1.37
    assert rate.source == "label tuner.io/usd-per-hour"


def test_instance_label_with_region_picks_that_row(pricer: NodePricer) -> None:
    labels = {"tuner.io/instance-type": "p.8x", "tuner.io/region": "us-east-1"}
    assert pricer.price({}, labels).usd_per_hour == 32.0


def test_instance_label_without_region_takes_the_cheapest_region(pricer: NodePricer) -> None:
    rate = pricer.price({}, {"tuner.io/instance-type": "p.8x"})
    assert rate.usd_per_hour == 24.0
    assert "cheapest of its regions" in rate.source


def test_spot_market_label_uses_spot_price(pricer: NodePricer) -> None:
    labels = {"tuner.io/instance-type": "p.8x", "tuner.io/region": "us-east-1"}
    assert pricer.price({}, {**labels, "tuner.io/market": "spot"}).usd_per_hour == 9.6


def test_accelerator_family_priced_per_gpu_at_cheapest_model(pricer: NodePricer) -> None:
    # "A100" names both models; the cheapest per GPU of either is us-west-2's p.8x at
    # $24 / 8 = $3.00 (gcp's one-GPU A100-80GB is $3.50).
    rate = pricer.price({"GPU": 2, "accelerator_type:A100": 1}, {})
    assert rate.usd_per_hour == pytest.approx(6.0)
    assert rate.source == "catalog: cheapest A100-40GB per GPU (aws p.8x) x 2"


def test_node_nothing_prices_gets_the_default(pricer: NodePricer) -> None:
    assert pricer.price({"CPU": 4}, {}).usd_per_hour == 0.25
    unknown = pricer.price({"GPU": 1, "accelerator_type:Z9": 1}, {})
    assert unknown.usd_per_hour == 0.25
    assert "no instance with Z9" in unknown.source


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        ({"tuner.io/usd-per-hour": "cheap"}, "must be a number >= 0"),
        ({"tuner.io/usd-per-hour": "-1"}, "must be a number >= 0"),
        ({"tuner.io/instance-type": "p.9x"}, "no such instance in the catalog. Closest: p.8x"),
        ({"tuner.io/market": "reserved"}, "must be spot or on-demand"),
    ],
)
def test_bad_labels_are_clear_errors(
    pricer: NodePricer, labels: dict[str, str], message: str
) -> None:
    with pytest.raises(PricingError, match="To fix") as info:
        pricer.price({}, labels)
    assert message in str(info.value)
