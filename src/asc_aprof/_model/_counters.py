"""Per-task PMU counters: which CSV columns are counters, and the columnar store results carry.

Theory of operation
-------------------
op_summary ends with the AI Core PMU columns of the metric group the collection asked for
(``aic_mac_ratio``, ``aiv_vec_time(us)``, ``aiv_main_mem_read_bw(GB/s)``, ...; the names depend
on the group and the chip). Rather than listing every group's names, a column is a counter when
it is *not* one of the columns that describe a task (:data:`TASK_COLUMNS`: ids, names, types,
times, block dims, shapes, Context ID; those of op_summary, task_time and torch_npu's
kernel_details). So a group, chip or CANN version this module has never seen still has all its
counters read, keyed by the header's own name, unit included.

The store is columnar: one ``array('d')`` per column, aligned with the result's tasks, 8 bytes a
task and column, and no object per task or value (a million tasks with the 25 PipeUtilization
counters of a 910B: 200 MB). A missing value -- the CSV's ``N/A`` (AI CPU rows, no PMU match) or
a task whose file had no such column -- is stored as NaN and read back as None; the parser
refuses non-finite counter cells, so NaN never stands for a measured value. The arrays can be
handed out as read-only ``memoryview`` s (``format 'd'``), which numpy, polars and pyarrow wrap
without a copy.
"""

from __future__ import annotations

import math
import operator
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

#: The value stored for a missing counter (``N/A``, or no such column in the task's file).
NAN: Final = math.nan
_NAN_ROW: Final = array("d", [NAN])

#: Columns that describe a task rather than count PMU events: op_summary's (every CANN version),
#: task_time's, and torch_npu kernel_details'. Every other column is a counter.
TASK_COLUMNS: Final = frozenset(
    {
        # op_summary
        "Device_id",
        "Model Name",
        "Model ID",
        "Task ID",
        "Stream ID",
        "Infer ID",
        "Op Name",
        "OP Type",
        "OP State",
        "Task Type",
        "Task Start Time",
        "Task Start Time(us)",
        "Task Duration(us)",
        "Task Wait Time(us)",
        "Block Dim",
        "Block Num",
        "Mix Block Dim",
        "Mix Block Num",
        "HF32 Eligible",
        "Input Shapes",
        "Input Data Types",
        "Input Formats",
        "Output Shapes",
        "Output Data Types",
        "Output Formats",
        "Context ID",
        # torch_npu kernel_details
        "Step Id",
        "Name",
        "Type",
        "Accelerator Core",
        "Start Time(us)",
        "Duration(us)",
        "Wait Time(us)",
        # task_time
        "kernel_name",
        "kernel_type",
        "stream_id",
        "task_id",
        "task_time(us)",
        "task_start(us)",
        "task_stop(us)",
        "task_start(ns)",
        "task_stop(ns)",
    }
)


def counter_indexes(header: Sequence[str]) -> tuple[int, ...]:
    """Indexes of the counter columns of *header*, in file order (a repeated name: its first)."""
    seen: set[str] = set()
    out = []
    for index, name in enumerate(header):
        if name and name not in TASK_COLUMNS and name not in seen:
            seen.add(name)
            out.append(index)
    return tuple(out)


def _value(x: float) -> float | None:
    return None if x != x else x


