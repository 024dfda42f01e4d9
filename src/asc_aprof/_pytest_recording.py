"""What the pytest plugin's fixtures do with ``--aprof``: profilers that record every call, and
the records the session's table and reports are made of (loaded only when a test profiles).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from ._cann._binding import ProfileTypes
from ._cann._discovery import discover_toolkit
from ._model._enums import AicoreMetrics
from ._model._errors import ToolkitNotFoundError
from ._model._records import AICORE_TASK_TYPES, ProfilingResult, task_time_median
from ._model._toolkit import Toolkit
from ._plans._bench import BenchResult
from ._profilers._async import AsyncProfiler
from ._profilers._protocol import ProfileRun
from ._profilers._sync import Profiler

#: What the fixtures record, in the order the test made them.
Recorded = ProfilingResult | BenchResult

NO_TOOLKIT = (
    "no CANN toolkit was found (set ASCEND_HOME_PATH, usually by sourcing CANN's set_env.sh), so this "
    "profiled test is skipped; pass --aprof-simulate to run it on the simulated toolkit instead"
)


def toolkit_for(config: pytest.Config) -> Toolkit:
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
    """The ``aprof`` and ``profiler`` fixtures when profiling: a :class:`Profiler` recording
    every call's result; *default_device* (``--device``) stands for ``device_id=None``."""

    enabled = True

    def __init__(self, *args: Any, default_device: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.recorder = _Recorder()
        self.default_device = default_device

    def _device(self, device_id: int | None) -> int:  # type: ignore[override]
        return Profiler._device(self.default_device if device_id is None else device_id)

    @contextlib.contextmanager
    def profile(
        self,
        device_id: int | None = None,
        cleanup: bool = True,
        metrics: AicoreMetrics | int | str = AicoreMetrics.PIPE_UTILIZATION,
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
        metrics: AicoreMetrics | int | str = AicoreMetrics.PIPE_UTILIZATION,
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


def record(
    request: pytest.FixtureRequest,
    profiler: RecordingProfiler | RecordingAsyncProfiler,
    into: list[dict[str, Any]],
    results: list[ProfilingResult],
) -> None:
    """File what *profiler* recorded in this test: its results in *results*, a record per
    kernel (or benchmark) in *into*."""
    config = request.config
    records = list(profiler.recorder.records)
    if not records and profiler.results:
        # store_result() / store_last_result() after a manual start/stop
        records.append(profiler.last_result)
    skip = config.getoption("--aprof-skip")
    for index, record in enumerate(records):
        if isinstance(record, BenchResult):
            entries = _bench_entries(record)
        else:
            results.append(record)
            entries = _profile_entries(record, skip)
        for entry in entries:
            into.append({"test": request.node.nodeid, "call": index, **entry})


def test_folder(root: Path, nodeid: str) -> Path:
    """The folder of a test's raw runs under ``--profile-path`` *root*, named from its node id as
    pyasc's conftest names it (``:`` and ``/`` become ``_``, spaces go), created."""
    folder = root / nodeid.replace(":", "_").replace("/", "_").replace(" ", "")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def upstream_row(nodeid: str, profiler: RecordingProfiler, skip: int) -> dict[str, Any]:
    """A "Profiling results" row: the median of the test's last result (pyasc's
    ``task_time_median(last_result.tasks, skip=1)``), or why there is none."""
    if not profiler.results:  # last_result raises then, as upstream's does
        return {
            "test": nodeid,
            "duration": None,
            "note": "the test stored no result: no profile() block ended",
        }
    result = profiler.last_result
    try:
        duration: float | None = task_time_median(result.tasks, skip=skip)
    except ValueError as exc:
        return {"test": nodeid, "duration": None, "note": str(exc).splitlines()[0]}
    return {"test": nodeid, "duration": duration, "note": ""}
