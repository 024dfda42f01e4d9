"""A run on disk, obtained one way: :func:`open_run` / :func:`aopen_run`, the reading policy, the handle.

Theory of operation
-------------------
Everything that reads a ``PROF_*`` run goes through this module: ``store_result``,
``store_last_result`` and ``iter_tasks`` of both profilers, the protocol's read after a
collection, :func:`~asc_aprof.read_columns`, :func:`~asc_aprof.read_timeline`,
:func:`~asc_aprof.sweep_timelines`, every CLI command, the pytest plugin and the tune probe. So
one policy applies everywhere (DECISIONS 23):

* **Where the run is**: a ``PROF_*`` folder itself, or a result path and a run id
  (:func:`resolve_run`; a result path holding exactly one run means that run).
* **How files are opened**: :mod:`asc_aprof._cann._files` -- regular files only, no link followed below
  the run, nothing that can block, each file within its size bound.
* **Which source**: :func:`obtain` is an IO-free plan that tries, under ``reader``, the raw data
  natively (``auto``, ``raw``), then the run's exported CSVs (``auto``, ``msprof``), then an export
  with ``msprof.py`` (``auto``, ``msprof``; the toolkit is looked for only then), and keeps why
  each skipped source was skipped. When every source fails, :class:`RunUnreadable` gives every
  reason in one line, with the fix in the words of the interface (parameters, or flags on the
  command line).
* **What was collected**: :class:`RunInfo` (chip, CANN version where the run records it, task
  time level, metric group, devices, collection start, the source used and why others were
  skipped), read from the run's small metadata files.

:class:`Run` drives the plan by blocking, :class:`AsyncRun` by awaiting (raw decoding and
whole-run conversions in a worker thread, CSVs in slices between checkpoints, public records
built in bounded slices), so they cannot disagree on what a run holds.

``batches()`` / ``tasks()`` (and so ``iter_tasks()``) read raw data a device at a time
(:class:`~asc_aprof._runs._raw_files.DeviceReads`): a device's tasks are given, and let go of,
before the next device is decoded. A later device can still be declined; then ``reader='raw'``
fails after the tasks given, and ``reader='auto'`` goes on with the next source, skipping the
tasks given once the last of them is found at its place there (:class:`_Given`; else
:class:`SourcesDisagree`: two sources are never mixed).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import time
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Final, Protocol, TypeVar

import anyio
import anyio.lowlevel

from .._cann._discovery import discover_toolkit
from .._cann._export import DEFAULT_EXPORT_TIMEOUT
from .._cann._files import check_tree
from .._cann._layout import MERGED_DIR, RUN_PATTERN, CsvFile, find_summary_csvs, is_run_dir, list_runs
from .._cann._layout import resolve_run as _resolve_in
from .._cann._runguard import wait_for_export, wait_for_export_async
from .._model._errors import ExportError, ToolkitNotFoundError, UsageError
from .._model._records import ProfilingResult, ProfilingTask, make_result
from .._model._toolkit import Toolkit
from .._plans._columns import TaskColumns
from .._plans._raw import Declined, RawReadDeclined, RawResult, Reader
from .._plans._raw._chunked import to_tuple
from ._csv import (
    RunReader,
    RunTasks,
    TaskBatch,
    aiter_file_batches,
    aiter_reader_batches,
    aread_file_columns,
    iter_file_batches,
    iter_reader_batches,
    raw_columns,
    read_file_columns,
)
from ._drive import drive, drive_async, perform_async, release
from ._info import RunInfo, RunSource, Skipped, read_info
from ._raw_files import DeviceReads, RawPart, reading
from ._steps import Export, Offload, ReadRaw, Steps
from ._timeline import Timeline, csv_timeline, raw_timeline


class SweptItem(Protocol):
    """What :func:`sweep_timelines` reads of a sweep's item (``AsyncProfiler.sweep``'s SweepItem)."""

    @property
    def case(self) -> object: ...
    @property
    def device(self) -> int: ...
    @property
    def result(self) -> ProfilingResult | None: ...


T = TypeVar("T")

#: Public records built per slice on the event loop (about a millisecond of C work each).
ASYNC_TASK_SLICE: Final = 2048


class RunUnreadable(UsageError):
    """No source could give a run's tasks; the message names every source's reason and the fix.

    :ivar path: the run
    :ivar skipped: each source tried, with its reason
    """

    def __init__(self, path: Path, skipped: Sequence[Skipped], *, flags: bool = False) -> None:
        self.path = path
        self.skipped = tuple(skipped)
        #: the run was made by the simulated toolkit (its export needs that toolkit)
        self.simulated = read_info(path).simulated
        super().__init__(self.message(flags=flags))

    def message(self, *, flags: bool) -> str:
        """The one-line message; *flags*: the fix in command-line words (``--reader``)."""
        reasons = "; ".join(str(s) for s in self.skipped)
        return f"run {self.path.name} cannot be read ({reasons}). Fix: {self._fix(flags)}"

    def _fix(self, flags: bool) -> str:
        sources = {s.source for s in self.skipped}
        raw_reason = next((s.reason for s in self.skipped if s.source is RunSource.RAW), "")
        if self.simulated and RunSource.EXPORT in sources:
            return (
                "pass --simulate (the run was made by the simulated toolkit, whose msprof.py exports it)"
                if flags
                else "pass toolkit=asc_aprof.sim.toolkit() (the run was made by the simulated toolkit)"
            )
        if RunSource.EXPORT not in sources:
            # reader='raw': only the raw data was tried
            other = "--reader auto" if flags else "reader='auto'"
            return f"read it with {other} (its exported CSVs, else an export with msprof.py)"
        how = (
            "run this where CANN is installed (or set ASCEND_HOME_PATH), or export the run with msprof.py "
            "on the host that collected it and read its mindstudio_profiler_output"
            if flags
            else "give a CANN toolkit (toolkit=..., or set ASCEND_HOME_PATH), or export the run with "
            "msprof.py on the host that collected it and read its mindstudio_profiler_output"
        )
        if raw_reason.startswith("unknown_file"):
            how += " (the raw reader reads only the files it verified; the file named is not one)"
        return how


class SourcesDisagree(UsageError):
    """The raw data was declined after some of its tasks were given, and the source that took
    over does not give those same tasks first (the two do not agree: nothing is mixed).

    :ivar path: the run
    """

    def __init__(self, path: Path, given: int, declined: Declined, what: str) -> None:
        self.path = path
        self._text = (
            f"run {path.name}: its raw data gave {given} tasks, then was declined ({declined}); {what}"
        )
        super().__init__(self.message(flags=False))

    def message(self, *, flags: bool) -> str:
        """The one-line message; *flags*: the fix in command-line words (``--reader``)."""
        how = "--reader msprof" if flags else "reader='msprof'"
        return f"{self._text}. Fix: read it with {how} (its exported CSVs, else an export with msprof.py)"


class _Given:
    """The tasks a read gave from the raw data, a device at a time: when the raw data is
    declined later (see :class:`~asc_aprof._runs._raw_files.DeviceReads`), the source that takes
    over gives the tasks after them, once the last one given is found at its place there."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.count_given = 0
        self.last: ProfilingTask | None = None
        self._skip = 0

    def count(self, batches: Iterable[TaskBatch]) -> Iterator[TaskBatch]:
        """*batches*, counted as they go by."""
        for batch in batches:
            if batch.tasks:
                self.count_given += len(batch.tasks)
                self.last = batch.tasks[-1]
            yield batch

    def after(self, batches: Iterable[TaskBatch], declined: Declined) -> Iterator[TaskBatch]:
        """The batches of the source that took over, from the first task not given yet.

        :raises SourcesDisagree: that source's tasks up to there are not the ones given
        """
        self._skip = self.count_given
        for batch in batches:
            if (cut := self._cut(batch, declined)) is not None:
                yield cut
        self._end(declined)

    async def aafter(
        self, batches: AsyncGenerator[TaskBatch, None], declined: Declined
    ) -> AsyncGenerator[TaskBatch, None]:
        """As :meth:`after`, of batches that are awaited."""
        self._skip = self.count_given
        async with contextlib.aclosing(batches):
            async for batch in batches:
                if (cut := self._cut(batch, declined)) is not None:
                    yield cut
        self._end(declined)

    def _cut(self, batch: TaskBatch, declined: Declined) -> TaskBatch | None:
        skip, tasks = self._skip, batch.tasks
        if skip == 0:
            return batch
        if skip > len(tasks):
            self._skip -= len(tasks)
            return None
        if tasks[skip - 1] != self.last:
            raise SourcesDisagree(
                self.path,
                self.count_given,
                declined,
                f"the next source's task {self.count_given} is {tasks[skip - 1]!r}, not {self.last!r}",
            )
        self._skip = 0
        if skip == len(tasks):
            return None
        part = batch.counters.select(range(skip, len(tasks))) if batch.counters is not None else None
        return TaskBatch(tasks[skip:], part)

    def _end(self, declined: Declined) -> None:
        if self._skip:
            raise SourcesDisagree(
                self.path,
                self.count_given,
                declined,
                f"the next source has {self.count_given - self._skip} tasks in all",
            )


