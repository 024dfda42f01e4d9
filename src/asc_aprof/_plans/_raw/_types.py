"""What the raw reader hands back: rich task records, a result, or a stated refusal."""

from __future__ import annotations

import bisect
import dataclasses
import enum
import itertools
import math
import operator
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final, NamedTuple, overload

from ..._model._clock import TaskClocks
from ..._model._counters import TaskCounters
from ..._model._errors import AprofError, InvalidArgumentError
from ..._model._join import Level0Join
from ..._model._records import ProfilingTask, new_task
from ._accel import C as _C
from ._accel import active as _accelerated
from ._chunked import empty, to_tuple


class Reader(enum.Enum):
    """How a profiler turns a run that has no exported CSV yet into tasks.

    * ``AUTO`` (default): read the raw data natively; where the raw reader declines, read the
      run's exported CSVs, else run ``msprof.py export summary`` and parse its CSVs;
    * ``RAW``: read natively only; a declined run raises :class:`RawReadDeclined`;
    * ``MSPROF``: the exported CSVs, else ``msprof.py export summary`` first.

    The one reading policy of every reader (:func:`asc_aprof.open_run`).
    """

    AUTO = "auto"
    RAW = "raw"
    MSPROF = "msprof"

    @classmethod
    def of(cls, value: Reader | str) -> Reader:
        try:
            return cls(value)
        except ValueError:
            choices = ", ".join(repr(m.value) for m in cls)
            raise InvalidArgumentError(f"reader must be one of {choices}, got reader={value!r}") from None


class DeclineReason(enum.Enum):
    """Why the raw reader left a run to ``msprof.py`` (the message names the file and value)."""

    #: not a ``PROF_*`` run with ``host/`` and ``device_N/`` folders
    NOT_A_RUN = "not_a_run"
    #: a file the exporter needs is absent (info.json, start_info, clock logs, stars_soc, ...)
    MISSING_FILE = "missing_file"
    #: a raw file this reader has no verified model of (its effect on the export is unknown)
    UNKNOWN_FILE = "unknown_file"
    #: chip (``platform_version``) or driver/collection version not verified against the exporter
    UNKNOWN_PLATFORM = "unknown_platform"
    #: a record type, level or value whose handling was not verified (e.g. FFTS+ subtasks)
    UNKNOWN_RECORD = "unknown_record"
    #: a collection feature whose export was not verified (several devices, task-id wrap, ...)
    UNSUPPORTED = "unsupported"
    #: the exporter's output would depend on unordered state (ties, duplicate keys)
    AMBIGUOUS = "ambiguous"
    #: a file is truncated or inconsistent
    MALFORMED = "malformed"
    #: the exporter would write no op_summary / task_time row
    NO_TASKS = "no_tasks"
    #: the raw reader itself failed (a bug: the message names the exception)
    INTERNAL = "internal"


@dataclasses.dataclass(frozen=True, slots=True)
class Declined:
    """The raw reader's refusal: *reason* says which kind, *message* what exactly."""

    reason: DeclineReason
    message: str

    def __str__(self) -> str:
        return f"{self.reason.value}: {self.message}"


class RawReadDeclined(AprofError):
    """``reader="raw"`` and the raw reader declined the run (``declined`` says why)."""

    def __init__(self, run_dir: object, declined: Declined) -> None:
        self.run_dir = run_dir
        self.declined = declined
        super().__init__(self.message(flags=False))

    def message(self, *, flags: bool) -> str:
        """The one-line message; *flags*: the fix in command-line words (``--reader``)."""
        fix = "--reader auto" if flags else "reader='auto'"
        return (
            f"run {self.run_dir}: the raw reader declined it ({self.declined}); read it with {fix} "
            "(its exported CSVs, else an export with msprof.py)"
        )


class DeclinedError(Exception):
    """Raised inside the reader to stop at the first thing it does not know."""

    def __init__(self, reason: DeclineReason, message: str) -> None:
        super().__init__(message)
        self.declined = Declined(reason, message)


