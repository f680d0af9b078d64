"""Atomic file writes: a reader sees the old file or the new one, never half of one.

Every file tuner or a trainable writes in place (the run folder's JSON and YAML, the
scheduler's state, Tune snapshot copies, reports, checkpoints) goes through here: the data
is written to a temporary file beside the target (a unique name, so two writers never share
one), then renamed over it. With ``durable`` (the default) the data is fsynced before the
rename, so a crash of the machine cannot leave a renamed but empty file; copies made only to
survive a crash of the *process* (Tune snapshot slots) skip the fsync. Files get the
permissions a plain ``open()`` would give them (0666 less the umask).

Standard library only: trials import it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

__all__ = ["copy_file", "fsync_dir", "write_bytes", "write_json", "write_text", "write_with"]


def _read_umask() -> int:
    # /proc tells it without changing it; elsewhere the set-and-restore dance, once, at import.
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


_MODE = 0o666 & ~_read_umask()


def write_with(
    path: str | os.PathLike[str], write: Callable[[IO[bytes]], object], *, durable: bool = True
) -> None:
    """Writes ``path`` atomically: ``write`` fills a temporary file that then replaces it.

    Args:
        path: The file to write; its folder is created if missing.
        write: Called with the temporary file, open for writing bytes.
        durable: fsync the data before the rename.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _MODE)
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_bytes(path: str | os.PathLike[str], data: bytes, *, durable: bool = True) -> None:
    """Writes ``data`` to ``path`` atomically."""
    write_with(path, lambda handle: handle.write(data), durable=durable)


def write_text(path: str | os.PathLike[str], text: str, *, durable: bool = True) -> None:
    """Writes ``text`` (UTF-8) to ``path`` atomically."""
    write_bytes(path, text.encode("utf-8"), durable=durable)


def write_json(
    path: str | os.PathLike[str], data: Any, *, indent: int | None = 2, durable: bool = True
) -> None:
    """Writes ``data`` as JSON atomically (values JSON lacks are written as ``str()``)."""
    text = json.dumps(data, indent=indent, default=str)
    write_text(path, text + "\n" if indent is not None else text, durable=durable)


def copy_file(
    source: str | os.PathLike[str], dest: str | os.PathLike[str], *, durable: bool = False
) -> None:
    """Copies ``source`` over ``dest`` atomically, with its access and modification times.

    Raises:
        FileNotFoundError: ``source`` does not exist (``dest`` is left as it was).
    """

    def copy(handle: IO[bytes]) -> None:
        with open(source, "rb") as src:
            shutil.copyfileobj(src, handle)
        handle.flush()
        stat = os.stat(source)
        os.utime(handle.fileno(), ns=(stat.st_atime_ns, stat.st_mtime_ns))

    write_with(dest, copy, durable=durable)


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """Makes renames in ``directory`` durable (where the platform lets a folder be opened)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
