"""A self-contained HTML page for a recommendation: the table and a cost-vs-time plot.

matplotlib is imported inside :func:`render_html` only (Agg backend), so importing the
cost model stays fast and needs no display.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence

from tuner.cost._recommend import TABLE_HEADER, OptionPlan, Recommendation

__all__ = ["plot_png", "render_html"]


def _priced(rec: Recommendation) -> list[tuple[OptionPlan, float, float]]:
    return [
        (p, p.wall_h, p.usd)
        for p in rec.plans
        if p.fits and p.wall_h is not None and p.usd is not None
    ]


def plot_png(rec: Recommendation) -> bytes:
    """Cost vs wall time of every option that fits, Pareto front and picks labelled.

    Args:
        rec: The recommendation to draw.

    Returns:
        PNG bytes.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = _priced(rec)
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    try:
        ax.scatter([h for _, h, _ in points], [u for _, _, u in points], color="tab:blue")
        for plan, hours, usd in points:
            label = plan.option.name
            if plan.option.name == rec.cheapest_within_deadline:
                label += " (cheapest)"
            if plan.option.name == rec.fastest_within_budget:
                label += " (fastest)"
            ax.annotate(label, (hours, usd), textcoords="offset points", xytext=(5, 5))
        front = sorted((h, u) for p, h, u in points if p.pareto)
        if front:
            ax.plot([h for h, _ in front], [u for _, u in front], color="tab:orange",
                    drawstyle="steps-post", label="Pareto front")  # fmt: skip
        ax.axhline(rec.budget_usd, color="tab:red", linestyle="--", label="budget")
        if rec.deadline_h is not None:
            ax.axvline(rec.deadline_h, color="tab:green", linestyle="--", label="deadline")
        ax.set_xlabel("campaign wall time (h)")
        ax.set_ylabel("campaign cost (USD)")
        ax.set_title("Cost vs time per instance option")
        ax.legend(loc="best")
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", bbox_inches="tight")
    finally:
        plt.close(fig)
    return buffer.getvalue()


def _table_html(rec: Recommendation) -> str:
    header = "".join(f"<th>{html.escape(h)}</th>" for h in TABLE_HEADER)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>"
        for row in rec.rows()
    )
    return f"<table><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>"


def render_html(
    rec: Recommendation, *, title: str = "Instance recommendation", notes: Sequence[str] = ()
) -> str:
    """A self-contained HTML page: summary, picks, an embedded PNG plot and the table.

    Args:
        rec: The recommendation to render.
        title: Page title.
        notes: Paragraphs to add under the findings (e.g. where the profile came from).

    Returns:
        The HTML text; the plot is inlined as a base64 ``data:`` URI.
    """
    png = base64.b64encode(plot_png(rec)).decode("ascii")
    findings = "".join(f"<li>{html.escape(line)}</li>" for line in rec.findings())
    extra = "".join(f"<p>{html.escape(line)}</p>" for line in notes)
    return (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>"
        "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><p>{html.escape(rec.headline())}</p>"
        f"<ul>{findings}</ul>{extra}"
        f'<p><img id="cost-vs-time" src="data:image/png;base64,{png}" alt="cost vs time"></p>'
        f"{_table_html(rec)}"
        "</body></html>\n"
    )
