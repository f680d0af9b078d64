"""The shared loop's data-parallel path: 2 gloo processes on CPU, no Ray.

Ray Train's TorchTrainer sets up the process group and calls the trainable on each worker;
here two processes spawned by torch.multiprocessing do the same, each with a session that
names its rank. Checks: every rank trains on its own half of each epoch, DDP keeps the
replicas identical, the reported train loss is the all-reduced one (equal on both ranks),
rank 0's checkpoint restores, and the run matches one process with the combined batch.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from trainables import digits
from trainables._session import LocalSession

CONFIG = {"channels": 8, "hidden": 16, "batch_size": 64, "tuner_max_epochs": 2}


class _RankSession:
    """A session for one of N processes (what TrainWorkerSession is inside Ray Train)."""

    def __init__(self, rank: int, world: int, out: Path) -> None:
        self.rank, self.world, self.out = rank, world, out
        self.metrics: list[dict[str, Any]] = []

    def report(self, metrics: dict[str, Any], checkpoint_dir: str | None) -> None:
        self.metrics.append(dict(metrics))
        if checkpoint_dir is not None and self.rank == 0:
            data = (Path(checkpoint_dir) / "state.pt").read_bytes()
            (self.out / f"epoch{metrics['epoch']}.pt").write_bytes(data)

    @contextlib.contextmanager
    def checkpoint_dir(self) -> Iterator[str | None]:
        yield None

    def gpu_ids(self) -> list[Any]:
        return []

    def cpu_count(self) -> int | None:
        return 1

    def rank_and_world(self) -> tuple[int, int]:
        return self.rank, self.world

    def stop_requested(self, key: str | None) -> str | None:
        return None


def _worker(rank: int, world: int, port: int, out: str) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        session = _RankSession(rank, world, Path(out))
        digits.train(dict(CONFIG), session)
        torch.save(session.metrics, Path(out) / f"metrics{rank}.pt")
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_two_ranks_train_in_lockstep_and_rank0_checkpoints(tmp_path: Path) -> None:
    mp.spawn(_worker, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True)
    m0 = torch.load(tmp_path / "metrics0.pt")
    m1 = torch.load(tmp_path / "metrics1.pt")
    assert [m["epoch"] for m in m0] == [m["epoch"] for m in m1] == [1, 2]
    for a, b in zip(m0, m1, strict=True):
        assert a["workers"] == b["workers"] == 2
        assert a["train_loss"] == b["train_loss"]  # all-reduced over both shards
        assert a["val_acc"] == b["val_acc"]  # identical replicas score identically
    # Two ranks x 64 see, step by step, the same samples as one process with batches of 128
    # (rank r takes order[r::2]), and DDP averages their gradients: the same training, up to
    # float summation order and the one sample the equal shards leave out of each epoch.
    single = LocalSession(tmp_path / "single")
    digits.train({**CONFIG, "batch_size": 128}, single)
    for a, ref in zip(m0, single.metrics, strict=True):
        assert abs(a["train_loss"] - ref["train_loss"]) < 2e-3
        assert abs(a["val_loss"] - ref["val_loss"]) < 2e-3
    # Only rank 0 wrote checkpoints, and one restores into a plain (single-process) model.
    assert sorted(p.name for p in tmp_path.glob("epoch*.pt")) == ["epoch1.pt", "epoch2.pt"]
    state = torch.load(tmp_path / "epoch2.pt", weights_only=False)
    model = digits.make_task(dict(CONFIG)).make_model()
    model.load_state_dict(state["model"])