@dataclasses.dataclass(frozen=True, slots=True)
class Obtained:
    """What :func:`obtain` found: raw tasks, or CSV files (read or just exported), and the reasons."""

    source: RunSource
    raw: RawResult | None
    files: tuple[CsvFile, ...]
    skipped: tuple[Skipped, ...]
    #: read a device at a time: *raw* is the first device's tasks, these give the rest
    rest: DeviceReads | None = None


def obtain(
    run_dir: Path,
    *,
    counters: bool,
    reader: Reader,
    toolkit: Toolkit | Callable[[], Toolkit] | None,
    export_timeout: float | None,
    on_export: Callable[[bool, float], None] | None = None,
    packed: bool = False,
    by_device: bool = False,
    raw_declined: Declined | None = None,
) -> Steps[Obtained]:
    """The reading policy as a plan (see the module doc): the first source that gives the tasks.

    *toolkit* is called only when an export is needed (None: no export is possible here);
    *on_export(finished, seconds)* is told when an export starts and ends; *packed*: raw tasks
    may come packed (for a caller that takes them a slice at a time, see ``ReadRaw``);
    *by_device*: a device at a time (``Obtained.rest``; without *counters*); *raw_declined*: the
    raw data was read and declined late (some of its tasks given already): the next source.

    :raises RawReadDeclined: *reader* is ``raw`` and the raw reader declined the run
    :raises RunUnreadable: no source gives the tasks (every reason named)
    :raises ExportError: the export failed (the skipped sources' reasons first)
    """
    # The one rule, before any source: no link and no special file anywhere below the run (a
    # source that does not read it now, a later export would write through it).
    skipped: list[Skipped] = []
    if reader is Reader.MSPROF or raw_declined is not None:
        yield Offload(functools.partial(check_tree, run_dir))
        if raw_declined is not None:
            skipped.append(Skipped(RunSource.RAW, str(raw_declined)))
    else:
        outcome: RawResult | tuple[RawResult, DeviceReads] | Declined = yield ReadRaw(
            run_dir, counters, checked=True, packed=packed, by_device=by_device
        )
        if isinstance(outcome, tuple):
            return Obtained(RunSource.RAW, outcome[0], (), (), outcome[1])
        if isinstance(outcome, RawResult):
            return Obtained(RunSource.RAW, outcome, (), ())
        if reader is Reader.RAW:
            raise RawReadDeclined(run_dir, outcome)
        skipped.append(Skipped(RunSource.RAW, str(outcome)))
    files = find_summary_csvs(run_dir)
    if files:
        return Obtained(RunSource.CSV, None, tuple(files), tuple(skipped))
    skipped.append(Skipped(RunSource.CSV, f"none in the run (no {MERGED_DIR}/ or device_N/summary/ CSV)"))
    if toolkit is None:
        skipped.append(Skipped(RunSource.EXPORT, "not allowed here"))
        raise RunUnreadable(run_dir, skipped)
    try:
        kit = toolkit if isinstance(toolkit, Toolkit) else toolkit()
    except ToolkitNotFoundError:
        skipped.append(Skipped(RunSource.EXPORT, "no CANN toolkit found"))
        raise RunUnreadable(run_dir, skipped) from None
    began = [time.monotonic()]

    def started() -> None:  # (told once the export has its places, not while it waits for them)
        began[0] = time.monotonic()
        if on_export is not None:
            on_export(False, 0.0)

    try:
        exported: list[CsvFile] = yield Export(kit, run_dir, export_timeout, started)
    except ExportError as exc:
        if not skipped:
            raise
        raise _with_reasons(exc, skipped) from exc
    if on_export is not None:
        on_export(True, time.monotonic() - began[0])
    return Obtained(RunSource.EXPORT, None, tuple(exported), tuple(skipped))


