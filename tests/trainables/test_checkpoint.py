"""Checkpoints are verified before they are restored, and a bad one falls back (no Ray).

The write side (manifest written last, sizes and hashes), what the read side rejects
(truncation, a flipped bit, a missing or broken manifest, a state that does not unpickle)
and the loop's fallback to the newest good earlier checkpoint, or to a fresh start.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.trainables._support import Preempted, PreemptedSession, checkpoint_weights
from trainables import _checkpoint, tabular
from trainables._checkpoint import (
    CHECKPOINT_FILE,
    MANIFEST_FILE,
    CheckpointError,
    CheckpointFallbackWarning,
    Located,
)
from trainables._loop import FALLBACK_KEY
from trainables._session import LocalSession

CONFIG: dict[str, Any] = {"tuner_max_epochs": 5, "tuner_seed": 3, "lr_schedule": "cosine"}
COMPARED = ("epoch", "train_loss", "val_loss", "val_acc")
ATOL = 1e-6


def _state(epoch: int = 3, fmt: int = 4) -> dict[str, Any]:
    """A state like the loop's: model and optimizer state, RNG streams, metrics."""
    torch.manual_seed(epoch)
    model = torch.nn.Linear(4, 3)
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.randn(2, 4)).sum().backward()
    optimizer.step()
    return {
        "format": fmt,
        "epoch": epoch,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "rng": {"torch": torch.get_rng_state(), "python": (3, (1, 2, 3), None)},
        "metrics": {"epoch": epoch, "val_acc": 0.5},
    }


def _written(directory: Path, epoch: int = 3) -> Path:
    directory.mkdir(parents=True)
    _checkpoint.write(directory, _state(epoch))
    return directory


def _flip_bit(path: Path, at: float = 0.5) -> None:
    data = bytearray(path.read_bytes())
    data[int(len(data) * at)] ^= 0x10
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _assert_same(got: Any, want: Any) -> None:
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor) and got.dtype == want.dtype
        assert torch.equal(got, want)
    elif isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys()
        for key in want:
            _assert_same(got[key], want[key])
    elif isinstance(want, list | tuple):
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _assert_same(g, w)
    else:
        assert got == want


# --- write and verify -----------------------------------------------------------------


def test_write_puts_a_manifest_with_size_and_hash_and_reads_back_exactly(tmp_path: Path) -> None:
    state = _state()
    _checkpoint.write(tmp_path, state)

    assert sorted(os.listdir(tmp_path)) == [MANIFEST_FILE, CHECKPOINT_FILE]  # no temp files
    manifest = json.loads((tmp_path / MANIFEST_FILE).read_text())
    data = (tmp_path / CHECKPOINT_FILE).read_bytes()
    assert manifest == {
        "format": 1,
        "epoch": 3,
        "files": {CHECKPOINT_FILE: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}},
    }
    _assert_same(_checkpoint.read(tmp_path), state)


def test_sha256_streams_large_files(tmp_path: Path) -> None:
    data = os.urandom(3 * (1 << 20) + 17)  # more than one 1 MiB block, not a whole number
    (tmp_path / "big").write_bytes(data)
    assert _checkpoint.sha256_file(tmp_path / "big") == hashlib.sha256(data).hexdigest()


def test_a_failed_write_leaves_no_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(Exception, match=r"pickle|lambda"):
        _checkpoint.write(tmp_path, {"epoch": 1, "bad": lambda: None})
    assert os.listdir(tmp_path) == []


def test_truncated_state_is_rejected(tmp_path: Path) -> None:
    ck = _written(tmp_path / "ck")
    _truncate(ck / CHECKPOINT_FILE)
    with pytest.raises(CheckpointError, match=r"state.pt has \d+ bytes, the manifest lists \d+"):
        _checkpoint.read(ck)


def test_bit_flipped_state_is_rejected(tmp_path: Path) -> None:
    ck = _written(tmp_path / "ck")
    _flip_bit(ck / CHECKPOINT_FILE)
    with pytest.raises(CheckpointError, match=r"state\.pt does not match its SHA-256"):
        _checkpoint.read(ck)


def test_missing_manifest_is_a_partial_write(tmp_path: Path) -> None:
    # The state is complete, but the writer stopped before the manifest (written last).
    ck = _written(tmp_path / "ck")
    (ck / MANIFEST_FILE).unlink()
    with pytest.raises(CheckpointError, match=r"no manifest\.json: the checkpoint was not"):
        _checkpoint.read(ck, unverified_formats=(2, 3))


