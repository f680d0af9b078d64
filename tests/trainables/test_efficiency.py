"""GPU efficiency knobs and the DataLoader path: config, placement and identical results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from tests.trainables._support import Preempted, PreemptedSession
from trainables import digits, tabular
from trainables._batches import keep_on_device
from trainables._config import LoopConfig
from trainables._run import Run, amp_dtype
from trainables._session import LocalSession

COMPARED = ("epoch", "train_loss", "val_loss", "val_acc")
# Augmentation draws, dropout, BatchNorm and two micro-batches per step all in play.
DIGITS: dict[str, Any] = {
    "tuner_max_epochs": 2,
    "tuner_seed": 3,
    "channels": 4,
    "hidden": 16,
    "dropout": 0.2,
    "batch_norm": True,
    "augment": 0.5,
    "grad_accum": 2,
    "batch_size": 32,
}


def _compared(session: LocalSession) -> list[tuple[Any, ...]]:
    return [tuple(m[k] for k in COMPARED) for m in session.metrics]


def test_defaults() -> None:
    cfg = LoopConfig.from_config({})
    assert (cfg.channels_last, cfg.cudnn_benchmark, cfg.tf32, cfg.non_blocking) == (
        True,
        True,
        True,
        True,
    )
    assert (cfg.compile, cfg.data_on_device, cfg.loader_workers) == (False, "auto", 0)
    assert (cfg.plateau_patience, cfg.plateau_min_delta, cfg.plateau_metric) == (
        0,
        0.0,
        "val_loss",
    )


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({"data_on_device": "alway"}, r"data_on_device'\] must be one of .*Did you mean 'always'"),
        ({"loader_workers": -1}, r"loader_workers'\] must be >= 0, but got -1"),
        ({"compile": "yes"}, r"compile'\] must be true or false, but got 'yes'"),
        ({"plateau_min_delta": -0.1}, r"plateau_min_delta'\] must be >= 0.0, but got -0.1"),
        ({"amp_dtype": "bf61"}, r"amp_dtype'\] must be one of .*Did you mean 'bf16'"),
    ],
)
def test_bad_knob_is_rejected(config: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        LoopConfig.from_config(config)


def test_auto_keeps_data_on_device_below_one_gib() -> None:
    small = [torch.zeros(10)]
    # An expanded view reports its full size without allocating it.
    big = [torch.zeros(1).expand(2**28)]  # 2**28 float32 = exactly 1 GiB
    assert keep_on_device("auto", small)
    assert not keep_on_device("auto", big)
    assert keep_on_device("always", big)
    assert not keep_on_device("never", small)


def test_dataloader_path_matches_on_device_path(tmp_path: Path) -> None:
    on_device, loader = LocalSession(tmp_path / "a"), LocalSession(tmp_path / "b")
    digits.train({**DIGITS, "data_on_device": "always"}, on_device)
    digits.train({**DIGITS, "data_on_device": "never"}, loader)
    # Same order from the same generator, same gathers and float ops: bitwise equal on CPU.
    assert _compared(loader) == _compared(on_device)


def test_dataloader_workers_match_on_device_path(tmp_path: Path) -> None:
    on_device, workers = LocalSession(tmp_path / "a"), LocalSession(tmp_path / "b")
    config = {"tuner_max_epochs": 2, "batch_size": 32}
    tabular.train(config, on_device)
    tabular.train({**config, "data_on_device": "never", "loader_workers": 1}, workers)
    assert _compared(workers) == _compared(on_device)


def test_dataloader_path_restores_exactly(tmp_path: Path) -> None:
    config = {**DIGITS, "tuner_max_epochs": 3, "data_on_device": "never"}
    whole = LocalSession(tmp_path / "whole")
    digits.train(config, whole)
    first = PreemptedSession(tmp_path / "first", after=1)
    with pytest.raises(Preempted):
        digits.train(config, first)
    torch.manual_seed(999)  # the restored run must not depend on the global RNG
    second = LocalSession(tmp_path / "second", restore_from=first.latest_checkpoint)
    digits.train(config, second)
    assert _compared(first) + _compared(second) == _compared(whole)


def test_cuda_knobs_are_ignored_on_cpu(tmp_path: Path) -> None:
    on, off = LocalSession(tmp_path / "on"), LocalSession(tmp_path / "off")
    knobs = ("channels_last", "cudnn_benchmark", "tf32", "non_blocking")
    digits.train({**DIGITS, **dict.fromkeys(knobs, True)}, on)
    digits.train({**DIGITS, **dict.fromkeys(knobs, False)}, off)
    assert on.metrics[0]["tuner_device"] == "cpu"
    assert _compared(on) == _compared(off)


@pytest.mark.parametrize(
    ("asked", "bf16_gpu", "expected"),
    [
        ("auto", True, torch.bfloat16),
        ("auto", False, torch.float16),
        ("fp16", True, torch.float16),
        ("bf16", True, torch.bfloat16),
    ],
)
def test_amp_dtype_choice(
    asked: str, bf16_gpu: bool, expected: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16_gpu)
    cfg = LoopConfig.from_config({"amp_dtype": asked})
    assert amp_dtype(cfg, torch.device("cuda", 0)) == expected
    # Off CUDA, or with AMP off, there is no autocast whatever the knob says.
    assert amp_dtype(cfg, torch.device("cpu")) is None
    assert (
        amp_dtype(
            LoopConfig.from_config({"amp_dtype": asked, "amp": False}), torch.device("cuda", 0)
        )
        is None
    )


def test_bf16_on_a_gpu_without_it_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a, **k: "Tesla T4")
    cfg = LoopConfig.from_config({"amp_dtype": "bf16"})
    with pytest.raises(ValueError, match=r"amp_dtype'\] is 'bf16', but Tesla T4 .*To fix"):
        amp_dtype(cfg, torch.device("cuda", 0))


@pytest.mark.gpu
def test_fp16_trains_with_a_gradient_scaler(tmp_path: Path) -> None:
    config = {"tuner_max_epochs": 2, "amp_dtype": "fp16"}
    cfg = LoopConfig.from_config(config)
    session = LocalSession(tmp_path)
    run = Run.build(cfg, tabular.make_task(config), session, torch.device("cuda", 0))
    assert run.amp_dtype == torch.float16 and run.scaler is not None
    tabular.train(config, session)
    assert session.metrics[-1]["precision"] == "amp"
    assert session.metrics[-1]["val_acc"] > 0.9


@pytest.mark.gpu
@pytest.mark.parametrize("placement", ["always", "never"])
def test_cuda_knobs_and_placements_train(placement: str, tmp_path: Path) -> None:
    session = LocalSession(tmp_path)
    config = {"tuner_max_epochs": 3, "lr": 3e-3, "data_on_device": placement}
    digits.train({**config, "loader_workers": 1 if placement == "never" else 0}, session)
    assert torch.backends.cudnn.benchmark
    assert session.metrics[-1]["tuner_device"].startswith("cuda")
    assert session.metrics[-1]["val_acc"] > 0.9


@pytest.mark.gpu
def test_compiled_model_trains_and_restores(tmp_path: Path) -> None:
    first = LocalSession(tmp_path / "first")
    tabular.train({"tuner_max_epochs": 2, "compile": True}, first)
    assert first.metrics[-1]["val_acc"] > 0.9
    # The checkpoint holds the plain model's keys, so it restores with or without compile.
    second = LocalSession(tmp_path / "second", restore_from=first.latest_checkpoint)
    tabular.train({"tuner_max_epochs": 3}, second)
    assert [m["epoch"] for m in second.metrics] == [3]
