"""Trials waiting for resources: each one PENDING longer than ``resources.pending_warning``
is reported once, with why it waits (what the cluster has against what a trial asks for).

The budget guard keeps one and feeds it at each step of Tune's loop; the warnings go to
the ledger (``pending_warnings``) and the live view.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ray.tune.experiment import Trial

from tuner.budget import NodeSeen, NodeType, pending_reason


class PendingWatch:
    """Reports trials PENDING longer than ``warning_s``, each once, with the reason.

    Args:
        request: One trial's resource bundle.
        node_types: The autoscaler's node types, when known.
        max_workers: The autoscaler's global worker cap, when known.
        warning_s: Report a trial PENDING longer than this.
        say: Prints a message for the user.
    """

    def __init__(
        self,
        *,
        request: Mapping[str, float],
        node_types: Sequence[NodeType],
        max_workers: int | None,
        warning_s: float,
        say: Callable[[str], None],
    ) -> None:
        self._request = dict(request)
        self._node_types = list(node_types)
        self._max_workers = max_workers
        self._warning_s = warning_s
        self._say = say
        self._since: dict[str, float] = {}
        self._warned: set[str] = set()
        self.warnings: list[dict[str, Any]] = []

    def started(self, trial_id: str) -> None:
        """``trial_id`` got its resources."""
        self._since.pop(trial_id, None)

    def watch(self, trials: Sequence[Trial], now: float, alive: Sequence[NodeSeen]) -> None:
        """Times the PENDING ones among ``trials``; warns of those waiting too long."""
        for trial in trials:
            if trial.status != Trial.PENDING:
                self._since.pop(trial.trial_id, None)
                continue
            since = self._since.setdefault(trial.trial_id, now)
            waited = now - since
            if waited < self._warning_s or trial.trial_id in self._warned:
                continue
            self._warned.add(trial.trial_id)
            reason = self.reason(alive)
            self.warnings.append(
                {"trial": trial.trial_id, "pending_s": round(waited, 1), "reason": reason}
            )
            self._say(f"trial {trial.trial_id} PENDING for {waited:.0f} s: {reason}")

    def reason(self, alive: Sequence[NodeSeen]) -> str:
        """Why a trial of this campaign would wait for resources with ``alive`` nodes."""
        totals = [{"GPU": n.gpus, "CPU": n.cpus} for n in alive]
        by_type: dict[str, int] = {}
        for node in alive:
            for t in self._node_types:
                if not t.head and _same_shape(t.resources, node):
                    by_type[t.name] = by_type.get(t.name, 0) + 1
                    break
        return pending_reason(
            self._request,
            self._node_types,
            totals,
            (),
            workers_by_type=by_type,
            max_workers=self._max_workers,
        )


def _same_shape(resources: Mapping[str, float], node: NodeSeen) -> bool:
    return resources.get("GPU", 0.0) == node.gpus and resources.get("CPU", 0.0) == node.cpus
