"""The recommendation page in a real browser: the plot is on the page and drawn."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.browser import dump_dom, needs_chromium, screenshot
from tests.tuner.cost.test_advise import _advise
from tuner.report import write_recommendation


def _pixels_near(png: Path, rgb: tuple[int, int, int], tol: int = 40) -> int:
    import matplotlib.image

    image = (matplotlib.image.imread(png)[..., :3] * 255).astype(int)
    return int((np.abs(image - np.array(rgb)).max(axis=-1) < tol).sum())


@needs_chromium
def test_recommendation_page_renders_its_plot_in_chromium(tmp_path: Path) -> None:
    files = write_recommendation(_advise(deadline_h=10.0), tmp_path)
    dom = dump_dom(files["html"])
    assert '<img id="cost-vs-time" src="data:image/png;base64,' in dom
    assert "Cheapest within the deadline: aws/r1/fast.1" in dom
    shot = screenshot(files["html"], tmp_path / "page.png")
    # The plot's Pareto front (tab:orange) and the cheapest pick's star (tab:green) are
    # drawn: nothing else on the page has those colours.
    assert _pixels_near(shot, (255, 127, 14)) > 100
    assert _pixels_near(shot, (44, 160, 44)) > 100
