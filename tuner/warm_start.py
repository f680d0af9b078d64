"""Warm starts: an earlier campaign's trials seed a new campaign's sampler.

``warm_start: {from: RUN_DIR | {storage: URL, study: NAME}, top: K}`` in a campaign file
(or ``--warm-start RUN_DIR``) reads the earlier campaign's finished trials and, before the
new campaign's first trial:

* **seeds** its study with them (Optuna's ``add_trials``), each with its per-epoch values,
  so PRUNED trials teach TPE too (Optuna's TPE ranks a pruned trial by the epochs it
  reached, then its last value). Seeded trials carry the user attribute
  :data:`SEED_ATTR`; they are not the campaign's trials: counts, summaries, reports,
  resumes and ``tuner list`` leave them out (:func:`tuner.study.campaign_trials`);
* **enqueues** the K best (Optuna's ``enqueue_trial``): the campaign's first K trials try
  them, at this campaign's fidelity, as trials of its own (user attribute
  :data:`FIRST_ATTR`).

Spaces may differ. A source parameter the new space lacks (or that is inactive there) is
dropped; a new parameter the source lacks is left out of the seed (TPE models each
parameter from the trials that have it) and sampled for the enqueued ones. A value outside
the new range refuses that trial, and the message says which and why; a source no trial of
which fits is an error. Fidelity follows the new ``budget.max_epochs`` (M): a source trial
that reached epoch M is COMPLETE with its value there; one that stopped before is PRUNED
with its epochs up to M.

All of it is checked before the campaign writes anything (:func:`plan_warm_start`); the
study is seeded once, when the campaign starts (never again on resume).
Pure of Ray: Optuna and the spec only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import TrialState

from tuner.errors import SpecError, closest
from tuner.spec import (
    CampaignSpec,
    CategoricalParam,
    FixedParam,
    FloatParam,
    IntParam,
    Mode,
    Param,
    WarmStart,
)
from tuner.standings import rank_key
from tuner.study import SEED_ATTR, campaign_trials, check_reachable, open_study, storage_for

__all__ = ["FIRST_ATTR", "Seed", "WarmStartPlan", "plan_warm_start", "seed_study"]

FIRST_ATTR = "warm_start_rank"
"""User attribute of a campaign trial that retried one of the source's best (1 = best)."""
_FROM_ATTR = "warm_start_from"
_PATH = "warm_start.from"
_MAX_REASONS = 3


@dataclass(frozen=True)
class Seed:
    """One source trial as the new campaign's study takes it."""

    number: int
    params: dict[str, Any]
    distributions: dict[str, BaseDistribution]
    state: TrialState
    value: float | None
    intermediate: dict[int, float]

    @property
    def epochs(self) -> int:
        return max(self.intermediate) if self.intermediate else 0


@dataclass(frozen=True)
class WarmStartPlan:
    """What a warm start will add to the new study, worked out before anything is written.

    Attributes:
        label: The source as messages name it.
        seeds: Source trials that fit the new space, in the source's order.
        first: Parameters of the ``top`` best seeds, best first (enqueued).
        refused: Why each refused source trial was refused (``trial 7: lr=0.5 ...``).
        dropped: Source parameters the new space does not have (or not there).
        source_trials: Finished trials the source has (COMPLETE or PRUNED).
    """

    label: str
    seeds: list[Seed]
    first: list[dict[str, Any]]
    refused: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    source_trials: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The plan as summary.json and the run folder record it."""
        return {
            "from": self.label,
            "source_trials": self.source_trials,
            "seeded": len(self.seeds),
            "seeded_complete": sum(s.state == TrialState.COMPLETE for s in self.seeds),
            "tried_first": len(self.first),
            "refused": len(self.refused),
            "refused_reasons": self.refused[:_MAX_REASONS],
            "dropped_params": self.dropped,
        }

    def line(self) -> str:
        """One line for the campaign's output."""
        done = sum(s.state == TrialState.COMPLETE for s in self.seeds)
        text = (
            f"warm start from {self.label}: {len(self.seeds)} of {self.source_trials} trials "
            f"seed the sampler ({done} reached max_epochs), its {len(self.first)} best are "
            "tried first"
        )
        if self.dropped:
            text += f"; parameters not in this space dropped: {', '.join(self.dropped)}"
        if self.refused:
            text += f"; {len(self.refused)} refused ({self.refused[0]})"
        return text


