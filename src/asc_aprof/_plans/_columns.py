"""The columnar result: a run's tasks as contiguous arrays, and the grouping its statistics use.

Theory of operation
-------------------
:class:`TaskColumns` holds what :class:`~asc_aprof.ProfilingTask` objects would, one array per
field instead of one object per task: durations (``double``), ids (``int64``, :data:`NO_ID` for
``N/A``), and device, name and type as ``int32`` codes into small tables of the distinct values
(a run launches few kernels on few devices), plus the PMU counters as the
:class:`~asc_aprof.TaskCounters` they already are. A task costs 28 bytes (8 + 8 + 3 x 4) and no
Python object, where a ``ProfilingTask`` costs ~175 bytes and one GC entry. It is the counters'
design: arrays aligned with the tasks, handed out as read-only ``memoryview`` s that numpy,
pyarrow and polars wrap without a copy (:meth:`TaskColumns.buffers`); tasks are built from it
only when asked (:meth:`TaskColumns.tasks`).

Filling: the parser's columnar mode (``TaskParser(columnar=...)``) appends each row's values to
byte buffers and looks its strings up in :class:`ValueTable` s shared by every file of a run, so
codes mean the same in every batch. The C row loop does this straight from the bytes (no str is
made for a name it has seen in the call, no object per task); the pure-Python row loop builds the
tasks it always builds and converts them (:meth:`ColumnBatch.from_tasks`), which is the reference
the C path must equal, codes and tables included (values are coded in the order they are first
seen, so both give the same tables).

Statistics (:mod:`asc_aprof._plans._stats` on a :class:`TaskColumns`) never build a task either:
:func:`group_rows` buckets row indexes per (device, name) code pair, groups in the order of their
first row and rows in file order, dropping the first *skip* of each group (what the task path's
dicts of lists give); :func:`take` gathers one group's values; :func:`order_stats` picks the
order statistics a quantile needs by selection, not by sorting. Python's sort is stable and
treats ``-0.0`` and ``0.0`` as equal, so which zero lands at a rank depends on file order;
:func:`order_stats` reproduces that, so every statistic equals the task path's to the last bit.
Each has a pure-Python reference and a C version (``_cparser``), used when the extension is built
and ``ASC_APROF_PURE_PYTHON`` is not ``1``.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
from array import array
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, Generic, NamedTuple, TypeVar

from .._model._counters import CounterBuilder, TaskCounters
from .._model._join import Level0Join
from .._model._records import ProfilingResult, ProfilingTask, new_task

#: The id column's value for a task whose id is ``N/A`` (ids are int64; this one is refused).
NO_ID: Final = -(2**63)
ID_MAX: Final = 2**63 - 1

assert array("i").itemsize == 4 and array("q").itemsize == 8

#: The columns of :meth:`TaskColumns.buffers`, with their ``memoryview`` format.
BUFFER_FORMATS: Final = {
    "duration_us": "d",
    "id": "q",
    "device": "i",
    "name": "i",
    "type": "i",
    "aic_mhz": "d",
}


def _load() -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any], Callable[..., Any]] | None:
    try:
        from ._cparser import fsum, group_rows, order_stats, take
    except ImportError:  # built without a compiler: the extension is optional
        return None
    return group_rows, take, order_stats, fsum


_C: Final = _load()


def accelerated_default() -> bool:
    """Whether the columnar functions use C by default (built, ``ASC_APROF_PURE_PYTHON`` not ``1``)."""
    return _C is not None and os.environ.get("ASC_APROF_PURE_PYTHON") != "1"


V = TypeVar("V", bound=Hashable)


class ValueTable(Generic[V]):
    """Distinct values in the order first seen, and the code of each (append-only)."""

    __slots__ = ("codes", "values")

    def __init__(self) -> None:
        self.codes: dict[V, int] = {}
        self.values: list[V] = []

    def code(self, value: V) -> int:
        code = self.codes.get(value)
        if code is None:
            code = self.codes[value] = len(self.values)
            self.values.append(value)
        return code


class Tables(NamedTuple):
    """The value tables of one run (shared by its parsers, so codes agree across files)."""

    devices: ValueTable[int | None]
    names: ValueTable[str]
    types: ValueTable[str]

    @classmethod
    def new(cls) -> Tables:
        return cls(ValueTable(), ValueTable(), ValueTable())


class ColumnBatch(NamedTuple):
    """Raw columns of some tasks: duration (double), id (int64), device, name, type codes (int32)."""

    duration: bytes
    id: bytes
    device: bytes
    name: bytes
    type: bytes
    length: int
    counters: TaskCounters | None

    @classmethod
    def from_tasks(
        cls, tasks: Sequence[ProfilingTask], tables: Tables, counters: TaskCounters | None = None
    ) -> ColumnBatch:
        """The columns of *tasks*, coded with *tables* (new values added in the order seen).

        :raises OverflowError: for an id outside int64 (or equal to :data:`NO_ID`)
        """
        dev_code, name_code, type_code = tables.devices.code, tables.names.code, tables.types.code
        ids = array("q")
        for task in tasks:
            task_id = task.id
            if task_id is None:
                ids.append(NO_ID)
            elif NO_ID < task_id <= ID_MAX:
                ids.append(task_id)
            else:
                raise OverflowError(f"task id {task_id} is outside the 64-bit range of the id column")
        names = array("i")
        types = array("i")
        for task in tasks:  # name, then type: the order the C path codes them in
            names.append(name_code(task.name))
            types.append(type_code(task.type))
        return cls(
            array("d", [t.duration for t in tasks]).tobytes(),
            ids.tobytes(),
            array("i", [dev_code(t.device) for t in tasks]).tobytes(),
            names.tobytes(),
            types.tobytes(),
            len(tasks),
            counters,
        )


class ColumnBuilder:
    """Appends :class:`ColumnBatch` es of one run into one :class:`TaskColumns`."""

    __slots__ = ("_columns", "_counters", "_length", "tables")

    def __init__(self, counters: bool = False, tables: Tables | None = None) -> None:
        self.tables = tables if tables is not None else Tables.new()
        self._columns = [bytearray() for _ in range(5)]
        self._counters = CounterBuilder() if counters else None
        self._length = 0

    def __len__(self) -> int:
        return self._length

    def add(self, batch: ColumnBatch) -> None:
        for column, part in zip(self._columns, batch[:5], strict=True):
            column += part
        self._length += batch.length
        if self._counters is not None:
            if batch.counters is None:
                self._counters.pad(batch.length)
            else:
                self._counters.extend(batch.counters)

    def add_tasks(self, tasks: Sequence[ProfilingTask], counters: TaskCounters | None = None) -> None:
        self.add(ColumnBatch.from_tasks(tasks, self.tables, counters))

    def build(self, run_id: str | None = None, stored_at: _dt.datetime | None = None) -> TaskColumns:
        """The columns appended so far (the builder starts over empty, with new tables)."""
        counters = self._counters.build() if self._counters is not None else None
        tables = self.tables
        out = TaskColumns._wrap(
            self._columns,
            (tuple(tables.devices.values), tuple(tables.names.values), tuple(tables.types.values)),
            self._length,
            counters,
            run_id,
            stored_at,
        )
        self.tables = Tables.new()
        self._columns = [bytearray() for _ in range(5)]
        self._length = 0
        return out


def _view(data: bytes | bytearray, fmt: str) -> memoryview[Any]:
    view: memoryview[Any] = memoryview(data).toreadonly().cast("B").cast(fmt)  # type: ignore[call-overload]
    return view


class TaskColumns:
    """A run's tasks as columns (see the module doc): the columnar twin of :class:`ProfilingResult`.

    Fields are read as whole columns: :meth:`durations` (µs), :meth:`ids` (:data:`NO_ID` for
    ``N/A``), :meth:`device_codes` / :meth:`name_codes` / :meth:`type_codes` (indexes into
    :attr:`devices`, :attr:`names`, :attr:`types`), all read-only ``memoryview`` s; one task
    with :meth:`task`, all of them with :meth:`tasks`; :attr:`counters` as in a result.
    :func:`~asc_aprof.kernel_stats`, :func:`~asc_aprof.run_kernel_stats`,
    :func:`~asc_aprof.compare_tasks` and :func:`~asc_aprof.compare_runs` take it wherever they
    take a result, and give identical statistics without building a task.

    The tables hold every distinct value the codes use, in the order first seen (a level-0 run
    may also list the ``N/A`` type its join replaced). Immutable; equal when the tasks (and the
    counters) are equal, whatever the codes (the clocks, :meth:`aic_mhz`, are not compared: a
    run read from its CSVs has none).

    :ivar run_id: the ``PROF_*`` run the columns came from (None when built from tasks)
    :ivar stored_at: when they were parsed (naive local time, as ``ProfilingResult.stored_at``), or None
    :ivar level0_join: how a level-0 run's types were joined from task_time, as
        ``ProfilingResult.level0_join`` (None when no join was made or the columns were built from
        tasks; not compared)
    """

    __slots__ = ("_clock", "_cols", "_counters", "_length", "_tables", "level0_join", "run_id", "stored_at")

    _cols: tuple[bytes | bytearray, ...]
    _tables: tuple[tuple[int | None, ...], tuple[str, ...], tuple[str, ...]]
    _length: int
    _counters: TaskCounters | None
    _clock: bytes | None  # aic_mhz as doubles; None: no clock data (NaN throughout)
    run_id: str | None
    stored_at: _dt.datetime | None
    level0_join: Level0Join | None

    def __init__(
        self,
        tasks: Iterable[ProfilingTask] = (),
        counters: TaskCounters | None = None,
        *,
        run_id: str | None = None,
        stored_at: _dt.datetime | None = None,
    ) -> None:
        """The columns of *tasks* (and their aligned *counters*)."""
        seq = tasks if isinstance(tasks, Sequence) else list(tasks)
        if counters is not None and len(counters) != len(seq):
            raise ValueError(f"counters has {len(counters)} rows for {len(seq)} tasks")
        builder = ColumnBuilder(counters is not None)
        builder.add_tasks(seq, counters)
        built = builder.build(run_id, stored_at)
        for name in self.__slots__:
            object.__setattr__(self, name, getattr(built, name))

    @classmethod
    def _wrap(
        cls,
        cols: Sequence[bytes | bytearray],
        tables: tuple[tuple[int | None, ...], tuple[str, ...], tuple[str, ...]],
        length: int,
        counters: TaskCounters | None,
        run_id: str | None,
        stored_at: _dt.datetime | None,
        clock: bytes | None = None,
        level0_join: Level0Join | None = None,
    ) -> TaskColumns:
        self = cls.__new__(cls)
        for name, value in (
            ("_clock", clock),
            ("_cols", tuple(cols)),
            ("_tables", tables),
            ("_length", length),
            ("_counters", counters),
            ("run_id", run_id),
            ("stored_at", stored_at),
            ("level0_join", level0_join),
        ):
            object.__setattr__(self, name, value)
        return self

    @classmethod
    def from_result(cls, result: ProfilingResult) -> TaskColumns:
        """The columns of a result (its tasks, counters, run id, time and level-0 join)."""
        made = cls(result.tasks, result.counters, run_id=result.run_id, stored_at=result.stored_at)
        return made.with_level0_join(result.level0_join) if result.level0_join is not None else made

    def with_aic_mhz(self, values: Sequence[float]) -> TaskColumns:
        """These columns with each task's AI Core clock (MHz, NaN where unknown; see :meth:`aic_mhz`)."""
        if len(values) != self._length:
            raise ValueError(f"aic_mhz has {len(values)} values for {self._length} tasks")
        clock = None if all(math.isnan(v) for v in values) else array("d", values).tobytes()
        return self._with(clock, self.level0_join)

    def with_level0_join(self, join: Level0Join | None) -> TaskColumns:
        """These columns recording how their level-0 types were joined (see :attr:`level0_join`)."""
        return self._with(self._clock, join)

    def _with(self, clock: bytes | None, join: Level0Join | None) -> TaskColumns:
        """These columns (shared, not copied) with *clock* and *join* in place of their own."""
        return TaskColumns._wrap(
            self._cols, self._tables, self._length, self._counters, self.run_id, self.stored_at, clock, join
        )

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("TaskColumns is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("TaskColumns is immutable")

    # -- reading ----------------------------------------------------------------------------
    def __len__(self) -> int:
        """How many tasks."""
        return self._length

    @property
    def devices(self) -> tuple[int | None, ...]:
        """The distinct devices (None: host rows / unknown), indexed by :meth:`device_codes`."""
        return self._tables[0]

    @property
    def names(self) -> tuple[str, ...]:
        """The distinct kernel names, indexed by :meth:`name_codes`."""
        return self._tables[1]

    @property
    def types(self) -> tuple[str, ...]:
        """The distinct task types, indexed by :meth:`type_codes`."""
        return self._tables[2]

    @property
    def counters(self) -> TaskCounters | None:
        """The tasks' PMU counters (aligned), or None when they were not read."""
        return self._counters

    def durations(self) -> memoryview[Any]:
        """Every task's duration in µs (format ``'d'``)."""
        return _view(self._cols[0], "d")

    def ids(self) -> memoryview[Any]:
        """Every task's id (format ``'q'``; :data:`NO_ID` where the CSV says ``N/A``)."""
        return _view(self._cols[1], "q")

    def device_codes(self) -> memoryview[Any]:
        """Every task's device as an index into :attr:`devices` (format ``'i'``)."""
        return _view(self._cols[2], "i")

    def name_codes(self) -> memoryview[Any]:
        """Every task's kernel name as an index into :attr:`names` (format ``'i'``)."""
        return _view(self._cols[3], "i")

    def type_codes(self) -> memoryview[Any]:
        """Every task's type as an index into :attr:`types` (format ``'i'``)."""
        return _view(self._cols[4], "i")

    def aic_mhz(self) -> memoryview[Any]:
        """Every task's AI Core clock at its start, in MHz (format ``'d'``), as the run's
        ``lpmInfoConv`` / ``lpmFreqConv`` data and the real exporter's ``freq.db`` give it; NaN
        where the run has no clock data or the tasks did not come from the raw data (CSVs)."""
        if self._clock is None:
            return _view((array("d", [math.nan]) * self._length).tobytes(), "d")
        return _view(self._clock, "d")

    def buffers(self) -> dict[str, memoryview[Any]]:
        """Every column as a read-only ``memoryview`` (:data:`BUFFER_FORMATS`), for a zero-copy hand-off.

        e.g. ``numpy.frombuffer(cols.buffers()["duration_us"])``, or pyarrow's
        ``pa.Array.from_buffers(pa.float64(), len(cols), [None, pa.py_buffer(view)])``; codes
        with their tables make categoricals / dictionary arrays (``pandas.Categorical.from_codes``).
        """
        return {
            "duration_us": self.durations(),
            "id": self.ids(),
            "device": self.device_codes(),
            "name": self.name_codes(),
            "type": self.type_codes(),
            "aic_mhz": self.aic_mhz(),
        }

    def task(self, index: int) -> ProfilingTask:
        """Task *index* as a :class:`ProfilingTask` (built now)."""
        if not -self._length <= index < self._length:
            raise IndexError(f"task index {index} out of range for {self._length} tasks")
        task_id = self.ids()[index]
        return ProfilingTask(
            None if task_id == NO_ID else task_id,
            self.names[self.name_codes()[index]],
            self.types[self.type_codes()[index]],
            self.durations()[index],
            self.devices[self.device_codes()[index]],
        )

    def tasks(self) -> list[ProfilingTask]:
        """Every task as a :class:`ProfilingTask`, in order (built now: ~175 bytes each)."""
        return list(self.iter_tasks())

    def iter_tasks(self) -> Iterator[ProfilingTask]:
        """The tasks one at a time, built as they are taken."""
        devices, names, types = self._tables
        columns = (self.ids(), self.name_codes(), self.type_codes(), self.durations(), self.device_codes())
        for task_id, name, ttype, duration, device in zip(*columns, strict=True):
            yield new_task(
                (None if task_id == NO_ID else task_id, names[name], types[ttype], duration, devices[device])
            )

    def result(self) -> ProfilingResult:
        """These tasks as a :class:`ProfilingResult` (the tasks are built now)."""
        stored = self.stored_at or _dt.datetime.now()
        return ProfilingResult(
            tuple(self.iter_tasks()), self.run_id or "", stored, self._counters, self.level0_join
        )

    # -- comparison -------------------------------------------------------------------------
    def _decoded(self, which: int) -> list[Any]:
        table = self._tables[which - 2]
        return [table[c] for c in _view(self._cols[which], "i")]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TaskColumns):
            return NotImplemented
        if self._length != other._length or self._counters != other._counters:
            return False
        if bytes(self._cols[0]) != bytes(other._cols[0]) or bytes(self._cols[1]) != bytes(other._cols[1]):
            return False
        for which in (2, 3, 4):
            same_table = self._tables[which - 2] == other._tables[which - 2]
            if same_table and bytes(self._cols[which]) == bytes(other._cols[which]):
                continue
            if self._decoded(which) != other._decoded(which):
                return False
        return True

    def __hash__(self) -> int:
        return hash((self._length, self.names))

    def __repr__(self) -> str:
        shown = ", ".join(self.names[:4]) + (", ..." if len(self.names) > 4 else "")
        return f"TaskColumns({self._length} tasks, {len(self.names)} kernels: {shown})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            TaskColumns._wrap,
            (
                [bytes(c) for c in self._cols],
                self._tables,
                self._length,
                self._counters,
                self.run_id,
                self.stored_at,
                self._clock,
                self.level0_join,
            ),
        )


