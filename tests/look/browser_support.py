"""Driving the system's Chromium headless through playwright, for the report's browser tests.

The browser is Debian's ``chromium`` (``/usr/bin/chromium``, or ``ASC_APROF_CHROMIUM``), driven by
the ``playwright`` package through its ``executable_path``: nothing is downloaded. Without either,
the tests skip with one sentence saying what to install, except in CI (``CI=true``), where a
missing browser is a failure: CI installs it (``.ci/run``), so a skip there would hide a broken
install. Screenshots go to ``build/ci-artifacts/`` (ignored by git), kept by CI as artifacts.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest

REPO: Final = Path(__file__).resolve().parents[2]
ARTIFACTS: Final = REPO / "build" / "ci-artifacts"
CHROMIUM: Final = Path(os.environ.get("ASC_APROF_CHROMIUM", "/usr/bin/chromium"))
#: As root in a closed network: no sandbox, no GPU, no background connections Chromium would try.
FLAGS: Final = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)

#: Per chart: its name, the main SVG's size, and how many marks (paths with a shape, images) it drew.
CHART_PROBE: Final = """() => [...document.querySelectorAll('.aprof-chart')].map(div => {
  const svg = div.querySelector('svg.main-svg');
  const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
  const drawn = el => el.tagName === 'image' || (el.getAttribute('d') || '').replace(/[MZ\\s]/g, '') !== '';
  const marks = [...div.querySelectorAll('g.trace path, g.hm image')].filter(drawn);
  return {name: div.dataset.chart, width: box.width, height: box.height, marks: marks.length};
})"""


#: Per roofline or speed-of-light chart: its name and how many scatter markers (kernel points) it drew.
POINT_PROBE: Final = """() => Object.fromEntries([...document.querySelectorAll(
  '.aprof-chart[data-chart^="roofline:"], .aprof-chart[data-chart^="sol:"]')].map(div =>
  [div.dataset.chart, div.querySelectorAll('g.trace.scatter path.point').length]))"""


ALL_DRAWN: Final = "() => [...document.querySelectorAll('.aprof-chart')].every(d => d.querySelector('svg'))"


def _unavailable() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the browser tests need the playwright package: pip install -e '.[test]' installs it"
    if not CHROMIUM.exists():
        return f"the browser tests need Chromium at {CHROMIUM}: install it with apt-get install chromium"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium (playwright ``Browser``), or a skip (a failure in CI) without one.

    Module-scoped: playwright's sync API keeps an event loop running in this thread while it is
    up, so async tests elsewhere must not run while it lives.
    """
    reason = _unavailable()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI installs it in .ci/run, so this is a broken CI setup)")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=list(FLAGS), headless=True)
        try:
            yield launched
        finally:
            launched.close()


@dataclasses.dataclass(frozen=True)
class PageCheck:
    charts: list[dict[str, Any]]
    console_errors: list[str]
    page_errors: list[str]
    requests_blocked: list[str]
    seconds: float
    screenshot: Path
    #: roofline / speed-of-light chart name -> kernel points drawn (:data:`POINT_PROBE`)
    points: dict[str, int] = dataclasses.field(default_factory=dict)


def open_report(browser: Any, page_path: Path, shot: str) -> PageCheck:
    """Load *page_path* offline (any other request is blocked and recorded), probe it, screenshot it."""
    began = time.monotonic()
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    console: list[str] = []
    errors: list[str] = []
    blocked: list[str] = []
    url = page_path.resolve().as_uri()
    page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))

    def route(request_route: Any) -> None:
        if request_route.request.url == url:
            request_route.continue_()
        else:
            blocked.append(request_route.request.url)
            request_route.abort()

    page.route("**/*", route)
    try:
        page.goto(url, wait_until="load")
        page.wait_for_function(ALL_DRAWN, timeout=30_000)
        charts = page.evaluate(CHART_PROBE)
        points = page.evaluate(POINT_PROBE)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        target = ARTIFACTS / f"{shot}.png"
        page.screenshot(path=str(target), full_page=True)
    finally:
        page.close()
    return PageCheck(charts, console, errors, blocked, time.monotonic() - began, target, points)


def assert_renders(check: PageCheck, expected_charts: int) -> None:
    """No console error, nothing fetched, every chart drawn with marks in a non-empty SVG."""
    assert check.console_errors == [] and check.page_errors == []
    assert check.requests_blocked == []
    assert len(check.charts) == expected_charts
    for chart in check.charts:
        assert chart["width"] > 100 and chart["height"] > 100, chart
        assert chart["marks"] > 0, chart
    assert check.screenshot.stat().st_size > 10_000
