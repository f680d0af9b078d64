"""The report as one self-contained, interactive HTML page.

plotly.js is inlined once, in ``<head>`` (it adds ``len(plotly.offline.get_plotlyjs())``
bytes, about 4.8 MB, to each page); every figure is a ``<div>`` with its data that
plotly.js draws on load. Nothing is fetched: the page opens offline, from anywhere.
A figure without data points is a note instead (:func:`tuner.report._plotly.figures`).
"""

from __future__ import annotations

import html
from typing import Any

import plotly.io as pio
import plotly.offline

from tuner.report._plotly import Figures
from tuner.report._render import headline, rung_notes, tables

__all__ = ["PLOT_CLASS", "html_page", "html_table"]

# The class of every plot's <div> on the page (plotly's; plotly.js adds js-plotly-plot once
# it has drawn one).
PLOT_CLASS = "plotly-graph-div"
_CONFIG = {"displaylogo": False, "responsive": True}
_WIDE = ("pareto", "intermediate", "importances", "parallel", "slice")
_TITLES = {
    "pareto": "Pareto front",
    "history": "Optimization history",
    "intermediate": "Intermediate values (learning curves)",
    "importances": "Importances per rung",
    "parallel": "Parallel coordinates",
    "slice": "Slice",
    "contour": "Contour",
    "edf": "Empirical distribution",
    "spend": "Spend over time",
    "predicted": "Predicted vs actual",
    "gpu": "GPU telemetry",
    "outcomes": "Trial outcomes",
}
_CSS = (
    "body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;color:#222}"
    "table{border-collapse:collapse;font-size:13px;margin:0.5em 0}"
    "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}"
    ".grid{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:1em}"
    "figure{margin:0;min-width:0}.wide{grid-column:1/-1}"
    ".note{color:#666;font-style:italic}"
)


def html_table(rows: list[list[str]], table_id: str) -> str:
    """A table (header row first) as HTML."""
    head, *body = rows
    th = "".join(f"<th>{html.escape(c)}</th>" for c in head)
    trs = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in body
    )
    return f'<table id="{table_id}"><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>'


def _figure(name: str, fig: Any, extra: str) -> str:
    kind = name.split("-")[0]
    title = _TITLES.get(kind, name)
    wide = " wide" if kind in _WIDE else ""
    fid = html.escape(name, quote=True)
    if isinstance(fig, str):
        body = f'<p class="note">{html.escape(title)}: {html.escape(fig)}.</p>'
    else:
        body = pio.to_html(
            fig,
            full_html=False,
            include_plotlyjs=False,
            div_id=f"plot-{fid}",
            config=_CONFIG,
            default_width="100%",
        )
    return f'<figure id="figure-{fid}" class="{wide.strip()}">{body}{extra}</figure>'


def html_page(r: dict[str, Any], figs: Figures) -> str:
    """The report as one HTML page: headline, tables, and every figure, interactive."""
    t = tables(r)
    parts = []
    for name, fig in figs.items():
        extra = html_table(t[name], f"table-{name}") if name in t else ""
        if name == "importances":
            extra = "<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in rung_notes(r)) + "</ul>"
        parts.append(_figure(name, fig, extra))
    head = "".join(f"<p>{html.escape(line)}</p>" for line in headline(r))
    campaign = html.escape(r["campaign"])
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>tuner report: {campaign}</title><style>{_CSS}</style>"
        f'<script type="text/javascript">{plotly.offline.get_plotlyjs()}</script>'
        f"</head><body><h1>Campaign report: {campaign}</h1>{head}"
        f"<h2>Best configuration</h2>{html_table(t['best'], 'table-best')}"
        f"<h2>Top trials</h2>{html_table(t['top'], 'table-top')}"
        f"<div class='grid'>{''.join(parts)}</div></body></html>"
    )
