"""The profiling campaign: the few short trials whose results become a :class:`Profile`.

A small FIFO campaign of ``trials`` configurations drawn at random from the campaign's
space (or the one configuration of a ``best.yaml``) for ``epochs`` epochs each, one at a
time so they do not compete for the device. Running it is the CLI's (``tuner profile``:
:func:`tuner.profile`); reading its trial results is
:func:`~tuner.cost._profile.profile_from_run`'s.

Pure: builds a campaign spec, runs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tuner.spec import CampaignSpec

__all__ = ["profile_spec"]

_SEED_OFFSET = 1000


def profile_spec(
    spec: CampaignSpec,
    *,
    trials: int,
    epochs: int,
    config: Mapping[str, Any] | None = None,
) -> CampaignSpec:
    """The small FIFO campaign that measures ``spec``'s trainable.

    Args:
        spec: The campaign to profile.
        trials: Trials to run, one at a time.
        epochs: Epochs per trial (>= 2 separates set-up from steady epochs).
        config: A configuration to measure instead of random draws from the space; its
            keys that are not in the space become fixed settings.

    Raises:
        SpecError: ``config`` names values the campaign's space rejects.
    """
    from tuner.spec import parse_campaign

    data = spec.to_dict()
    data["name"] = f"{spec.name}-profile"
    data["budget"] = {"trials": trials, "max_epochs": epochs}
    data["scheduler"] = {"type": "fifo"}
    # Drawn apart from the campaign's own first trials: a profile samples the space.
    data["sampler"] = {"type": "random", "seed": (spec.sampler.seed or 0) + _SEED_OFFSET}
    data["resources"] = {**data["resources"], "max_concurrent": 1}
    data["failure"] = {"max_retries": 0}
    if config is not None:
        names = set(spec.space.names)
        data["space"] = {k: {"value": v} for k, v in config.items() if k in names}
        extra = {k: v for k, v in config.items() if k not in names}
        data["fixed"] = {**data.get("fixed", {}), **extra}
        if not data["space"]:
            # A space needs one entry; a fixed value the trainable reads anyway will do.
            key, value = next(iter(extra.items()))
            data["space"] = {key: {"value": value}}
            del data["fixed"][key]
    return parse_campaign(data, f"{spec.source} (profile)")
