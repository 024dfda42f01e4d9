"""asc-aprof: exact on-device timings for Ascend NPU kernels, sync and async, without torch.

Implements the ``asc.lib.profiling`` API (:class:`Profiler`, :class:`AicoreMetrics`,
:class:`ProfileType`, :class:`ProfilingResult`, :class:`ProfilingTask`, :func:`task_time_median`,
:class:`MsprofInterface`) over CANN's ``libmsprofiler.so`` and ``msprof.py``, plus an anyio-based
:class:`AsyncProfiler`, a benchmark loop (:func:`bench`, :func:`do_bench`, ``Profiler.bench``)
with a racing autotuner (:func:`tune`, ``Profiler.tune``, ``AsyncProfiler.tune``) and its on-disk
cache, and ways to look at results: :func:`read_timeline` (exact start times, streams, counters),
:func:`write_trace` (a Perfetto / chrome://tracing file) and :func:`write_report` (an offline HTML
report; the ``report`` extra). ``asc_aprof.sim`` is a simulated CANN toolkit for machines without
an NPU.

Why is it slow: ``counters=True`` (``profile()``, ``store_result()``, ``iter_tasks()``,
``sweep()``) keeps every task's PMU counters (:class:`TaskCounters`); :func:`kernel_stats` gives
per-kernel statistics, counter medians and a bound :class:`Verdict` (:data:`VERDICT_RULE`);
:func:`compare_tasks` compares durations or one counter between two runs
(:func:`run_kernel_stats` / :func:`compare_runs`: over several runs each).
"""

from __future__ import annotations

import contextlib as _contextlib
import importlib as _importlib
import typing as _typing

from ._version import __version__

if _typing.TYPE_CHECKING:  # what type checkers and IDEs see; at run time each name loads on first use
    from . import history as history
    from . import report as report
    from . import sim as sim
    from . import stats as stats
    from ._cann._binding import MsprofInterface as MsprofInterface
    from ._cann._binding import ProfilerConfig as ProfilerConfig
    from ._cann._discovery import discover_toolkit as discover_toolkit
    from ._cann._files import RunFileError as RunFileError
    from ._model._chips import CHIP_TABLE as CHIP_TABLE
    from ._model._chips import ChipSpec as ChipSpec
    from ._model._chips import chip_spec as chip_spec
    from ._model._counters import TaskCounters as TaskCounters
    from ._model._enums import AicoreMetrics as AicoreMetrics
    from ._model._enums import ProfileType as ProfileType
    from ._model._errors import AclError as AclError
    from ._model._errors import AprofError as AprofError
    from ._model._errors import CollectionTimeout as CollectionTimeout
    from ._model._errors import ExportError as ExportError
    from ._model._errors import InvalidArgumentError as InvalidArgumentError
    from ._model._errors import NoSamplesError as NoSamplesError
    from ._model._errors import ParseError as ParseError
    from ._model._errors import ToolkitNotFoundError as ToolkitNotFoundError
    from ._model._errors import UsageError as UsageError
    from ._model._join import Level0Join as Level0Join
    from ._model._progress import ProgressEvent as ProgressEvent
    from ._model._records import ProfilingResult as ProfilingResult
    from ._model._records import ProfilingTask as ProfilingTask
    from ._model._records import task_time_median as task_time_median
    from ._model._toolkit import Toolkit as Toolkit
    from ._outputs._report_write import write_report as write_report
    from ._outputs._trace import write_trace as write_trace
    from ._plans._bench import AttributionError as AttributionError
    from ._plans._bench import BenchConfig as BenchConfig
    from ._plans._bench import BenchResult as BenchResult
    from ._plans._bench import ClockCheck as ClockCheck
    from ._plans._bench import GroupRun as GroupRun
    from ._plans._bench import KernelTime as KernelTime
    from ._plans._bench import StopReason as StopReason
    from ._plans._bench import ThrottledError as ThrottledError
    from ._plans._columns import NO_ID as NO_ID
    from ._plans._columns import TaskColumns as TaskColumns
    from ._plans._parser import TaskParser as TaskParser
    from ._plans._sol import ChipFacts as ChipFacts
    from ._plans._sol import SolFigures as SolFigures
    from ._plans._sol import chip_facts as chip_facts
    from ._plans._sol import speed_of_light as speed_of_light
    from ._plans._stats import KernelChange as KernelChange
    from ._plans._stats import KernelStats as KernelStats
    from ._plans._stats import compare_runs as compare_runs
    from ._plans._stats import compare_tasks as compare_tasks
    from ._plans._stats import kernel_stats as kernel_stats
    from ._plans._stats import run_kernel_stats as run_kernel_stats
    from ._plans._verdict import VERDICT_RULE as VERDICT_RULE
    from ._plans._verdict import Verdict as Verdict
    from ._plans._verdict import VerdictKind as VerdictKind
    from ._plans._verdict import bound_verdict as bound_verdict
    from ._profilers._async import AsyncProfiler as AsyncProfiler
    from ._profilers._async import SweepItem as SweepItem
    from ._profilers._async import SweepItems as SweepItems
    from ._profilers._functions import bench as bench
    from ._profilers._functions import do_bench as do_bench
    from ._profilers._functions import tune as tune
    from ._profilers._protocol import ProfileRun as ProfileRun
    from ._profilers._sync import Profiler as Profiler
    from ._profilers._tune import Candidate as Candidate
    from ._profilers._tune import CandidateStatus as CandidateStatus
    from ._profilers._tune import TuneError as TuneError
    from ._profilers._tune import TuneResult as TuneResult
    from ._profilers._tune import TuneStop as TuneStop
    from ._runs._info import RunInfo as RunInfo
    from ._runs._info import RunSource as RunSource
    from ._runs._run import AsyncRun as AsyncRun
    from ._runs._run import Run as Run
    from ._runs._run import RunUnreadable as RunUnreadable
    from ._runs._run import SourcesDisagree as SourcesDisagree
    from ._runs._run import aopen_run as aopen_run
    from ._runs._run import aread_columns as aread_columns
    from ._runs._run import open_run as open_run
    from ._runs._run import read_columns as read_columns
    from ._runs._run import read_timeline as read_timeline
    from ._runs._run import sweep_timelines as sweep_timelines
    from ._runs._timeline import TimedTask as TimedTask
    from ._runs._timeline import Timeline as Timeline

