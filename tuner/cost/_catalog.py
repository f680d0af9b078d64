"""GPU and instance catalogs: data files with a source and a date per row, typed records."""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from importlib import resources
from pathlib import Path
from types import MappingProxyType

from tuner.cost._csvio import RowReader, read_rows
from tuner.errors import SpecError, TunerWarning, closest
from tuner.spec._checks import Checker
from tuner.spec._limits import CATALOG

__all__ = [
    "ARCHITECTURES",
    "Catalog",
    "CatalogWarning",
    "GpuSpec",
    "Instance",
    "find_gpu",
    "gpu_name_tokens",
    "load_catalog",
    "load_gpus",
    "load_instances",
    "resolve_gpu",
]

ARCHITECTURES = ("pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell")
DEFAULT_MAX_PRICE_AGE_DAYS = 365

_GPU_REQUIRED: tuple[str, ...] = ("gpu", "architecture", "memory_gib", "mem_bw_gb_s")
_GPU_REQUIRED += ("fp32_tflops", "tf32_tflops", "fp16_bf16_tflops", "source", "as_of")
_GPU_OPTIONAL = ("tdp_w", "aliases", "notes")
_INSTANCE_REQUIRED: tuple[str, ...] = ("cloud", "region", "instance_type", "gpu", "gpu_count")
_INSTANCE_REQUIRED += ("ondemand_usd_per_hour", "source", "as_of")
_INSTANCE_OPTIONAL = ("vcpus", "memory_gib", "spot_usd_per_hour", "billing", "notes")


class CatalogWarning(TunerWarning):
    """A catalog row loads but looks wrong: a stale price or spot not below on-demand."""


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model's datasheet numbers (dense, no sparsity); None where unknown."""

    name: str
    architecture: str
    memory_gib: float
    mem_bw_gb_s: float | None
    fp32_tflops: float | None
    tf32_tflops: float | None
    fp16_bf16_tflops: float | None
    tdp_w: float | None
    source: str
    as_of: date
    notes: str = ""
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Instance:
    """One rentable machine type in one region, with its hourly prices in USD."""

    cloud: str
    region: str
    instance_type: str
    gpu: str
    gpu_count: int
    vcpus: int | None
    memory_gib: float | None
    ondemand_usd_per_hour: float
    spot_usd_per_hour: float | None
    billing: str
    source: str
    as_of: date
    notes: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        """``(cloud, region, instance_type)``: what a user file overrides by."""
        return (self.cloud, self.region, self.instance_type)


@dataclass(frozen=True)
class Catalog:
    """GPU models by name and the instances that carry them."""

    gpus: Mapping[str, GpuSpec]
    instances: tuple[Instance, ...]

    def gpu(self, name: str, source: str = "<catalog>") -> GpuSpec:
        """Returns the GPU called ``name``; SpecError with the closest names otherwise."""
        return find_gpu(self.gpus, name, source=source, path="gpu")


# Words that vendors and drivers add to a model name without telling models apart.
_NOISE_WORDS = frozenset({"nvidia", "tesla", "geforce", "generation", "gpu"})


def gpu_name_tokens(name: str) -> frozenset[str]:
    """The words of a GPU model name, case and separators ignored, vendor words dropped.

    ``"A100-PCIE-40GB"``, ``"A100 40GB PCIe"`` and ``"NVIDIA A100-PCIE-40GB"`` (what
    ``torch.cuda.get_device_name`` says) all give ``{"a100", "pcie", "40gb"}``.
    """
    words = re.split(r"[\s\-_/(),]+", name.lower())
    return frozenset(w for w in words if w and w not in _NOISE_WORDS)


def _resolve(gpus: Mapping[str, GpuSpec], name: str) -> list[GpuSpec]:
    """Catalog models ``name`` can mean: one when it is clear, several when ambiguous."""
    if name in gpus:
        return [gpus[name]]
    wanted = gpu_name_tokens(name)
    if not wanted:
        return []
    names = {spec.name: [spec.name, *spec.aliases] for spec in gpus.values()}
    by_name = {spec.name: spec for spec in gpus.values()}
    exact = [
        by_name[key]
        for key, spellings in names.items()
        if any(gpu_name_tokens(s) == wanted for s in spellings)
    ]
    if exact:
        return exact
    # "H100 80GB SXM5" names H100-SXM5 (more words than the catalog's name); "H200" names
    # H200-SXM (fewer) as long as only one model fits either way.
    wider = [
        by_name[key]
        for key, spellings in names.items()
        if any(gpu_name_tokens(s) < wanted for s in spellings)
    ]
    if wider:
        return wider
    return [
        by_name[key]
        for key, spellings in names.items()
        if any(wanted < gpu_name_tokens(s) for s in spellings)
    ]