class TaskCounters:
    """The PMU counters of a result's tasks: one column per CSV counter column, aligned with the tasks.

    ``counters.row(i)`` is task *i*'s counters as a dict (header name -> float, or None for
    ``N/A``); ``counters.column(name)`` one column as a list; ``counters.values(name)`` the same
    column as a read-only ``memoryview`` of doubles (NaN for None) for numpy / polars / pyarrow
    without a copy. Column names are the header's, units included (``aiv_vec_ratio``,
    ``aiv_time(us)``, ``aiv_main_mem_read_bw(GB/s)``). Immutable; equal when the columns, their
    order and every value (None for None) are equal.
    """

    __slots__ = ("_length", "_values")

    _values: dict[str, array[float]]
    _length: int

    def __init__(
        self, columns: Mapping[str, Sequence[float | None]] | None = None, *, length: int | None = None
    ) -> None:
        """Counters from plain columns, each *length* long (None for no value).

        *length* (the number of tasks) may be left out when there is a column to tell it.
        """
        values: dict[str, array[float]] = {}
        for name, column in (columns or {}).items():
            if length is None:
                length = len(column)
            elif len(column) != length:
                raise ValueError(f"counter column {name!r} has {len(column)} values, not {length}")
            values[str(name)] = array("d", (NAN if v is None else float(v) for v in column))
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "_length", length or 0)

    @classmethod
    def _wrap(cls, values: dict[str, array[float]], length: int) -> TaskCounters:
        """Take ownership of *values* (arrays of *length* doubles, NaN = None) without a copy."""
        self = cls.__new__(cls)
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "_length", length)
        return self

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("TaskCounters is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("TaskCounters is immutable")

    # -- reading ------------------------------------------------------------------------------
    @property
    def columns(self) -> tuple[str, ...]:
        """The counter columns, in file order (header names, units included)."""
        return tuple(self._values)

    def __len__(self) -> int:
        """How many tasks (not columns)."""
        return self._length

    def __contains__(self, name: object) -> bool:
        return name in self._values

    def column(self, name: str) -> list[float | None]:
        """Every task's value of column *name* (None for ``N/A``).

        :raises KeyError: naming the columns there are, when *name* is not one
        """
        return [None if x != x else x for x in self._array(name)]

    def values(self, name: str) -> memoryview:
        """Column *name* as a read-only ``memoryview`` of doubles (format ``'d'``; NaN for None)."""
        return memoryview(self._array(name)).toreadonly()

    def row(self, index: int) -> dict[str, float | None]:
        """Task *index*'s counters, in column order (None for ``N/A``)."""
        if not -self._length <= index < self._length:
            raise IndexError(f"task index {index} out of range for {self._length} tasks")
        return {name: _value(column[index]) for name, column in self._values.items()}

    def rows(self) -> Iterator[dict[str, float | None]]:
        """Every task's counters as a dict, in task order."""
        names = tuple(self._values)
        if not names:  # no PMU column: an empty dict per task
            for _ in range(self._length):
                yield {}
            return
        for row in zip(*self._values.values(), strict=True):
            yield dict(zip(names, [None if x != x else x for x in row], strict=True))

    def _array(self, name: str) -> array[float]:
        try:
            return self._values[name]
        except KeyError:
            shown = ", ".join(self._values) or "none: the CSV had no PMU column"
            raise KeyError(f"no counter column {name!r} (columns: {shown})") from None

    # -- deriving -----------------------------------------------------------------------------
    def select(self, indexes: Iterable[int]) -> TaskCounters:
        """The counters of the tasks at *indexes*, in that order."""
        picked = list(indexes)
        if len(picked) < 2:  # itemgetter returns a tuple only for two indexes or more
            return TaskCounters._wrap(
                {name: array("d", [column[i] for i in picked]) for name, column in self._values.items()},
                len(picked),
            )
        get = operator.itemgetter(*picked)  # the picking at C speed
        return TaskCounters._wrap(
            {name: array("d", get(column)) for name, column in self._values.items()}, len(picked)
        )

    @staticmethod
    def concat(parts: Iterable[TaskCounters | None], lengths: Iterable[int] | None = None) -> TaskCounters:
        """*parts* one after the other; a column missing from a part is None for its tasks.

        A None part stands for tasks without counters; give *lengths* (the task count of every
        part) when there are any.
        """
        builder = CounterBuilder()
        sizes = iter(lengths) if lengths is not None else None
        for part in parts:
            size = next(sizes) if sizes is not None else None
            if part is None:
                if size is None:
                    raise ValueError("TaskCounters.concat: a None part needs lengths=")
                builder.pad(size)
            else:
                if size is not None and size != len(part):
                    raise ValueError(f"TaskCounters.concat: a part has {len(part)} tasks, not {size}")
                builder.extend(part)
        return builder.build()

    # -- serialisation and comparison -----------------------------------------------------------
    def to_dict(self) -> dict[str, list[float | None]]:
        """``{column: [value or None, ...]}`` in column order (the result format's ``counters``)."""
        return {name: self.column(name) for name in self._values}

    @classmethod
    def from_dict(cls, data: Mapping[str, Sequence[float | None]], length: int | None = None) -> TaskCounters:
        """Rebuild what :meth:`to_dict` wrote (*length*: the task count, for a dict without columns)."""
        return cls(data, length=length)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TaskCounters):
            return NotImplemented
        if self._length != other._length or list(self._values) != list(other._values):
            return False
        for name, mine in self._values.items():
            theirs = other._values[name]
            if mine.tobytes() == theirs.tobytes():
                continue
            if any(a != b and not (a != a and b != b) for a, b in zip(mine, theirs, strict=True)):
                return False
        return True

    def __hash__(self) -> int:
        return hash((self._length, tuple(self._values)))

    def __repr__(self) -> str:
        shown = ", ".join(list(self._values)[:4]) + (", ..." if len(self._values) > 4 else "")
        return f"TaskCounters({self._length} tasks, {len(self._values)} columns: {shown})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self._values, self._length))