# -- grouping and order statistics (pure references; C in _cparser) ------------------------------
GroupKey = tuple[int, int, int]  # (device code, name code, first row)


def _group_rows_py(
    devices: bytes | bytearray, names: bytes | bytearray, ndevices: int, nnames: int, skip: int
) -> tuple[list[GroupKey], bytes, list[int]]:
    groups: dict[tuple[int, int], list[int]] = {}
    for index, key in enumerate(zip(_view(devices, "i"), _view(names, "i"), strict=True)):
        if not (0 <= key[0] < ndevices and 0 <= key[1] < nnames):
            raise ValueError("group_rows: a code out of range")
        rows = groups.get(key)
        if rows is None:
            rows = groups[key] = []
        rows.append(index)
    keys: list[GroupKey] = []
    order = array("i")
    starts: list[int] = []
    for (device, name), rows in groups.items():
        if skip and len(rows) <= skip:
            continue
        keys.append((device, name, rows[0]))
        starts.append(len(order))
        order.extend(rows[skip:])
    starts.append(len(order))
    return keys, order.tobytes(), starts


def _take_py(values: bytes | bytearray, order: bytes, start: int, stop: int, drop_nan: bool) -> bytes:
    view = _view(values, "d")
    picked = array("d", [view[i] for i in _view(order, "i")[start:stop]])
    if drop_nan:
        picked = array("d", [v for v in picked if v == v])
    return picked.tobytes()


