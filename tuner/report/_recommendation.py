"""A recommendation's report: recommend.md, and a self-contained recommend.html with the
table and a cost-vs-time plot, beside recommend.json (see :func:`write_recommendation`).

matplotlib is imported inside :func:`plot_png` only (Agg backend), so importing this module
stays fast and needs no display.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Sequence
from pathlib import Path

from tuner import atomic
from tuner.cost._advise import Advice
from tuner.cost._recommend import TABLE_HEADER, OptionPlan, Recommendation

__all__ = ["plot_png", "render_html", "write_recommendation"]


def _priced(rec: Recommendation) -> list[tuple[OptionPlan, float, float]]:
    """The plans that can be plotted: they fit, with finite hours and dollars (spot that
    never finishes is infinite)."""
    return [
        (p, p.wall_h, p.usd)
        for p in rec.plans
        if p.fits
        and p.wall_h is not None
        and p.usd is not None
        and math.isfinite(p.wall_h)
        and math.isfinite(p.usd)
    ]


def _label(plan: OptionPlan) -> str:
    """``cloud instance_type``: short enough to sit next to a point."""
    return f"{plan.option.cloud} {plan.option.name.rsplit('/', 1)[-1]}"


def plot_png(rec: Recommendation) -> bytes:
    """Cost vs wall time of every option that fits: Pareto front, picks, budget, deadline.

    Points off the Pareto front are grey and unlabelled; the front is orange with names;
    the picks are stars. Both axes go logarithmic when the options span a factor of 10.
    The budget and deadline are drawn as lines when they are near the points, and named
    in the title when every option is far inside them.

    Args:
        rec: The recommendation to draw.

    Returns:
        PNG bytes.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = _priced(rec)
    fig, ax = plt.subplots(figsize=(8, 5), dpi=100)
    try:
        hours = [h for _, h, _ in points]
        costs = [u for _, _, u in points]
        others = [(h, u) for p, h, u in points if not p.pareto]
        ax.scatter([h for h, _ in others], [u for _, u in others], color="0.6", s=18,
                   label="other options")  # fmt: skip
        # By hours then dollars only: two options can tie on both (plans do not compare).
        front = sorted(((h, u, p) for p, h, u in points if p.pareto), key=lambda t: t[:2])
        if front:
            ax.plot([h for h, _, _ in front], [u for _, u, _ in front], color="tab:orange",
                    marker="o", drawstyle="steps-post", label="Pareto front")  # fmt: skip
            for h, u, p in front:
                ax.annotate(_label(p), (h, u), textcoords="offset points", xytext=(6, 4),
                            fontsize=8)  # fmt: skip
        for name, marker, colour, text in (
            (rec.cheapest_within_deadline, "*", "tab:green", "cheapest within deadline"),
            (rec.fastest_within_budget, "P", "tab:purple", "fastest within budget"),
        ):
            pick = rec.plan(name)
            if pick is not None and pick.wall_h is not None and pick.usd is not None:
                ax.scatter([pick.wall_h], [pick.usd], marker=marker, s=220, color=colour,
                           zorder=5, label=f"{text}: {_label(pick)}")  # fmt: skip
        notes = []
        if costs:
            # A log axis for a spread over 10x; a dollar figure that underflowed to 0 (a
            # price of 1e-300 USD/h) keeps the axis linear rather than dividing by it.
            if min(hours) > 0 and max(hours) > 10 * min(hours):
                ax.set_xscale("log")
            if min(costs) > 0 and max(costs) > 10 * min(costs):
                ax.set_yscale("log")
            if rec.budget_usd <= 3 * max(costs):
                ax.axhline(rec.budget_usd, color="tab:red", linestyle="--", label="budget")
            else:
                notes.append(f"budget ${rec.budget_usd:,.0f} is above every option")
            if rec.deadline_h is not None:
                if rec.deadline_h <= 3 * max(hours):
                    ax.axvline(rec.deadline_h, color="tab:red", linestyle=":",
                               label="deadline")  # fmt: skip
                else:
                    notes.append(f"deadline {rec.deadline_h:g} h is beyond every option")
        ax.set_xlabel("campaign wall time (h)")
        ax.set_ylabel("campaign cost (USD)")
        title = "Cost vs time per instance option"
        ax.set_title(title + (f"\n({'; '.join(notes)})" if notes else ""), fontsize=11)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="best", fontsize=8)
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


def write_recommendation(advice: Advice, out_dir: Path) -> dict[str, Path]:
    """Writes recommend.md, recommend.html and recommend.json into ``out_dir``.

    Args:
        advice: The recommendation and the context its reports print.
        out_dir: The report folder (made if missing).

    Returns:
        The files by kind: ``markdown``, ``html``, ``json``.
    """
    rec = advice.recommendation
    title = f"Instance recommendation: {advice.campaign}"
    md = "\n".join([f"# {title}", "", rec.markdown(), "", *[f"{n}  " for n in advice.notes], ""])
    files = {
        "markdown": out_dir / "recommend.md",
        "html": out_dir / "recommend.html",
        "json": out_dir / "recommend.json",
    }
    atomic.write_text(files["markdown"], md)
    atomic.write_text(files["html"], render_html(rec, title=title, notes=advice.notes))
    atomic.write_json(files["json"], advice.to_dict())
    return files
