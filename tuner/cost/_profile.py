"""Profiles: what a trainable measured on one device, read from a run folder's trial results.

A profile is built from the per-epoch reports Ray Tune writes to ``trial_*/result.json``,
whether the run was a real campaign (``tuner run`` writes ``profile.json`` at the end) or
the few short trials of ``tuner profile``. Ray's ``time_this_iter_s`` of an epoch is the
wall time between two reports: training, validation, the report itself and the checkpoint
write. The first epoch also holds the trial's set-up inside the trainable (data loading,
model construction, the FLOP probe); on a fresh Ray worker it holds the imports too, which
a reused worker (``reuse_actors``) pays once. So per trial:

- ``epoch_s``: the mean of epochs 2.. (epoch 1 when it is the only one: the trainable's own
  ``epoch_time_s`` plus nothing for the report, a slight underestimate);
- ``startup_s``: epoch 1 minus ``epoch_s``; ``cold``: the first trial a worker process ran.

Pure: file reading and arithmetic, no Ray or torch.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tuner import atomic
from tuner.contract import DEVICE_KEY, hyperparameters
from tuner.errors import SpecError, closest
from tuner.spec._checks import Checker, join
from tuner.spec._limits import PROFILE, SIZES
from tuner.spec._parse_space import check_plain

__all__ = [
    "PROFILE_FORMAT",
    "Profile",
    "TrialProfile",
    "load_profile",
    "profile_from_run",
]

PROFILE_FORMAT = 1
# Numbers the loop reports that the cost model reads, averaged over a trial's epochs.
_MEAN_KEYS = (
    "samples_per_s",
    "step_time_s",
    "data_wait_share",
    "epoch_time_s",
    "train_time_s",
)
# Constant within a trial (the loop's probe); the first report's value is kept.
_FIRST_KEYS = (
    "flops_per_sample",
    "bytes_per_sample",
    "ops_per_batch",
    "weight_bytes_per_batch",
    "param_count",
    "est_mem_gib",
    "batch_size",
    "grad_accum",
    "train_samples",
    "workers",
)
_TEXT_KEYS = ("precision", DEVICE_KEY, "gpu_name")


@dataclass(frozen=True)
class TrialProfile:
    """One trial's measurements (see the module docstring for the timing terms).

    Attributes:
        trial: Trial id.
        config: Hyperparameters (service keys removed).
        epochs: Epochs reported.
        epoch_s: Seconds per steady-state epoch, as Ray counts it.
        startup_s: Seconds of set-up before the first epoch's work (>= 0).
        cold: Whether this was the first trial of its worker process.
        total_s: Ray's ``time_total_s`` at the last report (the trial-seconds it used).
        metrics: The loop's measurements (:data:`_MEAN_KEYS` averaged, the probe's
            figures from the first report, device and precision names); absent keys are
            ones the trainable did not report.
    """

    trial: str
    config: Mapping[str, Any]
    epochs: int
    epoch_s: float
    startup_s: float
    cold: bool
    total_s: float
    metrics: Mapping[str, Any] = field(default_factory=dict)

    def number(self, key: str) -> float | None:
        """A numeric measurement, or None when the trainable did not report it."""
        value = self.metrics.get(key)
        return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


@dataclass(frozen=True)
class Profile:
    """What a campaign's trainable costs on the device it was measured on.

    Attributes:
        campaign: Campaign name.
        trainable: The campaign's trainable.
        source: "tuner profile" or "campaign run".
        device: "cpu" or "cuda".
        gpu_name: CUDA device name (e.g. "NVIDIA A100-SXM4-40GB"); None on CPU.
        precision: fp32, tf32 or amp, as the trials trained.
        trials: The trials measured, in start order.
    """

    campaign: str
    trainable: str
    source: str
    device: str
    gpu_name: str | None
    precision: str
    trials: tuple[TrialProfile, ...]

    def _mean(self, values: Iterable[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return statistics.fmean(known) if known else None

    @property
    def epoch_s(self) -> float:
        """Mean seconds per epoch over the trials (each config counts once)."""
        return statistics.fmean(t.epoch_s for t in self.trials)

    @property
    def startup_s(self) -> float:
        """Mean set-up seconds of a trial on a reused (warm) worker.

        Cold trials stand in when no warm one was measured.
        """
        warm = [t.startup_s for t in self.trials if not t.cold]
        return statistics.fmean(warm or [t.startup_s for t in self.trials])

    @property
    def cold_start_s(self) -> float:
        """Extra seconds the first trial on a fresh worker pays (imports), >= 0."""
        cold = [t.startup_s for t in self.trials if t.cold]
        if not cold or all(t.cold for t in self.trials):
            return 0.0
        return max(0.0, statistics.fmean(cold) - self.startup_s)

    def mean(self, key: str) -> float | None:
        """Mean of a numeric measurement over the trials that reported it."""
        return self._mean(t.number(key) for t in self.trials)

    @property
    def mem_gib(self) -> float | None:
        """Training memory per GPU: the CUDA peak where measured, else the estimate (max)."""
        for key in ("peak_mem_gib", "est_mem_gib"):
            values = [v for t in self.trials if (v := t.number(key)) is not None]
            if values:
                return max(values)
        return None

    def summary(self) -> dict[str, Any]:
        """The headline figures, for printing and for the JSON file."""
        return {
            "trials": len(self.trials),
            "epoch_s": self.epoch_s,
            "startup_s": self.startup_s,
            "cold_start_s": self.cold_start_s,
            "samples_per_s": self.mean("samples_per_s"),
            "flops_per_sample": self.mean("flops_per_sample"),
            "data_wait_share": self.mean("data_wait_share"),
            "mem_gib": self.mem_gib,
            "mem_measured": any(t.number("peak_mem_gib") is not None for t in self.trials),
        }

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form (``format``, the fields, and :meth:`summary`)."""
        data = asdict(self)
        data["trials"] = [
            {**asdict(t), "config": dict(t.config), "metrics": dict(t.metrics)} for t in self.trials
        ]
        return {"format": PROFILE_FORMAT, **data, "summary": self.summary()}

    def write(self, path: Path) -> None:
        """Writes the profile as JSON, atomically."""
        atomic.write_json(path, self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "<dict>") -> Profile:
        """Inverse of :meth:`to_dict`; SpecError naming the key for a malformed file (every
        error of the file, as for a campaign: see :class:`~tuner.errors.SpecErrors`)."""
        ck = Checker(source)
        with ck.collecting():
            profile = _parse_profile(ck, data)
        return profile


