"""pytest plugin: profile test bodies with ``--aprof`` (registered through the ``pytest11`` entry point).

Fixtures: ``aprof`` (a :class:`~asc_aprof.Profiler`) and ``aprof_async`` (an
:class:`~asc_aprof.AsyncProfiler`). Without ``--aprof`` they hand the test a *pass-through*
profiler (:mod:`asc_aprof._passthrough`): the body runs, nothing is collected, and the test
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

import contextlib
import inspect
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from ._async import AsyncProfiler
from ._bench import BenchResult
from ._binding import ProfileTypes
from ._core import ProfileRun
from ._discovery import discover_toolkit
from ._enums import AicoreMetrics
from ._errors import ToolkitNotFoundError
from ._passthrough import PassThroughAsyncProfiler, PassThroughProfiler
from ._profiler import Profiler
from ._records import AICORE_TASK_TYPES, ProfilingResult, task_time_median
from ._toolkit import Toolkit

_RECORDS_KEY = pytest.StashKey[list[dict[str, Any]]]()
_RESULTS_KEY = pytest.StashKey[list[ProfilingResult]]()

#: What the fixtures record, in the order the test made them.
Recorded = ProfilingResult | BenchResult

NO_TOOLKIT = (
    "no CANN toolkit was found (set ASCEND_HOME_PATH, usually by sourcing CANN's set_env.sh), so this "
    "profiled test is skipped; pass --aprof-simulate to run it on the simulated toolkit instead"
)


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


def _toolkit(config: pytest.Config) -> Toolkit:
    if config.getoption("--aprof-simulate"):
        from . import sim

        return sim.toolkit()
    try:
        return discover_toolkit()
    except ToolkitNotFoundError:
        pytest.skip(NO_TOOLKIT)


class _Recorder:
    """What one test's profiler recorded (one test, one thread or task group at a time)."""

    def __init__(self) -> None:
        self.records: list[Recorded] = []


class RecordingProfiler(Profiler):
    """The ``aprof`` fixture with ``--aprof``: a :class:`Profiler` recording every call's result."""

    enabled = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.recorder = _Recorder()

    @contextlib.contextmanager
    def profile(
        self,
        device_id: int | None = None,
        cleanup: bool = True,
        metrics: AicoreMetrics | int = AicoreMetrics.PIPE_UTILIZATION,
        profile_types: ProfileTypes | None = None,
        *,
        counters: bool = False,
    ) -> Iterator[ProfileRun]:
        with super().profile(device_id, cleanup, metrics, profile_types, counters=counters) as run:
            yield run
        if run.result is not None:
            self.recorder.records.append(run.result)

    def _bench(self, *args: Any, **kwargs: Any) -> BenchResult:
        result = super()._bench(*args, **kwargs)
        self.recorder.records.append(result)
        return result


class RecordingAsyncProfiler(AsyncProfiler):
    """The ``aprof_async`` fixture with ``--aprof``: an :class:`AsyncProfiler` that records."""

    enabled = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.recorder = _Recorder()

    @contextlib.asynccontextmanager
    async def profile(
        self,
        device_id: int | None = None,
        cleanup: bool = True,
        metrics: AicoreMetrics | int = AicoreMetrics.PIPE_UTILIZATION,
        profile_types: ProfileTypes | None = None,
        *,
        counters: bool = False,
    ) -> AsyncIterator[ProfileRun]:
        """As :meth:`AsyncProfiler.profile` (same cancellation), recording the result."""
        async with super().profile(device_id, cleanup, metrics, profile_types, counters=counters) as run:
            yield run
        if run.result is not None:
            self.recorder.records.append(run.result)

    async def _bench(self, *args: Any, **kwargs: Any) -> BenchResult:
        result = await super()._bench(*args, **kwargs)
        self.recorder.records.append(result)
        return result


def _type_counts(tasks: tuple[Any, ...]) -> str:
    counts: dict[str, int] = {}
    for task in tasks:
        counts[task.type] = counts.get(task.type, 0) + 1
    return ", ".join(f"{n} {t}" for t, n in sorted(counts.items()))