def _with_reasons(exc: ExportError, skipped: Sequence[Skipped]) -> ExportError:
    """*exc* with the reasons of the sources tried before the export in front of its first line."""
    first = str(exc.args[0]).split("\n")[0] if exc.args else str(exc)
    reasons = "; ".join(str(s) for s in skipped)
    return ExportError(
        f"{reasons}; {RunSource.EXPORT.value}: {first}",
        command=exc.command,
        returncode=exc.returncode,
        output_tail=exc.output_tail,
        diagnostics=exc.diagnostics,
    )


# -- where the run is, and what it says ------------------------------------------------------------
def resolve_run(path: str | os.PathLike[str], run_id: str | os.PathLike[str] | None = None) -> Path:
    """The run *path* names: a run folder itself, or (*run_id*) a run in the result path *path*; a
    result path holding exactly one run stands for it.

    :raises UsageError: no such run, a run id leaving the result path, or several runs and no id
    """
    base = Path(os.path.abspath(os.fspath(path)))
    if run_id is not None:
        return _resolve_in(base, run_id)
    if not base.is_dir():
        raise UsageError(f"{base}: no such run directory (give a PROF_* run or a result path)")
    if is_run_dir(base):
        return base
    runs = list_runs(base)
    if len(runs) == 1:
        return runs[0]
    if not runs:
        raise UsageError(f"{base}: neither a PROF_* run nor a result path holding one")
    names = ", ".join(r.name for r in runs[-3:])
    raise UsageError(
        f"{base} holds {len(runs)} runs (newest: {names}): give the run's own path, or run_id=NAME"
    )


