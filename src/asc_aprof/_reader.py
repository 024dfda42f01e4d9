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

A file that gives no task -- a header and no data row, or only rows the parser skips (``N/A``
durations, ``PROFILING_ENABLE`` / ``PROFILING_DISABLE``) -- is not an error (a device may have run
nothing), but it is said: a warning on the ``asc_aprof`` logger names the file and what it held.
"""

from __future__ import annotations

import decimal
import enum
import logging
from collections.abc import AsyncGenerator, Iterator, Sequence
from pathlib import Path
from typing import Final

import anyio
import anyio.lowlevel

from ._errors import UsageError
from ._layout import CsvFile, find_summary_csvs, task_time_beside
from ._parser import TaskParser
from ._records import UNKNOWN_TASK_TYPE as UNKNOWN_TYPE
from ._records import ProfilingTask

logger = logging.getLogger("asc_aprof")

SYNC_CHUNK: Final = 1 << 20
#: Parsed on the event loop between checkpoints: small enough to stay around a millisecond.
ASYNC_CHUNK: Final = 32 << 10

STREAM_COLUMNS: Final = ("Stream ID", "stream_id")
#: Start-time columns and their unit in nanoseconds (the header says the unit).
START_COLUMNS: Final = {"Task Start Time(us)": 1000, "task_start(us)": 1000, "task_start(ns)": 1}
JOIN_KEEP: Final = (STREAM_COLUMNS, tuple(START_COLUMNS))

JoinKey = tuple[int | None, str, int | None, int]


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


def report_no_tasks(parser: TaskParser) -> None:
    """Warn (logger ``asc_aprof``) when a file just parsed gave no task, naming it."""
    if parser.tasks_out:
        return
    if not parser.data_rows:
        held = "a header and no data row"
    else:
        reasons = ", ".join(f"{reason}: {count}" for reason, count in parser.skipped.items())
        held = f"all {parser.data_rows} data rows skipped ({reasons})"
    logger.warning("%s holds no task: %s", parser.source, held)


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
    :attr:`reading`, and ``b""`` at the end of the file; every call returns the tasks it finished.
    """

    def __init__(self, files: Sequence[CsvFile]) -> None:
        self._files = list(files)
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
        )
        self._first_batch = True
        self.reading = True
        return self._file

    def feed(self, data: bytes) -> list[ProfilingTask]:
        """Bytes of the current file (``b""`` at its end); the tasks they completed."""
        parser = self._parser
        if parser is None or not self.reading:
            raise RuntimeError("RunReader.feed() without a file being read")
        if data:
            tasks = parser.feed(data)
        else:
            tasks = parser.close()
            self.reading = False
            if self._phase is not _Phase.TYPES:
                report_no_tasks(parser)
        if self._phase is _Phase.TYPES:
            self._add_types(parser, tasks)
            return []
        if self._phase is _Phase.JOINED:
            return self._resolve(parser, tasks)
        if tasks and self._first_batch:
            self._first_batch = False
            if parser.kind == "op_summary" and self._needs_types(tasks):
                return []
        return tasks

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
    reader = RunReader(files)
    while (csv_file := reader.next_file()) is not None:
        with open(csv_file.path, "rb") as stream:
            while reader.reading:
                batch = reader.feed(stream.read(SYNC_CHUNK))
                if batch:
                    yield batch


async def aiter_file_tasks(files: Sequence[CsvFile]) -> AsyncGenerator[list[ProfilingTask], None]:
    """Batches of tasks from *files*, read with anyio's file API.

    Reads 1 MiB per worker-thread round trip and parses it in 32 KiB slices with a checkpoint
    between them, so the loop never stalls for long; the consumer's pace sets the reading pace
    (at most one read chunk is held).
    """
    reader = RunReader(files)
    while (csv_file := reader.next_file()) is not None:
        async with await anyio.open_file(csv_file.path, "rb") as stream:
            while reader.reading:
                chunk = await stream.read(SYNC_CHUNK)
                if not chunk:
                    batch = reader.feed(b"")
                    if batch:
                        yield batch
                    break
                view = memoryview(chunk)
                for start in range(0, len(chunk), ASYNC_CHUNK):
                    batch = reader.feed(bytes(view[start : start + ASYNC_CHUNK]))
                    if batch:
                        yield batch
                    await anyio.lowlevel.checkpoint()
                    if not reader.reading:
                        break


def split_by_device(batches: Iterator[list[ProfilingTask]]) -> dict[int | None, list[ProfilingTask]]:
    out: dict[int | None, list[ProfilingTask]] = {}
    for batch in batches:
        for task in batch:
            bucket = out.get(task.device)
            if bucket is None:
                bucket = out[task.device] = []
            bucket.append(task)
    return out