def distribution(param: FloatParam | IntParam | CategoricalParam) -> BaseDistribution:
    """The Optuna distribution ``tuner.space.suggest`` gives ``param``."""
    if isinstance(param, FloatParam):
        return FloatDistribution(param.low, param.high, log=param.log, step=param.step)
    if isinstance(param, IntParam):
        return IntDistribution(param.low, param.high, log=param.log, step=param.step)
    return CategoricalDistribution(list(param.choices))


def _describe(param: Param) -> str:
    if isinstance(param, CategoricalParam):
        return f"one of {list(param.choices)}"
    if isinstance(param, (FloatParam, IntParam)):
        step = f", step {param.step}" if param.step not in (None, 1) else ""
        kind = "an integer" if isinstance(param, IntParam) else "a number"
        return f"{kind} in [{param.low}, {param.high}]{step}"
    return repr(param)


def _fits(param: Param, value: Any) -> bool:
    if isinstance(param, IntParam) and (isinstance(value, bool) or float(value) != int(value)):
        return False
    try:
        return bool(param.contains(value))
    except (TypeError, ValueError):
        return False


def map_trial(
    frozen: optuna.trial.FrozenTrial, spec: CampaignSpec
) -> tuple[Seed | None, str | None, set[str]]:
    """One source trial in the new campaign: (seed, why refused, dropped parameter names).

    The seed is None when the trial is refused (the reason says why) or has nothing to
    teach (no value at any epoch of the new fidelity; the reason is None then).
    """
    config: dict[str, Any] = {}
    params: dict[str, Any] = {}
    dists: dict[str, BaseDistribution] = {}
    for param in spec.space:
        if not param.is_active(config):
            continue
        if isinstance(param, FixedParam):
            config[param.name] = param.value
            continue
        if param.name not in frozen.params:
            continue  # new here: the seed leaves it out, the sampler picks it
        value = frozen.params[param.name]
        if not _fits(param, value):
            why = (
                f"trial {frozen.number}: {param.name}={value!r} is outside this campaign's "
                f"space ({_describe(param)})"
            )
            return None, why, set()
        config[param.name] = params[param.name] = value
        dists[param.name] = distribution(param)
    dropped = set(frozen.params) - set(params)
    max_epochs = spec.budget.max_epochs
    values = {
        int(k): float(v)
        for k, v in frozen.intermediate_values.items()
        if int(k) <= max_epochs and math.isfinite(v)
    }
    if not values:
        return None, None, dropped
    complete = max_epochs in values
    seed = Seed(
        number=frozen.number,
        params=params,
        distributions=dists,
        state=TrialState.COMPLETE if complete else TrialState.PRUNED,
        value=values[max_epochs] if complete else None,
        intermediate=values,
    )
    return seed, None, dropped


def open_source(warm: WarmStart, source: str) -> optuna.Study:
    """The source campaign's study. SpecError at ``warm_start.from`` when it has none."""
    if warm.run is not None:
        run_dir = Path(warm.run).expanduser()
        if not run_dir.is_dir():
            raise SpecError(
                source,
                _PATH,
                "no such run folder",
                got=warm.run,
                fix="name the run folder of an earlier campaign (`tuner list` shows them), "
                "relative to where tuner runs, or an absolute path",
            )
        try:
            return open_study(run_dir)
        except FileNotFoundError as err:
            raise SpecError(
                source,
                _PATH,
                f"the run folder has no study to start from ({err})",
                got=warm.run,
                fix="name the run folder of a campaign that ran trials",
            ) from None
    url, name = str(warm.storage), str(warm.study)
    check_reachable(url, source=source, path=f"{_PATH}.storage")
    storage = storage_for(url)
    names = optuna.get_all_study_names(storage=storage)
    if name not in names:
        raise SpecError(
            source,
            f"{_PATH}.study",
            f"no such study in {url}",
            got=name,
            allowed=sorted(names)[:20] or "(the store holds no study)",
            suggestion=closest(name, names),
            fix="`tuner list --study-storage URL` lists the store's campaigns and studies",
        )
    return optuna.load_study(study_name=name, storage=storage)