# -- the handles -----------------------------------------------------------------------------------
class _RunBase:
    """What the blocking and the awaiting handle share: where, how, and what was learnt."""

    def __init__(
        self,
        path: Path,
        *,
        reader: Reader | str = Reader.AUTO,
        toolkit: Toolkit | Callable[[], Toolkit] | None = None,
        export_timeout: float | None = DEFAULT_EXPORT_TIMEOUT,
        allow_export: bool = True,
        on_export: Callable[[bool, float], None] | None = None,
    ) -> None:
        self.path = path
        self.reader = Reader.of(reader)
        self._toolkit = toolkit
        self._allow_export = allow_export
        self.export_timeout = export_timeout
        self._on_export = on_export
        # Set by the thread or task that reads; a handle is used by one caller at a time.
        self._info = read_info(path)

    @property
    def info(self) -> RunInfo:
        """What the run says about its collection, and the source of the latest read."""
        return self._info

    @property
    def run_id(self) -> str:
        return self.path.name

    def _toolkit_getter(self) -> Toolkit | Callable[[], Toolkit] | None:
        if not self._allow_export:
            return None
        return discover_toolkit if self._toolkit is None else self._toolkit

    def _plan(
        self,
        counters: bool,
        *,
        packed: bool = False,
        by_device: bool = False,
        raw_declined: Declined | None = None,
    ) -> Steps[Obtained]:
        return obtain(
            self.path,
            counters=counters,
            reader=self.reader,
            toolkit=self._toolkit_getter(),
            export_timeout=self.export_timeout,
            on_export=self._on_export,
            packed=packed,
            by_device=by_device,
            raw_declined=raw_declined,
        )

    def _after_raw(self, declined: Declined) -> None:
        """The raw data declined after some of its tasks were given: with ``reader='raw'`` the
        read fails; else the next source gives the rest (:class:`_Given`)."""
        if self.reader is Reader.RAW:
            raise RawReadDeclined(self.path, declined)

    def _learnt(self, found: Obtained) -> Obtained:
        self._info = dataclasses.replace(self._info, source=found.source, skipped=found.skipped)
        return found

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r}, reader={self.reader.value!r})"


