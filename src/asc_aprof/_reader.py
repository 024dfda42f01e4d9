"""Reading a run's exported CSVs into tasks: one sans-IO plan, a blocking driver and an async one.

Theory of operation
-------------------
:class:`RunReader` decides which file to read next and turns the bytes it is fed into tasks; it
never opens a file. The drivers (:func:`iter_file_tasks`, :func:`aiter_file_tasks`) only open what
:meth:`RunReader.next_file` names and feed it chunks until :attr:`RunReader.reading` goes false,
so the sync and async paths cannot disagree on what a run holds.

Level-0 runs (task time level 0, ``ACL_PROF_TASK_TIME_L0``) write ``N/A`` in op_summary's
``Task Type``; the same export's task_time CSV has the type of each task. When the first batch of
an op_summary file holds an ``N/A`` type, the reader drops that batch, reads the task_time files
beside it into a map keyed by (device, stream id, task id, start time in ns), and reads the
op_summary file again keeping its stream and start cells, so every task whose key is in the map
gets its real type. Tasks with no match keep ``N/A`` (their type is never guessed from a name);
:func:`~asc_aprof.task_time_median` counts them only when their kernel is named. Real exports
make every row of a level-0 op_summary ``N/A``, so the first batch decides for the file; joined
files are parsed by the pure-Python row loop (it keeps the extra cells), and the map holds one
entry per task_time row.

With ``counters=True`` every parser also reads the PMU counter columns, and each batch comes with
the counters of its tasks (:class:`TaskBatch`), aligned with them; a dropped batch drops its
counters too. :class:`DeviceSplit` files batches by device, counters along.
"""

from __future__ import annotations

import contextlib
import decimal
import enum
from collections.abc import AsyncGenerator, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Final, NamedTuple

import anyio
import anyio.lowlevel

from ._counters import CounterBuilder, TaskCounters
from ._errors import UsageError
from ._layout import CsvFile, find_summary_csvs, task_time_beside
from ._parser import TaskParser
from ._records import UNKNOWN_TASK_TYPE as UNKNOWN_TYPE
from ._records import ProfilingTask

SYNC_CHUNK: Final = 1 << 20
#: Parsed on the event loop between checkpoints: small enough to stay around a millisecond.
ASYNC_CHUNK: Final = 32 << 10

STREAM_COLUMNS: Final = ("Stream ID", "stream_id")
#: Start-time columns and their unit in nanoseconds (the header says the unit).
START_COLUMNS: Final = {"Task Start Time(us)": 1000, "task_start(us)": 1000, "task_start(ns)": 1}
JOIN_KEEP: Final = (STREAM_COLUMNS, tuple(START_COLUMNS))

JoinKey = tuple[int | None, str, int | None, int]
#: One device's share of a run: its tasks, and their counters when they were asked for.
DeviceTasks = tuple[tuple[ProfilingTask, ...], TaskCounters | None]


class TaskBatch(NamedTuple):
    """Tasks a feed finished, with their counters (aligned) when the reader reads counters."""

    tasks: list[ProfilingTask]
    counters: TaskCounters | None


class _Phase(enum.Enum):
    PLAIN = "plain"  # op_summary or task_time read as it is
    TYPES = "types"  # a task_time file read for the level-0 type map
    JOINED = "joined"  # an op_summary file read again, types taken from the map


def summary_csvs_or_error(run_dir: Path) -> list[CsvFile]:
    files = find_summary_csvs(run_dir)
    if not files:
        raise UsageError(
            f"run {run_dir.name} has no exported op_summary/task_time CSV in {run_dir}; call export() first"
        )
    return files


def _start_ns(parser: TaskParser, text: str | None) -> int | None:
    """The start cell as integer nanoseconds (exact: the cells carry 19 digits), or None."""
    if text is None:
        return None
    column = next((c for c in parser.columns if c in START_COLUMNS), None)
    if column is None:
        return None
    try:
        return int(decimal.Decimal(text.strip()) * START_COLUMNS[column])
    except (decimal.InvalidOperation, ValueError):
        return None


def _join_keys(parser: TaskParser, tasks: Sequence[ProfilingTask]) -> Iterator[JoinKey | None]:
    kept, parser.kept = parser.kept, []
    for task, (stream, start) in zip(tasks, kept, strict=True):
        start_ns = _start_ns(parser, start)
        if stream is None or start_ns is None:
            yield None
        else:
            yield (task.device, stream.strip(), task.id, start_ns)