#: Where each public name lives (loaded on first use, so ``import asc_aprof`` stays light: the
#: pytest plugin's entry point imports it in every test session of every user).
_WHERE: dict[str, str] = {
    "AsyncProfiler": "._profilers._async",
    "SweepItem": "._profilers._async",
    "SweepItems": "._profilers._async",
    "AttributionError": "._plans._bench",
    "BenchConfig": "._plans._bench",
    "BenchResult": "._plans._bench",
    "ClockCheck": "._plans._bench",
    "ThrottledError": "._plans._bench",
    "KernelTime": "._plans._bench",
    "StopReason": "._plans._bench",
    "bench": "._profilers._functions",
    "do_bench": "._profilers._functions",
    "tune": "._profilers._functions",
    "MsprofInterface": "._cann._binding",
    "ProfilerConfig": "._cann._binding",
    "NO_ID": "._plans._columns",
    "TaskColumns": "._plans._columns",
    "ProfileRun": "._profilers._protocol",
    "TaskCounters": "._model._counters",
    "discover_toolkit": "._cann._discovery",
    "AicoreMetrics": "._model._enums",
    "ProfileType": "._model._enums",
    "AclError": "._model._errors",
    "AprofError": "._model._errors",
    "CollectionTimeout": "._model._errors",
    "ExportError": "._model._errors",
    "InvalidArgumentError": "._model._errors",
    "NoSamplesError": "._model._errors",
    "ParseError": "._model._errors",
    "ToolkitNotFoundError": "._model._errors",
    "UsageError": "._model._errors",
    "RunFileError": "._cann._files",
    "TaskParser": "._plans._parser",
    "Profiler": "._profilers._sync",
    "ProgressEvent": "._model._progress",
    "Level0Join": "._model._join",
    "ProfilingResult": "._model._records",
    "ProfilingTask": "._model._records",
    "task_time_median": "._model._records",
    "write_report": "._outputs._report_write",
    "AsyncRun": "._runs._run",
    "Run": "._runs._run",
    "RunUnreadable": "._runs._run",
    "SourcesDisagree": "._runs._run",
    "aopen_run": "._runs._run",
    "aread_columns": "._runs._run",
    "open_run": "._runs._run",
    "read_columns": "._runs._run",
    "read_timeline": "._runs._run",
    "sweep_timelines": "._runs._run",
    "RunInfo": "._runs._info",
    "RunSource": "._runs._info",
    "KernelChange": "._plans._stats",
    "KernelStats": "._plans._stats",
    "compare_runs": "._plans._stats",
    "compare_tasks": "._plans._stats",
    "kernel_stats": "._plans._stats",
    "run_kernel_stats": "._plans._stats",
    "TimedTask": "._runs._timeline",
    "Timeline": "._runs._timeline",
    "Toolkit": "._model._toolkit",
    "write_trace": "._outputs._trace",
    "Candidate": "._profilers._tune",
    "CandidateStatus": "._profilers._tune",
    "TuneError": "._profilers._tune",
    "TuneResult": "._profilers._tune",
    "TuneStop": "._profilers._tune",
    "VERDICT_RULE": "._plans._verdict",
    "Verdict": "._plans._verdict",
    "VerdictKind": "._plans._verdict",
    "bound_verdict": "._plans._verdict",
    "CHIP_TABLE": "._model._chips",
    "ChipSpec": "._model._chips",
    "chip_spec": "._model._chips",
    "GroupRun": "._plans._bench",
    "ChipFacts": "._plans._sol",
    "SolFigures": "._plans._sol",
    "chip_facts": "._plans._sol",
    "speed_of_light": "._plans._sol",
}
#: Public submodules: the simulated toolkit, statistics, reports and traces, the command line.
_SUBMODULES = frozenset({"sim", "stats", "report", "history", "cli", "pytest_plugin", "ray_sweep"})