class Run(_RunBase):
    """A run on disk, read by blocking (see :func:`open_run`). Each read applies the policy anew."""

    def obtain(self, *, counters: bool = False, packed: bool = False) -> Obtained:
        """The source that gives the run's tasks (the raw tasks, or the CSV files), per policy
        (*packed*: raw tasks may come packed, see ``ReadRaw``)."""
        wait_for_export(self.path)
        return self._learnt(drive(self._plan(counters, packed=packed)))

    def result(self, *, counters: bool = False) -> ProfilingResult:
        """Every task of the run (every device) as one :class:`~asc_aprof.ProfilingResult`.

        :param counters: also every task's PMU counters (``result.counters``)
        """
        found = self.obtain(counters=counters, packed=True)  # (public records made from them)
        if found.raw is not None:
            raw = found.raw
            return make_result(raw.profiling_tasks(), self.run_id, raw.counters, raw.level0_join)
        gathered = RunTasks(counters)
        reader = RunReader(found.files, counters=counters)
        for batch in iter_reader_batches(reader):
            gathered.add(batch)
        return make_result(gathered.tasks, self.run_id, gathered.counters(), reader.level0_join)

    def _obtain_parts(self, *, counters: bool = False) -> Obtained:
        """As :meth:`obtain`, the raw tasks a device at a time (``Obtained.rest``) where no
        counters are asked for."""
        wait_for_export(self.path)
        return self._learnt(drive(self._plan(counters, packed=True, by_device=not counters)))

    def batches(self, *, counters: bool = False) -> Iterator[TaskBatch]:
        """The run's tasks in batches as they are read (with their counters when asked); raw
        data a device at a time (a device's tasks are let go of before the next is read)."""
        found = self._obtain_parts(counters=counters)  # (public records made per batch)
        if found.raw is None:
            yield from iter_file_batches(found.files, counters=counters)
            return
        rest, given, size = found.rest, _Given(self.path), ASYNC_TASK_SLICE * 16
        try:
            yield from given.count(_raw_batches(found.raw, size))
            del found
            while rest is not None:
                part = rest.next_part()
                if part is None:
                    return
                if isinstance(part, Declined):
                    self._after_raw(part)
                    later = self._learnt(drive(self._plan(counters, raw_declined=part)))
                    yield from given.after(iter_file_batches(later.files, counters=counters), part)
                    return
                yield from given.count(_raw_batches(part.result, size, part.first))
                del part
        finally:
            if rest is not None:
                rest.close()

    def tasks(self) -> Iterator[ProfilingTask]:
        """The run's tasks one by one, as they are read (CSVs streamed in 1 MiB chunks)."""
        for batch in self.batches():
            yield from batch.tasks

    def columns(self, *, counters: bool = False) -> TaskColumns:
        """Every task as :class:`~asc_aprof.TaskColumns` (no task object is made from CSVs)."""
        found = self.obtain(counters=counters)
        if found.raw is not None:
            return raw_columns(found.raw, self.run_id)
        return read_file_columns(found.files, counters=counters, run_id=self.run_id)

    def timeline(
        self, *, counters: bool = True, case: str | Mapping[int | None, object] | None = None
    ) -> Timeline:
        """The timed tasks (exact starts, streams, counters) for a trace or a report.

        :param counters: also every task's PMU counters
        :param case: a case label for every device, or one per device (a mapping)
        """
        found = self.obtain(counters=counters)
        if found.raw is not None:
            made = raw_timeline(self.path, found.raw, case=case)
        else:
            made = csv_timeline(self.path, found.files, case=case, counters=counters)
        return dataclasses.replace(made, info=self.info)


