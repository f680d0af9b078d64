"""Where a training loop reports to: Ray Tune in a trial, or an in-process recorder in tests.

The loop talks only to a :class:`Session`, so the same code runs inside a Ray Tune trial
(:class:`RaySession`) and in plain unit tests or profiling runs (:class:`LocalSession`).
Ray is imported lazily, only by :class:`RaySession`.

Besides the :class:`Session` methods, a session may define ``checkpoint_lineage(directory)``
(see :meth:`RaySession.checkpoint_lineage`): the handed checkpoint and its trial's earlier
ones, for the loop to fall back to when the handed one is bad. Without it the loop looks at
the checkpoint's sibling directories on the local disk.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import posixpath
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from trainables import _checkpoint
from tuner.contract import STOP_NAMESPACE, WORKERS_KEY

__all__ = [
    "LocalSession",
    "RaySession",
    "Report",
    "Session",
    "TrainWorkerSession",
    "default_session",
]


class Session(Protocol):
    """What a training loop needs from whoever runs it."""

    def report(self, metrics: dict[str, Any], checkpoint_dir: str | None) -> None:
        """Reports one epoch's metrics, with a checkpoint directory to keep (copied) or None."""
        ...

    def checkpoint_dir(self) -> contextlib.AbstractContextManager[str | None]:
        """Yields a local directory holding the checkpoint to restore from, or None."""
        ...

    def gpu_ids(self) -> list[Any]:
        """GPUs given to this run; empty means the run must not use CUDA."""
        ...

    def cpu_count(self) -> int | None:
        """CPUs given to this run (torch threads to use), or None to leave torch alone."""
        ...

    def rank_and_world(self) -> tuple[int, int]:
        """This worker's rank and the number of data-parallel workers (0, 1 when alone)."""
        ...

    def stop_requested(self, key: str | None) -> str | None:
        """Why the campaign asks its trials to checkpoint and stop now, or None."""
        ...


# The campaign's budget guard writes a stop reason under a per-campaign key of Ray's
# cluster-wide key-value store; trials read it after each epoch.


def stop_signal(key: str | None) -> str | None:
    """The reason the campaign asked its trials to stop (budget exhausted), or None."""
    if not key:
        return None
    from ray.experimental import internal_kv

    if not internal_kv._internal_kv_initialized():  # type: ignore[no-untyped-call]
        return None
    value = internal_kv._internal_kv_get(key, namespace=STOP_NAMESPACE)
    return value.decode() if value else None


def ray_lineage(checkpoint: Any, directory: str) -> list[_checkpoint.Located]:
    """A Ray checkpoint (at ``directory`` locally) and its trial's earlier checkpoints.

    On a local or mounted filesystem these are the sibling directories; on remote storage
    (a pyarrow filesystem such as GCS or S3) the siblings are listed there, and each is
    downloaded only when the loop tries it.
    """
    pafs: Any = importlib.import_module("pyarrow.fs")  # Ray's dependency; no type stubs
    fs, path = checkpoint.filesystem, str(checkpoint.path).rstrip("/")
    if isinstance(fs, pafs.LocalFileSystem):
        return _checkpoint.local_lineage(directory)
    scheme = fs.type_name

    def located(fs_path: str, at: Any) -> _checkpoint.Located:
        return _checkpoint.Located(f"{scheme}://{fs_path}", at)

    lineage = [located(path, lambda: contextlib.nullcontext(directory))]
    parent, name = posixpath.split(path)
    if _checkpoint.checkpoint_index(name) is None:
        return lineage
    infos = fs.get_file_info(pafs.FileSelector(parent))
    names = [i.base_name for i in infos if i.type == pafs.FileType.Directory]
    for earlier in _checkpoint.earlier_indices(names, name):
        other = type(checkpoint)(posixpath.join(parent, earlier), filesystem=fs)
        lineage.append(located(other.path, other.as_directory))
    return lineage


@contextlib.contextmanager
def _local_dir(checkpoint: Any) -> Iterator[str | None]:
    """A Ray checkpoint (Tune's or Train's) as a local directory, or None without one."""
    if checkpoint is None:
        yield None
        return
    with checkpoint.as_directory() as directory:
        yield str(directory)


class RaySession:
    """The session of a Ray Tune function trainable (``ray.tune.report`` and friends)."""

    def report(self, metrics: dict[str, Any], checkpoint_dir: str | None) -> None:
        """Reports to Ray Tune; Ray copies ``checkpoint_dir`` before this returns."""
        from ray import tune

        checkpoint = tune.Checkpoint.from_directory(checkpoint_dir) if checkpoint_dir else None
        tune.report(metrics, checkpoint=checkpoint)

    def _ray_checkpoint(self) -> Any:
        from ray import tune

        return tune.get_checkpoint()

    def checkpoint_dir(self) -> contextlib.AbstractContextManager[str | None]:
        """Yields the trial's restored checkpoint as a local directory, or None."""
        return _local_dir(self._ray_checkpoint())

    def checkpoint_lineage(self, directory: str) -> list[_checkpoint.Located]:
        """The restored checkpoint (at ``directory``) and its earlier ones (:func:`ray_lineage`)."""
        checkpoint = self._ray_checkpoint()
        if checkpoint is None:
            return _checkpoint.local_lineage(directory)
        return ray_lineage(checkpoint, directory)

    def gpu_ids(self) -> list[Any]:
        """The GPU ids Ray assigned to this trial (CUDA_VISIBLE_DEVICES is set to them)."""
        import ray

        return list(ray.get_gpu_ids())

    def cpu_count(self) -> int | None:
        """The trial's CPU resource, rounded down and at least 1; None if Ray assigned none."""
        import ray

        context: Any = ray.get_runtime_context()  # Ray's API is not fully typed
        cpus = context.get_assigned_resources().get("CPU")
        return max(1, int(cpus)) if cpus else None

    def rank_and_world(self) -> tuple[int, int]:
        """A Tune trial trains alone."""
        return 0, 1

    def stop_requested(self, key: str | None) -> str | None:
        """The campaign's stop signal (see :func:`stop_signal`)."""
        return stop_signal(key)


