"""A character corpus that ships with Python, its vocabulary, split and training windows.

The corpus is ``pydoc_data.topics`` (the text behind ``help("topic")``: about 0.5 M
characters of English prose and Python code, part of the standard library), its values
joined in sorted key order. It varies a little between Python releases, so losses are
comparable between trials on the same Python, not across Python versions.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch

__all__ = [
    "VAL_FRACTION",
    "CharCorpus",
    "contiguous_windows",
    "corpus_text",
    "load_corpus",
    "random_windows",
]

# Fixed split: the first 90% of the characters train, the last 10% validate.
VAL_FRACTION = 0.1


@dataclass(frozen=True)
class CharCorpus:
    """A text encoded as character ids, with a contiguous train/validation split.

    Attributes:
        chars: The vocabulary: every distinct character of the text, sorted; a
            character's id is its index here.
        train: Ids of the first ``1 - VAL_FRACTION`` of the text (int64, 1-D).
        val: Ids of the rest of the text (int64, 1-D).
    """

    chars: tuple[str, ...]
    train: torch.Tensor
    val: torch.Tensor

    @property
    def vocab_size(self) -> int:
        """Number of distinct characters."""
        return len(self.chars)

    def encode(self, text: str) -> torch.Tensor:
        """Ids of ``text`` (int64, 1-D); ``ValueError`` on a character outside the vocabulary."""
        return torch.from_numpy(_encode(text, self.chars))

    def decode(self, ids: torch.Tensor) -> str:
        """The text of a 1-D tensor of ids."""
        return "".join(self.chars[i] for i in ids.tolist())


def _encode(text: str, chars: tuple[str, ...]) -> np.ndarray:
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    vocab = np.array([ord(c) for c in chars], dtype=np.uint32)  # sorted, as chars is
    ids = np.searchsorted(vocab, codes)
    unknown = (ids >= len(vocab)) | (vocab[np.minimum(ids, len(vocab) - 1)] != codes)
    if unknown.any():
        bad = sorted({chr(c) for c in codes[unknown]})
        raise ValueError(f"Text has characters outside the vocabulary: {bad!r}.")
    return ids.astype(np.int64)


def corpus_text() -> str:
    """The raw corpus: ``pydoc_data.topics`` values joined in sorted key order."""
    from pydoc_data.topics import topics

    return "".join(topics[key] for key in sorted(topics))


@functools.lru_cache(maxsize=1)
def load_corpus() -> CharCorpus:
    """The encoded, split corpus (built once per process; deterministic)."""
    text = corpus_text()
    chars = tuple(sorted(set(text)))
    ids = torch.from_numpy(_encode(text, chars))
    n_train = int(len(ids) * (1 - VAL_FRACTION))
    return CharCorpus(chars=chars, train=ids[:n_train], val=ids[n_train:])


def _gather(
    ids: torch.Tensor, starts: torch.Tensor, length: int
) -> tuple[torch.Tensor, torch.Tensor]:
    windows = ids[starts[:, None] + torch.arange(length + 1)]
    return windows[:, :-1], windows[:, 1:]


def random_windows(
    ids: torch.Tensor, count: int, length: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """``count`` windows at uniformly random offsets: inputs and next-character targets.

    Both are (count, length) int64; ``targets[:, t]`` is the character after
    ``inputs[:, t]``. Offsets are drawn from ``generator`` (a CPU generator).

    Raises:
        ValueError: ``ids`` is too short for one window of ``length + 1`` characters.
    """
    if len(ids) < length + 1:
        raise ValueError(
            f"A window needs length + 1 = {length + 1} characters, but the text has {len(ids)}."
        )
    starts = torch.randint(0, len(ids) - length, (count,), generator=generator)
    return _gather(ids, starts, length)


def contiguous_windows(ids: torch.Tensor, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The text cut into non-overlapping windows (the last partial one dropped), with targets.

    Every character but the first and the few after the last full window is a target
    exactly once, so a mean loss over these windows is a loss over the text.

    Raises:
        ValueError: ``ids`` is too short for one window of ``length + 1`` characters.
    """
    count = (len(ids) - 1) // length
    if count < 1:
        raise ValueError(
            f"A window needs length + 1 = {length + 1} characters, but the text has {len(ids)}."
        )
    return _gather(ids, torch.arange(count) * length, length)
