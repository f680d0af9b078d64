"""W&B's offline run files read back: the records of a ``run-<id>.wandb`` file.

wandb 0.31 dropped its Python reader (``wandb.sdk.internal.datastore``); its Go core reads
and writes the file. The container is LevelDB's log format behind a 7-byte file header
(``:W&B``, magic 0xBEE1, version 0): 32 KiB blocks of chunks, each with a CRC-32 (seeded
with the chunk type), a length and a type (full, first, middle, last). The records inside
are W&B's own protobuf messages (``wandb.proto.wandb_internal_pb2.Record``). Every chunk's
checksum is checked, so a misread file fails rather than yields garbage.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_HEADER = struct.Struct("<4sHB")
_CHUNK = struct.Struct("<IHB")
_BLOCK = 32 * 1024
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def records(path: Path) -> Iterator[Any]:
    """The W&B records of an offline run file, in the order they were written."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    ident, magic, version = _HEADER.unpack_from(data)
    if (ident, magic, version) != (b":W&B", 0xBEE1, 0):
        raise ValueError(f"{path}: not a W&B run file ({ident!r}, {magic:#x}, {version})")
    pos, pending = _HEADER.size, b""
    while pos + _CHUNK.size <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _CHUNK.size:  # a block's tail too short for a chunk header is padding
            pos += left
            continue
        crc, length, kind = _CHUNK.unpack_from(data, pos)
        if kind == 0:  # zero padding to the end of the block
            pos += left
            continue
        chunk = data[pos + _CHUNK.size : pos + _CHUNK.size + length]
        if zlib.crc32(chunk, zlib.crc32(bytes([kind]))) != crc:
            raise ValueError(f"{path}: bad checksum at byte {pos}")
        pos += _CHUNK.size + length
        pending += chunk
        if kind in (_FULL, _LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            pending = b""
            yield record


def _key(item: Any) -> str:
    return item.key or "/".join(item.nested_key)


def read_run(path: Path) -> dict[str, Any]:
    """An offline run as plain data: its run record's id, project, group, job type and name,
    its config (the run's own then every update, in order), its history rows, its summary
    (every update, in order) and its artifacts (name, type and each file's path in the
    artifact -> the local file W&B recorded for it, with its digest)."""
    run: dict[str, Any] = {"config": {}, "history": [], "summary": {}, "artifacts": []}
    for record in records(path):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run |= {"id": record.run.run_id, "project": record.run.project}
            run |= {"group": record.run.run_group, "job_type": record.run.job_type}
            run["name"] = record.run.display_name
            updates = record.run.config.update
        elif kind == "config":
            updates = record.config.update
        elif kind == "history":
            run["history"].append(
                {_key(item): json.loads(item.value_json) for item in record.history.item}
            )
            continue
        elif kind == "summary":
            for item in record.summary.update:
                run["summary"][_key(item)] = json.loads(item.value_json)
            continue
        elif kind == "artifact":
            files = {
                entry.path: {"local_path": entry.local_path, "digest": entry.digest}
                for entry in record.artifact.manifest.contents
            }
            run["artifacts"].append(
                {"name": record.artifact.name, "type": record.artifact.type, "files": files}
            )
            continue
        else:
            continue
        for item in updates:
            run["config"][item.key] = json.loads(item.value_json)
    return run
