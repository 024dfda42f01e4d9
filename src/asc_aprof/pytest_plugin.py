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

**pyasc's fixture, as a drop-in.** pyasc's test suites define, in their conftest, the options
``--profile``, ``--runs N``, ``--device`` and ``--profile-path DIR`` and the fixtures ``profiler``
and ``runs``; this plugin provides the same (and ``device_id``), so a suite can delete that code
and keep its tests and command lines. ``--profile`` and ``--aprof`` both switch profiling on, for
every fixture. ``profiler`` is a :class:`~asc_aprof.Profiler` whose raw runs go to
``DIR/<node id made a folder name>`` (else a pytest temporary folder), a pass-through profiler
without profiling or when the project's own ``backend`` fixture names a pyasc backend other than
NPU; at teardown it records ``task_time_median(last_result.tasks, skip=--aprof-skip)``, and a
"Profiling results" section lists ``<node id>: <median> μs`` per test, as pyasc's conftest prints
it. The upstream-named options are registered after the initial conftests are loaded, each only
when no conftest registered it already, and a conftest's own fixture of the same name wins over
the plugin's (pytest's rule), so a project that keeps its own profiler code keeps its behaviour.
"""

from __future__ import annotations

import argparse
import enum
import inspect
import json
from collections.abc import Generator, Iterator
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
# the "Profiling results" rows of the ``profiler`` fixture (pyasc's table)
_UPSTREAM_KEY = pytest.StashKey[list[dict[str, Any]]]()
# the upstream-named options this plugin registered (a conftest may have registered its own)
_OWNED_KEY = pytest.StashKey[frozenset[str]]()
# whether a test used ``aprof`` / ``aprof_async`` with profiling on (their table is then shown)
_APROF_USED_KEY = pytest.StashKey[bool]()

#: pyasc's conftest options: (names, argparse attributes), registered where no conftest has them.
_UPSTREAM_OPTIONS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("--profile", {"action": "store_true", "help": "profile the tests (as --aprof; pyasc's spelling)"}),
    (
        "--profile-path",
        {
            "metavar": "DIR",
            "default": None,
            "help": "keep the profiler fixture's raw runs in DIR, a folder per test (else a temporary one)",
        },
    ),
    ("--runs", {"type": int, "default": 1, "help": "kernel launches per test: the runs fixture (default 1)"}),
    (
        "--device",
        {
            "type": int,
            "default": None,
            "help": "device the profiler fixture profiles by default; the device_id fixture",
        },
    ),
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("aprof", "asc-aprof kernel profiling")
    group.addoption(
        "--aprof",
        action="store_true",
        help="profile tests that use the aprof or profiler fixtures (without it they run unprofiled)",
    )
    group.addoption(
        "--aprof-skip", type=int, default=1, help="warm-up samples dropped per kernel (default 1)"
    )
    group.addoption("--aprof-json", metavar="PATH", help="write the medians and results as JSON")
    group.addoption(
        "--aprof-report", metavar="PATH", help="write an HTML report of the results (tests as cases)"
    )
    group.addoption("--aprof-simulate", action="store_true", help="use the simulated CANN toolkit")
    group.addoption(
        "--aprof-history",
        nargs="?",
        const="",
        default=None,
        metavar="PATH",
        help="record the session's results into the history store (PATH or postgresql:// URL; "
        "without one: $ASC_APROF_HISTORY, else ~/.local/share/asc-aprof/history.sqlite3)",
    )


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> Generator[None, None, None]:
    """Register pyasc's option names once the initial conftests registered theirs: a project
    that keeps its own ``--profile`` (or ``--runs``, ``--device``, ``--profile-path``) keeps it."""
    yield
    group = parser.getgroup("aprof", "asc-aprof kernel profiling")
    owned = set()
    for name, attrs in _UPSTREAM_OPTIONS:
        try:
            group.addoption(name, **attrs)
        except (ValueError, argparse.ArgumentError):
            continue  # a conftest registered it (its own fixture reads it)
        owned.add(name)
    early_config.stash[_OWNED_KEY] = frozenset(owned)


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_RECORDS_KEY] = []
    config.stash[_RESULTS_KEY] = []
    config.stash[_UPSTREAM_KEY] = []
    config.stash[_APROF_USED_KEY] = False


def _owned(config: pytest.Config, name: str) -> bool:
    """Whether the upstream-named option *name* is this plugin's (not a conftest's own)."""
    return name in config.stash.get(_OWNED_KEY, frozenset())


def _profiling(config: pytest.Config) -> bool:
    """``--aprof``, or pyasc's ``--profile`` where it is this plugin's option."""
    return bool(config.getoption("--aprof")) or (
        _owned(config, "--profile") and bool(config.getoption("--profile"))
    )


def _npu_backend(request: pytest.FixtureRequest) -> bool:
    """False when the project's ``backend`` fixture is a pyasc-style backend enum (one with an
    ``NPU`` member) naming another backend: pyasc's fixture profiles on NPU only."""
    try:
        backend = request.getfixturevalue("backend")
    except pytest.FixtureLookupError:
        return True
    if isinstance(backend, enum.Enum) and "NPU" in type(backend).__members__:
        return backend is type(backend).__members__["NPU"]
    return True


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
    if not _profiling(request.config):
        from ._profilers._passthrough import PassThroughProfiler

        yield PassThroughProfiler()
        return
    from ._pytest_recording import RecordingProfiler, record, toolkit_for

    profiler = RecordingProfiler(toolkit=toolkit_for(request.config))
    request.config.stash[_APROF_USED_KEY] = True
    yield profiler
    record(request, profiler, request.config.stash[_RECORDS_KEY], request.config.stash[_RESULTS_KEY])


