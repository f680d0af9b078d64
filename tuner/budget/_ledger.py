"""The spend ledger: what every node alive during the campaign cost, and what each trial used.

Pure bookkeeping over observations the Ray glue feeds it (``observe`` with the alive nodes
every half second or so; ``trial_started`` / ``trial_stopped``). Money goes to nodes, not
trials: a node costs from the moment it is first seen alive until it is gone, busy or idle.

A node that appears between two observations is taken to have started halfway between them,
and one that disappears to have ended halfway, so the error of a lifetime is at most half an
observation interval at each end (and zero on average). A node still alive after a driver
restart is taken to have been alive (and billed) through the gap; one that disappeared
during the gap is counted up to when it was last seen.

Persisted as ``ledger.json`` in the run folder (``to_dict`` / ``from_dict``), so a resumed
campaign carries on with what was already spent.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tuner.errors import RunFolderError

LEDGER_FILE = "ledger.json"
_FORMAT = 1


@dataclass(frozen=True, slots=True)
class NodeSeen:
    """One alive node in one observation."""

    node_id: str
    usd_per_hour: float
    rate_source: str
    gpus: float
    cpus: float
    ip: str = ""
    kind: str = ""  # node type label or a short resource summary, for the report
    started_at: float | None = None  # when Ray says the node started (GCS), if known


@dataclass(slots=True)
class NodeRecord:
    """A node's lifetime as the ledger saw it (epoch seconds)."""

    node_id: str
    usd_per_hour: float
    rate_source: str
    gpus: float
    cpus: float
    ip: str
    kind: str
    start: float
    last_seen: float
    end: float | None = None

    def alive_s(self, now: float) -> float:
        """Seconds alive so far (to ``now`` while alive)."""
        stop = self.end if self.end is not None else max(now, self.last_seen)
        return max(0.0, stop - self.start)

    def usd(self, now: float) -> float:
        """Dollars this node cost so far."""
        return self.usd_per_hour * self.alive_s(now) / 3600.0


@dataclass(slots=True)
class TrialRecord:
    """When a trial held its resources, and on which node."""

    trial_id: str
    gpus: float
    node_ip: str = ""
    intervals: list[list[float | None]] = field(default_factory=list)

    def spans(self, now: float) -> list[tuple[float, float]]:
        """Running intervals, an open one ending at ``now``."""
        return [(float(s), e if e is not None else now) for s, e in self.intervals if s is not None]

    def busy_s(self, now: float) -> float:
        """Seconds the trial held its slot (running intervals, to ``now`` if running)."""
        return sum(end - start for start, end in self.spans(now))


