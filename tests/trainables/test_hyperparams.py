"""Each training hyperparameter has its documented effect (CPU, no Ray)."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from trainables import digits, tabular
from trainables._config import LoopConfig
from trainables._loop import _train_loss_fn, train_step
from trainables._schedule import LRSchedule
from trainables._session import LocalSession

STEPS_PER_EPOCH = 3


def _lrs(steps: int, steps_per_epoch: int = STEPS_PER_EPOCH, **knobs: Any) -> list[float]:
    """The learning rate used by each of the first ``steps`` optimizer steps (base lr 1)."""
    cfg = LoopConfig(max_epochs=4, lr=1.0, **knobs)
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    schedule = LRSchedule(cfg, optimizer, steps_per_epoch)
    lrs = []
    for _ in range(steps):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    return lrs


def _per_epoch(lrs: list[float], steps_per_epoch: int = STEPS_PER_EPOCH) -> list[float]:
    return lrs[::steps_per_epoch]


def test_constant_schedule_keeps_lr() -> None:
    assert _lrs(12) == [1.0] * 12


def test_cosine_schedule_anneals_per_step_to_zero() -> None:
    lrs = _lrs(12, lr_schedule="cosine")
    assert lrs == pytest.approx([0.5 * (1 + math.cos(math.pi * t / 12)) for t in range(12)])
    assert _per_epoch(lrs) == pytest.approx([1.0, 0.853553, 0.5, 0.146447], abs=1e-6)


def test_step_schedule_decays_at_epoch_boundaries() -> None:
    lrs = _lrs(12, lr_schedule="step", lr_step_epochs=2, lr_gamma=0.5)
    assert lrs == pytest.approx([1.0] * 6 + [0.5] * 6)


def test_onecycle_schedule_rises_to_lr_then_anneals() -> None:
    lrs = _lrs(12, lr_schedule="onecycle")
    # torch defaults: start at lr / 25, peak lr at 30% of the run, end at start / 1e4.
    assert lrs[0] == pytest.approx(1.0 / 25)
    assert lrs[-1] == pytest.approx(1.0 / 25 / 1e4)
    peak = lrs.index(max(lrs))
    assert peak in (2, 3) and max(lrs) > 0.9
    assert lrs[: peak + 1] == sorted(lrs[: peak + 1])
    assert lrs[peak:] == sorted(lrs[peak:], reverse=True)
    # Past the peak (step 0.3 * 12 - 1 = 2.6) it is a cosine from lr to lr / 25 / 1e4
    # over steps 2.6..11.
    floor = 1.0 / 25 / 1e4

    def annealed(step: int) -> float:
        return floor + (1.0 - floor) / 2 * (1 + math.cos(math.pi * (step - 2.6) / 8.4))

    assert _per_epoch(lrs) == pytest.approx([0.04, annealed(3), annealed(6), annealed(9)], rel=1e-9)


def test_warmup_ramps_linearly_then_hands_over() -> None:
    assert _lrs(6, steps_per_epoch=4, warmup_epochs=1.0) == pytest.approx(
        [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    )
    # Half an epoch of 4 steps = 2 steps, multiplied onto the cosine schedule.
    cosine = _lrs(6, steps_per_epoch=4, lr_schedule="cosine")
    warm = _lrs(6, steps_per_epoch=4, lr_schedule="cosine", warmup_epochs=0.5)
    assert warm == pytest.approx([cosine[0] / 2, cosine[1], *cosine[2:]])


@pytest.mark.parametrize("schedule", ["cosine", "step", "onecycle"])
def test_schedule_restores_mid_warmup(schedule: str) -> None:
    cfg = LoopConfig(
        max_epochs=4, lr=1.0, lr_schedule=schedule, warmup_epochs=1.5, lr_step_epochs=1
    )

    def run(steps: int, state: Any = None) -> tuple[list[float], Any]:
        optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
        sched = LRSchedule(cfg, optimizer, STEPS_PER_EPOCH)
        if state is not None:
            optimizer.load_state_dict(state[0])
            sched.load_state_dict(state[1])
        lrs = []
        for _ in range(steps):
            lrs.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            sched.step()
        return lrs, (copy.deepcopy(optimizer.state_dict()), sched.state_dict())

    whole, _ = run(12)
    first, state = run(3)
    second, _ = run(9, state)
    assert first + second == whole


def _digits_batch(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    x_train, y_train, _, _ = digits._load(False)
    return x_train[:n], y_train[:n]


def _grads(model: nn.Module) -> list[torch.Tensor]:
    return [p.grad.clone() for p in model.parameters() if p.grad is not None]


def test_grad_accumulation_matches_one_big_batch() -> None:
    torch.manual_seed(0)
    model = digits.DigitsCNN(digits.DigitsCNNConfig(channels=8, hidden=16, dropout=0.0))
    x, y = _digits_batch(64)
    twin = copy.deepcopy(model)
    # lr 0: the step leaves weights alone, so both models see the same weights.
    train_step(model, torch.optim.SGD(model.parameters(), lr=0.0), F.cross_entropy, [(x, y)])
    micro = [(x[i : i + 16], y[i : i + 16]) for i in range(0, 64, 16)]
    loss_sum = train_step(twin, torch.optim.SGD(twin.parameters(), lr=0.0), F.cross_entropy, micro)
    assert loss_sum.item() == pytest.approx(F.cross_entropy(model(x), y).item() * 64, rel=1e-6)
    for big, acc in zip(_grads(model), _grads(twin), strict=True):
        torch.testing.assert_close(acc, big, atol=1e-6, rtol=0)


def test_grad_accum_trains_end_to_end(tmp_path: Path) -> None:
    session = LocalSession(tmp_path)
    tabular.train({"tuner_max_epochs": 2, "batch_size": 16, "grad_accum": 4}, session)
    assert session.metrics[-1]["val_acc"] >= 0.85


def test_grad_clip_bounds_the_global_norm() -> None:
    torch.manual_seed(0)
    x, y = _digits_batch(64)
    norms = {}
    for clip in (0.0, 0.01):
        model = digits.DigitsCNN(digits.DigitsCNNConfig(channels=8, hidden=16))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
        train_step(model, optimizer, F.cross_entropy, [(x, y)], grad_clip=clip)
        norms[clip] = torch.linalg.vector_norm(torch.stack([g.norm() for g in _grads(model)]))
    assert norms[0.0] > 0.1
    assert norms[0.01] == pytest.approx(0.01, rel=1e-4)


def test_label_smoothing_is_torchs_smoothed_cross_entropy(tmp_path: Path) -> None:
    torch.manual_seed(0)
    logits, y = torch.randn(32, 10), torch.randint(0, 10, (32,))
    s = 0.2
    log_p = logits.log_softmax(dim=1)
    want = (1 - s) * F.nll_loss(log_p, y) + s * (-log_p.mean(dim=1)).mean()
    got = _train_loss_fn(F.cross_entropy, s)(logits, y)
    assert got.item() == pytest.approx(want.item(), rel=1e-6)
    assert _train_loss_fn(F.cross_entropy, 0.0) is F.cross_entropy
    with pytest.raises(ValueError, match=r"label_smoothing'\] is 0.2.*not cross-entropy"):
        _train_loss_fn(F.nll_loss, s)

    # In a run the reported training loss is the smoothed one: it cannot fall below the
    # entropy of the smoothed 2-class target (0.85, 0.15), about 0.4227.
    losses = {}
    for smoothing in (0.0, 0.3):
        session = LocalSession(tmp_path / str(smoothing))
        tabular.train({"tuner_max_epochs": 3, "lr": 1e-2, "label_smoothing": smoothing}, session)
        losses[smoothing] = session.metrics[-1]["train_loss"]
    assert losses[0.3] > 0.4227 > losses[0.0]


def test_augment_strength_zero_is_identity_and_off_by_default() -> None:
    x, _ = _digits_batch(32)
    assert digits.augment_images(x, torch.Generator().manual_seed(0), 0.0) is x
    assert digits.make_task({}).augment is None
    assert digits.make_task({"augment": 0.0}).augment is None


def test_augment_changes_inputs_reproducibly() -> None:
    x, _ = _digits_batch(32)
    task = digits.make_task({"augment": 0.5})
    assert task.augment is not None
    a = task.augment(x, torch.Generator().manual_seed(3))
    b = task.augment(x, torch.Generator().manual_seed(3))
    c = task.augment(x, torch.Generator().manual_seed(4))
    assert a.shape == x.shape
    assert torch.equal(a, b)
    assert not torch.allclose(a, x, atol=1e-3)
    assert not torch.allclose(a, c, atol=1e-3)
    # Ranges scale with strength: a weak warp stays closer to the original.
    weak = digits.augment_images(x, torch.Generator().manual_seed(3), 0.1)
    assert (weak - x).abs().mean() < (a - x).abs().mean()


def test_augmented_run_is_reproducible_and_differs(tmp_path: Path) -> None:
    runs = []
    for i, strength in enumerate((0.8, 0.8, 0.0)):
        session = LocalSession(tmp_path / str(i))
        config = {"channels": 4, "hidden": 16, "augment": strength, "tuner_max_epochs": 1}
        digits.train(config, session)
        runs.append(session.metrics[0]["train_loss"])
    assert runs[0] == runs[1] != runs[2]


def test_digits_input_standardize_is_global() -> None:
    raw, _, _, _ = digits._load(False)
    x_train, _, x_val, _ = digits._load(True)
    assert x_train.mean().item() == pytest.approx(0.0, abs=1e-5)
    assert x_train.std().item() == pytest.approx(1.0, abs=1e-3)
    # One affine map for every pixel: standardised = (raw - mean) / std.
    torch.testing.assert_close(x_train * raw.std() + raw.mean(), raw, atol=1e-4, rtol=0)
    assert x_val.dtype == torch.float32


def test_tabular_input_standardize_and_batch_norm(tmp_path: Path) -> None:
    assert tabular.make_task({}).x_train.mean(dim=0).abs().max() < 1e-5
    assert tabular.make_task({"input_standardize": False}).x_train.mean().item() > 10
    task = tabular.make_task({"batch_norm": True})
    assert any(isinstance(m, nn.BatchNorm1d) for m in task.make_model().modules())
    session = LocalSession(tmp_path)
    tabular.train({"tuner_max_epochs": 3, "batch_norm": True}, session)
    assert session.metrics[-1]["val_acc"] >= 0.9


@pytest.mark.parametrize("amount", [0.3, 0.8])
def test_pruning_reaches_the_amount_and_keeps_it(amount: float, tmp_path: Path) -> None:
    session = LocalSession(tmp_path)
    config = {"channels": 4, "hidden": 16, "lr": 1e-2, "tuner_max_epochs": 3}
    config["prune_amount"] = amount
    digits.train({**config, "prune_finetune_epochs": 1}, session)
    sparsity = [m["sparsity"] for m in session.metrics]
    assert sparsity[0] < 0.01  # dense until the pruning epoch (3 - 1 = 2)
    assert sparsity[1] == pytest.approx(amount, abs=0.01)
    assert sparsity[2] == pytest.approx(amount, abs=0.01)  # fine-tuning keeps the zeros
    assert session.metrics[-1]["val_acc"] > 0.6
    assert all("tuner_stop_reason" not in m for m in session.metrics)


def test_no_pruning_by_default(tmp_path: Path) -> None:
    session = LocalSession(tmp_path)
    tabular.train({"tuner_max_epochs": 1}, session)
    assert session.metrics[0]["sparsity"] < 0.01


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({"lr_schedule": "cosin"}, r"lr_schedule'\] must be one of .*Did you mean 'cosine'"),
        ({"lr_gamma": 0}, r"config\['lr_gamma'\] must be > 0.0 and <= 1.0, but got 0.0"),
        ({"lr_step_epochs": 0}, r"config\['lr_step_epochs'\] must be >= 1, but got 0"),
        ({"warmup_epochs": -1}, r"config\['warmup_epochs'\] must be >= 0.0, but got -1.0"),
        ({"label_smoothing": 1}, r"config\['label_smoothing'\] must be >= 0.0 and < 1.0"),
        ({"grad_clip": -0.5}, r"config\['grad_clip'\] must be >= 0.0, but got -0.5"),
        ({"grad_accum": 0}, r"config\['grad_accum'\] must be >= 1, but got 0"),
        ({"prune_amount": 1.0}, r"config\['prune_amount'\] must be >= 0.0 and < 1.0"),
        (
            {"prune_amount": 0.5, "prune_finetune_epochs": 3, "tuner_max_epochs": 3},
            r"config\['prune_finetune_epochs'\] must be < config\['tuner_max_epochs'\] \(3\)",
        ),
        ({"input_standardize": 1}, r"config\['input_standardize'\] must be true or false"),
        ({"augment": 1.5}, r"config\['augment'\] must be >= 0.0 and <= 1.0, but got 1.5"),
    ],
)
def test_bad_hyperparameter_is_rejected_with_the_key(
    config: dict[str, Any], match: str, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match=match):
        digits.train(config, LocalSession(tmp_path))