class RawTask(NamedTuple):
    """One task as the exporter's CSV would show it, plus what the CSV rounds away.

    :ivar device: the device (``device_N``)
    :ivar stream_id: stream id (``Stream ID``)
    :ivar task_id: task id (``Task ID``)
    :ivar batch_id: batch id (task-id wrap-around count; always 0 in what is accepted)
    :ivar name: ``Op Name`` (op_summary) or ``kernel_name`` (task_time)
    :ivar type: the type the library reports (level 0: joined from task_time as the CSV path does)
    :ivar csv_type: the type cell of the source CSV (``N/A`` in a level-0 op_summary)
    :ivar duration: ``Task Duration(us)`` as the exporter rounds it (3 decimals)
    :ivar duration_ns: the exporter's unrounded duration in ns (a float of counter arithmetic)
    :ivar start_ns: ``Task Start Time(us)`` as integer ns (local time, exactly the printed value)
    :ivar start_cycles: the task-start system counter value (``stars_soc``)
    :ivar end_cycles: the task-end system counter value
    :ivar block_num: ``Block Num`` (``Block Dim`` on older CANN); None where the run has no
        node_basic_info (task time level 0, where op_summary prints 0)
    :ivar mix_block_num: ``Mix Block Num`` (None where block_num is None)
    """

    device: int
    stream_id: int
    task_id: int
    batch_id: int
    name: str
    type: str
    csv_type: str
    duration: float
    duration_ns: float
    start_ns: int
    start_cycles: int
    end_cycles: int
    block_num: int | None = None
    mix_block_num: int | None = None

    def task(self) -> ProfilingTask:
        """The public record, equal to what ``store_result()`` reads from the exported CSV."""
        return ProfilingTask(self.task_id, self.name, self.type, self.duration, self.device)


class PackedPart(NamedTuple):
    """One device's op_summary rows as ``_cdevice.op_summary(..., 2)`` packs them."""

    rows: object  # the capsule holding the rows (freed with it)
    size: int
    strings: list[str]  # the names and types the rows index
    device: int
    level0: bool


class PackedRows(Sequence[RawTask]):
    """Op_summary rows packed in C, device after device: 64 bytes a row where a :class:`RawTask`
    and its fields take some 400. A sequence of RawTask records, each made when asked for (equal
    to the record the unpacked decode makes); :meth:`records` makes a slice of them, or their
    public records, in one bounded C call. Made by a packed decode (``decode_run(...,
    packed=True)``) for a reader that takes the tasks a slice at a time (``iter_tasks()``)."""

    __slots__ = ("_ends", "_parts")

    def __init__(self, parts: Sequence[PackedPart]) -> None:
        self._parts = tuple(parts)
        self._ends = tuple(itertools.accumulate(part.size for part in self._parts))

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    @overload
    def __getitem__(self, index: int) -> RawTask: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[RawTask, ...]: ...
    def __getitem__(self, index: int | slice) -> RawTask | tuple[RawTask, ...]:
        if isinstance(index, slice):
            lo, hi, step = index.indices(len(self))
            if step != 1:
                return tuple(self.records(0, len(self)))[index]
            return tuple(self.records(lo, max(lo, hi)))
        at = operator.index(index)
        if at < 0:
            at += len(self)
        if not 0 <= at < len(self):
            raise IndexError("PackedRows index out of range")
        found: list[RawTask] = self.records(at, at + 1)
        return found[0]

    def __iter__(self) -> Iterator[RawTask]:
        for lo in range(0, len(self), _PACKED_SLICE):
            yield from self.records(lo, min(lo + _PACKED_SLICE, len(self)))

    def records(self, start: int, stop: int, *, public: bool = False) -> list[Any]:
        """RawTask records of rows ``[start:stop]`` (0 <= start <= stop <= len), or with *public*
        their :class:`ProfilingTask` records (``RawTask.task()``)."""
        return self._made(start, stop, 1 if public else 0)

    def start_cycles(self, start: int, stop: int) -> list[int]:
        """The ``start_cycles`` of rows ``[start:stop]``."""
        return self._made(start, stop, 2)

    @property
    def parts(self) -> tuple[tuple[int, int, int], ...]:
        """(device, first row, end row) of each device's rows, in order."""
        begins = (0, *self._ends[:-1])
        return tuple((p.device, b, e) for p, b, e in zip(self._parts, begins, self._ends, strict=True))

    def _made(self, start: int, stop: int, kind: int) -> list[Any]:
        c = _C
        assert c is not None  # (only the C loops pack rows)
        out: list[Any] = []
        begin = 0
        cls = ProfilingTask if kind == 1 else RawTask
        for part, end in zip(self._parts, self._ends, strict=True):
            if start < end and stop > begin:
                lo, hi = max(start, begin) - begin, min(stop, end) - begin
                got = c.packed_rows(part.rows, part.strings, part.device, part.level0, lo, hi, cls, kind)
                out = got if not out else out + got
            begin = end
        return out

    def __repr__(self) -> str:
        return f"PackedRows({len(self)} rows, {len(self._parts)} devices)"


