"""Checkpoint directories that are verified before they are trusted, and fallback on restore.

Layout: a checkpoint directory holds the state file (``state.pt``, written by
:func:`torch.save`) and ``manifest.json``, written last and atomically (a temporary name,
fsync, :func:`os.replace`)::

    {"format": 1, "epoch": 3, "files": {"state.pt": {"size": 1234, "sha256": "<hex>"}}}

A checkpoint is good only if the manifest exists and parses, every file it lists has the
listed size and SHA-256, and the state file loads (``torch.load(weights_only=True)``) with
the manifest's epoch. A directory copied only in part (Ray copies the files of a reported
checkpoint in no set order), a truncated or bit-flipped file, or a state written without
its manifest is never taken for a good checkpoint. Files the manifest does not list (Ray's
own metadata) are ignored. States of the formats written before manifests existed are read
unverified (they only have to load), if the caller lists those formats.

On restore (:func:`restore`) a bad checkpoint falls back to the newest good earlier one of
the same trial: the sibling ``checkpoint_NNNNNN`` directories of its parent folder, as Ray
Tune and :class:`~trainables._session.LocalSession` name them, with a smaller index (the
index grows with every checkpoint a trial reports, so this is newest epoch first). When
none is good the trial starts from scratch. Either way a :class:`CheckpointFallbackWarning`
names the bad checkpoint, what was wrong and what was used instead. A session whose storage
is remote lists the earlier checkpoints there itself (``RaySession.checkpoint_lineage``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import warnings
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

from tuner import atomic
from tuner.contract import CHECKPOINT_FILE, MANIFEST_FILE

__all__ = [
    "CHECKPOINT_FILE",
    "MANIFEST_FILE",
    "CheckpointError",
    "CheckpointFallbackWarning",
    "Located",
    "Restored",
    "checkpoint_index",
    "earlier_indices",
    "local_lineage",
    "read",
    "restore",
    "sha256_file",
    "write",
]

_MANIFEST_FORMAT = 1
_BLOCK = 1 << 20  # hashing reads 1 MiB at a time, so a GB-sized state needs no GB of memory
_CHECKPOINT_NAME = re.compile(r"checkpoint_(\d+)")


class CheckpointError(Exception):
    """A checkpoint directory is not a complete, intact checkpoint (the message says why)."""


class CheckpointFallbackWarning(UserWarning):
    """A restore found a bad checkpoint and used an earlier one, or none."""


@dataclass(frozen=True)
class Located:
    """A checkpoint where the trial's storage keeps it.

    Attributes:
        name: How messages name it (a local path, or a URI on remote storage).
        open: Makes it available as a local directory (a download from remote storage) for
            the duration of the context.
    """

    name: str
    open: Callable[[], contextlib.AbstractContextManager[str]]


@dataclass(frozen=True)
class Restored:
    """What :func:`restore` found.

    Attributes:
        state: The state of the checkpoint restored from, or None to start from scratch.
        fallback: None when the handed checkpoint was good, else ``"<bad> -> <used>"``
            (directory names; ``none`` when no checkpoint was good).
    """

    state: dict[str, Any] | None
    fallback: str | None = None


def sha256_file(path: str | os.PathLike[str]) -> str:
    """The hex SHA-256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def write(directory: str | os.PathLike[str], state: dict[str, Any]) -> None:
    """Writes ``state`` (a dict with an int ``epoch``) as a checkpoint into ``directory``.

    The state file first, then the manifest naming its size and hash, each under a
    temporary name, fsynced and renamed into place: until the manifest is in place the
    directory is not a good checkpoint, and once it is, the state it names is complete.
    """
    import torch  # here, so that importing this module (from the sessions) stays light

    directory = os.fspath(directory)
    atomic.write_with(os.path.join(directory, CHECKPOINT_FILE), lambda f: torch.save(state, f))
    path = os.path.join(directory, CHECKPOINT_FILE)
    manifest = {
        "format": _MANIFEST_FORMAT,
        "epoch": int(state["epoch"]),
        "files": {CHECKPOINT_FILE: {"size": os.path.getsize(path), "sha256": sha256_file(path)}},
    }
    data = (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()
    atomic.write_bytes(os.path.join(directory, MANIFEST_FILE), data)
    atomic.fsync_dir(directory)


def _verify(directory: str) -> int:
    """Checks the manifest and every file it lists; returns the manifest's epoch."""
    path = os.path.join(directory, MANIFEST_FILE)
    try:
        with open(path, "rb") as f:
            manifest = json.loads(f.read())
    except (OSError, ValueError) as e:  # JSONDecodeError and UnicodeDecodeError included
        raise CheckpointError(f"{MANIFEST_FILE} does not parse ({e})") from e
    if not isinstance(manifest, dict):
        manifest = {}
    files, epoch = manifest.get("files"), manifest.get("epoch")
    if (
        manifest.get("format") != _MANIFEST_FORMAT
        or not isinstance(epoch, int)
        or not isinstance(files, dict)
        or CHECKPOINT_FILE not in files
    ):
        raise CheckpointError(
            f"{MANIFEST_FILE} is not a format-{_MANIFEST_FORMAT} manifest listing "
            f"{CHECKPOINT_FILE!r}"
        )
    # Cheapest checks first: names and entries, then sizes, then hashes (reading the files).
    for name, entry in files.items():
        if os.path.basename(name) != name or name in ("", ".", ".."):
            raise CheckpointError(f"{MANIFEST_FILE} lists {name!r}, not a plain file name")
        if not isinstance(entry, dict):
            raise CheckpointError(f"{MANIFEST_FILE} entry of {name!r} is not an object")
    for name, entry in files.items():
        try:
            size = os.path.getsize(os.path.join(directory, name))
        except OSError as e:
            raise CheckpointError(f"{name} is missing ({e.strerror})") from e
        if size != entry.get("size"):
            raise CheckpointError(
                f"{name} has {size} bytes, the manifest lists {entry.get('size')} "
                "(truncated or partly copied)"
            )
    for name, entry in files.items():
        try:
            digest = sha256_file(os.path.join(directory, name))
        except OSError as e:
            raise CheckpointError(f"{name} does not read ({e.strerror})") from e
        if digest != entry.get("sha256"):
            raise CheckpointError(f"{name} does not match its SHA-256 in the manifest")
    return epoch


def read(
    directory: str | os.PathLike[str], *, unverified_formats: Collection[int] = ()
) -> dict[str, Any]:
    """The state of a good checkpoint directory, loaded onto the CPU.

    Args:
        directory: The checkpoint directory.
        unverified_formats: State formats written before checkpoints had manifests: such a
            state is accepted without one if it loads. A state of any other format
            without a manifest is a partial write.

    Raises:
        CheckpointError: The directory is not a good checkpoint (see the module doc).
    """
    import torch

    directory = os.fspath(directory)
    epoch = None
    if os.path.exists(os.path.join(directory, MANIFEST_FILE)):
        epoch = _verify(directory)
    elif not os.path.isfile(os.path.join(directory, CHECKPOINT_FILE)):
        raise CheckpointError(f"no {MANIFEST_FILE} and no {CHECKPOINT_FILE}")
    try:
        state = torch.load(
            os.path.join(directory, CHECKPOINT_FILE), map_location="cpu", weights_only=True
        )
    except Exception as e:  # a damaged zip or pickle fails in many ways
        raise CheckpointError(f"{CHECKPOINT_FILE} does not load ({type(e).__name__}: {e})") from e
    if not isinstance(state, dict) or not isinstance(state.get("epoch"), int):
        raise CheckpointError(f"{CHECKPOINT_FILE} does not hold a state dict with an epoch")
    if epoch is None and state.get("format") not in unverified_formats:
        raise CheckpointError(
            f"no {MANIFEST_FILE}: the checkpoint was not completely written "
            "(the manifest is written last)"
        )
    if epoch is not None and state["epoch"] != epoch:
        raise CheckpointError(
            f"{CHECKPOINT_FILE} holds epoch {state['epoch']}, the manifest says {epoch}"
        )
    return state


def checkpoint_index(name: str) -> int | None:
    """NNNNNN of a ``checkpoint_NNNNNN`` directory name, else None."""
    match = _CHECKPOINT_NAME.fullmatch(name)
    return int(match.group(1)) if match else None


def earlier_indices(names: Iterable[str], name: str) -> list[str]:
    """Of ``names``, the ``checkpoint_NNNNNN`` ones before ``name``, newest first.

    Empty when ``name`` is not such a name itself (then its siblings are not known to be
    checkpoints of the same trial).
    """
    own = checkpoint_index(name)
    if own is None:
        return []
    indexed = [(i, n) for n in names if (i := checkpoint_index(n)) is not None]
    return [n for i, n in sorted(indexed, reverse=True) if i < own]


def _at(path: str) -> Callable[[], contextlib.AbstractContextManager[str]]:
    return lambda: contextlib.nullcontext(path)


def local_lineage(directory: str) -> list[Located]:
    """``directory``, then its earlier sibling checkpoints on a local (or mounted) disk."""
    directory = os.path.normpath(directory)
    parent, name = os.path.split(directory)
    try:
        siblings = [e.name for e in os.scandir(parent or ".") if e.is_dir()]
    except OSError:
        siblings = []
    earlier = [os.path.join(parent, n) for n in earlier_indices(siblings, name)]
    return [Located(p, _at(p)) for p in [directory, *earlier]]


def _short(name: str) -> str:
    """The directory name of a path or URI (``checkpoint_000003``)."""
    return name.rstrip("/").rsplit("/", 1)[-1] or name


def restore(
    directory: str,
    lineage: Callable[[str], list[Located]] = local_lineage,
    *,
    unverified_formats: Collection[int] = (),
) -> Restored:
    """Reads the checkpoint in ``directory``, or the newest good earlier one, or none.

    Args:
        directory: The checkpoint handed to the trial, as a local directory.
        lineage: Lists the handed checkpoint (first, as storage names it) and then the
            earlier checkpoints of its trial, newest first; called only when ``directory``
            is bad. The default looks at the sibling directories on the local disk.
        unverified_formats: As for :func:`read`.

    Returns:
        The state to resume from (None: start from scratch) and, after a fallback, what
        happened. Warns with :class:`CheckpointFallbackWarning` after a fallback.
    """
    try:
        return Restored(read(directory, unverified_formats=unverified_formats))
    except CheckpointError as e:
        problem = str(e)
    try:
        located = lineage(directory)
    except Exception as e:  # listing remote storage can fail; the trial still runs
        located = []
        problem += f"; listing earlier checkpoints failed ({type(e).__name__}: {e})"
    bad = located[0].name if located else directory
    skipped: list[str] = []
    for candidate in located[1:]:
        try:
            with candidate.open() as local:
                state = read(local, unverified_formats=unverified_formats)
        except CheckpointError as e:
            skipped.append(f"{candidate.name} ({e})")
            continue
        except Exception as e:  # e.g. a download that fails: try the next one
            skipped.append(f"{candidate.name} ({type(e).__name__}: {e})")
            continue
        _warn(bad, problem, skipped, f"fell back to {candidate.name} (epoch {state['epoch']})")
        return Restored(state, f"{_short(bad)} -> {_short(candidate.name)}")
    _warn(bad, problem, skipped, "no earlier good checkpoint: the trial starts from scratch")
    return Restored(None, f"{_short(bad)} -> none")


def _warn(bad: str, problem: str, skipped: list[str], outcome: str) -> None:
    also = f"; earlier ones bad too: {'; '.join(skipped)}" if skipped else ""
    warnings.warn(
        f"Checkpoint {bad} is bad ({problem}){also}; {outcome}.",
        CheckpointFallbackWarning,
        stacklevel=3,
    )