def _rebuild(values: dict[str, array[float]], length: int) -> TaskCounters:
    return TaskCounters._wrap(values, length)


class CounterBuilder:
    """Appends counter batches (columns may differ between batches) into one :class:`TaskCounters`.

    Each column is one array that grows by a quarter when full (NaN in the room not yet used) and
    is cut to size in :meth:`build`. Measured on a million tasks with 25 columns: growing by
    ``array.extend`` alone (CPython adds 1/16) made the allocator copy the 25 side-by-side arrays
    over and over (0.4 s); keeping the batches and joining them at the end held both at once (2x
    the memory, 585 B a task at the peak); doubling left up to half the room unused (535 B). A
    quarter copies each column about 5 times in all (0.2 s) and peaks at 410-435 B a task (the
    tasks' 177 B and the counters' 200 B included; benchmarks/RESULTS.md, section 7).
    """

    __slots__ = ("_length", "_values")

    def __init__(self) -> None:
        self._values: dict[str, array[float]] = {}  # each at least _length long (the rest: room)
        self._length = 0

    def __len__(self) -> int:
        return self._length

    def _room(self, n: int) -> None:
        """Make every column hold at least *n* values."""
        for column in self._values.values():
            if len(column) < n:
                column.extend(_NAN_ROW * (max(n, len(column) + len(column) // 4) - len(column)))

    def extend(self, part: TaskCounters) -> None:
        """Append *part*'s tasks (its arrays are copied, never kept)."""
        n = len(part)
        start, end = self._length, self._length + n
        values = self._values
        for name in part._values:  # its columns, even without a task (a header-only file)
            if name not in values:
                values[name] = _NAN_ROW * (len(next(iter(values.values()))) if values else 0)
        if not n:
            return
        self._room(end)
        for name, column in values.items():
            piece = part._values.get(name)
            if piece is not None:
                column[start:end] = piece
        self._length = end

    def pad(self, n: int) -> None:
        """Append *n* tasks without counters (NaN: the room is NaN already)."""
        if n:
            self._room(self._length + n)
            self._length += n

    def build(self) -> TaskCounters:
        """The counters appended so far (the builder starts over empty)."""
        values, length = self._values, self._length
        self._values, self._length = {}, 0
        for column in values.values():
            del column[length:]
        return TaskCounters._wrap(values, length)