def _profile_entries(result: ProfilingResult, skip: int) -> list[dict[str, Any]]:
    kernels = list(dict.fromkeys(t.name for t in result.tasks if t.type in AICORE_TASK_TYPES))
    base: dict[str, Any] = {"kind": "profile", "run_id": result.run_id, "skip": skip}
    if not kernels:
        if not result.tasks:
            why = "no task was recorded (did the body launch kernels on the profiled device?)"
        else:
            why = f"no AI Core task among {len(result.tasks)} tasks ({_type_counts(result.tasks)})"
            if any(t.type == "N/A" for t in result.tasks):
                why += "; N/A types come from a level-0 run whose task types could not be joined"
        return [{**base, "kernel": None, "median_us": None, "count": 0, "note": why}]
    entries = []
    for kernel in kernels:
        count = sum(1 for t in result.tasks if t.name == kernel and t.type in AICORE_TASK_TYPES)
        entry = {**base, "kernel": kernel, "count": count, "note": ""}
        if skip and count <= skip:
            entry["note"] = f"skip {skip} not applied: only {count} sample(s)"
        try:
            entry["median_us"] = task_time_median(result.tasks, name=kernel, skip=skip)
        except ValueError as exc:
            entry.update(median_us=None, note=str(exc))
        entries.append(entry)
    return entries


def _bench_entries(result: BenchResult) -> list[dict[str, Any]]:
    kernel = " + ".join(k.name for k in result.kernels)
    note = (
        f"{result.ci_level:.0%} CI [{result.ci_low_us:.3f}, {result.ci_high_us:.3f}], "
        f"{len(result.outliers)} outlier(s), stop: {result.stop.value}"
    )
    entries: list[dict[str, Any]] = [
        {
            "kind": "bench",
            "run_id": result.run_ids[-1] if result.run_ids else None,
            "kernel": kernel,
            "median_us": result.median_us,
            "count": result.count,
            "note": note,
            "bench": result.to_dict(),
        }
    ]
    if len(result.kernels) > 1:
        for part in result.kernels:
            entries.append(
                {
                    "kind": "bench-kernel",
                    "run_id": None,
                    "kernel": f"  {part.name}" + (f" x{part.per_call}" if part.per_call > 1 else ""),
                    "median_us": part.median_us,
                    "count": result.count,
                    "note": "per call",
                }
            )
    return entries


def _record(request: pytest.FixtureRequest, profiler: RecordingProfiler | RecordingAsyncProfiler) -> None:
    config = request.config
    records = list(profiler.recorder.records)
    last = profiler.last_result
    if not records and last is not None:
        records.append(last)  # store_result() / store_last_result() after a manual start/stop
    skip = config.getoption("--aprof-skip")
    for index, record in enumerate(records):
        if isinstance(record, BenchResult):
            entries = _bench_entries(record)
        else:
            config.stash[_RESULTS_KEY].append(record)
            entries = _profile_entries(record, skip)
        for entry in entries:
            config.stash[_RECORDS_KEY].append({"test": request.node.nodeid, "call": index, **entry})


@pytest.fixture
def aprof(request: pytest.FixtureRequest) -> Iterator[RecordingProfiler | PassThroughProfiler]:
    """A :class:`Profiler` with ``--aprof`` (recording every call), else a pass-through one."""
    if not request.config.getoption("--aprof"):
        yield PassThroughProfiler()
        return
    profiler = RecordingProfiler(toolkit=_toolkit(request.config))
    yield profiler
    _record(request, profiler)


@pytest.fixture
def aprof_async(
    request: pytest.FixtureRequest,
) -> Iterator[RecordingAsyncProfiler | PassThroughAsyncProfiler]:
    """An :class:`AsyncProfiler` with ``--aprof`` (recording every call), else a pass-through one."""
    if not request.config.getoption("--aprof"):
        yield PassThroughAsyncProfiler()
        return
    profiler = RecordingAsyncProfiler(toolkit=_toolkit(request.config))
    yield profiler
    _record(request, profiler)


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
        from ._report import report
        from ._stats import run_kernel_stats

        results = config.stash[_RESULTS_KEY]
        data = report(results, run_kernel_stats([r.tasks for r in results]))
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
