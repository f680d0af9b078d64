"""Atomic writes (tuner.atomic): whole files or none, no temporary files left behind."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

import pytest

from tuner import atomic


def test_atomic_write_replaces_and_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "x.json"
    atomic.write_json(target, {"a": 1})
    atomic.write_json(target, {"a": 2})
    assert target.read_text().strip().endswith("}")
    assert '"a": 2' in target.read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_a_failed_write_keeps_the_old_file_and_removes_its_temporary(tmp_path: Path) -> None:
    target = tmp_path / "state.bin"
    atomic.write_bytes(target, b"old")

    def half_then_fail(handle: IO[bytes]) -> None:
        handle.write(b"ne")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic.write_with(target, half_then_fail)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["state.bin"]


def test_files_get_the_permissions_of_a_plain_open(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.write_text("x")
    atomic.write_text(tmp_path / "atomic", "x")
    assert (tmp_path / "atomic").stat().st_mode == plain.stat().st_mode


def test_a_copy_keeps_the_modification_time_and_creates_the_folder(tmp_path: Path) -> None:
    source = tmp_path / "result.json"
    source.write_text("{}\n")
    os.utime(source, ns=(1_000_000_000, 2_000_000_123))
    dest = tmp_path / "slot" / "logs" / "result.json"
    atomic.copy_file(source, dest)
    assert dest.read_text() == "{}\n"
    assert dest.stat().st_mtime_ns == 2_000_000_123


def test_copying_a_missing_file_raises_and_leaves_the_target(tmp_path: Path) -> None:
    dest = tmp_path / "kept"
    dest.write_text("kept")
    with pytest.raises(FileNotFoundError):
        atomic.copy_file(tmp_path / "gone", dest)
    assert dest.read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"]