def _order_stats_py(values: bytes | bytearray, ranks: tuple[int, ...]) -> tuple[float, ...]:
    ordered = sorted(_view(values, "d"))
    return tuple(ordered[r] for r in ranks)


class Grouping(NamedTuple):
    """Rows per (device, name) code pair: ``order[starts[g]:starts[g + 1]]`` are group g's rows."""

    keys: list[GroupKey]
    order: bytes
    starts: list[int]


def group_rows(columns: TaskColumns, skip: int, *, accelerated: bool | None = None) -> Grouping:
    """The rows of *columns* per (device, kernel), *skip* leading rows of each dropped."""
    fast = accelerated_default() if accelerated is None else accelerated
    fn = _C[0] if fast and _C is not None else _group_rows_py
    keys, order, starts = fn(
        columns._cols[2], columns._cols[3], len(columns.devices), len(columns.names), skip
    )
    return Grouping(keys, order, starts)


def take(
    values: bytes | bytearray,
    order: bytes,
    start: int,
    stop: int,
    *,
    drop_nan: bool = False,
    accelerated: bool | None = None,
) -> bytes:
    """``values[order[i]]`` (doubles) for i in [start, stop), NaN left out when *drop_nan*."""
    fast = accelerated_default() if accelerated is None else accelerated
    fn = _C[1] if fast and _C is not None else _take_py
    out: bytes = fn(values, order, start, stop, drop_nan)
    return out