class RunReader:
    """The files of one export, read in order, with level-0 types joined in (see the module doc).

    Drive it: ``while (f := reader.next_file()) is not None:`` open *f*, then feed chunks while
    :attr:`reading`, and ``b""`` at the end of the file; every call returns the tasks it finished
    (:meth:`feed_batch`: with their counters, when *counters*).
    """

    def __init__(self, files: Sequence[CsvFile], *, counters: bool = False) -> None:
        self._files = list(files)
        self.counters = counters
        self._beside = task_time_beside(self._files)
        self._index = -1  # position in _files
        self._pending: list[tuple[_Phase, CsvFile]] = []
        self._types: dict[JoinKey, str | None] | None = None
        self._phase = _Phase.PLAIN
        self._file: CsvFile | None = None
        self._parser: TaskParser | None = None
        self._first_batch = True
        #: whether the current file wants more bytes
        self.reading = False
        #: tasks whose type was taken from task_time / left ``N/A`` for want of a match
        self.joined = 0
        self.unjoined = 0

    def next_file(self) -> CsvFile | None:
        """The next file to open, or None when the run is read."""
        if self._pending:
            self._phase, self._file = self._pending.pop(0)
        else:
            self._index += 1
            if self._index >= len(self._files):
                self._file = None
                return None
            self._phase, self._file = _Phase.PLAIN, self._files[self._index]
        joined = self._phase is not _Phase.PLAIN
        self._parser = TaskParser(
            str(self._file.path),
            device=self._file.device,
            accelerated=False if joined else None,
            keep=JOIN_KEEP if joined else (),
            counters=self.counters,
        )
        self._first_batch = True
        self.reading = True
        return self._file

    def feed(self, data: bytes) -> list[ProfilingTask]:
        """Bytes of the current file (``b""`` at its end); the tasks they completed."""
        return self.feed_batch(data).tasks

    def feed_batch(self, data: bytes) -> TaskBatch:
        """As :meth:`feed`, with the tasks' counters (None unless the reader reads counters)."""
        parser = self._parser
        if parser is None or not self.reading:
            raise RuntimeError("RunReader.feed() without a file being read")
        if data:
            tasks = parser.feed(data)
        else:
            tasks = parser.close()
            self.reading = False
        counters = parser.take_counters() if self.counters else None
        if self._phase is _Phase.TYPES:
            self._add_types(parser, tasks)
            return TaskBatch([], TaskCounters() if self.counters else None)
        if self._phase is _Phase.JOINED:
            return TaskBatch(self._resolve(parser, tasks), counters)
        if tasks and self._first_batch:
            self._first_batch = False
            if parser.kind == "op_summary" and self._needs_types(tasks):
                return TaskBatch([], TaskCounters() if self.counters else None)
        return TaskBatch(tasks, counters)

    # -- level 0 --------------------------------------------------------------------------------
    def _needs_types(self, first: list[ProfilingTask]) -> bool:
        """Switch to the joined read of this file when its first tasks lack a type."""
        assert self._file is not None
        if UNKNOWN_TYPE not in {t.type for t in first}:
            return False
        plan: list[tuple[_Phase, CsvFile]] = []
        if self._types is None:
            self._types = {}
            plan = [(_Phase.TYPES, f) for f in self._beside]
        if not plan and not self._types:
            return False  # no task_time beside it: the tasks keep N/A
        self._pending = [*plan, (_Phase.JOINED, self._file)]
        self.reading = False
        return True

    def _add_types(self, parser: TaskParser, tasks: list[ProfilingTask]) -> None:
        types = self._types
        assert types is not None
        for task, key in zip(tasks, _join_keys(parser, tasks), strict=True):
            if key is None:
                continue
            # A key seen twice with different types is ambiguous: no type rather than a guess.
            types[key] = task.type if types.get(key, task.type) == task.type else None

    def _resolve(self, parser: TaskParser, tasks: list[ProfilingTask]) -> list[ProfilingTask]:
        types = self._types or {}
        out: list[ProfilingTask] = []
        for task, key in zip(tasks, _join_keys(parser, tasks), strict=True):
            if task.type == UNKNOWN_TYPE:
                found = types.get(key) if key is not None else None
                if found is not None and found != UNKNOWN_TYPE:
                    task = task._replace(type=found)
                    self.joined += 1
                else:
                    self.unjoined += 1
            out.append(task)
        return out


def iter_file_tasks(files: Sequence[CsvFile]) -> Iterator[list[ProfilingTask]]:
    """Batches of tasks from *files*, read in 1 MiB chunks."""
    for batch in iter_file_batches(files):
        yield batch.tasks


