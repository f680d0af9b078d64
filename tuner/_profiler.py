"""``tuner profile``: measure a campaign's trainable with a few short trials on this device.

The trials run exactly as a campaign's do (the same Ray Tune trainable, resources, worker
reuse, reports and checkpoints), one at a time so they do not compete for the device: a
small FIFO campaign of ``trials`` configurations drawn at random from the space (or the one
configuration of a ``best.yaml``) for ``epochs`` epochs each, in a temporary run folder.
Its trial results become a :class:`~tuner.cost.Profile`.
"""

from __future__ import annotations

import io
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tuner.cost._profile import Profile, profile_from_run
from tuner.errors import SpecError
from tuner.spec import CampaignSpec, parse_campaign
from tuner.spec._yaml import load_yaml

__all__ = ["load_config_file", "profile_campaign", "profile_spec"]

_SEED_OFFSET = 1000


def load_config_file(path: Path) -> dict[str, Any]:
    """The configuration in a ``best.yaml`` (its ``config:``) or a plain YAML mapping.

    Raises:
        SpecError: Unreadable file, bad YAML, or not a mapping of names to values.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise SpecError(str(path), "file", "cannot read config file", got=err.strerror) from None
    except UnicodeDecodeError as err:
        raise SpecError(
            str(path),
            "file",
            "not a UTF-8 text file",
            got=str(err),
            fix="save the config file as YAML with UTF-8 encoding",
        ) from None
    data = load_yaml(text, str(path))
    if isinstance(data, Mapping) and isinstance(data.get("config"), Mapping):
        data = data["config"]
    if not isinstance(data, Mapping) or not data:
        empty = data is None or isinstance(data, Mapping)
        raise SpecError(
            str(path),
            "config",
            "names no hyperparameter"
            if empty
            else "expected a mapping of hyperparameter names to values",
            got=data if empty else type(data).__name__,
            fix="pass a best.yaml written by `tuner run`, or a YAML mapping like `lr: 0.01`",
        )
    return {str(k): v for k, v in data.items()}


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


def profile_campaign(
    spec: CampaignSpec,
    *,
    trials: int = 3,
    epochs: int = 3,
    config: Mapping[str, Any] | None = None,
    options: Any = None,
    code_dirs: list[str] | None = None,
) -> Profile:
    """Runs the profiling trials on a local (or joined) Ray and returns the profile.

    Args:
        spec: The campaign whose trainable to measure.
        trials: Trials (configurations) to measure.
        epochs: Epochs per trial.
        config: One configuration to measure (all trials use it), else random draws.
        options: Where Ray runs (:class:`tuner._ray.driver.RayOptions`).
        code_dirs: Folders the trainable imports from.

    Raises:
        SpecError: Bad config, or no trial reported an epoch (the trainable failed).
    """
    from tuner._ray.driver import run_campaign

    measured = profile_spec(spec, trials=trials, epochs=epochs, config=config)
    with tempfile.TemporaryDirectory(prefix="tuner-profile-") as tmp:
        run_dir = Path(tmp) / measured.name
        run_campaign(measured, run_dir, options, stream=io.StringIO(), code_dirs=code_dirs)
        return profile_from_run(
            run_dir, campaign=spec.name, trainable=spec.trainable, source="tuner profile"
        )