def find_gpu(
    gpus: Mapping[str, GpuSpec], name: str, *, source: str = "<catalog>", path: str = "gpu"
) -> GpuSpec:
    """Looks up a GPU model by its catalog name, an alias, or any spelling of them.

    Case, separators and vendor words do not matter (see :func:`gpu_name_tokens`), so
    ``"a100 40gb pcie"``, ``"Tesla T4"`` and ``torch.cuda.get_device_name()`` strings
    resolve; a partial name resolves when only one model matches it.

    Args:
        gpus: GPU models by name, as :func:`load_gpus` returns.
        name: The model name, e.g. ``"A100-SXM4-40GB"``.
        source: Where the name came from, for the error message.
        path: Key path of the name, for the error message.

    Returns:
        The GPU record.

    Raises:
        SpecError: No model of that name (the message suggests the closest one), or a
            partial name that fits several models (the message lists them).
    """
    found = _resolve(gpus, name)
    if len(found) == 1:
        return found[0]
    if found:
        raise SpecError(
            source,
            path,
            "ambiguous GPU model",
            got=name,
            allowed=", ".join(spec.name for spec in found),
            fix="name the variant, e.g. " + found[0].name,
        )
    raise SpecError(
        source,
        path,
        "unknown GPU model",
        got=name,
        allowed=", ".join(sorted(gpus)),
        suggestion=closest(name, gpus, cutoff=0.4),
        fix="use a name from tuner/data/gpus.csv or add a row for the model there",
    )


def resolve_gpu(gpus: Mapping[str, GpuSpec], name: str) -> GpuSpec | None:
    """Like :func:`find_gpu`, but None for an unknown or ambiguous name."""
    found = _resolve(gpus, name)
    return found[0] if len(found) == 1 else None


def _data_file(name: str) -> Path:
    return Path(str(resources.files("tuner") / "data" / name))


def load_gpus(path: str | Path | None = None) -> Mapping[str, GpuSpec]:
    """Loads GPU models from a CSV file (default: the shipped ``tuner/data/gpus.csv``).

    Args:
        path: CSV with columns gpu, architecture, memory_gib, mem_bw_gb_s, fp32_tflops,
            tf32_tflops, fp16_bf16_tflops, source, as_of (tdp_w, aliases, notes optional;
            aliases are other names of the model, separated by ";").
            Numbers may be empty where unknown except memory_gib.

    Returns:
        Read-only mapping from GPU name to record, in file order.

    Raises:
        SpecError: Missing column or field, non-numeric or negative value, bad date,
            unknown architecture, or a duplicate GPU name.
    """
    file = Path(path) if path is not None else _data_file("gpus.csv")
    gpus: dict[str, GpuSpec] = {}
    ck = Checker(str(file))
    with ck.collecting():  # every row is read; the errors of all are raised at the end
        each = ck.group()
        for line, row in read_rows(file, _GPU_REQUIRED, _GPU_OPTIONAL):
            with each:
                r = RowReader(str(file), line, row, ck.group())
                name = r.text("gpu")
                if name in gpus:
                    raise SpecError(str(file), r.path("gpu"), "duplicate GPU model", got=name)
                tflops = CATALOG["tflops"]
                spec = GpuSpec(
                    name=name,
                    architecture=r.choice("architecture", ARCHITECTURES),
                    memory_gib=r.required_number(
                        "memory_gib", positive=True, limit=CATALOG["gpu.memory_gib"]
                    ),
                    mem_bw_gb_s=r.number(
                        "mem_bw_gb_s", required=False, positive=True, limit=CATALOG["mem_bw_gb_s"]
                    ),
                    fp32_tflops=r.number(
                        "fp32_tflops", required=False, positive=True, limit=tflops
                    ),
                    tf32_tflops=r.number(
                        "tf32_tflops", required=False, positive=True, limit=tflops
                    ),
                    fp16_bf16_tflops=r.number(
                        "fp16_bf16_tflops", required=False, positive=True, limit=tflops
                    ),
                    tdp_w=r.number("tdp_w", required=False, positive=True, limit=CATALOG["tdp_w"]),
                    source=r.text("source"),
                    as_of=r.day("as_of"),
                    notes=r.text("notes", required=False),
                    aliases=tuple(
                        a.strip() for a in r.text("aliases", required=False).split(";") if a.strip()
                    ),
                )
                r.close()
                gpus[name] = spec
    return MappingProxyType(gpus)