_TOP_KEYS: tuple[str, ...] = ("format", "campaign", "trainable", "source", "device", "gpu_name")
_TOP_KEYS += ("precision",)
_TOP_KEYS += ("trials", "summary")
_REQUIRED = ("campaign", "trainable", "device", "precision", "trials")
_TRIAL_KEYS = ("trial", "config", "epochs", "epoch_s", "startup_s", "cold", "total_s", "metrics")
_TRIAL_REQUIRED = ("trial", "epochs", "epoch_s", "startup_s")
_METRIC_KEYS = (*_MEAN_KEYS, "peak_mem_gib", *_FIRST_KEYS, *_TEXT_KEYS)


def _known_keys(
    ck: Checker,
    data: Mapping[str, Any],
    path: str,
    allowed: tuple[str, ...],
    required: tuple[str, ...],
) -> None:
    """Unknown keys (with the closest known one) and missing required keys, each an error."""
    each = ck.group()
    for key in data:
        if key not in allowed:
            with each:
                ck.fail(
                    join(path, key),
                    "unknown key",
                    allowed=list(allowed),
                    suggestion=closest(key, allowed),
                    fix="measure it again with `tuner profile CAMPAIGN`",
                )
    for key in required:
        if key not in data:
            with each:
                ck.fail(join(path, key), "missing key", fix="measure it again")