@pytest.fixture
def aprof_async(
    request: pytest.FixtureRequest,
) -> Iterator[RecordingAsyncProfiler | PassThroughAsyncProfiler]:
    """An :class:`AsyncProfiler` with ``--aprof`` (recording every call), else a pass-through one."""
    if not _profiling(request.config):
        from ._profilers._passthrough import PassThroughAsyncProfiler

        yield PassThroughAsyncProfiler()
        return
    from ._pytest_recording import RecordingAsyncProfiler, record, toolkit_for

    profiler = RecordingAsyncProfiler(toolkit=toolkit_for(request.config))
    request.config.stash[_APROF_USED_KEY] = True
    yield profiler
    record(request, profiler, request.config.stash[_RECORDS_KEY], request.config.stash[_RESULTS_KEY])


@pytest.fixture
def profiler(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RecordingProfiler | PassThroughProfiler]:
    """pyasc's ``profiler`` fixture: a :class:`Profiler` with ``--profile`` (or ``--aprof``), its
    raw runs in ``--profile-path``/<test> (else a temporary folder), whose last result's median is
    a "Profiling results" row; else a pass-through profiler."""
    config = request.config
    if not _profiling(config) or not _npu_backend(request):
        from ._profilers._passthrough import PassThroughProfiler

        yield PassThroughProfiler()
        return
    from ._pytest_recording import RecordingProfiler, record, test_folder, toolkit_for, upstream_row

    toolkit = toolkit_for(config)
    where = config.getoption("--profile-path") if _owned(config, "--profile-path") else None
    if where:
        result_path = test_folder(config.invocation_params.dir / where, request.node.nodeid)
    else:
        result_path = tmp_path_factory.mktemp("profiler")
    device = config.getoption("--device") if _owned(config, "--device") else None
    profiler = RecordingProfiler(result_path, toolkit=toolkit, default_device=device)
    yield profiler
    skip = config.getoption("--aprof-skip")
    config.stash[_UPSTREAM_KEY].append(upstream_row(request.node.nodeid, profiler, skip))
    record(request, profiler, config.stash[_RECORDS_KEY], config.stash[_RESULTS_KEY])


@pytest.fixture
def runs(request: pytest.FixtureRequest) -> Any:
    """pyasc's ``runs`` fixture: the ``--runs`` value (kernel launches per test)."""
    return request.config.getoption("--runs")


@pytest.fixture
def device_id(request: pytest.FixtureRequest) -> Any:
    """pyasc's ``device_id`` fixture: the ``--device`` value (0 when not given)."""
    value = request.config.getoption("--device")
    return 0 if value is None else value


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    rows = config.stash[_UPSTREAM_KEY]
    if rows:
        # pyasc's conftest table, line for line (its "μs" is a Greek mu)
        terminalreporter.write_sep("=", "Profiling results")
        for row in rows:
            if row["duration"] is None:
                terminalreporter.write_line(f"{row['test']}: no median ({row['note']})")
            else:
                terminalreporter.write_line(f"{row['test']}: {row['duration']} \u03bcs")
    if not (config.getoption("--aprof") or config.stash[_APROF_USED_KEY]):
        if config.stash[_RESULTS_KEY]:
            _write_files(terminalreporter, config, config.stash[_RECORDS_KEY])
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
    _write_files(terminalreporter, config, records)


def _write_files(terminalreporter: Any, config: pytest.Config, records: list[dict[str, Any]]) -> None:
    """``--aprof-json`` and ``--aprof-report``, when given."""
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
    history = config.getoption("--aprof-history")
    if history is not None:
        _record_history(terminalreporter, config, history or None)


def _record_history(terminalreporter: Any, config: pytest.Config, db: str | None) -> None:
    """``--aprof-history``: the session's results as one history record (label ``pytest``)."""
    from ._model._errors import AprofError
    from ._outputs._history_entries import entries_from_columns, environment
    from ._outputs._history_store import HistoryRecord, HistoryStore
    from ._plans._columns import TaskColumns

    results = config.stash[_RESULTS_KEY]
    runs = [(TaskColumns(r.tasks, run_id=r.run_id), None) for r in results]
    entries = entries_from_columns(runs)
    if not entries:
        terminalreporter.write_line("asc-aprof: no kernel to record in the history")
        return
    record = HistoryRecord("pytest session", environment(), entries, label="pytest")
    try:
        with HistoryStore(db) as store:
            record_id = store.add(record)
            where = store.location
    except AprofError as exc:
        terminalreporter.write_line(f"asc-aprof: history not recorded: {str(exc).splitlines()[0]}")
        return
    terminalreporter.write_line(f"recorded {len(entries)} kernel(s) as history record {record_id} in {where}")


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
