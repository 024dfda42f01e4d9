"""The HTML report in a real browser: headless Chromium loads it offline, every chart renders, no error.

Screenshots land in ``build/ci-artifacts/`` (see :mod:`tests.browser_support`).
"""

from __future__ import annotations

import concurrent.futures
import re
from pathlib import Path

import anyio
import pytest

from asc_aprof import SweepItem, Timeline, Toolkit, sweep_timelines, write_report

from ..extras import require
from .browser_support import assert_renders, open_report
from .test_roofline import CASES, KERNELS, roofline_sweep
from .test_trace import four_device_sweep

require("plotly")  # the report is drawn with it


@pytest.fixture
def sweep(toolkit: Toolkit, tmp_path: Path) -> list[Timeline]:
    root = tmp_path / "sweep"

    async def main() -> list[SweepItem[int]]:
        return await four_device_sweep(toolkit, root, cases=6)

    # playwright's sync API runs an event loop in this thread once the browser is up
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        items = pool.submit(anyio.run, main).result()
    return sweep_timelines(items, root)


def charts_in(page: Path) -> int:
    return len(re.findall(r'class="aprof-chart"', page.read_text(encoding="utf-8")))


def test_sweep_report_renders(browser: object, sweep: list[Timeline], tmp_path: Path) -> None:
    page = write_report(sweep, tmp_path / "sweep.html", title="Simulated 4-device sweep")
    check = open_report(browser, page, "report-sweep")
    assert_renders(check, charts_in(page))
    assert {c["name"] for c in check.charts} >= {"timeline", "counters:ratios", "cases:add_custom"}


def test_compare_report_renders(browser: object, sweep: list[Timeline], tmp_path: Path) -> None:
    page = write_report({"base": sweep[:1], "new": sweep[1:]}, tmp_path / "compare.html")
    check = open_report(browser, page, "report-compare")
    assert_renders(check, charts_in(page))
    assert "compare:change" in {c["name"] for c in check.charts}


def test_roofline_renders_one_point_per_kernel(browser: object, toolkit: Toolkit, tmp_path: Path) -> None:
    """A simulated 910B sweep collected once per group (fops, pipe ratios, GM bandwidth): one
    roofline, a point per (case, kernel), no console error."""
    root = tmp_path / "sweep"
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        timelines = pool.submit(anyio.run, roofline_sweep, toolkit, root).result()
    page = write_report(timelines, tmp_path / "roofline.html", title="Simulated 910B roofline")
    check = open_report(browser, page, "report-roofline")
    assert_renders(check, charts_in(page))
    assert check.points == {"roofline:Ascend910B3": CASES * len(KERNELS)}
    assert "Speed of light: vk: " in page.read_text(encoding="utf-8")


def test_history_trend_page_renders(browser: object, tmp_path: Path) -> None:
    import datetime as _dt

    from asc_aprof.history import Environment, HistoryRecord, HistoryStore, KernelEntry, write_trend

    env = Environment(_dt.datetime.now(_dt.timezone.utc), "host", "0.test")
    with HistoryStore(tmp_path / "h.sqlite3") as store:
        for median in (10.0, 10.1, 9.9, 10.0, 15.0):
            kernels = tuple(
                KernelEntry("Ascend 910B", "AI_CORE", name, 30, m, m - 0.1, m + 0.1, m - 0.3, m + 0.3)
                for name, m in (("add_custom", median), ("mul_custom", median / 2))
            )
            store.add(HistoryRecord("test", env, kernels))
        stored = store.kernels()
    page = write_trend(stored, tmp_path / "trend.html", window=5, min_change=0.05, title="history")
    check = open_report(browser, page, "history-trend")
    assert_renders(check, 2)  # one chart per kernel
    assert {c["name"] for c in check.charts} == {
        "Ascend 910B / AI_CORE / add_custom",
        "Ascend 910B / AI_CORE / mul_custom",
    }
    assert "add_custom: regression" in page.read_text(encoding="utf-8")


def test_a_broken_page_is_caught(browser: object, tmp_path: Path) -> None:
    """The probe itself fails on an error and on an empty chart (it would not pass a broken report)."""
    page = tmp_path / "broken.html"
    page.write_text(
        '<html><body><div class="aprof-chart" data-chart="x"><svg class="main-svg" width="400" height="300">'
        "</svg></div><script>undefinedFunction()</script></body></html>"
    )
    check = open_report(browser, page, "broken-page")
    assert check.page_errors and check.charts == [{"name": "x", "width": 400, "height": 300, "marks": 0}]
    with pytest.raises(AssertionError):
        assert_renders(check, 1)