def load_instances(
    path: str | Path | None = None,
    gpus: Mapping[str, GpuSpec] | None = None,
    *,
    max_price_age_days: int = DEFAULT_MAX_PRICE_AGE_DAYS,
    today: date | None = None,
) -> tuple[Instance, ...]:
    """Loads instance types and prices (default: the shipped ``tuner/data/instances.csv``).

    Args:
        path: CSV with columns cloud, region, instance_type, gpu, gpu_count,
            ondemand_usd_per_hour, source, as_of; optional vcpus, memory_gib,
            spot_usd_per_hour, billing, notes.
        gpus: Known GPU models (default: :func:`load_gpus`); every row's gpu must be one.
        max_price_age_days: Rows whose as_of is older than this get a CatalogWarning.
        today: The date to measure price age against (default: today).

    Returns:
        The instances in file order.

    Raises:
        SpecError: Missing column or field, unknown GPU model, non-numeric or negative
            value, bad date, or the same cloud/region/instance_type twice.
    """
    file = Path(path) if path is not None else _data_file("instances.csv")
    known = gpus if gpus is not None else load_gpus()
    instances: list[Instance] = []
    seen: set[tuple[str, str, str]] = set()
    source = str(file)
    ck = Checker(source)
    with ck.collecting():  # every row is read; the errors of all are raised at the end
        each = ck.group()
        for line, row in read_rows(file, _INSTANCE_REQUIRED, _INSTANCE_OPTIONAL):
            with each:
                r = RowReader(source, line, row, ck.group())
                instance = _instance(r, known)
                r.close()
                if instance.key in seen:
                    raise SpecError(
                        source,
                        f"line {line}",
                        "duplicate cloud/region/instance_type",
                        got="/".join(instance.key),
                        fix="keep one row per instance type",
                    )
                seen.add(instance.key)
                _warn_if_odd(
                    instance, f"{file}: line {line}", max_price_age_days, today or date.today()
                )
                instances.append(instance)
    return tuple(instances)


def _instance(r: RowReader, known: Mapping[str, GpuSpec]) -> Instance:
    """One row of an instance catalog (placeholders where a field failed: see RowReader)."""
    gpu = r.check(
        lambda: find_gpu(known, r.text("gpu"), source=r.source, path=r.path("gpu")).name, ""
    )
    price = CATALOG["ondemand_usd_per_hour"]
    return Instance(
        cloud=r.text("cloud"),
        region=r.text("region"),
        instance_type=r.text("instance_type"),
        gpu=gpu,
        gpu_count=r.integer("gpu_count", limit=CATALOG["gpu_count"]) or 0,
        vcpus=r.integer("vcpus", required=False, limit=CATALOG["vcpus"]),
        memory_gib=r.number("memory_gib", required=False, limit=CATALOG["memory_gib"]),
        ondemand_usd_per_hour=r.required_number(
            "ondemand_usd_per_hour", positive=True, limit=price
        ),
        spot_usd_per_hour=r.number(
            "spot_usd_per_hour", required=False, positive=True, limit=CATALOG["spot_usd_per_hour"]
        ),
        billing=r.text("billing", required=False),
        source=r.text("source"),
        as_of=r.day("as_of"),
        notes=r.text("notes", required=False),
    )


def _warn_if_odd(instance: Instance, where: str, max_age_days: int, today: date) -> None:
    """Warns about stale prices and spot prices that are not below on-demand."""
    age_days = (today - instance.as_of).days
    if age_days > max_age_days:
        warnings.warn(
            f"{where}: price of {instance.instance_type!r} is {age_days} days old "
            f"(as_of {instance.as_of}; limit {max_age_days} days); check current prices",
            CatalogWarning,
            stacklevel=3,
        )
    spot = instance.spot_usd_per_hour
    if spot is not None and spot >= instance.ondemand_usd_per_hour:
        warnings.warn(
            f"{where}: spot price of {instance.instance_type!r} ({spot} USD/h) is not below "
            f"on-demand ({instance.ondemand_usd_per_hour} USD/h); leave spot empty if none",
            CatalogWarning,
            stacklevel=3,
        )


def load_catalog(
    user_file: str | Path | None = None,
    *,
    gpus_file: str | Path | None = None,
    instances_file: str | Path | None = None,
    max_price_age_days: int = DEFAULT_MAX_PRICE_AGE_DAYS,
    today: date | None = None,
) -> Catalog:
    """Loads GPUs and instances, then merges a user's instance file over them.

    A user row whose cloud/region/instance_type matches a shipped row replaces it (a
    contract price); other user rows are added (e.g. a rented server's monthly price
    turned into USD per hour).

    Args:
        user_file: Optional instance CSV in the same format as instances.csv.
        gpus_file: GPU CSV (default: shipped).
        instances_file: Instance CSV (default: shipped).
        max_price_age_days: Older prices get a CatalogWarning.
        today: The date to measure price age against (default: today).

    Returns:
        The merged catalog; user rows come after shipped ones unless they replace one.

    Raises:
        SpecError: Any file is invalid (see :func:`load_gpus`, :func:`load_instances`).
    """
    gpus = load_gpus(gpus_file)
    base = load_instances(instances_file, gpus, max_price_age_days=max_price_age_days, today=today)
    if user_file is None:
        return Catalog(gpus=gpus, instances=base)
    user = load_instances(user_file, gpus, max_price_age_days=max_price_age_days, today=today)
    overrides = {instance.key: instance for instance in user}
    merged = [overrides.pop(instance.key, instance) for instance in base]
    merged.extend(instance for instance in user if instance.key in overrides)
    return Catalog(gpus=gpus, instances=tuple(merged))
