"""``warm_start:`` in a campaign file: which earlier campaign seeds this one, and how.

Only the shape is checked here (pure, no file or database is opened); whether the source
exists and its trials fit the new space is checked when the campaign starts, before
anything is written (:mod:`tuner.warm_start`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuner.rundir import check_study_storage
from tuner.spec._checks import Checker
from tuner.spec._fields import SECTIONS
from tuner.spec._limits import WARM_START_TOP

__all__ = ["DEFAULT_TOP", "WarmStart", "parse_warm_start"]

DEFAULT_TOP = 3
"""How many of the source's best configurations are tried first, unless ``top`` says."""

TOP = WARM_START_TOP


@dataclass(frozen=True)
class WarmStart:
    """Where an earlier campaign's trials come from, and how many of its best to retry.

    Exactly one of ``run`` and (``storage``, ``study``) is set.

    Attributes:
        run: A run folder of an earlier campaign (its study is found through its run.json).
        storage: A study storage URL (``postgresql://...``, ``journal:///...``, ...).
        study: The study's name in ``storage`` (``tuner list --study-storage`` shows them).
        top: The source's best configurations tried first, before the sampler's own.
    """

    run: str | None = None
    storage: str | None = None
    study: str | None = None
    top: int = DEFAULT_TOP

    @property
    def label(self) -> str:
        """The source as messages and summaries name it."""
        return self.run if self.run is not None else f"{self.study} in {self.storage}"

    def to_dict(self) -> dict[str, Any]:
        """The section as the campaign file writes it."""
        source: Any = (
            self.run if self.run is not None else {"storage": self.storage, "study": self.study}
        )
        return {"from": source, "top": self.top}


def parse_warm_start(ck: Checker, value: Any, trials: int | None) -> WarmStart:
    """The ``warm_start`` section: ``{from: RUN_DIR | {storage: URL, study: NAME}, top: K}``.

    A bare string is shorthand for ``{from: RUN_DIR}``.

    Args:
        ck: The campaign's checker.
        value: The section as parsed from YAML.
        trials: ``budget.trials`` (``top`` may not exceed it), or None when it failed.
    """
    if isinstance(value, str):
        value = {"from": value}
    section = ck.mapping(
        value,
        "warm_start",
        fix="write warm_start: {from: runs/<earlier campaign>, top: 3}, or "
        "{from: {storage: URL, study: NAME}}",
    )
    ck.keys(section, "warm_start", SECTIONS["warm_start"].allowed, SECTIONS["warm_start"].required)
    source = ck.required(section, "from")
    top = DEFAULT_TOP
    if "top" in section:
        top = ck.integer(section["top"], "warm_start.top", limit=TOP)
        if trials is not None and top > trials:
            ck.fail(
                "warm_start.top",
                f"is more than budget.trials={trials}",
                got=top,
                fix=f"at most {trials}: the best configurations are tried among the "
                "campaign's own trials",
            )
    if isinstance(source, str):
        run = ck.string(source, "warm_start.from")
        return WarmStart(run=run, top=top)
    where = ck.mapping(
        source,
        "warm_start.from",
        fix="a run folder (runs/<name>), or {storage: URL, study: NAME}",
    )
    shape = SECTIONS["warm_start.from"]
    ck.keys(where, "warm_start.from", shape.allowed, shape.required)
    url = check_study_storage(
        ck.string(ck.required(where, "storage"), "warm_start.from.storage"),
        source=ck.source,
        path="warm_start.from.storage",
    )
    study = ck.string(ck.required(where, "study"), "warm_start.from.study")
    return WarmStart(storage=url, study=study, top=top)
