"""What a Ray node costs per hour, from its labels, its GPUs and the price catalog.

Pure: takes a node's resources and labels as Ray reports them (``ray.nodes()``) and the
catalog's instances; imports neither Ray nor torch.

Lookup order, first match wins:

1. label ``tuner.io/usd-per-hour`` (a rented server, a contract price);
2. label ``tuner.io/instance-type`` (with ``tuner.io/cloud`` and ``tuner.io/region`` when
   the type exists in several) looked up in the catalog;
3. the node's ``accelerator_type:<GPU>`` resource: the catalog's cheapest on-demand (or
   spot) price per GPU of that model, times the node's GPUs;
4. the campaign's ``pricing.node_usd_per_hour`` (0 by default: a local run is free).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tuner.cost._catalog import (
    CatalogWarning,
    GpuSpec,
    Instance,
    gpu_name_tokens,
    load_catalog,
    resolve_gpu,
)
from tuner.errors import TunerError
from tuner.spec import CampaignSpec

RATE_LABEL = "tuner.io/usd-per-hour"
INSTANCE_LABEL = "tuner.io/instance-type"
CLOUD_LABEL = "tuner.io/cloud"
REGION_LABEL = "tuner.io/region"
MARKET_LABEL = "tuner.io/market"
ACCELERATOR_PREFIX = "accelerator_type:"


class PricingError(TunerError):
    """A node's price labels are wrong (an unknown instance type, a rate that is no number)."""


@dataclass(frozen=True, slots=True)
class NodeRate:
    """A node's price and where it came from (shown in the ledger and the report)."""

    usd_per_hour: float
    source: str


def _accelerator(resources: Mapping[str, float]) -> str | None:
    for key in resources:
        if key.startswith(ACCELERATOR_PREFIX):
            return key[len(ACCELERATOR_PREFIX) :]
    return None