def _parse_profile(ck: Checker, data: Any) -> Profile:
    if not isinstance(data, Mapping):
        ck.fail("<root>", "a profile is a JSON object", got=type(data).__name__)
    data = ck.mapping(data, "<root>")
    if data.get("format") != PROFILE_FORMAT:
        ck.fail(
            "format",
            "unsupported profile format",
            got=data.get("format"),
            allowed=str(PROFILE_FORMAT),
            fix="measure it again with `tuner profile CAMPAIGN`",
        )
    _known_keys(ck, data, "", _TOP_KEYS, _REQUIRED)
    names = SIZES["name"]
    each = ck.group()
    with each:
        campaign = ck.string(ck.required(data, "campaign"), "campaign", limit=names)
    with each:
        trainable = ck.string(ck.required(data, "trainable"), "trainable")
    with each:
        made_by = ck.string(data.get("source", ""), "source", nonempty=False)
    with each:
        device = ck.string(ck.required(data, "device"), "device", limit=names)
    with each:
        gpu_name = data.get("gpu_name")
        gpu_name = None if gpu_name is None else ck.string(gpu_name, "gpu_name", limit=names)
    with each:
        precision = ck.string(ck.required(data, "precision"), "precision", limit=names)
    with each:
        trials = _parse_trials(ck, ck.required(data, "trials"))
    each.close()
    return Profile(
        campaign=campaign,
        trainable=trainable,
        source=made_by,
        device=device,
        gpu_name=gpu_name,
        precision=precision,
        trials=trials,
    )


def _parse_trials(ck: Checker, raw: Any) -> tuple[TrialProfile, ...]:
    if not isinstance(raw, list):
        ck.fail(
            "trials",
            "must be a list of trial records",
            got=type(raw).__name__,
            fix="measure it again",
        )
    if not raw:
        ck.fail("trials", "no trial measured", fix="measure it again")
    ck.size(len(raw), "trials", PROFILE["trials"], "trial records")
    each = ck.group()
    trials = []
    for i, record in enumerate(raw):
        with each:
            trials.append(_parse_trial(ck, record, f"trials[{i}]"))
    each.close()
    return tuple(trials)


def _parse_trial(ck: Checker, raw: Any, path: str) -> TrialProfile:
    raw = ck.mapping(raw, path, fix="measure it again")
    _known_keys(ck, raw, path, _TRIAL_KEYS, _TRIAL_REQUIRED)
    each = ck.group()
    with each:
        trial = ck.required(raw, "trial")
        if isinstance(trial, bool) or not isinstance(trial, str | int):
            ck.fail(join(path, "trial"), "must be a trial id (a string)", got=trial)
        trial = str(trial)
        ck.size(len(trial), join(path, "trial"), SIZES["name"], "characters", got=trial)
    with each:
        config = ck.mapping(raw.get("config", {}), join(path, "config"))
        for key, value in config.items():
            check_plain(ck, value, join(join(path, "config"), key))
    figures: dict[str, float] = {}
    for key in ("epoch_s", "startup_s", "total_s"):
        with each:
            if key in raw or key != "total_s":
                figures[key] = ck.number(
                    ck.required(raw, key), join(path, key), limit=PROFILE[f"trials[].{key}"]
                )
    with each:
        epochs = ck.integer(
            ck.required(raw, "epochs"), join(path, "epochs"), limit=PROFILE["trials[].epochs"]
        )
    with each:
        cold = ck.boolean(raw.get("cold", False), join(path, "cold"))
    with each:
        metrics = _parse_metrics(ck, raw.get("metrics", {}), join(path, "metrics"))
    each.close()
    return TrialProfile(
        trial=trial,
        config=dict(config),
        epochs=epochs,
        epoch_s=figures["epoch_s"],
        startup_s=figures["startup_s"],
        cold=cold,
        total_s=figures.get("total_s", 0.0),
        metrics=metrics,
    )


def _parse_metrics(ck: Checker, raw: Any, path: str) -> dict[str, Any]:
    raw = ck.mapping(raw, path)
    _known_keys(ck, raw, path, _METRIC_KEYS, ())
    each = ck.group()
    for key, value in raw.items():
        with each:
            if key not in _METRIC_KEYS:
                continue  # reported above
            if key in _TEXT_KEYS:
                if value is not None:
                    ck.string(value, join(path, key), limit=SIZES["name"])
            elif value is not None:
                ck.number(value, join(path, key), limit=PROFILE[key])
    each.close()
    return dict(raw)