#: Rows made per call when a PackedRows is iterated
_PACKED_SLICE: Final = 2048


@dataclasses.dataclass(frozen=True, slots=True)
class ClockTable:
    """A device's ``FreqParse`` rows, sorted by counter as the exporter reads them.

    :ivar rows: (system counter, MHz), stably sorted by counter; empty where the run has no
        clock data (then every clock is NaN)
    :ivar rated_mhz: info.json ``aic_frequency`` (the clock before the first row)
    """

    rows: tuple[tuple[int, float], ...] = ()
    rated_mhz: float = math.nan
    _counters: tuple[int, ...] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_counters", tuple(r[0] for r in self.rows))

    @property
    def usable(self) -> bool:
        """Whether the exporter uses the rows (some, none at 0 MHz)."""
        return bool(self.rows) and all(mhz != 0 for _, mhz in self.rows)

    def mhz_at(self, counter: int) -> float:
        """The clock in effect at system counter *counter* (NaN without usable rows)."""
        if not self.usable:
            return math.nan
        at = bisect.bisect_right(self._counters, counter)
        return self.rows[at - 1][1] if at else self.rated_mhz

    def mhz_of(self, counters: Sequence[int]) -> list[float]:
        """:meth:`mhz_at` of each counter."""
        if not self.usable:
            return [math.nan] * len(counters)
        if len(set(mhz for _, mhz in self.rows)) == 1 and self.rows[0][1] == self.rated_mhz:
            return [self.rated_mhz] * len(counters)  # one clock throughout
        return [self.mhz_at(c) for c in counters]

    def changes(self) -> bool:
        """Whether any row's clock differs from the rated one (where a PMU time would differ)."""
        return self.usable and any(mhz != self.rated_mhz for _, mhz in self.rows)


#: A RawTask's ProfilingTask fields, in ProfilingTask's order (see :meth:`RawTask.task`).
_PUBLIC_FIELDS: Final = operator.itemgetter(2, 4, 5, 7, 0)

#: One device's tasks and, when read, their counters.
DeviceShare = tuple[tuple[ProfilingTask, ...], TaskCounters | None]

#: Records made per call by :meth:`RawResult.device_tasks` (a few milliseconds of C work).
_DEVICE_SLICE: Final = 16384

#: Which exported CSV the tasks stand for (the library reads op_summary when it exists).
SOURCE_OP_SUMMARY = "op_summary"
SOURCE_TASK_TIME = "task_time"