def order_stats(
    values: bytes | bytearray, ranks: Sequence[int], *, accelerated: bool | None = None
) -> tuple[float, ...]:
    """``sorted(values)[r]`` for every rank in *ranks* (ascending), exactly (see the module doc)."""
    fast = accelerated_default() if accelerated is None else accelerated
    fn = _C[2] if fast and _C is not None else _order_stats_py
    out: tuple[float, ...] = fn(values, tuple(ranks))
    return out


def exact_sum(values: bytes, *, accelerated: bool | None = None) -> float:
    """``math.fsum`` of *values* (doubles): in C when built (the same algorithm, the same value)."""
    fast = accelerated_default() if accelerated is None else accelerated
    if fast and _C is not None:
        total: float | None = _C[3](values)
        if total is not None:
            return total
    return math.fsum(_view(values, "d"))


def quantile_ranks(n: int, qs: Iterable[float]) -> list[int]:
    """The ranks :func:`asc_aprof._plans._stats.quantile` reads for each q, ascending, without repeats."""
    ranks: set[int] = set()
    for q in qs:
        lo = math.floor((n - 1) * q)
        ranks.update((lo, min(lo + 1, n - 1)))
    return sorted(ranks)


def quantiles_of(values: bytes, qs: Sequence[float], *, extremes: bool = False) -> dict[float, float]:
    """:func:`asc_aprof._plans._stats.quantile` of *values* (doubles, no NaN, not empty) for every q.

    With *extremes*, keys ``-inf`` / ``inf`` also give the minimum / maximum.
    """
    n = len(values) // 8
    wanted = [*qs, *((0.0, 1.0) if extremes else ())]
    ranks = quantile_ranks(n, wanted)
    picked = dict(zip(ranks, order_stats(values, ranks), strict=True))
    out: dict[float, float] = {}
    for q in qs:
        pos = (n - 1) * q
        lo = math.floor(pos)
        hi = min(lo + 1, n - 1)
        out[q] = picked[lo] + (picked[hi] - picked[lo]) * (pos - lo)
    if extremes:
        out[-math.inf] = picked[0]
        out[math.inf] = picked[n - 1]
    return out


def counter_bytes(counters: TaskCounters) -> Mapping[str, bytes]:
    """Every counter column as bytes of doubles (what :func:`take` reads)."""
    return {name: counters._values[name].tobytes() for name in counters.columns}
