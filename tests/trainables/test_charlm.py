"""The character LM built-in: corpus split, model shape rules, learning and exact restore."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.trainables._support import Preempted, PreemptedSession, checkpoint_weights
from trainables import BUILTINS, charlm
from trainables._session import LocalSession
from trainables._text import VAL_FRACTION, contiguous_windows, corpus_text, load_corpus

# A model and epochs small enough for a unit test, with every stateful part in play:
# dropout (torch RNG), Adam moments, a warmed-up per-step cosine schedule, window draws.
TINY: dict[str, Any] = {
    "n_layer": 1,
    "n_head": 2,
    "n_embd": 32,
    "block_size": 32,
    "dropout": 0.1,
    "steps_per_epoch": 8,
    "batch_size": 16,
    "lr": 3e-3,
    "lr_schedule": "cosine",
    "warmup_epochs": 0.5,
    "grad_clip": 1.0,
    "tuner_seed": 3,
}
COMPARED = ("epoch", "train_loss", "val_loss", "val_acc")
# The contract's tolerance, as in test_loop.py (CPU runs are bitwise equal in practice).
ATOL = 1e-6


def test_registered_as_builtin() -> None:
    assert BUILTINS["charlm"] == "trainables.charlm:train"


def test_corpus_split_is_deterministic_contiguous_and_disjoint() -> None:
    corpus = load_corpus()
    text = corpus_text()
    assert corpus.chars == tuple(sorted(set(text)))
    assert len(corpus.train) + len(corpus.val) == len(text)
    assert len(corpus.val) == pytest.approx(VAL_FRACTION * len(text), abs=1)
    # First 90% then last 10%, in order: together they decode back to the whole text.
    assert corpus.decode(corpus.train) + corpus.decode(corpus.val) == text
    load_corpus.cache_clear()
    again = load_corpus()
    assert again.chars == corpus.chars
    assert torch.equal(again.train, corpus.train) and torch.equal(again.val, corpus.val)


def test_validation_windows_score_each_val_character_once() -> None:
    ids = torch.arange(100)
    x, y = contiguous_windows(ids, 8)
    assert x.shape == y.shape == (12, 8)
    assert torch.equal(y, x + 1)  # targets are the next character
    assert torch.equal(y.flatten(), torch.arange(1, 97))


def test_n_embd_must_be_divisible_by_n_head() -> None:
    with pytest.raises(ValueError, match=r"n_embd.*divisible.*n_head.*n_embd=30, n_head=4"):
        charlm.make_task({"n_embd": 30, "n_head": 4})
    with pytest.raises(ValueError, match=r"n_embd=30, n_head=4"):
        charlm.GPTConfig(vocab_size=10, n_embd=30, n_head=4)


def test_attention_is_causal() -> None:
    torch.manual_seed(0)
    model = charlm.CharGPT(charlm.GPTConfig(vocab_size=20, n_layer=2, n_embd=16, block_size=12))
    model.eval()
    x = torch.randint(0, 20, (3, 12))
    changed = x.clone()
    changed[:, 7:] = (changed[:, 7:] + 1) % 20
    with torch.no_grad():
        logits, logits_changed = model(x), model(changed)
    assert logits.shape == (3, 20, 12)  # classes on dim 1, as F.cross_entropy takes them
    torch.testing.assert_close(logits[:, :, :7], logits_changed[:, :, :7], atol=1e-6, rtol=0)
    assert not torch.allclose(logits[:, :, 7:], logits_changed[:, :, 7:])


def test_longer_sequence_than_block_size_is_refused() -> None:
    model = charlm.CharGPT(charlm.GPTConfig(vocab_size=5, n_embd=8, block_size=4))
    with pytest.raises(ValueError, match="exceeds the model's block_size 4"):
        model(torch.zeros((1, 5), dtype=torch.long))


def test_learns_below_uniform_guess(tmp_path: Path) -> None:
    session = LocalSession(tmp_path)
    config = {**TINY, "dropout": 0.0, "steps_per_epoch": 20, "lr_schedule": "constant"}
    charlm.train({**config, "tuner_max_epochs": 3}, session)

    losses = [m["val_loss"] for m in session.metrics]
    assert [m["epoch"] for m in session.metrics] == [1, 2, 3]
    assert losses[0] > losses[1] > losses[2]
    uniform = math.log(load_corpus().vocab_size)  # 4.6 nats for about 100 characters
    assert losses[-1] < uniform - 1.0
    assert 0.0 < session.metrics[-1]["val_acc"] < 1.0
    assert "tuner_stop_reason" not in session.metrics[-1]


def test_restored_run_matches_uninterrupted_run(tmp_path: Path) -> None:
    config = {**TINY, "tuner_max_epochs": 4}
    whole = LocalSession(tmp_path / "whole")
    charlm.train(config, whole)

    first = PreemptedSession(tmp_path / "first", after=2)
    with pytest.raises(Preempted):
        charlm.train(config, first)
    torch.manual_seed(12345)  # the restored run must not depend on the global RNG
    second = LocalSession(tmp_path / "second", restore_from=first.latest_checkpoint)
    charlm.train(config, second)

    resumed = first.metrics + second.metrics
    assert [m["epoch"] for m in resumed] == [1, 2, 3, 4]
    for got, want in zip(resumed, whole.metrics, strict=True):
        for key in COMPARED:
            assert got[key] == pytest.approx(want[key], abs=ATOL, rel=0), key
    # Fresh windows each epoch: the data order differs from epoch to epoch.
    assert len({m["train_loss"] for m in whole.metrics}) == 4
    final, expected = (
        checkpoint_weights(second.latest_checkpoint),
        checkpoint_weights(whole.latest_checkpoint),
    )
    assert final.keys() == expected.keys()
    for name in expected:
        torch.testing.assert_close(final[name], expected[name], atol=ATOL, rtol=0)