class NodePricer:
    """Prices Ray nodes.

    Args:
        instances: Catalog instances (``load_catalog().instances``).
        gpus: Catalog GPU models, to resolve ``accelerator_type`` names such as ``A100``.
        default_usd_per_hour: Rate of a node nothing else prices.
        spot: Use spot prices where the catalog has them (a node labelled
            ``tuner.io/market: spot`` or ``on-demand`` overrides this).
    """

    def __init__(
        self,
        instances: Sequence[Instance],
        gpus: Mapping[str, GpuSpec],
        *,
        default_usd_per_hour: float = 0.0,
        spot: bool = False,
    ) -> None:
        self._instances = tuple(instances)
        self._gpus = gpus
        self._default = default_usd_per_hour
        self._spot = spot

    def price(self, resources: Mapping[str, float], labels: Mapping[str, str]) -> NodeRate:
        """The node's hourly rate.

        Raises:
            PricingError: A ``tuner.io/`` label is malformed or names an instance type the
                catalog lacks (with the closest names and how to fix it).
        """
        spot = self._market(labels)
        if RATE_LABEL in labels:
            return NodeRate(self._rate_label(labels[RATE_LABEL]), f"label {RATE_LABEL}")
        if INSTANCE_LABEL in labels:
            return self._by_instance(labels, spot)
        gpu = _accelerator(resources)
        count = resources.get("GPU", 0.0)
        if gpu is not None and count > 0:
            by_gpu = self._by_gpu(gpu, count, spot)
            if by_gpu is not None:
                return by_gpu
        source = "pricing.node_usd_per_hour"
        if gpu is not None:
            source += f" (the catalog has no instance with {gpu} GPUs)"
        return NodeRate(self._default, source)

    def _market(self, labels: Mapping[str, str]) -> bool:
        market = labels.get(MARKET_LABEL)
        if market is None:
            return self._spot
        if market not in ("spot", "on-demand"):
            raise PricingError(
                f"node label {MARKET_LABEL}={market!r}: must be spot or on-demand.\n"
                "  To fix: correct the label in the node type's labels in your cluster config."
            )
        return market == "spot"

    @staticmethod
    def _rate_label(raw: str) -> float:
        try:
            rate = float(raw)
        except ValueError:
            rate = math.nan
        if not math.isfinite(rate) or rate < 0:
            raise PricingError(
                f"node label {RATE_LABEL}={raw!r}: must be a number >= 0 (USD per hour).\n"
                f'  To fix: e.g. {RATE_LABEL}: "1.37" in the node type\'s labels.'
            )
        return rate

    def _by_instance(self, labels: Mapping[str, str], spot: bool) -> NodeRate:
        name = labels[INSTANCE_LABEL]
        rows = [i for i in self._instances if i.instance_type == name]
        for label, attr in ((CLOUD_LABEL, "cloud"), (REGION_LABEL, "region")):
            if label in labels and rows:
                rows = [i for i in rows if getattr(i, attr) == labels[label]]
        if not rows:
            import difflib

            names = sorted({i.instance_type for i in self._instances})
            close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
            keys = (CLOUD_LABEL, REGION_LABEL)
            where = ", ".join(f"{k}={labels[k]!r}" for k in keys if k in labels)
            hint = f" Closest: {', '.join(close)}." if close else ""
            raise PricingError(
                f"node label {INSTANCE_LABEL}={name!r}{' with ' + where if where else ''}: "
                f"no such instance in the catalog.{hint}\n"
                f"  To fix: correct the label, add the instance to a catalog file "
                f"(pricing.catalog), or label the node with {RATE_LABEL}."
            )
        row = min(rows, key=lambda i: self._row_rate(i, spot))
        rate = self._row_rate(row, spot)
        market = "spot" if spot and row.spot_usd_per_hour is not None else "on-demand"
        many = " (cheapest of its regions)" if len({i.region for i in rows}) > 1 else ""
        where = f"{row.cloud} {row.region} {row.instance_type}"
        return NodeRate(rate, f"catalog {where} {market}{many}")

    @staticmethod
    def _row_rate(row: Instance, spot: bool) -> float:
        if spot and row.spot_usd_per_hour is not None:
            return row.spot_usd_per_hour
        return row.ondemand_usd_per_hour

    def _by_gpu(self, gpu_name: str, count: float, spot: bool) -> NodeRate | None:
        # Ray names accelerators by family ("A100" for 40 and 80 GB): an exact model when
        # the name resolves to one, else every model of that family.
        gpu = resolve_gpu(self._gpus, gpu_name)
        if gpu is not None:
            rows = [i for i in self._instances if i.gpu == gpu.name and i.gpu_count > 0]
        else:
            tokens = gpu_name_tokens(gpu_name)
            rows = [
                i
                for i in self._instances
                if i.gpu_count > 0 and tokens and tokens <= gpu_name_tokens(i.gpu)
            ]
        if not rows:
            return None
        row = min(rows, key=lambda i: self._row_rate(i, spot) / i.gpu_count)
        per_gpu = self._row_rate(row, spot) / row.gpu_count
        return NodeRate(
            per_gpu * count,
            f"catalog: cheapest {row.gpu} per GPU ({row.cloud} {row.instance_type}) x {count:g}",
        )


def make_pricer(spec: CampaignSpec) -> NodePricer:
    """Prices nodes for the ledger: the catalog (plus ``pricing.catalog``) and the default."""
    user = spec.pricing.catalog
    if user is not None and not Path(user).is_absolute() and spec.source != "<dict>":
        beside = Path(spec.source).parent / user
        user = str(beside) if beside.is_file() else user
    with warnings.catch_warnings():
        # Stale-price warnings belong to `tuner recommend`; the ledger uses what there is.
        warnings.simplefilter("ignore", CatalogWarning)
        catalog = load_catalog(user)
    return NodePricer(
        catalog.instances,
        catalog.gpus,
        default_usd_per_hour=spec.pricing.node_usd_per_hour,
        spot=spec.pricing.spot,
    )
