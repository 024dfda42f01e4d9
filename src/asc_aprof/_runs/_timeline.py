"""Tasks with their exact start times, streams and counters: what a timeline is drawn from.

Theory of operation
-------------------
The default read (``store_result``, ``iter_tasks``, ``summary``) keeps five fields per task and
runs the C row loop. A timeline needs more: when each task started, on which stream, and what
the hardware counters said. :func:`read_timeline` asks the run reader for a *timed* read (the
pure row loop keeping those cells per task, see :mod:`asc_aprof._runs._csv`), so only code that
draws a timeline pays for it; level-0 runs get their task types joined in exactly as in the
default read.

Start cells carry 19 significant digits (Unix-epoch microseconds with three decimals): a float
loses the last one, so they become integer nanoseconds by decimal arithmetic and stay integers.
Durations are floats of microseconds with three decimals in every msprof layout, so
``round(duration * 1000)`` is their exact nanosecond count.

Counters are every op_summary column that is not one of the descriptive columns listed in
:data:`DESCRIPTIVE_COLUMNS` (ids, names, types, times, shapes, formats), keyed by the header name
with the unit as in the header (``aiv_vec_ratio``, ``aic_mte2_time(us)``,
``aiv_main_mem_read_bw(GB/s)``, 310B's ``vec_exe_ratio``); a cell that is not a number (``N/A``)
is None. task_time files have no counters.

The AI Core clock at each task's start (``aic_mhz``, MHz) comes from the raw reader
(:meth:`~asc_aprof._plans._raw.RawResult.aic_mhz`, what the real exporter's ``freq.db`` says);
exported CSVs carry no clock, so a timeline read from them has NaN there.

Cases label what a sweep ran: a run holds one collection window, which several devices can share
with a different case each, so a :class:`Timeline` maps devices to case labels.
"""

from __future__ import annotations

import dataclasses
import math
import os
import types
from collections.abc import Iterable, Mapping, Sequence
from itertools import repeat
from pathlib import Path
from typing import NamedTuple

from .._cann._layout import CsvFile
from .._model._counters import counter_indexes
from .._model._records import ProfilingTask
from .._plans._raw import RawResult
from ._csv import cell_ns, iter_timed_file_tasks, start_unit_ns
from ._info import RunInfo

_new_tuple = tuple.__new__


def counter_columns(header: Sequence[str]) -> tuple[str, ...]:
    """The counter columns of a CSV header (the parser's rule: every column not describing the
    task, :data:`asc_aprof._model._counters.TASK_COLUMNS`), in header order."""
    return tuple(header[i] for i in counter_indexes(header))


class TimedTask(NamedTuple):
    """A task with what a timeline needs.

    :ivar task: the task as every other API gives it
    :ivar start_ns: its start, integer nanoseconds since the Unix epoch (exact), or None when the
        CSV has no start column
    :ivar stream: its stream id, or None when the CSV has none
    :ivar counters: the counter cells by column name (None for ``N/A``); None when not read
    :ivar aic_mhz: the AI Core clock in effect at its start (MHz), as the run's ``lpmInfoConv`` /
        ``lpmFreqConv`` data and the real exporter's ``freq.db`` give it; NaN where unknown (no
        clock data, or a timeline read from CSVs). Not compared: a task read from the raw data
        equals the same task read from its exported CSVs, which carry no clock (as
        :class:`~asc_aprof.TaskColumns` equality ignores its clocks)
    """

    task: ProfilingTask
    start_ns: int | None
    stream: int | None
    counters: Mapping[str, float | None] | None = None
    aic_mhz: float = math.nan

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TimedTask):
            return self[:4] == other[:4]
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        if isinstance(other, TimedTask):
            return self[:4] != other[:4]
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self[:4])

    @property
    def duration_ns(self) -> int:
        """The duration in integer nanoseconds (exact for msprof's three decimals of µs)."""
        return round(self.task.duration * 1000)