class AsyncRun(_RunBase):
    """A run on disk, read by awaiting (see :func:`aopen_run`): the event loop never waits on it.

    Cancelling any method returns at once; a worker thread still decoding finishes unseen (it
    has no side effect); an export in progress is killed (its process group) and the raw data kept.
    """

    async def obtain(self, *, counters: bool = False, packed: bool = False) -> Obtained:
        """As :meth:`Run.obtain`, awaited."""
        await wait_for_export_async(self.path)
        return self._learnt(await drive_async(self._plan(counters, packed=packed)))

    async def result(self, *, counters: bool = False) -> ProfilingResult:
        """As :meth:`Run.result`, awaited: raw tasks become the result's tuple in a worker thread
        (made in steps, so the loop runs meanwhile), CSVs are parsed between checkpoints."""
        found = await self.obtain(counters=counters, packed=True)  # (public records made from them)
        if found.raw is not None:
            box: list[object] = [found.raw]
            public = found.raw.profiling_tasks
            run_counters = found.raw.counters
            join = found.raw.level0_join
            del found
            total = len(box[0].tasks)  # type: ignore[attr-defined]
            # in slices (threads switch between the calls), then the tuple made in steps
            tasks = await _offload(
                lambda: to_tuple([t for at in range(0, total, 16384) for t in public(at, at + 16384)])
            )
            del public
            await release(box)
            return make_result(tasks, self.run_id, run_counters, join)
        gathered = RunTasks(counters)
        reader = RunReader(found.files, counters=counters)
        async with contextlib.aclosing(aiter_reader_batches(reader)) as batches:
            async for batch in batches:
                gathered.add(batch)
        return make_result(gathered.tasks, self.run_id, gathered.counters(), reader.level0_join)

    async def _obtain_parts(self, *, counters: bool = False) -> Obtained:
        """As :meth:`Run._obtain_parts`, awaited."""
        await wait_for_export_async(self.path)
        return self._learnt(await drive_async(self._plan(counters, packed=True, by_device=not counters)))

    async def batches(self, *, counters: bool = False) -> AsyncGenerator[TaskBatch, None]:
        """As :meth:`Run.batches`: raw tasks in slices between checkpoints (each next device read
        in a worker thread), CSVs in 32 KiB slices.

        Cancelled (or closed early): the device being read in a worker thread finishes unseen,
        and the run's folder is closed then."""
        with reading():  # full collector passes held back until the last batch (see drive_async)
            found = await self._obtain_parts(counters=counters)  # (public records made per batch)
            if found.raw is None:
                async with contextlib.aclosing(aiter_file_batches(found.files, counters=counters)) as batches:
                    async for batch in batches:
                        yield batch
                return
            rest, given = found.rest, _Given(self.path)
            part: RawPart | Declined | None = RawPart(found.raw)
            del found
            try:
                while isinstance(part, RawPart):
                    box: list[object] = [part.result]  # its only holder once the batches are made
                    slices = given.count(_raw_batches(part.result, ASYNC_TASK_SLICE, part.first))
                    del part
                    try:
                        for batch in slices:
                            yield batch
                            await anyio.lowlevel.checkpoint()
                    finally:
                        del slices
                    await release(box)  # a device's tasks freed at once would hold the loop
                    part = (
                        None
                        if rest is None
                        else await anyio.to_thread.run_sync(rest.next_part, abandon_on_cancel=True)
                    )
                if isinstance(part, Declined):
                    self._after_raw(part)
                    later = self._learnt(await drive_async(self._plan(counters, raw_declined=part)))
                    files = aiter_file_batches(later.files, counters=counters)
                    async with contextlib.aclosing(given.aafter(files, part)) as batches:
                        async for batch in batches:
                            yield batch
            finally:
                if rest is not None:
                    rest.close()

    async def tasks(self) -> AsyncGenerator[ProfilingTask, None]:
        """As :meth:`Run.tasks`: pull-based, the consumer's pace sets the reading pace."""
        async with contextlib.aclosing(self.batches()) as batches:
            async for batch in batches:
                for task in batch.tasks:
                    yield task

    async def columns(self, *, counters: bool = False) -> TaskColumns:
        """As :meth:`Run.columns`: CSVs parsed between checkpoints, raw tasks in a worker thread."""
        found = await self.obtain(counters=counters)
        if found.raw is not None:
            raw = found.raw
            return await _offload(lambda: raw_columns(raw, self.run_id))
        return await aread_file_columns(found.files, counters=counters, run_id=self.run_id)

    async def timeline(
        self, *, counters: bool = True, case: str | Mapping[int | None, object] | None = None
    ) -> Timeline:
        """As :meth:`Run.timeline`, built in a worker thread."""
        found = await self.obtain(counters=counters)
        raw = found.raw
        files = found.files
        if raw is not None:
            made = await _offload(lambda: raw_timeline(self.path, raw, case=case))
        else:
            made = await _offload(lambda: csv_timeline(self.path, files, case=case, counters=counters))
        return dataclasses.replace(made, info=self.info)


async def _offload(fn: Callable[[], T]) -> T:
    done: T = await perform_async(Offload(fn))
    return done


def _raw_batches(raw: RawResult, size: int, first: int = 0) -> Iterator[TaskBatch]:
    """The raw tasks from *first* on as public records, *size* at a time (each slice one bounded
    C call)."""
    total = len(raw.tasks)
    counters = raw.counters
    for start in range(first, total, size):
        stop = min(start + size, total)
        part = counters.select(range(start, stop)) if counters is not None else None
        yield TaskBatch(raw.profiling_tasks(start, stop), part)  # one bounded C call