def load_profile(path: str | Path) -> Profile:
    """Reads a profile JSON file, or a run folder's ``profile.json`` when given the folder.

    Raises:
        SpecError: The file is missing, not JSON, or not a profile.
    """
    file = Path(path)
    if file.is_dir():
        file = file / "profile.json"
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except OSError as err:
        raise SpecError(
            str(file),
            "file",
            "cannot read profile",
            got=err.strerror,
            fix="pass a file written by `tuner profile`, or a run folder of `tuner run`",
        ) from None
    except (ValueError, RecursionError) as err:  # RecursionError: nested too deeply
        raise SpecError(str(file), "file", "not JSON", got=str(err)) from None
    return Profile.from_dict(data, source=str(file))


def _read_results(path: Path) -> list[dict[str, Any]]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line:
            try:
                rows.append(json.loads(line))
            except ValueError:
                break  # a line cut short by a crash ends the readable part
    return rows


def _trial_config(trial_dir: Path) -> dict[str, Any]:
    params = trial_dir / "params.json"
    if not params.is_file():
        return {}
    config: dict[str, Any] = json.loads(params.read_text(encoding="utf-8"))
    return hyperparameters(config)


def _trial_profile(trial_dir: Path, rows: list[dict[str, Any]], cold: bool) -> TrialProfile:
    iters = [float(r.get("time_this_iter_s", 0.0)) for r in rows]
    if len(iters) >= 2:
        epoch_s = statistics.fmean(iters[1:])
    else:
        epoch_s = float(rows[0].get("epoch_time_s", iters[0]))
    metrics: dict[str, Any] = {}
    for key in _MEAN_KEYS:
        values = [float(r[key]) for r in rows if isinstance(r.get(key), int | float)]
        values = [v for v in values if math.isfinite(v)]
        if values:
            metrics[key] = statistics.fmean(values)
    peaks = [
        float(r["peak_mem_gib"]) for r in rows if isinstance(r.get("peak_mem_gib"), int | float)
    ]
    if peaks:
        metrics["peak_mem_gib"] = max(peaks)
    for key in (*_FIRST_KEYS, *_TEXT_KEYS):
        if key in rows[0]:
            metrics[key] = rows[0][key]
    return TrialProfile(
        trial=str(rows[0].get("trial_id", trial_dir.name)),
        config=_trial_config(trial_dir),
        epochs=len(rows),
        epoch_s=max(epoch_s, 1e-9),
        startup_s=max(0.0, iters[0] - epoch_s),
        cold=cold,
        total_s=float(rows[-1].get("time_total_s", sum(iters))),
        metrics=metrics,
    )


def profile_from_run(
    run_dir: Path, *, campaign: str, trainable: str, source: str = "campaign run"
) -> Profile:
    """Builds a profile from the trial folders of a run (``trial_*/result.json``).

    Args:
        run_dir: A run folder of ``tuner run`` or ``tuner profile``.
        campaign: The campaign's name.
        trainable: The campaign's trainable.
        source: What produced the run.

    Raises:
        SpecError: No trial in the folder reported an epoch.
    """
    found: list[tuple[float, float, int, Path, list[dict[str, Any]]]] = []
    for result in sorted(run_dir.glob("trial_*/result.json")):
        rows = _read_results(result)
        if rows:
            start = float(rows[0].get("timestamp", 0)) - float(rows[0].get("time_total_s", 0))
            # Ray's timestamp has 1 s resolution: among ties, the slower start ran first.
            first_s = -float(rows[0].get("time_this_iter_s", 0.0))
            found.append((start, first_s, int(rows[0].get("pid", 0)), result.parent, rows))
    if not found:
        raise SpecError(
            str(run_dir),
            "trial_*/result.json",
            "no trial reported an epoch, so there is nothing to profile",
            fix="run at least one trial to its first report",
        )
    found.sort(key=lambda item: (item[0], item[1]))
    seen_pids: set[int] = set()
    trials = []
    for _, _, pid, trial_dir, rows in found:
        trials.append(_trial_profile(trial_dir, rows, cold=pid not in seen_pids))
        seen_pids.add(pid)
    first = trials[0].metrics
    device = str(first.get(DEVICE_KEY, "cpu")).split(":")[0]
    precisions = [str(t.metrics.get("precision", "fp32")) for t in trials]
    return Profile(
        campaign=campaign,
        trainable=trainable,
        source=source,
        device=device,
        gpu_name=first.get("gpu_name"),
        precision=max(set(precisions), key=precisions.count),
        trials=tuple(trials),
    )
