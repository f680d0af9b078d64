"""The headless Chromium harness (tests/browser.py) sees what report tests rely on it for."""

from __future__ import annotations

from pathlib import Path

from tests.browser import dump_dom_and_console, needs_chromium


@needs_chromium
def test_console_messages_and_uncaught_errors_are_reported(tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    page.write_text(
        "<html><body><p id='x'>ok</p>"
        "<script>console.error('broken plot'); console.warn('odd'); missing();</script>"
        "</body></html>"
    )
    dom, console = dump_dom_and_console(page)
    assert '<p id="x">ok</p>' in dom
    assert console == [
        "broken plot",
        "odd",
        "Uncaught ReferenceError: missing is not defined",
    ]
