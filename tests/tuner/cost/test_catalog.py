"""Catalog loading: shipped files load clean; synthetic tables exercise each check."""

from __future__ import annotations

import warnings
from datetime import date
from pathlib import Path

import pytest

from tuner.cost import CatalogWarning, load_catalog, load_gpus, load_instances
from tuner.errors import SpecError

TODAY = date(2026, 12, 2)
GPU_HEADER = (
    "gpu,architecture,memory_gib,mem_bw_gb_s,fp32_tflops,tf32_tflops,fp16_bf16_tflops,"
    "source,as_of\n"
)
INSTANCE_HEADER = (
    "cloud,region,instance_type,gpu,gpu_count,vcpus,memory_gib,ondemand_usd_per_hour,"
    "spot_usd_per_hour,source,as_of\n"
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture
def gpus_file(tmp_path: Path) -> Path:
    return write(
        tmp_path,
        "gpus.csv",
        GPU_HEADER
        # every figure present
        + "GA,ampere,40,1500,20,150,300,test,2026-01-01\n"
        # no TF32 (pre-Ampere): empty cell loads as None
        + "GV,volta,16,900,15,,120,test,2026-01-01\n",
    )


def test_shipped_catalog_loads_clean() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        catalog = load_catalog(today=TODAY)
    assert "H100-SXM5" in catalog.gpus
    assert catalog.gpu("t4").name == "T4"
    assert all(i.gpu in catalog.gpus for i in catalog.instances)
    assert {i.cloud for i in catalog.instances} >= {"aws", "gcp", "azure", "ctyun", "rented"}


def test_gpu_fields_typed(gpus_file: Path) -> None:
    gpus = load_gpus(gpus_file)
    assert gpus["GA"].tf32_tflops == 150.0
    assert gpus["GV"].tf32_tflops is None
    assert gpus["GV"].as_of == date(2026, 1, 1)


def test_instances_load_and_warn(tmp_path: Path, gpus_file: Path) -> None:
    path = write(
        tmp_path,
        "inst.csv",
        INSTANCE_HEADER
        # fresh, spot below on-demand: no warning
        + "c,r,ok,GA,1,8,64,3.0,1.0,test,2026-11-01\n"
        # no spot price: empty -> None
        + "c,r,nospot,GV,8,,,20.0,,test,2026-11-01\n"
        # spot >= on-demand: anomaly warning
        + "c,r,spotty,GA,1,8,64,3.0,3.0,test,2026-11-01\n"
        # priced two years ago: stale warning
        + "c,r,old,GA,1,8,64,3.0,1.0,test,2024-11-01\n",
    )
    gpus = load_gpus(gpus_file)
    with pytest.warns(CatalogWarning) as record:
        instances = load_instances(path, gpus, today=TODAY)
    messages = [str(w.message) for w in record]
    assert len(messages) == 2
    assert "'spotty'" in messages[0] and "not below on-demand" in messages[0]
    assert "'old'" in messages[1] and "days old" in messages[1]
    assert instances[1].spot_usd_per_hour is None and instances[1].vcpus is None
    with warnings.catch_warnings():
        warnings.simplefilter("error", CatalogWarning)
        with pytest.raises(CatalogWarning, match="spotty"):
            load_instances(path, gpus, today=TODAY, max_price_age_days=10_000)


@pytest.mark.parametrize(
    ("row", "match"),
    [
        # GPU name with a typo: suggestion
        (
            "c,r,x,GAA,1,8,64,3.0,1.0,t,2026-11-01",
            r"line 2\.gpu: unknown GPU model .*Did you mean 'GA'",
        ),
        # negative price
        ("c,r,x,GA,1,8,64,-3.0,1.0,t,2026-11-01", r"line 2\.ondemand_usd_per_hour: out of range"),
        # non-numeric price
        (
            "c,r,x,GA,1,8,64,cheap,1.0,t,2026-11-01",
            r"ondemand_usd_per_hour: not a number \(got 'cheap'",
        ),
        # missing required field
        ("c,r,x,GA,1,8,64,3.0,1.0,,2026-11-01", r"line 2\.source: required field is empty"),
        # zero GPUs
        ("c,r,x,GA,0,8,64,3.0,1.0,t,2026-11-01", r"gpu_count: out of range"),
        # bad date
        ("c,r,x,GA,1,8,64,3.0,1.0,t,11/01/2026", r"as_of: not a date .*YYYY-MM-DD"),
    ],
)
def test_instance_row_errors(tmp_path: Path, gpus_file: Path, row: str, match: str) -> None:
    path = write(tmp_path, "inst.csv", INSTANCE_HEADER + row + "\n")
    with pytest.raises(SpecError, match=match):
        load_instances(path, load_gpus(gpus_file), today=TODAY)


def test_missing_and_unknown_columns(tmp_path: Path, gpus_file: Path) -> None:
    # header without gpu_count
    path = write(
        tmp_path, "a.csv", "cloud,region,instance_type,gpu,ondemand_usd_per_hour,source,as_of\n"
    )
    with pytest.raises(SpecError, match=r"line 1: missing required column.*gpu_count"):
        load_instances(path, load_gpus(gpus_file))
    # misspelt column: suggestion
    path = write(tmp_path, "b.csv", INSTANCE_HEADER.replace("vcpus", "vcpu"))
    with pytest.raises(SpecError, match=r"unknown column \(got 'vcpu'.*Did you mean 'vcpus'"):
        load_instances(path, load_gpus(gpus_file))


def test_gpu_errors(tmp_path: Path) -> None:
    # unknown architecture: suggestion
    path = write(tmp_path, "g.csv", GPU_HEADER + "GX,amper,40,1500,20,150,300,t,2026-01-01\n")
    with pytest.raises(SpecError, match=r"line 2\.architecture: .*Did you mean 'ampere'"):
        load_gpus(path)
    # the same model twice
    row = "GX,ampere,40,1500,20,150,300,t,2026-01-01\n"
    path = write(tmp_path, "h.csv", GPU_HEADER + row + row)
    with pytest.raises(SpecError, match="duplicate GPU model"):
        load_gpus(path)


def test_user_file_overrides_and_adds(tmp_path: Path) -> None:
    user = write(
        tmp_path,
        "mine.csv",
        INSTANCE_HEADER
        # same key as a shipped row: replaces its price (a contract price)
        + "aws,us-east-1,p4d.24xlarge,A100-SXM4-40GB,8,96,1152,20.0,,contract,2026-11-01\n"
        # new row: a rented server, 5000 USD/month / 730 h
        + "rented,home,box,H100-SXM5,8,,,6.849315,,invoice,2026-11-01\n",
    )
    base = load_catalog(today=TODAY)
    merged = load_catalog(user, today=TODAY)
    assert len(merged.instances) == len(base.instances) + 1
    p4d = [i for i in merged.instances if i.instance_type == "p4d.24xlarge"]
    assert [i.ondemand_usd_per_hour for i in p4d] == [20.0]
    assert merged.instances[-1].key == ("rented", "home", "box")


ALIAS_GPUS = (
    GPU_HEADER.rstrip("\n")
    + ",aliases\n"
    # two memory variants of one model: "X100" alone is ambiguous
    + "X100-SXM4-40GB,ampere,40,1500,20,150,300,test,2026-01-01,\n"
    + "X100-PCIE-80GB,ampere,80,1900,20,150,300,test,2026-01-01,\n"
    # a driver name that shares no words with the catalog name, via an alias
    + "Y200-SXM,hopper,141,4800,67,495,989,test,2026-01-01,Y200 141GB HBM3e;NVIDIA Y-two\n"
)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("X100-SXM4-40GB", "X100-SXM4-40GB"),  # the catalog name itself
        ("x100 40gb sxm4", "X100-SXM4-40GB"),  # words in another order, other case
        ("NVIDIA X100-PCIE-80GB", "X100-PCIE-80GB"),  # torch.cuda.get_device_name()
        ("Tesla X100 PCIe 80GB", "X100-PCIE-80GB"),  # vendor words dropped
        ("X100 80GB PCIe Gen4", "X100-PCIE-80GB"),  # more words than the catalog's
        ("NVIDIA Y-two", "Y200-SXM"),  # an alias
        ("Y200 141GB HBM3e", "Y200-SXM"),  # another alias
        ("Y200", "Y200-SXM"),  # fewer words, one model fits
    ],
)
def test_gpu_names_resolve_by_their_words(tmp_path: Path, name: str, expected: str) -> None:
    from tuner.cost import find_gpu

    gpus = load_gpus(write(tmp_path, "gpus.csv", ALIAS_GPUS))
    assert find_gpu(gpus, name).name == expected


def test_partial_gpu_name_fitting_two_models_is_ambiguous(tmp_path: Path) -> None:
    from tuner.cost import find_gpu

    gpus = load_gpus(write(tmp_path, "gpus.csv", ALIAS_GPUS))
    with pytest.raises(
        SpecError,
        match=r"gpu: ambiguous GPU model \(got 'X100'; allowed X100-SXM4-40GB, X100-PCIE-80GB\)"
        r"\n  To fix: name the variant",
    ):
        find_gpu(gpus, "X100")
    assert gpus["Y200-SXM"].aliases == ("Y200 141GB HBM3e", "NVIDIA Y-two")


def test_calibration_file_gpu_names_all_resolve() -> None:
    # Every GPU the shipped calibration measurements name is in the shipped catalog.
    from tuner.cost import find_gpu
    from tuner.cost._calibrate import load_measurements

    gpus = load_gpus()
    names = {m.gpu for m in load_measurements()}
    assert len(names) == 12
    assert {find_gpu(gpus, n).name for n in names} >= {"Quadro-RTX-8000", "RTX-6000-Ada"}
