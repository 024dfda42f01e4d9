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
gets its real type. A task whose key is not in the map takes the type of the task_time row of
its device, stream id and task id with the nearest start within
:data:`~asc_aprof._model._join.NEAREST_START_BOUND_NS` that no task took yet (CANN's pure-Python
export prints a MIX kernel's two starts about 1 µs apart; see :mod:`asc_aprof._model._join`).
Tasks with no match keep ``N/A`` (their type is never guessed from a name);
:func:`~asc_aprof.task_time_median` counts them only when their kernel is named.
:attr:`RunReader.level0_join` counts the tasks of each kind. Real exports make every row of a
level-0 op_summary ``N/A``, so the first batch decides for the file; joined files are parsed by
the pure-Python row loop (it keeps the extra cells), and the map holds one entry per task_time row.

Timed reads (``RunReader(files, timed=True)``, used by :mod:`asc_aprof._runs._timeline`) keep every
task's stream and start cells, plus the columns ``extra(header)`` names, and hand them out in
:attr:`RunReader.kept` beside the tasks of each call. They run the pure row loop (the cells are
kept per row), so they are opt-in: the default read is the accelerated one, unchanged. To choose
the extra columns by the header, a timed read holds back a file's first bytes until its header
line is complete, reads that line with a throwaway parser, then builds the real one.

Columnar reads (``RunReader(files, columnar=True)``, :func:`iter_file_columns`,
:func:`aiter_file_columns`) build no task: plain files go through the parser's columnar mode
(the C row loop fills the columns from the bytes), every file of the run coding devices, names
and types with one set of tables; the level-0 join reads its files as above and converts the
joined tasks, so a columnar read holds exactly the tasks a task read gives.

With ``counters=True`` every parser also reads the PMU counter columns, and each batch comes with
the counters of its tasks (:class:`TaskBatch`), aligned with them; a dropped batch drops its
counters too. :class:`DeviceSplit` files batches by device, counters along.

A file that gives no task -- a header and no data row, or only rows the parser skips (``N/A``
durations, ``PROFILING_ENABLE`` / ``PROFILING_DISABLE``) -- is not an error (a device may have run
nothing), but it is said: a warning on the ``asc_aprof`` logger names the file and what it held.
"""

from __future__ import annotations

import contextlib
import csv
import datetime
import decimal
import enum
import io
import logging
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Final, NamedTuple

import anyio
import anyio.lowlevel
import anyio.to_thread

from .._cann._files import Bound, open_in_run
from .._cann._layout import CsvFile, find_summary_csvs, task_time_beside
from .._model._counters import CounterBuilder, TaskCounters
from .._model._errors import ParseError, UsageError
from .._model._join import Level0Join, nearest_start
from .._model._records import UNKNOWN_TASK_TYPE as UNKNOWN_TYPE
from .._model._records import ProfilingTask, joinable, new_task, task_with_type
from .._plans._columns import ColumnBatch, ColumnBuilder, Tables, TaskColumns
from .._plans._parser import TaskParser
from .._plans._raw import RawResult

logger = logging.getLogger("asc_aprof")

SYNC_CHUNK: Final = 1 << 20
#: Parsed on the event loop between checkpoints: small enough to stay around a millisecond.
ASYNC_CHUNK: Final = 32 << 10
#: A columnar read makes no object per task: a slice of about the same parse time is larger.
ASYNC_COLUMN_CHUNK: Final = 512 << 10
#: Bytes per worker-thread read of the async columnar path, parsed in ASYNC_COLUMN_CHUNK slices:
#: larger than the sync chunk, since each read is a worker-thread round trip.
ASYNC_COLUMN_READ: Final = 4 << 20

STREAM_COLUMNS: Final = ("Stream ID", "stream_id")
#: Start-time columns and their unit in nanoseconds (the header says the unit; old op_summary
#: headers say none, and their cells are microseconds with three decimals like the later ones).
START_COLUMNS: Final = {
    "Task Start Time(us)": 1000,
    "task_start(us)": 1000,
    "task_start(ns)": 1,
    "Task Start Time": 1000,
}
JOIN_KEEP: Final = (STREAM_COLUMNS, tuple(START_COLUMNS))

JoinKey = tuple[int | None, str, int | None, int]
#: A join key without its start: the tolerant step's key (device, stream id, task id).
NearKey = tuple[int | None, str, int | None]
#: The raw cells a timed read keeps per task: stream, start, then the extra columns.
KeptCells = tuple[str | None, ...]
#: One device's share of a run: its tasks, and their counters when they were asked for.
DeviceTasks = tuple[tuple[ProfilingTask, ...], TaskCounters | None]


class TaskBatch(NamedTuple):
    """Tasks a feed finished, with their counters (aligned) when the reader reads counters."""

    tasks: list[ProfilingTask]
    counters: TaskCounters | None


class _Taken(NamedTuple):
    """A task_time entry a task took (its type): the tolerant step passes it by."""

    type: str | None


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


def start_unit_ns(columns: Sequence[str]) -> int | None:
    """Nanoseconds per unit of the start column in *columns* (a header), or None without one."""
    column = next((c for c in columns if c in START_COLUMNS), None)
    return None if column is None else START_COLUMNS[column]


def cell_ns(text: str | None, unit_ns: int | None) -> int | None:
    """A start cell as integer nanoseconds (exact: the cells carry 19 digits), or None.

    The cell may carry msprof's trailing TAB and, on the row loop's fast split, its quotes.
    msprof's forms (whole ns, or us with up to three decimals) are converted with integer
    arithmetic; anything else goes through :class:`decimal.Decimal` (finer than 1 ns rounds
    half-even) in a context of its own, bounded: a cell of more than 64 characters or over
    10**30 units is None, not a start time.
    """
    if text is None or unit_ns is None:
        return None
    cell = text.strip().strip('"')
    if len(cell) > _CELL_MAX:  # (int() refuses over 4300 digits; no clock needs 64)
        return None
    whole, _, frac = cell.partition(".")
    if whole.isascii() and whole.isdigit() and frac.isascii() and (frac.isdigit() or not frac):
        digits = len(str(unit_ns)) - 1  # unit_ns is 1 or 1000
        if len(frac) <= digits:
            return int(whole) * unit_ns + (int(frac.ljust(digits, "0")) if frac else 0)
    try:
        value = _CELL_CONTEXT.create_decimal(cell)
    except (decimal.InvalidOperation, ValueError):
        return None
    # Bounded before any arithmetic: 1e999990 ns would take a minute to become an int.
    if not value.is_finite() or not value or value.adjusted() > _CELL_EXP_MAX:
        return 0 if value.is_zero() else None
    return int(_CELL_CONTEXT.to_integral_value(_CELL_CONTEXT.multiply(value, unit_ns)))


#: The longest start cell taken by its Decimal form (msprof's have 20 characters), and the
#: largest power of ten of its unit kept (10**30 ns or µs is far past any clock).
_CELL_MAX: Final = 64
_CELL_EXP_MAX: Final = 30
#: cell_ns's own arithmetic: exact for every cell it takes, whatever the caller's decimal context;
#: nothing traps but a malformed cell (a tiny value just rounds to 0 ns).
_CELL_CONTEXT: Final = decimal.Context(
    prec=_CELL_MAX + 4,
    rounding=decimal.ROUND_HALF_EVEN,
    Emax=decimal.MAX_EMAX,
    Emin=decimal.MIN_EMIN,
    traps=[decimal.InvalidOperation],
)


def _start_ns(parser: TaskParser, text: str | None) -> int | None:
    """The start cell as integer nanoseconds (exact: the cells carry 19 digits), or None."""
    return cell_ns(text, start_unit_ns(parser.columns))


def _join_keys(
    parser: TaskParser, tasks: Sequence[ProfilingTask], kept: Sequence[KeptCells]
) -> Iterator[JoinKey | None]:
    for task, cells in zip(tasks, kept, strict=True):
        stream, start = cells[0], cells[1]
        start_ns = _start_ns(parser, start)
        if stream is None or start_ns is None:
            yield None
        else:
            yield (task.device, stream.strip(), task.id, start_ns)


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


class RunReader:
    """The files of one export, read in order, with level-0 types joined in (see the module doc).

    Drive it: ``while (f := reader.next_file()) is not None:`` open *f*, then feed chunks while
    :attr:`reading`, and ``b""`` at the end of the file; every call returns the tasks it finished
    (:meth:`feed_batch`: with their counters, when *counters*).
    """

    def __init__(
        self,
        files: Sequence[CsvFile],
        *,
        timed: bool = False,
        extra: Callable[[Sequence[str]], Sequence[str]] | None = None,
        counters: bool = False,
        columnar: bool = False,
    ) -> None:
        if columnar and timed:
            raise ValueError("RunReader: a timed read cannot be columnar")
        self._files = list(files)
        #: the value tables of a columnar read (None: it returns tasks)
        self.tables: Tables | None = Tables.new() if columnar else None
        self._timed = timed
        self._extra = extra
        self.counters = counters
        self._held = b""  # a timed read's first bytes, until its header line is complete
        self._beside = task_time_beside(self._files)
        self._index = -1  # position in _files
        self._pending: list[tuple[_Phase, CsvFile]] = []
        # task_time's type per key; an entry a task took holds a _Taken (one per type, cached)
        self._types: dict[JoinKey, str | _Taken | None] | None = None
        self._taken: dict[str | None, _Taken] = {}
        self._near: dict[NearKey, list[int]] | None = None  # the tolerant step's index, made on first use
        self._joined = False
        self._phase = _Phase.PLAIN
        self._file: CsvFile | None = None
        self._parser: TaskParser | None = None
        self._first_batch = True
        #: whether the current file wants more bytes
        self.reading = False
        # level-0 tasks typed by an exact key / by the nearest start / left N/A
        self._exact = 0
        self._nearest = 0
        self._unmatched = 0
        #: timed reads: the cells of each task the last :meth:`feed` returned, in order
        #: (stream, start, then the columns *extra* named, None where the header lacks one)
        self.kept: list[KeptCells] = []

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
        self._parser = None if self._timed else self._make_parser(())
        self._held = b""
        self._first_batch = True
        self.reading = True
        return self._file

    def _make_parser(self, extra: Sequence[str]) -> TaskParser:
        assert self._file is not None
        keep = self._timed or self._phase is not _Phase.PLAIN
        return TaskParser(
            str(self._file.path),
            device=self._file.device,
            accelerated=False if keep else None,
            keep=(*JOIN_KEEP, *((name,) for name in extra)) if keep else (),
            counters=self.counters,
            columnar=self.tables if self.tables is not None and not keep else False,
        )

    def _extra_columns(self, held: bytes) -> Sequence[str]:
        """The extra columns of a timed read, from the header line at the start of *held*."""
        if self._extra is None or self._phase is _Phase.TYPES:
            return ()
        probe = TaskParser(str(self._file.path) if self._file else "<stream>", accelerated=False)
        end = _header_end(held)
        probe.feed(held[: end + 1] if end >= 0 else held + b"\n")
        return self._extra(probe.columns)

    @property
    def columns(self) -> tuple[str, ...]:
        """The header of the file being read (empty until its first line is in)."""
        return self._parser.columns if self._parser is not None else ()

    def feed(self, data: bytes) -> list[ProfilingTask]:
        """Bytes of the current file (``b""`` at its end); the tasks they completed."""
        return self.feed_batch(data).tasks

    def feed_batch(self, data: bytes) -> TaskBatch:
        """As :meth:`feed`, with the tasks' counters (None unless the reader reads counters)."""
        if self.tables is not None:
            raise RuntimeError("RunReader(columnar=True): use feed_columns()")
        return self._feed(data)

    def feed_columns(self, data: bytes) -> ColumnBatch:
        """A columnar reader's :meth:`feed`: the columns of the tasks the bytes completed."""
        if self.tables is None:
            raise RuntimeError("RunReader.feed_columns() needs RunReader(columnar=True)")
        batch = self._feed(data)
        parser = self._parser
        if parser is not None and parser.tables is not None:  # a plain file, parsed into columns
            columns = parser.take_columns()
            if columns.length and self._first_batch:
                self._first_batch = False
                unknown = parser.tables.types.codes.get(UNKNOWN_TYPE)
                if (
                    parser.kind == "op_summary"
                    and unknown is not None
                    and unknown in memoryview(columns.type).cast("i")
                    and self._needs_types()
                ):
                    return self._no_columns()
            return columns
        if not batch.tasks:
            return self._no_columns()
        return ColumnBatch.from_tasks(batch.tasks, self.tables, batch.counters)

    def _no_columns(self) -> ColumnBatch:
        return ColumnBatch(b"", b"", b"", b"", b"", 0, TaskCounters() if self.counters else None)

    def _feed(self, data: bytes) -> TaskBatch:
        if not self.reading:
            raise RuntimeError("RunReader.feed() without a file being read")
        parser = self._parser
        if parser is None:  # a timed read whose header line is not complete yet
            held = self._held + data
            if data and _header_end(held) < 0:
                self._held = held
                return self._none()
            self._held = b""
            parser = self._parser = self._make_parser(self._extra_columns(held))
            tasks = parser.feed(held) if held else []
            if not data:
                tasks += parser.close()
                self._closed(parser)
            return self._after(parser, tasks)
        if data:
            tasks = parser.feed(data)
        else:
            tasks = parser.close()
            self._closed(parser)
        return self._after(parser, tasks)

    def _closed(self, parser: TaskParser) -> None:
        self.reading = False
        if self._phase is not _Phase.TYPES:
            report_no_tasks(parser)

    def _none(self) -> TaskBatch:
        return TaskBatch([], TaskCounters() if self.counters else None)

    def _after(self, parser: TaskParser, tasks: list[ProfilingTask]) -> TaskBatch:
        kept, parser.kept = parser.kept, []
        # a columnar parser's counters go out with its columns (feed_columns)
        counters = parser.take_counters() if self.counters and parser.tables is None else None
        self.kept = []
        if self._phase is _Phase.TYPES:
            self._add_types(parser, tasks, kept)
            return self._none()
        if self._phase is _Phase.JOINED:
            out = self._resolve(parser, tasks, kept)
            self.kept = kept
            return TaskBatch(out, counters)
        if tasks and self._first_batch:
            self._first_batch = False
            unknown = UNKNOWN_TYPE in {t.type for t in tasks}
            if parser.kind == "op_summary" and unknown and self._needs_types():
                return self._none()
        self.kept = kept
        return TaskBatch(tasks, counters)

    # -- level 0 --------------------------------------------------------------------------------
    def _needs_types(self) -> bool:
        """Switch to the joined read of this file (its first tasks lack a type), when there is one."""
        assert self._file is not None
        plan: list[tuple[_Phase, CsvFile]] = []
        if self._types is None:
            self._types = {}
            plan = [(_Phase.TYPES, f) for f in self._beside]
        if not plan and not self._types:
            return False  # no task_time beside it: the tasks keep N/A
        self._pending = [*plan, (_Phase.JOINED, self._file)]
        self.reading = False
        return True

    def _add_types(self, parser: TaskParser, tasks: list[ProfilingTask], kept: list[KeptCells]) -> None:
        types = self._types
        assert types is not None
        for task, key in zip(tasks, _join_keys(parser, tasks, kept), strict=True):
            if key is None:
                continue
            # A key seen twice with different types is ambiguous: no type rather than a guess.
            types[key] = task.type if types.get(key, task.type) == task.type else None

    def _resolve(
        self, parser: TaskParser, tasks: list[ProfilingTask], kept: list[KeptCells]
    ) -> list[ProfilingTask]:
        self._joined = True
        types = self._types if self._types is not None else {}
        out: list[ProfilingTask] = []
        for task, key in zip(tasks, _join_keys(parser, tasks, kept), strict=True):
            if task.type == UNKNOWN_TYPE:
                if key is None:
                    found = None
                elif key in types:  # exact first; a key without one usable type stays N/A
                    found = self._take_exact(types, key)
                    self._exact += found is not None
                else:
                    found = self._take_nearest(types, key)
                    self._nearest += found is not None
                if found is None:
                    self._unmatched += 1
                else:
                    task = task_with_type(task, found)
            out.append(task)
        return out

    def _take_exact(self, types: dict[JoinKey, str | _Taken | None], key: JoinKey) -> str | None:
        """The type task_time has at *key*, None where it has no single one (the entry is taken)."""
        value = types[key]
        if isinstance(value, _Taken):
            value = value.type  # rows with one key and start are one task: each gets its type
        else:
            types[key] = self._taken_of(value)
        return value if value is not None and value != UNKNOWN_TYPE else None

    def _take_nearest(self, types: dict[JoinKey, str | _Taken | None], key: JoinKey) -> str | None:
        """The tolerant step (see :mod:`asc_aprof._model._join`): the type of the untaken task_time
        row of *key*'s device, stream and task id nearest its start within the bound (taken now)."""
        if self._near is None:
            near: dict[NearKey, list[int]] = {}
            for (device, stream, task_id, start), value in types.items():
                if joinable(value):
                    near.setdefault((device, stream, task_id), []).append(start)
            for listed in near.values():
                listed.sort()
            self._near = near  # made once, on the first row without an exact match
        device, stream, task_id, start = key
        starts = self._near.get((device, stream, task_id))
        if not starts:
            return None
        best = nearest_start(starts, start, lambda s: joinable(types[(device, stream, task_id, s)]))
        if best is None:
            return None
        value = types[(device, stream, task_id, best)]
        assert isinstance(value, str)
        types[(device, stream, task_id, best)] = self._taken_of(value)
        return value

    def _taken_of(self, value: str | None) -> _Taken:
        taken = self._taken.get(value)
        if taken is None:
            taken = self._taken[value] = _Taken(value)
        return taken

    @property
    def level0_join(self) -> Level0Join | None:
        """How the tasks read so far got their level-0 types (None: no join was made)."""
        if not self._joined:
            return None
        return Level0Join(self._exact, self._nearest, self._unmatched)


def _header_end(data: bytes) -> int:
    """Where the first non-blank line of *data* ends (its ``\\n``), or -1 when it is not complete."""
    end = data.find(b"\n")
    while end >= 0 and not data[:end].strip():
        end = data.find(b"\n", end + 1)
    return end


#: A timed read's batch: tasks, their kept cells, and the header of the file they came from.
TimedBatch = tuple[list[ProfilingTask], list[KeptCells], tuple[str, ...]]


def iter_timed_file_tasks(
    files: Sequence[CsvFile], extra: Callable[[Sequence[str]], Sequence[str]] | None = None
) -> Iterator[TimedBatch]:
    """Batches of a timed :class:`RunReader` over *files*, read in 1 MiB chunks."""
    reader = RunReader(files, timed=True, extra=extra)
    while (csv_file := reader.next_file()) is not None:
        with csv_file.open() as stream:
            while reader.reading:
                batch = reader.feed(stream.read(SYNC_CHUNK))
                if batch:
                    yield batch, reader.kept, reader.columns


def iter_file_tasks(files: Sequence[CsvFile]) -> Iterator[list[ProfilingTask]]:
    """Batches of tasks from *files*, read in 1 MiB chunks."""
    for batch in iter_file_batches(files):
        yield batch.tasks


def iter_file_batches(files: Sequence[CsvFile], *, counters: bool = False) -> Iterator[TaskBatch]:
    """Batches of tasks (with their counters, when asked) from *files*, read in 1 MiB chunks."""
    yield from iter_reader_batches(RunReader(files, counters=counters))


def iter_reader_batches(reader: RunReader) -> Iterator[TaskBatch]:
    """:func:`iter_file_batches` of a reader the caller keeps (to read its :attr:`~RunReader.level0_join`)."""
    while (csv_file := reader.next_file()) is not None:
        with csv_file.open() as stream:
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
    async with contextlib.aclosing(aiter_reader_batches(RunReader(files, counters=counters))) as batches:
        async for batch in batches:
            yield batch


async def aiter_reader_batches(reader: RunReader) -> AsyncGenerator[TaskBatch, None]:
    """:func:`aiter_file_batches` of a reader the caller keeps."""
    while (csv_file := reader.next_file()) is not None:
        async with await _aopen(csv_file) as stream:
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


def iter_file_columns(files: Sequence[CsvFile], *, counters: bool = False) -> Iterator[ColumnBatch]:
    """Batches of columns (with their counters, when asked) from *files*, read in 1 MiB chunks.

    Codes refer to one set of tables for all the files (the batches' reader's: see
    :func:`read_file_columns`).
    """
    reader = RunReader(files, counters=counters, columnar=True)
    yield from _columns_of(reader)


def _columns_of(reader: RunReader) -> Iterator[ColumnBatch]:
    while (csv_file := reader.next_file()) is not None:
        with csv_file.open() as stream:
            while reader.reading:
                batch = reader.feed_columns(stream.read(SYNC_CHUNK))
                if batch.length:
                    yield batch


def read_file_columns(
    files: Sequence[CsvFile], *, counters: bool = False, run_id: str | None = None
) -> TaskColumns:
    """Every task of *files* as one :class:`TaskColumns` (no task object is made)."""
    reader = RunReader(files, counters=counters, columnar=True)
    assert reader.tables is not None
    builder = ColumnBuilder(counters, reader.tables)
    for batch in _columns_of(reader):
        builder.add(batch)
    return builder.build(run_id, _now()).with_level0_join(reader.level0_join)


async def aread_file_columns(
    files: Sequence[CsvFile], *, counters: bool = False, run_id: str | None = None
) -> TaskColumns:
    """:func:`read_file_columns` with anyio's file API, as :func:`aiter_file_batches` reads.

    Cancelled: the file being read is closed and nothing is kept.
    """
    reader = RunReader(files, counters=counters, columnar=True)
    assert reader.tables is not None
    builder = ColumnBuilder(counters, reader.tables)
    while (csv_file := reader.next_file()) is not None:
        async with await _aopen(csv_file) as stream:
            while reader.reading:
                chunk = await stream.read(ASYNC_COLUMN_READ)
                if not chunk:
                    builder.add(reader.feed_columns(b""))
                    break
                view = memoryview(chunk)
                for start in range(0, len(chunk), ASYNC_COLUMN_CHUNK):
                    builder.add(reader.feed_columns(bytes(view[start : start + ASYNC_COLUMN_CHUNK])))
                    await anyio.lowlevel.checkpoint()
                    if not reader.reading:
                        break
    return builder.build(run_id, _now()).with_level0_join(reader.level0_join)


def raw_columns(raw: RawResult, run_id: str | None = None) -> TaskColumns:
    """The columns of a run the raw reader read: what its exported CSVs give (with the counters
    when the raw reader read them)."""
    builder = ColumnBuilder(counters=raw.counters is not None)
    builder.add_tasks(raw.profiling_tasks(), raw.counters)
    columns = builder.build(run_id, _now()).with_level0_join(raw.level0_join)
    return columns.with_aic_mhz(raw.aic_mhz()) if raw.clocks else columns


async def _aopen(csv_file: CsvFile) -> anyio.AsyncFile[bytes]:
    """:meth:`CsvFile.open` in a worker thread (the checks are a few system calls)."""
    return anyio.wrap_file(await anyio.to_thread.run_sync(csv_file.open))


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


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


def read_csv_tasks(path: Path, columns: tuple[str, str, str, str]) -> list[ProfilingTask]:
    """Every row of the CSV *path* as a task, its id, name, type and duration taken from the
    columns named *columns* (upstream's ``Profiler.populate_tasks``; ``device`` is None).

    Opened as every run file is (``_cann/_files``: a regular file, no link, the CSV bound), with
    the folder holding it as the run.

    :raises ParseError: a column missing from the header, a row too short, an id that is not an
        integer or a duration that is not a number (file and line)
    """
    source = str(path)
    with open_in_run(path.parent, path, Bound.CSV) as raw:
        rows = csv.reader(io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline=""))
        header = next(rows, None)
        if header is None:
            raise ParseError("the file is empty, so it has no header row naming the columns", source=source)
        missing = [name for name in columns if name not in header]
        if missing:
            raise ParseError(
                f"no column {', '.join(map(repr, missing))} in the header; it has {', '.join(header)}",
                source=source,
                line=rows.line_num,
            )
        at = [header.index(name) for name in columns]
        last = max(at)
        out: list[ProfilingTask] = []
        for row in rows:
            if not row:
                continue  # a blank line is no row (csv.DictReader skips it too)
            if len(row) <= last:
                raise ParseError(
                    f"the row has {len(row)} fields; column {header[last]!r} is field {last + 1}",
                    source=source,
                    line=rows.line_num,
                )
            cell_id, name, ttype, cell_duration = (row[i] for i in at)
            try:
                task_id = int(cell_id)
            except ValueError:
                raise ParseError(
                    f"{columns[0]!r} is {cell_id!r}, not an integer", source=source, line=rows.line_num
                ) from None
            try:
                duration = float(cell_duration)
            except ValueError:
                raise ParseError(
                    f"{columns[3]!r} is {cell_duration!r}, not a number", source=source, line=rows.line_num
                ) from None
            out.append(new_task((task_id, name, ttype, duration, None)))
        return out