#: The curated top level: the spec's names, the async profiler, the front door for a run,
#: bench and tune, the toolkit and the errors. Statistics (``asc_aprof.stats``), reports and
#: traces (``asc_aprof.report``), the history store (``asc_aprof.history``) and the simulated
#: toolkit (``asc_aprof.sim``) are submodules;
#: their names also resolve here, as they did before (``asc_aprof.kernel_stats``).
__all__ = (
    "AclError",
    "AicoreMetrics",
    "AprofError",
    "AsyncProfiler",
    "AsyncRun",
    "AttributionError",
    "BenchConfig",
    "BenchResult",
    "ClockCheck",
    "CollectionTimeout",
    "ExportError",
    "GroupRun",
    "InvalidArgumentError",
    "KernelTime",
    "Level0Join",
    "MsprofInterface",
    "NoSamplesError",
    "ParseError",
    "ProfileRun",
    "ProfileType",
    "Profiler",
    "ProfilerConfig",
    "ProfilingResult",
    "ProfilingTask",
    "Run",
    "RunFileError",
    "RunInfo",
    "RunSource",
    "RunUnreadable",
    "SourcesDisagree",
    "SweepItem",
    "SweepItems",
    "ThrottledError",
    "Toolkit",
    "ToolkitNotFoundError",
    "TuneError",
    "TuneResult",
    "UsageError",
    "__version__",
    "aopen_run",
    "bench",
    "discover_toolkit",
    "do_bench",
    "history",
    "open_run",
    "report",
    "sim",
    "stats",
    "task_time_median",
    "tune",
)


def __getattr__(name: str) -> _typing.Any:
    module = _WHERE.get(name)
    if module is None:
        if name in _SUBMODULES:
            return _importlib.import_module(f".{name}", __name__)
        raise AttributeError(f"module 'asc_aprof' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module, __name__), name)
    if getattr(value, "__module__", "").startswith("asc_aprof."):
        with _contextlib.suppress(AttributeError, TypeError):
            value.__module__ = "asc_aprof"  # shown and pickled as asc_aprof.X, where users find it
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE, *_SUBMODULES})