def test_missing_state_is_rejected(tmp_path: Path) -> None:
    # A partial copy that has the manifest but not (yet) the state.
    ck = _written(tmp_path / "ck")
    (ck / CHECKPOINT_FILE).unlink()
    with pytest.raises(CheckpointError, match=r"state\.pt is missing"):
        _checkpoint.read(ck)
    (ck / MANIFEST_FILE).unlink()
    with pytest.raises(CheckpointError, match=r"no manifest\.json and no state\.pt"):
        _checkpoint.read(ck)


@pytest.mark.parametrize(
    ("manifest", "match"),
    [
        ('{"format": 1, "epoch": 3, "fi', "does not parse"),
        ("[]", "is not a format-1 manifest"),
        ('{"format": 2, "epoch": 3, "files": {"state.pt": {}}}', "is not a format-1 manifest"),
        ('{"format": 1, "epoch": 3, "files": {}}', "is not a format-1 manifest"),
        (
            '{"format": 1, "epoch": 3, "files": {"state.pt": {}, "../x": {}}}',
            "not a plain file name",
        ),
    ],
    ids=["truncated", "not-an-object", "other-format", "no-state", "path-escape"],
)
def test_broken_manifest_is_rejected(manifest: str, match: str, tmp_path: Path) -> None:
    ck = _written(tmp_path / "ck")
    (ck / MANIFEST_FILE).write_text(manifest)
    with pytest.raises(CheckpointError, match=match):
        _checkpoint.read(ck)


def test_manifest_of_another_epoch_is_rejected(tmp_path: Path) -> None:
    ck = _written(tmp_path / "ck")
    manifest = json.loads((ck / MANIFEST_FILE).read_text())
    (ck / MANIFEST_FILE).write_text(json.dumps({**manifest, "epoch": 9}))
    with pytest.raises(CheckpointError, match="holds epoch 3, the manifest says 9"):
        _checkpoint.read(ck)


def test_unpicklable_state_with_a_matching_manifest_is_rejected(tmp_path: Path) -> None:
    # weights_only loading refuses arbitrary objects: the hash is fine, the state is not.
    ck = tmp_path / "ck"
    ck.mkdir()
    torch.save({"epoch": 3, "obj": Path("x")}, ck / CHECKPOINT_FILE)
    data = (ck / CHECKPOINT_FILE).read_bytes()
    entry = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    manifest = {"format": 1, "epoch": 3, "files": {CHECKPOINT_FILE: entry}}
    (ck / MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match=r"state\.pt does not load"):
        _checkpoint.read(ck)


