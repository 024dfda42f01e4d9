"""pytest plugin: profile test bodies with ``--aprof`` (registered through the ``pytest11`` entry point).

Fixtures: ``aprof`` (a :class:`~asc_aprof.Profiler`) and ``aprof_async`` (an
:class:`~asc_aprof.AsyncProfiler`). Without ``--aprof`` they hand the test a *pass-through*
profiler (:mod:`asc_aprof._profilers._passthrough`): the body runs, nothing is collected, and the test
passes or fails on its own asserts (``aprof.enabled`` is False). With ``--aprof``, every
``profile()`` and every ``bench()`` / ``do_bench()`` of a test is recorded (a result read with
``store_result()`` / ``store_last_result()`` too, when the test made no other record):
each AI Core kernel of a profiled call gets
``task_time_median(tasks, name=kernel, skip=--aprof-skip)`` (skip applied only when the kernel
has more samples than that, as upstream does), each benchmark its median and interval. A table
(test, call, kernel, median µs, samples, note) is printed at the end of the session; the note
explains an empty median (no AI Core task, which types there were) and a skip not applied.
``--aprof-json PATH`` writes the same JSON report as ``asc-aprof summary --json``, plus a
``tests`` list of these records; ``--aprof-report PATH`` writes the HTML report of the session's
results, each test a case (needs the ``report`` extra, plotly).

An ``async def`` test that uses ``aprof_async`` runs through anyio's pytest plugin without any
marker: the plugin adds ``pytest.mark.anyio`` (anyio then runs it on each available backend,
or on the test's own ``anyio_backend`` fixture), unless the test has an ``asyncio`` or ``anyio``
marker of its own already.

With ``--aprof`` but no CANN toolkit, the fixtures skip the test (one-sentence reason), unless
``--aprof-simulate`` selects the simulated toolkit.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ._model._records import ProfilingResult
    from ._profilers._passthrough import PassThroughAsyncProfiler, PassThroughProfiler
    from ._pytest_recording import RecordingAsyncProfiler, RecordingProfiler

# The plugin is loaded in every pytest session of every user (the pytest11 entry point): it
# imports the profilers only when a test asks for a fixture, so a session that never profiles
# pays for pytest hooks alone.

_RECORDS_KEY = pytest.StashKey[list[dict[str, Any]]]()
_RESULTS_KEY = pytest.StashKey[list["ProfilingResult"]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("aprof", "asc-aprof kernel profiling")
    group.addoption(
        "--aprof",
        action="store_true",
        help="profile tests that use the aprof fixtures (without it they run unprofiled)",
    )
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


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Mark async tests using ``aprof_async`` for anyio, unless they say how to run already."""
    if not config.pluginmanager.has_plugin("anyio"):
        return
    for item in items:
        if not isinstance(item, pytest.Function) or "aprof_async" not in item.fixturenames:
            continue
        function = getattr(item.obj, "hypothesis", None)
        function = getattr(function, "inner_test", item.obj)
        if not inspect.iscoroutinefunction(function):
            continue
        if item.get_closest_marker("anyio") or item.get_closest_marker("asyncio"):
            continue
        item.add_marker(pytest.mark.anyio)


@pytest.fixture
def aprof(request: pytest.FixtureRequest) -> Iterator[RecordingProfiler | PassThroughProfiler]:
    """A :class:`Profiler` with ``--aprof`` (recording every call), else a pass-through one."""
    if not request.config.getoption("--aprof"):
        from ._profilers._passthrough import PassThroughProfiler

        yield PassThroughProfiler()
        return
    from ._pytest_recording import RecordingProfiler, record, toolkit_for

    profiler = RecordingProfiler(toolkit=toolkit_for(request.config))
    yield profiler
    record(request, profiler, request.config.stash[_RECORDS_KEY], request.config.stash[_RESULTS_KEY])


@pytest.fixture
def aprof_async(
    request: pytest.FixtureRequest,
) -> Iterator[RecordingAsyncProfiler | PassThroughAsyncProfiler]:
    """An :class:`AsyncProfiler` with ``--aprof`` (recording every call), else a pass-through one."""
    if not request.config.getoption("--aprof"):
        from ._profilers._passthrough import PassThroughAsyncProfiler

        yield PassThroughAsyncProfiler()
        return
    from ._pytest_recording import RecordingAsyncProfiler, record, toolkit_for

    profiler = RecordingAsyncProfiler(toolkit=toolkit_for(request.config))
    yield profiler
    record(request, profiler, request.config.stash[_RECORDS_KEY], request.config.stash[_RESULTS_KEY])


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if not config.getoption("--aprof"):
        return
    records = config.stash[_RECORDS_KEY]
    terminalreporter.section("asc-aprof kernel medians (µs)")
    if not records:
        terminalreporter.write_line("no test used the aprof fixtures")
    else:
        width = max(len(r["test"]) for r in records)
        kwidth = max(24, *(len(r["kernel"] or "-") for r in records))
        terminalreporter.write_line(
            f"{'test'.ljust(width)}  {'call':>4}  {'kernel':<{kwidth}} {'median':>12} {'samples':>7}  note"
        )
        for r in records:
            median = "-" if r["median_us"] is None else f"{r['median_us']:.3f}"
            kernel = r["kernel"] or "-"
            terminalreporter.write_line(
                f"{r['test'].ljust(width)}  {r['call']:>4}  {kernel:<{kwidth}} {median:>12} "
                f"{r['count']:>7}  {r['note']}".rstrip()
            )
    path = config.getoption("--aprof-json")
    if path:
        from ._outputs._json_report import report
        from ._plans._columns import TaskColumns
        from ._plans._stats import run_kernel_stats

        # the statistics from columns; the samples kept, so `asc-aprof compare` can bootstrap
        runs = [
            TaskColumns(r.tasks, run_id=r.run_id, stored_at=r.stored_at) for r in config.stash[_RESULTS_KEY]
        ]
        data = report(runs, run_kernel_stats(runs), samples=True)
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
    from ._model._errors import AprofError
    from ._outputs._report_write import model_of

    results = config.stash[_RESULTS_KEY]
    if not results:
        terminalreporter.write_line(f"asc-aprof: no result to report, {path} not written")
        return
    cases: dict[tuple[str, int | None], str] = {(str(r["run_id"]), None): str(r["test"]) for r in records}
    try:
        model = model_of(
            results, skip=config.getoption("--aprof-skip"), cases=cases, title="asc-aprof: pytest session"
        )
        from ._outputs._report_html import write_html

        write_html(model, path)
    except AprofError as exc:
        terminalreporter.write_line(f"asc-aprof: {path} not written: {str(exc).splitlines()[0]}")
        return
    terminalreporter.write_line(f"wrote {path}")