class TrainWorkerSession(RaySession):
    """The session of one Ray Train worker of a data-parallel trial (``ray.train.*``).

    Every worker reports each epoch (Ray Train's report is a barrier); only rank 0 hands over
    a checkpoint, and rank 0's metrics are the ones Tune sees.
    """

    def report(self, metrics: dict[str, Any], checkpoint_dir: str | None) -> None:
        """Reports to Ray Train; rank 0's checkpoint is persisted before this returns."""
        from ray import train

        rank, _ = self.rank_and_world()
        checkpoint = None
        if checkpoint_dir is not None and rank == 0:
            checkpoint = train.Checkpoint.from_directory(checkpoint_dir)
        train.report(metrics, checkpoint=checkpoint)

    def _ray_checkpoint(self) -> Any:
        from ray import train

        return train.get_checkpoint()

    def checkpoint_dir(self) -> contextlib.AbstractContextManager[str | None]:
        """Yields the run's latest checkpoint (the same one on every worker), or None."""
        return _local_dir(self._ray_checkpoint())

    def rank_and_world(self) -> tuple[int, int]:
        """Rank and world size from Ray Train's context."""
        from ray import train

        context: Any = train.get_context()
        return int(context.get_world_rank()), int(context.get_world_size())

    def stop_requested(self, key: str | None) -> str | None:
        """Never: data-parallel ranks must agree on when to stop, so the driver decides."""
        return None


def default_session(config: dict[str, Any]) -> Session:
    """Ray Train's worker session for data-parallel trials, else Ray Tune's."""
    if int(config.get(WORKERS_KEY, 1)) > 1:
        return TrainWorkerSession()
    return RaySession()


@dataclass(frozen=True)
class Report:
    """One call to :meth:`LocalSession.report`: the metrics and the kept checkpoint copy."""

    metrics: dict[str, Any]
    checkpoint: str | None


class LocalSession:
    """An in-process session: records reports and keeps copies of every checkpoint.

    Args:
        root: Directory this session owns; checkpoint copies go to
            ``root/checkpoint_000001`` and so on. A fresh temporary directory (left for
            the caller to delete) when None.
        restore_from: A checkpoint directory (e.g. another session's
            :attr:`latest_checkpoint`) that :meth:`checkpoint_dir` yields, as Ray does for
            a restored trial. When None it yields this session's own latest checkpoint,
            so running a loop twice on one session resumes it.
        use_gpus: Whether :meth:`gpu_ids` offers the visible CUDA devices.
        cpus: What :meth:`cpu_count` returns (None leaves torch's thread count alone).
        stop_after: After this many reports :meth:`stop_requested` returns
            ``stop_reason``, as a campaign's budget guard would (None: never).
        stop_reason: The reason it returns.
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        restore_from: str | os.PathLike[str] | None = None,
        use_gpus: bool = True,
        cpus: int | None = None,
        stop_after: int | None = None,
        stop_reason: str = "budget exhausted",
    ) -> None:
        self.root = Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="tuner-"))
        self.root.mkdir(parents=True, exist_ok=True)
        self.restore_from = str(restore_from) if restore_from is not None else None
        self.use_gpus = use_gpus
        self.cpus = cpus
        self.stop_after = stop_after
        self.stop_reason = stop_reason
        self.reports: list[Report] = []

    @property
    def metrics(self) -> list[dict[str, Any]]:
        """The reported metrics, one dict per report, oldest first."""
        return [r.metrics for r in self.reports]

    @property
    def latest_checkpoint(self) -> str | None:
        """The newest kept checkpoint copy, or None if none was reported."""
        kept = [r.checkpoint for r in self.reports if r.checkpoint is not None]
        return kept[-1] if kept else None

    def report(self, metrics: dict[str, Any], checkpoint_dir: str | None) -> None:
        """Records ``metrics`` and copies ``checkpoint_dir`` (the caller deletes its own)."""
        kept = None
        if checkpoint_dir is not None:
            target = self.root / f"checkpoint_{len(self.reports) + 1:06d}"
            shutil.copytree(checkpoint_dir, target)
            kept = str(target)
        self.reports.append(Report(metrics=dict(metrics), checkpoint=kept))

    @contextlib.contextmanager
    def checkpoint_dir(self) -> Iterator[str | None]:
        """Yields ``restore_from`` if given, else this session's latest checkpoint, or None."""
        yield self.restore_from if self.restore_from is not None else self.latest_checkpoint

    def gpu_ids(self) -> list[Any]:
        """All visible CUDA devices when ``use_gpus`` (outside Ray: CUDA iff available)."""
        import torch

        if not (self.use_gpus and torch.cuda.is_available()):
            return []
        return list(range(torch.cuda.device_count()))

    def cpu_count(self) -> int | None:
        """The ``cpus`` given at construction."""
        return self.cpus

    def rank_and_world(self) -> tuple[int, int]:
        """A local run trains alone."""
        return 0, 1

    def stop_requested(self, key: str | None) -> str | None:
        """``stop_reason`` once ``stop_after`` reports were made (a test's budget stop)."""
        if self.stop_after is not None and len(self.reports) >= self.stop_after:
            return self.stop_reason
        return None