def _check_objective(study: optuna.Study, spec: CampaignSpec, label: str) -> None:
    if len(study.directions) != 1:
        raise SpecError(
            spec.source,
            _PATH,
            f"the source study has {len(study.directions)} objectives; this campaign has one",
            got=label,
            fix="warm-start from a campaign that optimized the same metric",
        )
    maximize = study.direction == optuna.study.StudyDirection.MAXIMIZE
    names = study.metric_names
    if names is not None and names[0] != spec.metric:
        raise SpecError(
            spec.source,
            _PATH,
            f"the source campaign optimized {names[0]!r}, this one {spec.metric!r}: "
            "their values cannot teach each other",
            got=label,
            fix="warm-start from a campaign with the same metric",
        )
    if maximize != (spec.mode is Mode.MAX):
        raise SpecError(
            spec.source,
            _PATH,
            f"the source campaign {'maximized' if maximize else 'minimized'} its metric, "
            f"this one has mode {spec.mode.value}",
            got=label,
            fix="warm-start from a campaign with the same metric and mode",
        )


def plan_warm_start(spec: CampaignSpec) -> WarmStartPlan | None:
    """Reads the source and works out the seeds (nothing is written). None: no warm start.

    Raises:
        SpecError: At ``warm_start.from``: the source does not exist, optimized another
            metric or direction, or none of its finished trials fits this campaign.
    """
    warm = spec.warm_start
    if warm is None:
        return None
    if spec.multi_objective:
        raise SpecError(
            spec.source,
            "warm_start",
            f"applies to single-objective campaigns; this one has {len(spec.objectives)} "
            "objectives",
            got=warm.label,
            fix="remove warm_start / --warm-start (multi-objective warm starts are not "
            "supported yet)",
        )
    study = open_source(warm, spec.source)
    _check_objective(study, spec, warm.label)
    finished = campaign_trials(study, states=(TrialState.COMPLETE, TrialState.PRUNED))
    seeds: list[Seed] = []
    refused: list[str] = []
    dropped: set[str] = set()
    for frozen in finished:
        seed, why, gone = map_trial(frozen, spec)
        dropped |= gone
        if why is not None:
            refused.append(why)
        elif seed is not None:
            seeds.append(seed)
    if not seeds:
        shown = "; ".join(refused[:_MAX_REASONS]) or "it has no finished trial with a value"
        raise SpecError(
            spec.source,
            _PATH,
            f"none of the source's {len(finished)} finished trials fits this campaign: {shown}",
            got=warm.label,
            fix="widen this campaign's space to cover the source's values, or start cold "
            "(remove warm_start)",
        )
    maximize = spec.mode is Mode.MAX
    ranked = sorted(
        seeds,
        key=lambda s: rank_key(
            s.value if s.value is not None else s.intermediate[s.epochs],
            complete=s.state == TrialState.COMPLETE,
            epochs=s.epochs,
            maximize=maximize,
        ),
    )
    first: list[dict[str, Any]] = []
    for seed in ranked:
        if len(first) == warm.top:
            break
        if seed.params not in first:
            first.append(seed.params)
    return WarmStartPlan(
        label=warm.label,
        seeds=seeds,
        first=first,
        refused=refused,
        dropped=sorted(dropped),
        source_trials=len(finished),
    )


def seed_study(study: optuna.Study, plan: WarmStartPlan) -> None:
    """Adds the plan's seeds to ``study`` and enqueues its best (once, at the start)."""
    trials = [
        optuna.trial.create_trial(
            state=seed.state,
            value=seed.value,
            params=seed.params,
            distributions=seed.distributions,
            intermediate_values=seed.intermediate,
            user_attrs={SEED_ATTR: f"{plan.label}#{seed.number}"},
        )
        for seed in plan.seeds
    ]
    study.add_trials(trials)
    for rank, params in enumerate(plan.first, start=1):
        study.enqueue_trial(params, user_attrs={FIRST_ATTR: rank, _FROM_ATTR: plan.label})