@dataclasses.dataclass(frozen=True, slots=True)
class RawResult:
    """A run read natively.

    :ivar tasks: in the order of the exporter's merged CSV (devices in folder-name order, each in
        start order); a tuple, or from a packed decode :class:`PackedRows`
    :ivar source: ``op_summary``, or ``task_time`` when the exporter would write no op_summary
    :ivar level0: the run used task time level 0 (types joined from task_time)
    :ivar task_time: when asked for (``with_task_time``), every row of the exporter's task_time
        CSV, control rows included, in its order; else None
    :ivar counters: when asked for (``counters``), the PMU counters the CSV path reads from
        op_summary, aligned with :attr:`tasks` (no column where op_summary has none: task_time
        as the source, or a run without PMU records); else None
    :ivar clocks: each device's AI Core clock rows (devices with lpm files only; see ``._freq``)
    :ivar level0_join: how the library's level-0 join typed op_summary's ``N/A`` rows, as the CSV
        reader records it (None: no join, the types are op_summary's or the source is task_time)
    """

    tasks: tuple[RawTask, ...] | PackedRows
    source: str
    level0: bool
    task_time: tuple[RawTask, ...] | None = None
    counters: TaskCounters | None = None
    clocks: Mapping[int, ClockTable] = dataclasses.field(default_factory=dict)
    level0_join: Level0Join | None = None

    def aic_mhz(self) -> list[float]:
        """The AI Core clock (MHz) in effect at each task's start, aligned with :attr:`tasks`, as
        the exporter's ``freq.db`` gives it; NaN where the device has no clock data."""
        out: list[float] = []
        tasks = self.tasks
        if isinstance(tasks, PackedRows):
            for device, begin, end in tasks.parts:
                table = self.clocks.get(device)
                if table is None:
                    out += itertools.repeat(math.nan, end - begin)
                    continue
                starts: list[int] = []
                for lo in range(begin, end, _DEVICE_SLICE):
                    starts += tasks.start_cycles(lo, min(lo + _DEVICE_SLICE, end))
                got = table.mhz_of(starts)
                out += got
                empty(starts, got)
            return out
        at = 0
        while at < len(tasks):  # runs of one device (devices are concatenated)
            device = tasks[at].device
            stop = at
            while stop < len(tasks) and tasks[stop].device == device:
                stop += 1
            table = self.clocks.get(device)
            # (no slice of the tuple: copying and dropping a run's worth of references are one
            # step each, milliseconds that a thread waiting for the interpreter waits out)
            if table is None:
                out += itertools.repeat(math.nan, stop - at)
            else:
                starts = [tasks[i].start_cycles for i in range(at, stop)]
                got = table.mhz_of(starts)
                out += got
                empty(starts, got)  # (in steps too)
            at = stop
        return out

    def profiling_tasks(self, start: int | None = None, stop: int | None = None) -> list[ProfilingTask]:
        """The public records of ``tasks[start:stop]`` (default: every task), as
        :meth:`RawTask.task` makes them. A caller on an event loop can build them in slices of a
        few thousand, so that no single call holds the interpreter long."""
        tasks = self.tasks
        lo, hi, _ = slice(start, stop).indices(len(tasks))
        hi = max(lo, hi)
        if isinstance(tasks, PackedRows):
            found_public: list[ProfilingTask] = tasks.records(lo, hi, public=True)
            return found_public
        c = _accelerated()
        if c is not None and isinstance(tasks, tuple):
            found: list[ProfilingTask] = c.public_tasks(tasks, ProfilingTask, lo, hi)
            return found
        picked = tasks if (lo, hi) == (0, len(tasks)) else tasks[lo:hi]
        # RawTask.task() of each, built without a Python frame: (task_id, name, type, duration, device)
        return list(map(new_task, map(_PUBLIC_FIELDS, picked)))

    def device_tasks(self) -> dict[int | None, DeviceShare]:
        """Per device (in order of appearance): its tasks and, when read, their counters.

        The records are :meth:`profiling_tasks`' (made in C where built: left out of the cyclic
        garbage collector, so a later collection does not walk every task of the run), made a
        slice at a time (each slice one call: threads switch between them)."""
        tasks = self.tasks
        if isinstance(tasks, PackedRows):  # (devices one after another, no counters)
            assert self.counters is None, "rows are packed where no counter is read"
            shares: dict[int | None, DeviceShare] = {}
            for device, begin, end in tasks.parts:
                if begin == end:
                    continue  # (a device without a task has no share, as below)
                made: list[ProfilingTask] = []
                for lo in range(begin, end, _DEVICE_SLICE):
                    made += tasks.records(lo, min(lo + _DEVICE_SLICE, end), public=True)
                shares[device] = (to_tuple(made), None)
                empty(made)
            return shares
        indexes: dict[int | None, list[int]] = {}
        for index, raw in enumerate(self.tasks):
            indexes.setdefault(raw.device, []).append(index)
        public: list[ProfilingTask] = []
        for start in range(0, len(self.tasks), _DEVICE_SLICE):
            public += self.profiling_tasks(start, start + _DEVICE_SLICE)
        counters = self.counters
        # (to_tuple: in steps, and in C left out of the collector, whose next pass would
        # otherwise visit every task of the tuple: 13 ms for two such tuples of 500,000)
        shares = {
            device: (
                to_tuple([public[i] for i in picked]),
                counters.select(picked) if counters is not None else None,
            )
            for device, picked in indexes.items()
        }
        empty(public, *indexes.values())  # (dropped whole: 11 ms for 500,000 tasks, see ._chunked)
        return shares

    def device_clocks(self) -> dict[int | None, TaskClocks]:
        """Per device with clock data: :meth:`aic_mhz` of its tasks and its rated clock (info.json
        ``aic_frequency``), aligned with :meth:`device_tasks`' tasks."""
        if not self.clocks:
            return {}
        clocks: dict[int | None, list[float]] = {}
        every = self.aic_mhz()
        tasks = self.tasks
        if isinstance(tasks, PackedRows):
            for device, begin, end in tasks.parts:
                mine = clocks.setdefault(device, [])
                for lo in range(begin, end, _DEVICE_SLICE):
                    mine += every[lo : min(lo + _DEVICE_SLICE, end)]
        else:
            for raw, mhz in zip(tasks, every, strict=True):
                clocks.setdefault(raw.device, []).append(mhz)
        empty(every)
        return {
            device: TaskClocks(to_tuple(mhz), _positive(self.clocks[device].rated_mhz))
            for device, mhz in clocks.items()
            if device is not None and device in self.clocks
        }

    def split_by_device(self) -> tuple[dict[int | None, DeviceShare], dict[int | None, TaskClocks]]:
        """:meth:`device_tasks` and :meth:`device_clocks`, for the shared result of a window."""
        return self.device_tasks(), self.device_clocks()

    def by_device(self) -> dict[int | None, tuple[ProfilingTask, ...]]:
        out: dict[int | None, list[ProfilingTask]] = {}
        for raw in self.tasks:
            out.setdefault(raw.device, []).append(raw.task())
        return {device: to_tuple(tasks) for device, tasks in out.items()}


def _positive(mhz: float) -> float:
    """*mhz* where it is a clock (> 0), else NaN (unknown)."""
    return mhz if mhz > 0 else math.nan


class WholeDecodeNeeded(Exception):
    """A lean decode (:func:`decode_run`'s *lean*) let go of what it turns out to need: no
    device has an op_summary row (task_time stands in then), or a level-1 GE task's type is
    ``N/A`` (the level-0 join would type its row). Decode again with ``lean=False``: neither
    is seen in real level-1 runs, and runs without a kernel row are small; or two host tasks
    share their ids where the host files were already let go of (a run declined then); or the
    lean host walk met what it does not cover (see ``_host.LeanWalk``): a decline among them,
    which the whole decode raises in its order."""