@dataclasses.dataclass(frozen=True, slots=True)
class Timeline:
    """The timed tasks of one exported run, and the case each device ran (if labelled).

    :ivar run_id: the ``PROF_*`` directory name
    :ivar tasks: the tasks in file order (start order per device)
    :ivar cases: case label per device (a read-only mapping; empty when not labelled)
    :ivar info: what the run says about its collection (chip, level, metric group, start, source
        read), where it was read from a run on disk
    """

    run_id: str
    tasks: tuple[TimedTask, ...]
    cases: Mapping[int | None, str] = dataclasses.field(default_factory=dict)
    #: not compared: two timelines of the same tasks are equal whichever source gave them
    info: RunInfo | None = dataclasses.field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "cases", types.MappingProxyType(dict(self.cases)))

    def case(self, device: int | None) -> str | None:
        """The case *device* ran in this run, or None when not labelled."""
        return self.cases.get(device)

    @property
    def devices(self) -> tuple[int | None, ...]:
        """The devices with tasks, in order of appearance."""
        return tuple(dict.fromkeys(t.task.device for t in self.tasks))


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)  # float() ignores the surrounding whitespace
    except ValueError:
        try:
            value = float(text.strip().strip('"'))
        except ValueError:
            return None  # N/A
    return value if value - value == 0 else None  # finite only


def _counters(names: tuple[str, ...], cells: Sequence[str | None]) -> dict[str, float | None]:
    """The counter cells as numbers (None for N/A): one C-level pass when they all are numbers."""
    try:
        values = tuple(map(float, cells))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return {name: _number(cell) for name, cell in zip(names, cells, strict=True)}
    if not math.isfinite(sum(values)):
        return {name: _number(cell) for name, cell in zip(names, cells, strict=True)}
    return dict(zip(names, values, strict=True))


def _stream(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text.strip().strip('"'))
    except ValueError:
        return None


def _cases_of(
    case: str | Mapping[int | None, object] | None, devices: Iterable[int | None]
) -> dict[int | None, str]:
    if case is None:
        return {}
    if isinstance(case, Mapping):
        return {device: str(label) for device, label in case.items()}
    return {device: str(case) for device in devices}


def csv_timeline(
    run: Path,
    files: Sequence[CsvFile],
    *,
    case: str | Mapping[int | None, object] | None = None,
    counters: bool = True,
) -> Timeline:
    """The timed tasks of the exported CSVs *files* of *run* (see the module doc for what is exact).

    :raises ParseError: for a malformed CSV (file and line named)
    """
    timed: list[TimedTask] = []
    append = timed.append
    extra = counter_columns if counters else None
    for tasks, kept, columns in iter_timed_file_tasks(files, extra):
        unit = start_unit_ns(columns)
        names = counter_columns(columns) if counters else ()
        for task, cells in zip(tasks, kept, strict=True):
            stream = cells[0]
            try:
                stream_id: int | None = int(stream)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                stream_id = _stream(stream)
            values = _counters(names, cells[2:]) if names else None
            # tuple.__new__: a NamedTuple's own __new__ costs as much again per task
            append(_new_tuple(TimedTask, (task, cell_ns(cells[1], unit), stream_id, values, math.nan)))
    run_id = run.resolve().name
    return Timeline(run_id, tuple(timed), _cases_of(case, dict.fromkeys(t.task.device for t in timed)))


def raw_timeline(
    run: str | os.PathLike[str], raw: RawResult, *, case: str | Mapping[int | None, object] | None = None
) -> Timeline:
    """The timeline of a run the raw reader read (*raw*): what :func:`csv_timeline` reads from
    its CSVs once exported (the same tasks, starts and streams), with the PMU counters when the
    raw reader read them (``RawResult.counters``) and each task's AI Core clock."""
    rows: Iterable[Mapping[str, float | None] | None] = (
        raw.counters.rows() if raw.counters is not None and raw.counters.columns else repeat(None)
    )
    clocks: Iterable[float] = raw.aic_mhz() if raw.clocks else repeat(math.nan)
    timed = tuple(
        _new_tuple(TimedTask, (t.task(), t.start_ns, t.stream_id, row, mhz))
        for t, row, mhz in zip(raw.tasks, rows, clocks, strict=False)
    )
    run_id = Path(run).resolve().name
    return Timeline(run_id, timed, _cases_of(case, dict.fromkeys(t.task.device for t in timed)))