class Ledger:
    """Node-hours, dollars and GPU-seconds of one campaign, across driver restarts."""

    def __init__(self) -> None:
        self.nodes: dict[str, NodeRecord] = {}
        self.trials: dict[str, TrialRecord] = {}
        # Driver sessions [start, end]: running time counts toward budget.deadline.
        self.sessions: list[list[float | None]] = []
        self._last_observed: float | None = None

    # -- observations ----------------------------------------------------------------------

    def begin_session(self, now: float) -> None:
        """A driver (first run or resume) starts keeping this ledger."""
        self.sessions.append([now, None])
        self._last_observed = None

    def end_session(self, now: float) -> None:
        """The driver stops; nodes still alive stay open (a resume continues them)."""
        if self.sessions and self.sessions[-1][1] is None:
            self.sessions[-1][1] = now
        for trial in self.trials.values():
            if trial.intervals and trial.intervals[-1][1] is None:
                trial.intervals[-1][1] = now

    def observe(
        self,
        alive: Iterable[NodeSeen],
        now: float,
        ended: Mapping[str, float] | None = None,
    ) -> None:
        """Records the nodes alive at ``now``; nodes gone since the last call end.

        ``ended`` gives when Ray says dead nodes ended (GCS), used where known.
        """
        ended = ended or {}
        previous = self._last_observed
        seen: set[str] = set()
        for node in alive:
            seen.add(node.node_id)
            record = self.nodes.get(node.node_id)
            if record is None or record.end is not None:
                # New since the previous observation of this session: it started when Ray
                # says it did, else in between; never before this session began.
                start = now if previous is None else (previous + now) / 2.0
                if node.started_at is not None:
                    start = min(now, node.started_at)
                    if self.sessions and self.sessions[-1][0] is not None:
                        start = max(start, float(self.sessions[-1][0]))
                self.nodes[node.node_id] = NodeRecord(
                    node_id=node.node_id,
                    usd_per_hour=node.usd_per_hour,
                    rate_source=node.rate_source,
                    gpus=node.gpus,
                    cpus=node.cpus,
                    ip=node.ip,
                    kind=node.kind,
                    start=start,
                    last_seen=now,
                )
            else:
                record.last_seen = now
        for record in self.nodes.values():
            if record.end is None and record.node_id not in seen:
                if record.node_id in ended and ended[record.node_id] > 0:
                    record.end = min(now, max(record.start, ended[record.node_id]))
                elif previous is not None and record.last_seen >= previous:
                    record.end = (previous + now) / 2.0  # went away in between
                else:
                    record.end = record.last_seen  # gone while no driver was watching
        self._last_observed = now

    def trial_started(self, trial_id: str, gpus: float, now: float) -> None:
        """A trial got its resources (started or restarted)."""
        record = self.trials.setdefault(trial_id, TrialRecord(trial_id=trial_id, gpus=gpus))
        if record.intervals and record.intervals[-1][1] is None:
            return
        record.intervals.append([now, None])

    def trial_node(self, trial_id: str, node_ip: str) -> None:
        """Which node the trial runs on (from its results)."""
        record = self.trials.get(trial_id)
        if record is not None and node_ip:
            record.node_ip = node_ip

    def trial_stopped(self, trial_id: str, now: float) -> None:
        """A trial released its resources (finished, stopped, errored or paused)."""
        record = self.trials.get(trial_id)
        if record is not None and record.intervals and record.intervals[-1][1] is None:
            record.intervals[-1][1] = now

    # -- totals ----------------------------------------------------------------------------

    def usd(self, now: float) -> float:
        """Dollars spent on nodes so far."""
        return sum(node.usd(now) for node in self.nodes.values())

    def node_hours(self, now: float) -> float:
        """Node-hours so far (every node, CPU ones included)."""
        return sum(node.alive_s(now) for node in self.nodes.values()) / 3600.0

    def gpu_hours(self, now: float) -> float:
        """GPU-hours of nodes so far: each node's GPUs times its hours alive."""
        return sum(node.gpus * node.alive_s(now) for node in self.nodes.values()) / 3600.0

    def usd_per_hour_now(self) -> float:
        """What the nodes alive now cost per hour."""
        return sum(n.usd_per_hour for n in self.nodes.values() if n.end is None)

    def gpus_now(self) -> float:
        """GPUs of the nodes alive now."""
        return sum(n.gpus for n in self.nodes.values() if n.end is None)

    def trial_gpu_s(self, now: float) -> dict[str, float]:
        """GPU-seconds each trial held."""
        return {t.trial_id: t.gpus * t.busy_s(now) for t in self.trials.values()}

    def trial_s(self, now: float) -> float:
        """Trial-seconds so far (all trials' running time)."""
        return sum(t.busy_s(now) for t in self.trials.values())

    def trial_usd(self, trial_id: str, now: float) -> float:
        """A trial's share of the dollars spent so far, by its share of the trial-seconds.

        Money goes to nodes, idle ones too; this charges it to the trials that ran, in
        proportion to how long each held its slot. Asked when a trial ends, it is what the
        campaign had cost per trial-second by then times that trial's seconds. 0 for a
        trial the ledger never saw start.
        """
        record = self.trials.get(trial_id)
        total_s = self.trial_s(now)
        if record is None or total_s <= 0:
            return 0.0
        return self.usd(now) * record.busy_s(now) / total_s

    def running_s(self, now: float) -> float:
        """Seconds a driver ran this campaign, over all sessions (what a deadline counts)."""
        total = 0.0
        for start, end in self.sessions:
            if start is not None:
                total += (end if end is not None else now) - start
        return total

    def gpu_node_idle(self, now: float) -> tuple[float, float]:
        """``(idle_s, alive_s)`` of GPU nodes: seconds no trial ran on them, of their time.

        A trial counts on the node whose IP its results carried; trials with no node yet are
        not counted (so idle is an upper bound while they start).
        """
        idle = alive = 0.0
        for node in self.nodes.values():
            if node.gpus <= 0:
                continue
            life_end = node.end if node.end is not None else max(now, node.last_seen)
            spans = sorted(
                (max(s, node.start), min(e, life_end))
                for t in self.trials.values()
                if t.node_ip and t.node_ip == node.ip
                for s, e in t.spans(now)
            )
            busy, cursor = 0.0, node.start
            for s, e in spans:
                s = max(s, cursor)
                if e > s:
                    busy += e - s
                    cursor = e
            life = max(0.0, life_end - node.start)
            alive += life
            idle += max(0.0, life - busy)
        return idle, alive

    def summary(self, now: float) -> dict[str, Any]:
        """Totals for summary.json and the report."""
        idle, alive = self.gpu_node_idle(now)
        return {
            "usd": self.usd(now),
            "node_hours": self.node_hours(now),
            "gpu_hours": self.gpu_hours(now),
            "trial_gpu_hours": sum(self.trial_gpu_s(now).values()) / 3600.0,
            "running_s": self.running_s(now),
            "nodes": len(self.nodes),
            "gpu_node_idle_share": idle / alive if alive > 0 else None,
        }

    # -- persistence -----------------------------------------------------------------------

    def to_dict(self, now: float) -> dict[str, Any]:
        """The ledger as JSON-able data (with totals at ``now`` for readers)."""
        return {
            "format": _FORMAT,
            "totals": self.summary(now),
            "sessions": self.sessions,
            "nodes": [asdict(n) for n in self.nodes.values()],
            "trials": [asdict(t) for t in self.trials.values()],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Ledger:
        """A ledger read back from :meth:`to_dict`; sessions left open are closed at their
        last observation (the driver died)."""
        ledger = cls()
        ledger.sessions = [list(s) for s in data.get("sessions", [])]
        for raw in data.get("nodes", []):
            node = NodeRecord(**raw)
            ledger.nodes[node.node_id] = node
        for raw in data.get("trials", []):
            trial = TrialRecord(**raw)
            ledger.trials[trial.trial_id] = trial
        last = max((n.last_seen for n in ledger.nodes.values()), default=None)
        for session in ledger.sessions:
            if session[1] is None:
                session[1] = last if last is not None else session[0]
        for trial in ledger.trials.values():
            if trial.intervals and trial.intervals[-1][1] is None:
                start = trial.intervals[-1][0]
                trial.intervals[-1][1] = max(last or 0.0, float(start or 0.0))
        return ledger


def read_ledger(run_dir: Path) -> tuple[Ledger, dict[str, Any]]:
    """The run's ledger.json as a ledger and as written (the guard's outcome is there too),
    or a fresh ledger and {} when there is none."""
    path = run_dir / LEDGER_FILE
    if not path.is_file():
        return Ledger(), {}
    try:
        data = dict(json.loads(path.read_text()))
        return Ledger.from_dict(data), data
    except (ValueError, TypeError, KeyError) as err:
        raise RunFolderError(
            str(path),
            f"the spend ledger is damaged ({err}).",
            fix="restore it from a backup; deleting it resumes with nothing spent.",
        ) from None


def format_spend(budget: dict[str, Any]) -> str:
    """The ledger's totals in one line, e.g. ``spent $1.20 of $5.00: 0.9 node-hours...``."""
    limits = budget["limits"]
    usd = f"${budget['usd']:,.2f}"
    if limits.get("usd") is not None:
        usd += f" of ${limits['usd']:,.2f}"
    parts = [
        f"spent {usd}",
        f"{budget['node_hours']:.3g} node-hours on {budget['nodes']} node(s)",
        f"{budget['gpu_hours']:.3g} GPU-hours of nodes"
        + (f" (limit {limits['gpu_hours']:g})" if limits.get("gpu_hours") is not None else ""),
        f"{budget['trial_gpu_hours']:.3g} GPU-hours in trials",
    ]
    share = budget.get("gpu_node_idle_share")
    if share is not None:
        parts.append(f"GPU nodes idle {100 * share:.0f}% of their time")
    return "ledger: " + "; ".join(parts)