def iter_file_batches(files: Sequence[CsvFile], *, counters: bool = False) -> Iterator[TaskBatch]:
    """Batches of tasks (with their counters, when asked) from *files*, read in 1 MiB chunks."""
    reader = RunReader(files, counters=counters)
    while (csv_file := reader.next_file()) is not None:
        with open(csv_file.path, "rb") as stream:
            while reader.reading:
                batch = reader.feed_batch(stream.read(SYNC_CHUNK))
                if batch.tasks:
                    yield batch


async def aiter_file_tasks(files: Sequence[CsvFile]) -> AsyncGenerator[list[ProfilingTask], None]:
    """Batches of tasks from *files*, read with anyio's file API (see :func:`aiter_file_batches`)."""
    async with contextlib.aclosing(aiter_file_batches(files)) as batches:
        async for batch in batches:
            yield batch.tasks


async def aiter_file_batches(
    files: Sequence[CsvFile], *, counters: bool = False
) -> AsyncGenerator[TaskBatch, None]:
    """Batches of tasks (with their counters, when asked) from *files*, read with anyio's file API.

    Reads 1 MiB per worker-thread round trip and parses it in 32 KiB slices with a checkpoint
    between them, so the loop never stalls for long; the consumer's pace sets the reading pace
    (at most one read chunk is held).
    """
    reader = RunReader(files, counters=counters)
    while (csv_file := reader.next_file()) is not None:
        async with await anyio.open_file(csv_file.path, "rb") as stream:
            while reader.reading:
                chunk = await stream.read(SYNC_CHUNK)
                if not chunk:
                    batch = reader.feed_batch(b"")
                    if batch.tasks:
                        yield batch
                    break
                view = memoryview(chunk)
                for start in range(0, len(chunk), ASYNC_CHUNK):
                    batch = reader.feed_batch(bytes(view[start : start + ASYNC_CHUNK]))
                    if batch.tasks:
                        yield batch
                    await anyio.lowlevel.checkpoint()
                    if not reader.reading:
                        break


class RunTasks:
    """Batches gathered into one list of tasks and (when counted) one :class:`TaskCounters`."""

    __slots__ = ("_builder", "tasks")

    def __init__(self, counters: bool) -> None:
        self.tasks: list[ProfilingTask] = []
        self._builder = CounterBuilder() if counters else None

    def add(self, batch: TaskBatch) -> None:
        self.tasks += batch.tasks
        if self._builder is not None:
            if batch.counters is None:
                self._builder.pad(len(batch.tasks))
            else:
                self._builder.extend(batch.counters)

    def counters(self) -> TaskCounters | None:
        return None if self._builder is None else self._builder.build()


class DeviceSplit:
    """Batches filed by device (``task.device``), counters along with their tasks."""

    __slots__ = ("_counted", "_counters", "_plain")

    def __init__(self, counters: bool) -> None:
        self._counters = counters
        self._plain: dict[int | None, list[ProfilingTask]] = {}  # without counters: plain lists
        self._counted: dict[int | None, RunTasks] = {}

    def add(self, batch: TaskBatch) -> None:
        if not self._counters:
            plain = self._plain
            for task in batch.tasks:
                bucket = plain.get(task.device)
                if bucket is None:
                    bucket = plain[task.device] = []
                bucket.append(task)
            return
        indexes: dict[int | None, list[int]] = {}
        for i, task in enumerate(batch.tasks):
            picked = indexes.get(task.device)
            if picked is None:
                picked = indexes[task.device] = []
            picked.append(i)
        whole = len(indexes) == 1  # the usual case: one device per batch, no copy
        for device, picked in indexes.items():
            tasks = batch.tasks if whole else [batch.tasks[i] for i in picked]
            counters = batch.counters
            if counters is not None and not whole:
                counters = counters.select(picked)
            entry = self._counted.get(device)
            if entry is None:
                entry = self._counted[device] = RunTasks(True)
            entry.add(TaskBatch(tasks, counters))

    def per_device(self) -> dict[int | None, DeviceTasks]:
        if not self._counters:
            return {device: (tuple(tasks), None) for device, tasks in self._plain.items()}
        return {device: (tuple(entry.tasks), entry.counters()) for device, entry in self._counted.items()}


def gather(batches: Iterable[TaskBatch], *, counters: bool) -> dict[int | None, DeviceTasks]:
    """Every batch, by device."""
    split = DeviceSplit(counters)
    for batch in batches:
        split.add(batch)
    return split.per_device()


def split_by_device(batches: Iterator[list[ProfilingTask]]) -> dict[int | None, list[ProfilingTask]]:
    out: dict[int | None, list[ProfilingTask]] = {}
    for batch in batches:
        for task in batch:
            bucket = out.get(task.device)
            if bucket is None:
                bucket = out[task.device] = []
            bucket.append(task)
    return out
