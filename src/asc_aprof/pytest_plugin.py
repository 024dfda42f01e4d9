"""pytest plugin: profile test bodies with ``--aprof`` (registered through the ``pytest11`` entry point).

Off unless ``--aprof`` is given. Then the ``aprof`` fixture yields a :class:`~asc_aprof.Profiler`
(``aprof_async`` an :class:`~asc_aprof.AsyncProfiler` for async tests); after each test that
profiled something, ``task_time_median(last_result.tasks, skip=--aprof-skip)`` is recorded and a
table (test id, kernel, median µs, count) is printed at the end of the session.
``--aprof-json PATH`` writes the same JSON report as ``asc-aprof summary --json``, plus a ``tests``
list; ``--aprof-report PATH`` writes the HTML report of the session's results, each test a case
(needs the ``report`` extra, plotly). Without a CANN toolkit the fixtures skip the test with the
reason, unless ``--aprof-simulate`` selects the simulated toolkit.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ._async import AsyncProfiler
from ._discovery import discover_toolkit
from ._errors import ToolkitNotFoundError
from ._profiler import Profiler
from ._records import AICORE_TASK_TYPES, ProfilingResult, task_time_median
from ._toolkit import Toolkit

_RECORDS_KEY = pytest.StashKey[list[dict[str, Any]]]()
_RESULTS_KEY = pytest.StashKey[list[ProfilingResult]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("aprof", "asc-aprof kernel profiling")
    group.addoption("--aprof", action="store_true", help="profile tests that use the aprof fixtures")
    group.addoption(
        "--aprof-skip", type=int, default=1, help="warm-up samples dropped per kernel (default 1)"
    )
    group.addoption("--aprof-json", metavar="PATH", help="write the medians and results as JSON")
    group.addoption(
        "--aprof-report", metavar="PATH", help="write an HTML report of the results (tests as cases)"
    )
    group.addoption("--aprof-simulate", action="store_true", help="use the simulated CANN toolkit")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_RECORDS_KEY] = []
    config.stash[_RESULTS_KEY] = []


def _toolkit(config: pytest.Config) -> Toolkit:
    if not config.getoption("--aprof"):
        pytest.skip("profiling is off: run pytest with --aprof")
    if config.getoption("--aprof-simulate"):
        from . import sim

        return sim.toolkit()
    try:
        return discover_toolkit()
    except ToolkitNotFoundError as exc:
        pytest.skip(f"no CANN toolkit: {str(exc).splitlines()[0]} (use --aprof-simulate without an NPU)")


def _record(request: pytest.FixtureRequest, result: ProfilingResult | None) -> None:
    if result is None:
        return
    config = request.config
    config.stash[_RESULTS_KEY].append(result)
    skip = config.getoption("--aprof-skip")
    first = next((t for t in result.tasks if t.type in AICORE_TASK_TYPES), None)
    entry: dict[str, Any] = {"test": request.node.nodeid, "run_id": result.run_id}
    if first is None:
        entry.update(kernel=None, median_us=None, count=0, error="no AI Core task")
    else:
        count = sum(1 for t in result.tasks if t.name == first.name and t.type in AICORE_TASK_TYPES)
        try:
            median = task_time_median(result.tasks, skip=skip)
        except ValueError as exc:
            entry.update(kernel=first.name, median_us=None, count=count, error=str(exc))
        else:
            entry.update(kernel=first.name, median_us=median, count=count)
    config.stash[_RECORDS_KEY].append(entry)


@pytest.fixture
def aprof(request: pytest.FixtureRequest) -> Iterator[Profiler]:
    """A :class:`Profiler`; use ``with aprof.profile(): ...`` in the test body."""
    profiler = Profiler(toolkit=_toolkit(request.config))
    yield profiler
    _record(request, profiler.last_result)


@pytest.fixture
def aprof_async(request: pytest.FixtureRequest) -> Iterator[AsyncProfiler]:
    """An :class:`AsyncProfiler`; use ``async with aprof_async.profile(): ...``."""
    profiler = AsyncProfiler(toolkit=_toolkit(request.config))
    yield profiler
    _record(request, profiler.last_result)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if not config.getoption("--aprof"):
        return
    records = config.stash[_RECORDS_KEY]
    terminalreporter.section("asc-aprof kernel medians (µs)")
    if not records:
        terminalreporter.write_line("no test used the aprof fixtures")
    else:
        width = max(len(r["test"]) for r in records)
        terminalreporter.write_line(f"{'test'.ljust(width)}  {'kernel':<24} {'median':>12} {'count':>7}")
        for r in records:
            median = "-" if r["median_us"] is None else f"{r['median_us']:.3f}"
            kernel = r["kernel"] or "-"
            terminalreporter.write_line(
                f"{r['test'].ljust(width)}  {kernel:<24} {median:>12} {r['count']:>7}"
            )
    path = config.getoption("--aprof-json")
    if path:
        from ._report import report
        from ._stats import kernel_stats

        results = config.stash[_RESULTS_KEY]
        data = report(results, kernel_stats([t for r in results for t in r.tasks]))
        data["tests"] = records
        Path(path).write_text(json.dumps(data), encoding="utf-8")
        terminalreporter.write_line(f"wrote {path}")
    html_path = config.getoption("--aprof-report")
    if html_path:
        _write_html_report(terminalreporter, config, html_path, records)


def _write_html_report(
    terminalreporter: Any, config: pytest.Config, path: str, records: list[dict[str, Any]]
) -> None:
    """The session's results as the HTML report, each run labelled by the test that made it."""
    from ._errors import AprofError
    from ._reporting import model_of

    results = config.stash[_RESULTS_KEY]
    if not results:
        terminalreporter.write_line(f"asc-aprof: no result to report, {path} not written")
        return
    cases: dict[tuple[str, int | None], str] = {(str(r["run_id"]), None): str(r["test"]) for r in records}
    try:
        model = model_of(
            results, skip=config.getoption("--aprof-skip"), cases=cases, title="asc-aprof: pytest session"
        )
        from ._html import write_html

        write_html(model, path)
    except AprofError as exc:
        terminalreporter.write_line(f"asc-aprof: {path} not written: {str(exc).splitlines()[0]}")
        return
    terminalreporter.write_line(f"wrote {path}")