def test_pre_manifest_state_is_read_unverified_unless_damaged(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    ck.mkdir()
    state = _state(fmt=3)
    torch.save(state, ck / CHECKPOINT_FILE)
    _assert_same(_checkpoint.read(ck, unverified_formats=(2, 3)), state)
    _truncate(ck / CHECKPOINT_FILE)
    with pytest.raises(CheckpointError, match=r"state\.pt does not load"):
        _checkpoint.read(ck, unverified_formats=(2, 3))


def test_unlisted_files_are_ignored(tmp_path: Path) -> None:
    ck = _written(tmp_path / "ck")
    (ck / ".metadata.json").write_text("{}")  # e.g. Ray's own checkpoint metadata
    assert _checkpoint.read(ck)["epoch"] == 3


def test_earlier_indices_are_the_smaller_checkpoint_names_newest_first() -> None:
    names = ["checkpoint_000010", "checkpoint_000002", "checkpoint_tmp_ab12", "x", "checkpoint_9"]
    assert _checkpoint.earlier_indices(names, "checkpoint_000010") == [
        "checkpoint_9",
        "checkpoint_000002",
    ]
    assert _checkpoint.earlier_indices(names, "checkpoint_000002") == []
    assert _checkpoint.earlier_indices(names, "restored") == []  # not a trial's checkpoint


# --- restore and fallback -------------------------------------------------------------


def _trial(tmp_path: Path, epochs: int = 3) -> list[Path]:
    """Checkpoints checkpoint_000001.. of a trial folder, epoch i in the i-th."""
    return [
        _written(tmp_path / "trial" / f"checkpoint_{i:06d}", epoch=i) for i in range(1, epochs + 1)
    ]


def test_good_checkpoint_restores_without_warning(
    tmp_path: Path, recwarn: pytest.WarningsRecorder
) -> None:
    *_, latest = _trial(tmp_path)
    restored = _checkpoint.restore(str(latest))
    assert restored.state is not None and restored.state["epoch"] == 3
    assert restored.fallback is None
    assert not [w for w in recwarn if issubclass(w.category, CheckpointFallbackWarning)]


def test_fallback_picks_the_newest_good_earlier_checkpoint(tmp_path: Path) -> None:
    first, second, third, fourth = _trial(tmp_path, epochs=4)
    _flip_bit(fourth / CHECKPOINT_FILE)
    _truncate(third / CHECKPOINT_FILE)
    message = (
        rf"Checkpoint {re.escape(str(fourth))} is bad \(state.pt does not match its SHA-256 "
        rf"in the manifest\); earlier ones bad too: {re.escape(str(third))} \(state.pt has "
        rf"\d+ bytes.*\); fell back to {re.escape(str(second))} \(epoch 2\)\."
    )
    with pytest.warns(CheckpointFallbackWarning, match=message):
        restored = _checkpoint.restore(str(fourth))
    assert restored.state is not None and restored.state["epoch"] == 2
    assert restored.fallback == "checkpoint_000004 -> checkpoint_000002"
    assert first.exists()  # nothing is deleted


def test_all_bad_starts_from_scratch_with_a_warning(tmp_path: Path) -> None:
    first, second = _trial(tmp_path, epochs=2)
    (second / MANIFEST_FILE).unlink()
    _flip_bit(first / CHECKPOINT_FILE)
    with pytest.warns(
        CheckpointFallbackWarning,
        match=rf"{re.escape(str(second))} is bad \(no manifest.json.*"
        r"no earlier good checkpoint: the trial starts from scratch\.",
    ):
        restored = _checkpoint.restore(str(second), unverified_formats=(2, 3))
    assert restored.state is None
    assert restored.fallback == "checkpoint_000002 -> none"


def test_a_checkpoint_outside_a_trial_folder_has_nothing_to_fall_back_to(tmp_path: Path) -> None:
    _trial(tmp_path)
    other = _written(tmp_path / "trial" / "restored")
    _flip_bit(other / CHECKPOINT_FILE)
    with pytest.warns(CheckpointFallbackWarning, match="starts from scratch"):
        assert _checkpoint.restore(str(other)).state is None


def test_failing_lineage_and_opens_do_not_crash_the_restore(tmp_path: Path) -> None:
    _, second = _trial(tmp_path, epochs=2)
    _flip_bit(second / CHECKPOINT_FILE)

    def unlisted(directory: str) -> list[Located]:
        raise ConnectionError("storage unreachable")

    with pytest.warns(CheckpointFallbackWarning, match="listing earlier checkpoints failed"):
        assert _checkpoint.restore(str(second), unlisted).state is None

    def broken_download() -> Any:
        raise OSError("download failed")

    def lineage(directory: str) -> list[Located]:
        return [
            Located("gs://b/t/checkpoint_000002", lambda: contextlib.nullcontext(directory)),
            Located("gs://b/t/checkpoint_000001", broken_download),
        ]

    with pytest.warns(
        CheckpointFallbackWarning, match=r"checkpoint_000001 \(OSError: download failed\)"
    ):
        restored = _checkpoint.restore(str(second), lineage)
    assert restored.fallback == "checkpoint_000002 -> none"


# --- the loop -------------------------------------------------------------------------


def _interrupted(tmp_path: Path, after: int) -> PreemptedSession:
    first = PreemptedSession(tmp_path / "first", after=after)
    with pytest.raises(Preempted):
        tabular.train(dict(CONFIG), first)
    return first


def test_loop_falls_back_and_continues_exactly(tmp_path: Path) -> None:
    whole = LocalSession(tmp_path / "whole")
    tabular.train(dict(CONFIG), whole)
    first = _interrupted(tmp_path, after=3)
    bad = Path(first.root, "checkpoint_000003")
    assert str(bad) == first.latest_checkpoint
    _flip_bit(bad / CHECKPOINT_FILE)

    second = LocalSession(tmp_path / "second", restore_from=bad)
    with pytest.warns(
        CheckpointFallbackWarning,
        match=r"checkpoint_000003 is bad .*SHA-256.*"
        r"fell back to .*checkpoint_000002 \(epoch 2\)",
    ):
        tabular.train(dict(CONFIG), second)

    # Epoch 3 again from epoch 2's state, and the same numbers as the uninterrupted run.
    assert [m["epoch"] for m in second.metrics] == [3, 4, 5]
    assert second.metrics[0][FALLBACK_KEY] == "checkpoint_000003 -> checkpoint_000002"
    assert all(FALLBACK_KEY not in m for m in second.metrics[1:])
    for got, want in zip(second.metrics, whole.metrics[2:], strict=True):
        for key in COMPARED:
            assert got[key] == pytest.approx(want[key], abs=ATOL, rel=0), key
    final, expected = (
        checkpoint_weights(second.latest_checkpoint),
        checkpoint_weights(whole.latest_checkpoint),
    )
    for name in expected:
        torch.testing.assert_close(final[name], expected[name], atol=ATOL, rtol=0)
    # The fallback note is not saved into the new checkpoints' metrics.
    assert second.latest_checkpoint is not None
    assert FALLBACK_KEY not in _checkpoint.read(second.latest_checkpoint)["metrics"]


def test_loop_starts_from_scratch_when_no_checkpoint_is_good(tmp_path: Path) -> None:
    first = _interrupted(tmp_path, after=2)
    for name in ("checkpoint_000001", "checkpoint_000002"):
        _truncate(Path(first.root, name, CHECKPOINT_FILE))

    second = LocalSession(tmp_path / "second", restore_from=first.latest_checkpoint)
    with pytest.warns(CheckpointFallbackWarning, match="the trial starts from scratch"):
        tabular.train(dict(CONFIG), second)
    assert [m["epoch"] for m in second.metrics] == [1, 2, 3, 4, 5]
    assert second.metrics[0][FALLBACK_KEY] == "checkpoint_000002 -> none"
    # From scratch with the same seed: the same run as the first one was.
    for got, want in zip(second.metrics, first.metrics, strict=False):
        for key in COMPARED:
            assert got[key] == pytest.approx(want[key], abs=ATOL, rel=0), key


def test_loop_restores_a_good_checkpoint_exactly(tmp_path: Path) -> None:
    first = _interrupted(tmp_path, after=2)
    assert first.latest_checkpoint is not None
    saved = torch.load(Path(first.latest_checkpoint, CHECKPOINT_FILE), weights_only=True)
    # What fit restores from is the state as saved: epoch, weights, optimizer, RNG streams.
    _assert_same(_checkpoint.read(first.latest_checkpoint), saved)
    assert (
        saved["epoch"] == 2
        and saved["optimizer"]["state"]
        and saved["rng"]["data_order"] is not None
    )

    second = LocalSession(tmp_path / "second", restore_from=first.latest_checkpoint)
    tabular.train(dict(CONFIG), second)
    assert [m["epoch"] for m in second.metrics] == [3, 4, 5]
    assert all(FALLBACK_KEY not in m for m in second.metrics)


# --- Ray checkpoints on a remote (non-local) filesystem ---------------------------------


def test_ray_lineage_lists_and_downloads_earlier_checkpoints_remotely(tmp_path: Path) -> None:
    from pyarrow import fs as pafs
    from ray import train

    from trainables._session import ray_lineage

    _, second, third = _trial(tmp_path / "bucket")
    _flip_bit(third / CHECKPOINT_FILE)
    # A pyarrow filesystem that is not LocalFileSystem: Ray downloads, as from GCS or S3.
    remote = pafs.SubTreeFileSystem(str(tmp_path / "bucket"), pafs.LocalFileSystem())
    handed = train.Checkpoint("trial/checkpoint_000003", filesystem=remote)
    with handed.as_directory() as local:
        assert Path(local) != third  # a download
        lineage = ray_lineage(handed, local)
        assert [c.name for c in lineage] == [
            f"subtree://trial/checkpoint_{i:06d}" for i in (3, 2, 1)
        ]
        with pytest.warns(
            CheckpointFallbackWarning,
            match=r"subtree://trial/checkpoint_000003 is bad .*fell back to "
            r"subtree://trial/checkpoint_000002 \(epoch 2\)",
        ):
            restored = _checkpoint.restore(local, lambda _: lineage)
    assert restored.state is not None and restored.state["epoch"] == 2
    assert restored.fallback == "checkpoint_000003 -> checkpoint_000002"
    assert second.exists()

    on_disk = train.Checkpoint(str(third), filesystem=pafs.LocalFileSystem())
    assert [c.name for c in ray_lineage(on_disk, str(third))] == [
        str(tmp_path / "bucket" / "trial" / f"checkpoint_{i:06d}") for i in (3, 2, 1)
    ]
