"""The report of a real (small) campaign: content, figures against the study and ledger,
and the interactive HTML page as headless Chromium renders it."""

from __future__ import annotations

import io
import json
import math
import re
from collections import Counter
from pathlib import Path

import numpy as np
import optuna
import plotly.offline
import pytest
from PIL import Image

from tests.browser import needs_chromium, plotly_plots, screenshot
from tests.conftest import tiny_digits_campaign
from tuner import rundir
from tuner._ray.cluster import RayOptions
from tuner._ray.driver import run_campaign
from tuner.cli import main
from tuner.report import PLOTS, write_report
from tuner.report._render import COLORS
from tuner.spec import parse_campaign

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One campaign for every test here, with the end-of-run report on."""
    data = tiny_digits_campaign(
        budget={"trials": 8, "max_epochs": 4, "usd": 50.0},
        pricing={"node_usd_per_hour": 3.6},
    )
    spec = parse_campaign(data, "report.yaml")
    folder = tmp_path_factory.mktemp("report") / "runs" / spec.name
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("TUNER_NO_REPORT", raising=False)
        out = io.StringIO()
        run_campaign(spec, folder, RayOptions(num_cpus=2), stream=out)
    (folder.parent / "output.txt").write_text(out.getvalue())
    return folder


def _pixels(png: Path) -> np.ndarray:
    """The PNG decoded to RGB, rows x columns x 3."""
    return np.asarray(Image.open(png).convert("RGB"))


def _rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def _tallest(pixels: np.ndarray, colour: str) -> int:
    """The longest vertical run of pixels of exactly ``colour`` (a bar's height)."""
    best = 0
    for column in (pixels == _rgb(colour)).all(axis=2).T:
        run = 0
        for hit in column:
            run = run + 1 if hit else 0
            best = max(best, run)
    return best


def test_campaign_writes_its_report_and_the_figures_match_study_and_ledger(run_dir: Path) -> None:
    for name in ("report.json", "report.md", "report.html"):
        assert (run_dir / name).is_file(), name
    report = json.loads((run_dir / "report.json").read_text())
    study = optuna.load_study(study_name="tiny-digits", storage=rundir.study_url(run_dir))
    summary = json.loads((run_dir / "summary.json").read_text())
    ledger = json.loads((run_dir / "ledger.json").read_text())

    assert report["trials"] == len(study.trials) == 8
    assert report["best"]["value"] == pytest.approx(study.best_value)
    assert report["best"]["params"] == study.best_params
    assert report["best"]["trial"] == summary["best"]["tune_trial_id"]
    states = Counter(t.state.name for t in study.trials)
    assert report["outcomes"].get("completed", 0) == states["COMPLETE"]
    assert sum(report["outcomes"].values()) == len(study.trials)
    assert report["epochs_consumed"] == sum(len(t.intermediate_values) for t in study.trials)
    assert report["rungs"] == [1, 2]
    for trial in study.trials:
        curve = report["curves"][trial.user_attrs["tune_trial_id"]]
        assert curve["values"] == [trial.intermediate_values[e] for e in curve["epochs"]]
        # Every epoch in the trial's result.json too, also for the first trials, which wait
        # at a rung and restart (Ray's loggers copied a stale result.json back over them).
        rows = (run_dir / f"trial_{trial.user_attrs['tune_trial_id']}" / "result.json").read_text()
        epochs = [json.loads(line)["epoch"] for line in rows.splitlines() if line.strip()]
        assert epochs == sorted(trial.intermediate_values)
    assert report["spend"]["usd"] == pytest.approx(ledger["totals"]["usd"])
    assert report["spend"]["usd"] > 0
    assert report["spend"]["limit_usd"] == 50.0
    assert report["spend"]["series"][-1][1] == pytest.approx(ledger["totals"]["usd"], rel=0.05)
    assert report["cost"]["actual"]["trial_epochs"] == report["epochs_consumed"]
    if states["COMPLETE"] >= 3:
        assert report["importances"]["evaluator"] == "fanova"
        assert report["importances"]["values"]
        assert set(report["importances"]["values"]) <= {"lr", "optimizer", "momentum", "channels"}
        assert sum(report["importances"]["values"].values()) == pytest.approx(1.0)
    else:
        assert report["importances"]["note"] == f"{states['COMPLETE']} completed trials: too few"
    assert report["gpu"] == {}  # CPU trials: no telemetry
    # Importances at each rung and at max_epochs, over every trial that reached the epoch.
    per_rung = report["rung_importances"]["rungs"]
    assert [r["epoch"] for r in per_rung] == [1, 2, 4]
    for rung in per_rung:
        reached = [
            t
            for t in study.trials
            if math.isfinite(t.intermediate_values.get(rung["epoch"], math.nan))
        ]
        assert rung["trials"] == len(reached), rung
        assert bool(rung["values"]) == (len(reached) >= 3), rung
    assert per_rung[0]["trials"] == 8

    md = (run_dir / "report.md").read_text()
    assert f"trial {report['best']['trial']}" in md
    for name in PLOTS:
        assert f"(report_plots/{name}.png)" in md
        pixels = _pixels(run_dir / "report_plots" / f"{name}.png")
        # Drawn on: more than a background (text alone brings antialiased greys).
        assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 16, name
        assert (pixels == 255).all(axis=2).mean() < 0.995, name
    # The outcomes plot shows the outcome counts: one bar per outcome in its colour, the
    # bars' heights in proportion to the counts (to 2 px: a bar's antialiased top and
    # bottom rows are not its exact colour).
    bars = _pixels(run_dir / "report_plots" / "outcomes.png")
    heights = {n: _tallest(bars, COLORS[n]) for n in report["outcomes"]}
    most = max(report["outcomes"], key=report["outcomes"].__getitem__)
    per_trial = heights[most] / report["outcomes"][most]
    for outcome, count in report["outcomes"].items():
        assert abs(heights[outcome] - count * per_trial) <= 2, (heights, report["outcomes"])


def test_report_html_is_self_contained(run_dir: Path) -> None:
    page = (run_dir / "report.html").read_text()
    # plotly.js once, in <head>; every figure a <div> of its own data; nothing fetched.
    assert page.count(plotly.offline.get_plotlyjs()) == 1
    assert page.index(plotly.offline.get_plotlyjs()) < page.index("</head>")
    assert not re.search(r"<(script|img|link|iframe)[^>]+(src|href)=", page)
    assert re.findall(r'<figure id="figure-(history|importances|outcomes)"', page) == [
        "history",
        "importances",
        "outcomes",
    ]


@needs_chromium
def test_report_renders_in_headless_chromium_with_every_plot(run_dir: Path, tmp_path: Path) -> None:
    report = json.loads((run_dir / "report.json").read_text())
    seen, dom, console = plotly_plots(run_dir / "report.html", tmp_path)
    assert console == []  # no error, warning or message of any kind
    # Every plot on the page is drawn and has data points, each with a mark on screen.
    for name, plot in seen.items():
        assert plot["drawn"] and plot["points"] > 0 and plot["marks"] > 0, (name, plot)
    # The figures this campaign has data for are plots; the others are notes saying why.
    drawn = {name.removeprefix("plot-") for name in seen}
    notes = set(re.findall(r'<figure id="figure-([\w-]+)" class="[^"]*"><p class="note">', dom))
    assert drawn.isdisjoint(notes)
    always = {"intermediate", "importances", "spend", "predicted", "outcomes"}
    if report["outcomes"].get("completed"):
        always |= {"history", "edf", "parallel", "slice"}
    assert always <= drawn, (drawn, notes)
    assert "gpu" in notes  # CPU trials: no telemetry
    assert {"history", "edf", "parallel", "slice", *always, "gpu"} <= drawn | notes

    # And on screen: the outcome bars in their colours (plotly fills bars with exactly it).
    shot = _pixels(screenshot(run_dir / "report.html", tmp_path / "report.png", height=5000))
    for outcome in report["outcomes"]:
        assert (shot == _rgb(COLORS[outcome])).all(axis=2).sum() > 200, outcome


def test_tuner_report_cli_rewrites_it(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (run_dir / "report.html").unlink()
    assert main(["report", str(run_dir)]) == 0
    assert (run_dir / "report.html").is_file()
    assert "report.html" in capsys.readouterr().out


def test_tuner_report_on_a_folder_that_is_not_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not a tuner run folder" in err and "Traceback" not in err
    assert not (tmp_path / "report.html").exists()


def test_write_report_is_repeatable(run_dir: Path) -> None:
    first = json.loads((run_dir / "report.json").read_text())
    write_report(run_dir)
    assert json.loads((run_dir / "report.json").read_text()) == first


def test_progress_lines_show_spend_against_the_budget(run_dir: Path) -> None:
    # Off a terminal (a StringIO): plain lines with the real guard's money figures.
    lines = (run_dir.parent / "output.txt").read_text().splitlines()
    status = [line for line in lines if "trials done" in line]
    assert status and all(
        re.search(r"\| \$\d+\.\d\d of \$50\.00 \(\d+%\) at \$3\.60/h", s) for s in status
    )
    assert any(line.startswith("report: ") and line.endswith("report.json)") for line in lines)
