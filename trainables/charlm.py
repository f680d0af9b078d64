"""Built-in ``charlm``: a small character-level transformer language model (nanoGPT style).

Data: the ``pydoc_data.topics`` text of the standard library (about 0.5 M characters, see
:mod:`trainables._text`), one id per distinct character, split into the first 90% for
training and the last 10% for validation.

An epoch is ``steps_per_epoch`` optimizer steps on windows of ``block_size`` characters
drawn at random offsets of the training text, fresh each epoch, from the loop's seeded
data-order generator (so runs are reproducible and restore exactly). Validation scores
every character of the validation text once, cut into non-overlapping ``block_size``
windows, so ``val_loss`` (mean cross-entropy per character, in nats; perplexity is
``exp(val_loss)``) and ``val_acc`` (next-character accuracy) are comparable across
epochs and across trials with the same ``block_size``.

Hyperparameters (config keys, all optional):
    n_layer (int, 2): transformer blocks.
    n_head (int, 2): attention heads; must divide ``n_embd``.
    n_embd (int, 64): width of the residual stream.
    block_size (int, 64): context length in characters (training and validation windows).
    dropout (float in [0, 1), 0.0): on embeddings, attention weights and residual branches.
    steps_per_epoch (int, 25): optimizer steps per epoch.
    batch_size (int, 32 here, unlike the loop's 64): windows per micro-batch.
    Plus the loop's keys: ``lr``, ``optimizer``, ``weight_decay``, ``lr_schedule``,
    ``warmup_epochs``, ``grad_clip``, ``grad_accum``, ``label_smoothing``, ``amp`` and the
    rest of :class:`trainables._config.LoopConfig` (``prune_amount`` also prunes the head,
    whose weight is the embedding's).

A good start: adam, lr 3e-3, grad_clip 1.0 with the default model (about 0.1 M
parameters): about 60 ms of CPU time per step on one thread (about 2 s per epoch with
validation), validation perplexity about 10 after 4 epochs and 9 after 6 (``val_loss``
2.3 and 2.2; a uniform guess is ``log(103)`` = 4.6).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from trainables._config import LoopConfig, get_float, get_int
from trainables._loop import Task, fit
from trainables._session import Session, default_session
from trainables._text import contiguous_windows, load_corpus, random_windows

__all__ = ["CharGPT", "GPTConfig", "make_task", "train"]

DEFAULT_STEPS_PER_EPOCH = 25
# Loop keys whose default differs here: 32 windows of 64 characters make a 2,048-token step.
_LOOP_DEFAULTS: dict[str, Any] = {"batch_size": 32}
# nanoGPT's initialisation: N(0, 0.02), residual projections scaled by 1/sqrt(2 * n_layer).
_INIT_STD = 0.02


@dataclass(frozen=True)
class GPTConfig:
    """Shape of a :class:`CharGPT` (defaults as in the module docstring).

    Raises:
        ValueError: A size is below 1, ``dropout`` is outside [0, 1), or ``n_head`` does
            not divide ``n_embd``.
    """

    vocab_size: int
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 64
    block_size: int = 64
    dropout: float = 0.0

    def __post_init__(self) -> None:
        for name in ("vocab_size", "n_layer", "n_head", "n_embd", "block_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"`{name}` must be >= 1, but got {getattr(self, name)!r}.")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"`dropout` must be in [0, 1), but got {self.dropout!r}.")
        if self.n_embd % self.n_head:
            raise ValueError(
                f"`n_embd` must be divisible by `n_head`, but got (n_embd={self.n_embd}, "
                f"n_head={self.n_head}). To fix: pick n_embd as a multiple of n_head."
            )

    @classmethod
    def from_config(cls, config: Mapping[str, Any], vocab_size: int) -> GPTConfig:
        """Reads and validates the model keys of a trial config."""
        n_embd = get_int(config, "n_embd", cls.n_embd, low=1)
        n_head = get_int(config, "n_head", cls.n_head, low=1)
        if n_embd % n_head:
            raise ValueError(
                f"config['n_embd'] must be divisible by config['n_head'], but got "
                f"(n_embd={n_embd}, n_head={n_head}). To fix: pick n_embd as a multiple "
                "of n_head, or constrain them together in the search space."
            )
        return cls(
            vocab_size=vocab_size,
            n_layer=get_int(config, "n_layer", cls.n_layer, low=1),
            n_head=n_head,
            n_embd=n_embd,
            block_size=get_int(config, "block_size", cls.block_size, low=1),
            dropout=get_float(config, "dropout", cls.dropout, low=0.0, high=1.0, high_open=True),
        )


class _CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.dropout = cfg.dropout
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.resid_drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        # (B, T, 3C) -> three (B, n_head, T, head_size)
        q, k, v = self.qkv(x).view(b, t, 3, self.n_head, c // self.n_head).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(
            q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0
        )
        out: torch.Tensor = self.resid_drop(self.proj(y.transpose(1, 2).reshape(b, t, c)))
        return out


class _Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd)
        self.attn = _CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd)
        self.fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)
        self.resid_drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        out: torch.Tensor = x + self.resid_drop(self.proj(F.gelu(self.fc(self.ln_2(x)))))
        return out


class CharGPT(nn.Module):
    """Decoder-only transformer with learned positions and a head tied to the embedding."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.pos_emb = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.Sequential(*(_Block(cfg) for _ in range(cfg.n_layer)))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.head.weight = self.tok_emb.weight
        self.apply(_init_weights)
        for name, param in self.named_parameters():
            if name.endswith("proj.weight"):  # the projections back into the residual stream
                nn.init.normal_(param, std=_INIT_STD / math.sqrt(2 * cfg.n_layer))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Logits of shape (batch, vocab, time) for ids of shape (batch, time).

        Classes are on dim 1, as ``F.cross_entropy`` takes them with (batch, time)
        targets; ``logits[:, :, t]`` depends on ``idx[:, : t + 1]`` only.

        Raises:
            ValueError: The sequence is longer than ``block_size``.
        """
        t = idx.shape[1]
        if t > self.cfg.block_size:
            raise ValueError(
                f"Sequence length {t} exceeds the model's block_size {self.cfg.block_size}."
            )
        pos = torch.arange(t, device=idx.device)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(pos))
        logits: torch.Tensor = self.head(self.ln_f(self.blocks(x)))
        return logits.transpose(1, 2)


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, nn.Linear | nn.Embedding):
        nn.init.normal_(module.weight, std=_INIT_STD)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


def make_task(config: Mapping[str, Any]) -> Task:
    """The character LM task for a trial config (the corpus is loaded once per process).

    Raises:
        ValueError: A model or data hyperparameter is invalid.
    """
    config = {**_LOOP_DEFAULTS, **config}
    corpus = load_corpus()
    model_cfg = GPTConfig.from_config(config, corpus.vocab_size)
    steps = get_int(config, "steps_per_epoch", DEFAULT_STEPS_PER_EPOCH, low=1)
    loop_cfg = LoopConfig.from_config(config)
    # Exactly `steps` optimizer steps of full batches per epoch.
    count = steps * loop_cfg.batch_size * loop_cfg.grad_accum
    block = model_cfg.block_size
    x_val, y_val = contiguous_windows(corpus.val, block)

    def sample_train(generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        return random_windows(corpus.train, count, block, generator)

    # Each epoch draws its own windows; this example epoch fixes their number and shape.
    x_train, y_train = sample_train(torch.Generator().manual_seed(0))
    return Task(
        x_train,
        y_train,
        x_val,
        y_val,
        make_model=lambda: CharGPT(model_cfg),
        sample_train=sample_train,
    )


def train(config: dict[str, Any], session: Session | None = None) -> None:
    """Ray Tune function trainable: trains the character LM (see the module docstring).

    Args:
        config: Hyperparameters and ``tuner_*`` keys.
        session: Where to report; Ray Tune's (or, for a data-parallel trial, Ray Train's) when None.
    """
    config = {**_LOOP_DEFAULTS, **config}
    fit(config, make_task(config), session if session is not None else default_session(config))
