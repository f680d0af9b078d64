"""The function Ray Tune runs for every trial: resolves the campaign's trainable and calls it.

One wrapper for every campaign keeps actor reuse possible (Tune reuses a worker only for the
same trainable) and keeps the user's function an ordinary ``fn(config) -> None``.
"""

from __future__ import annotations

from typing import Any

from tuner.contract import TRAINABLE_KEY


def run_trial(config: dict[str, Any]) -> None:
    """Runs one trial of a campaign: ``config[TRAINABLE_KEY]`` names the trainable."""
    from tuner.spec import resolve_trainable

    fn = resolve_trainable(str(config[TRAINABLE_KEY]))
    fn(config)