def open_run(
    path: str | os.PathLike[str],
    run_id: str | os.PathLike[str] | None = None,
    *,
    reader: Reader | str = Reader.AUTO,
    toolkit: Toolkit | Callable[[], Toolkit] | None = None,
    export_timeout: float | None = DEFAULT_EXPORT_TIMEOUT,
) -> Run:
    """A run on disk, to read: ``open_run(path).result()``, ``.tasks()``, ``.columns()``,
    ``.timeline()``, ``.info``.

    :param path: a ``PROF_*`` run, or a result path (with *run_id*, or holding one run)
    :param reader: ``"auto"`` (raw data natively, else exported CSVs, else an export), ``"raw"``
        (natively only) or ``"msprof"`` (CSVs, else an export)
    :param toolkit: the CANN toolkit to export with when needed (default: discovered then)
    :param export_timeout: seconds before a hung ``msprof.py export`` is killed
    :raises UsageError: no such run (several runs in *path* and no *run_id*)
    :raises RunFileError: a link or special file among the run's metadata files
    """
    return Run(resolve_run(path, run_id), reader=reader, toolkit=toolkit, export_timeout=export_timeout)


async def aopen_run(
    path: str | os.PathLike[str],
    run_id: str | os.PathLike[str] | None = None,
    *,
    reader: Reader | str = Reader.AUTO,
    toolkit: Toolkit | Callable[[], Toolkit] | None = None,
    export_timeout: float | None = DEFAULT_EXPORT_TIMEOUT,
) -> AsyncRun:
    """:func:`open_run` for async code: the handle's methods are awaited.

    Cancelled: returns at once (finding the run is a few system calls in a worker thread).
    """

    def make() -> AsyncRun:
        found = resolve_run(path, run_id)
        return AsyncRun(found, reader=reader, toolkit=toolkit, export_timeout=export_timeout)

    return await _offload(make)


# -- the functions that were the ways in before the handle: each one call on it --------------------
def read_columns(run_dir: str | os.PathLike[str], *, counters: bool = False) -> TaskColumns:
    """Every task of a run as :class:`~asc_aprof.TaskColumns`: ``open_run(run_dir).columns()``.

    The fast way to a large run's statistics: ``kernel_stats(read_columns(run))`` gives what
    ``store_result`` gives, without a task object for an exported run (C row loop).

    :param counters: also read the PMU counters (``TaskCounters``)
    :raises RunUnreadable: no source gives the run's tasks (each reason named)
    :raises ParseError: for a malformed CSV (file and line)
    """
    return open_run(run_dir).columns(counters=counters)


async def aread_columns(run_dir: str | os.PathLike[str], *, counters: bool = False) -> TaskColumns:
    """:func:`read_columns` awaited: ``(await aopen_run(run_dir)).columns()``.

    Cancelled: the file being read is closed and nothing is kept (no task, no column).
    """
    run = await aopen_run(run_dir)
    return await run.columns(counters=counters)


def read_timeline(
    run: str | os.PathLike[str],
    *,
    case: str | Mapping[int | None, object] | None = None,
    counters: bool = True,
) -> Timeline:
    """The timed tasks of a ``PROF_*`` run: ``open_run(run).timeline(...)`` (exact starts, streams,
    and the PMU counters).

    :param case: a case label for every device of the run, or one per device (a mapping)
    :param counters: also read every counter column
    :raises RunUnreadable: no source gives the run's tasks (each reason named)
    :raises ParseError: for a malformed CSV (file and line named)
    """
    return open_run(run).timeline(counters=counters, case=case)


def sweep_timelines(
    items: Iterable[SweptItem], result_path: str | os.PathLike[str], *, counters: bool = True
) -> list[Timeline]:
    """The timelines of a sweep's items, each device labelled with the case it ran.

    Items that failed are left out. The runs must still exist: sweep into a result path of your
    own (a temporary root's runs are deleted once parsed unless ``cleanup=False``).

    :raises UsageError: naming the case whose run is gone
    """
    root = Path(result_path)
    by_run: dict[str, dict[int | None, object]] = {}
    for item in items:
        if item.result is None:
            continue
        by_run.setdefault(item.result.run_id, {})[item.device] = item.case
    out: list[Timeline] = []
    for run_id, cases in by_run.items():
        run = root / run_id
        if not RUN_PATTERN.match(run_id) or not run.is_dir():
            shown = ", ".join(str(c) for c in cases.values())
            raise UsageError(
                f"run {run_id} of case(s) {shown} is not in {root} (deleted after parsing? sweep into "
                "a result path of your own, or with cleanup=False)"
            )
        out.append(open_run(run).timeline(counters=counters, case=cases))
    return out
