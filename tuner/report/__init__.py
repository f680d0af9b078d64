"""Reports: a campaign's ``report.json``, ``report.md`` (PNG plots beside it) and one
self-contained, interactive ``report.html`` (plotly), from a run folder alone (see
:func:`write_report`); and a recommendation's ``recommend.md``, ``recommend.html`` and
``recommend.json`` (see :func:`write_recommendation`).
"""

from __future__ import annotations

import json
from pathlib import Path

from tuner import atomic
from tuner.report._collect import collect, outcome_of, rungs, spend_series
from tuner.report._html import html_page
from tuner.report._importance import rung_importances
from tuner.report._plotly import figures
from tuner.report._recommendation import write_recommendation
from tuner.report._render import COLORS, PLOTS, markdown, plots, predicted_rows
from tuner.study import campaign_trials, open_study

REPORT_JSON = "report.json"
REPORT_MD = "report.md"
REPORT_HTML = "report.html"
PLOTS_DIR = "report_plots"


def _write(path: Path, data: bytes) -> None:
    # A report can be written again from the run folder: no fsync needed.
    atomic.write_bytes(path, data, durable=False)


def write_report(run_dir: Path) -> dict[str, Path]:
    """Writes the report of the campaign in ``run_dir``; returns the files by kind."""
    study = open_study(run_dir)
    report = collect(run_dir, study)
    figs = figures(report, campaign_trials(study), predicted=predicted_rows(report), colors=COLORS)
    pngs = plots(report)
    images = run_dir / PLOTS_DIR
    images.mkdir(exist_ok=True)
    names = {name: f"{PLOTS_DIR}/{name}.png" for name in pngs}
    for name, png in pngs.items():
        _write(run_dir / names[name], png)
    out = {
        "json": run_dir / REPORT_JSON,
        "markdown": run_dir / REPORT_MD,
        "html": run_dir / REPORT_HTML,
    }
    _write(out["json"], (json.dumps(report, indent=1, default=str) + "\n").encode())
    _write(out["markdown"], markdown(report, names).encode())
    _write(out["html"], html_page(report, figs).encode())
    return out


__all__ = [
    "PLOTS",
    "REPORT_HTML",
    "REPORT_JSON",
    "REPORT_MD",
    "collect",
    "outcome_of",
    "rung_importances",
    "rungs",
    "spend_series",
    "write_recommendation",
    "write_report",
]
