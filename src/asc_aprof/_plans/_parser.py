"""Sans-IO incremental parser for msprof ``op_summary`` / ``task_time`` CSVs.

Theory of operation
-------------------
:class:`TaskParser` takes bytes (:meth:`TaskParser.feed`, any split) and gives back
:class:`ProfilingTask` lists; it never opens a file, starts a thread or touches an event loop, so
the sync facade, the async engine and the benchmarks all drive the same object.

Bytes are cut at the last ``\\n`` of what has arrived; the incomplete tail waits for the next
feed (bounded by ``max_line_length``), so a multi-byte UTF-8 character or a ``\\r\\n`` split across
feeds is never mis-decoded. The first line is the header: columns are looked up by name with
aliases (op_summary, task_time, torch_npu kernel_details; Block Dim/Num and start-time drift do
not matter because only id, name, type, duration and device are read).

Quoting follows one rule, RFC 4180's, for counting fields and for splitting them (header and
data rows alike): a field is either unquoted (no ``"`` in it) or quoted (it starts with ``"``,
ends with the ``"`` right before the next comma or the line end, and doubles every ``"``
inside). Any other ``"`` -- inside an unquoted field, or text after a closing quote -- makes the
row malformed: a :class:`ParseError` naming the file and line, never a row split one way and
counted another (which once let an ``IndexError`` escape, or shifted a row's columns). Real
msprof files quote only cells with commas or quotes in them (a shape cell holding ``"8,2048"``,
quotes included, is written triple-quoted), which this rule reads exactly as :mod:`csv` does.

Each data line is split with ``str.split(",", k)`` where ``k`` covers the columns we read. That
is exact when no ``"`` occurs before the k-th comma (msprof quotes only shape cells, which come
later); otherwise the quoted line is split by the rule above. The field count is checked on
every row: splitting at ``"`` gives the text outside and inside quotes in turn; the rule holds
when every outside piece between quoted ones is empty (an escaped ``""``) or starts and ends
with a comma, and the fields are the commas outside quotes plus one. A truncated or corrupt row
is a :class:`ParseError` naming the line, never a silently shifted one. Quoted fields with
embedded newlines do not occur in msprof output and are reported as malformed.

A duration must be a finite number: ``nan``, ``inf`` and values beyond the float range (``1e309``)
are refused with a :class:`ParseError` like any other non-numeric duration (msprof never writes
them; a NaN in a median makes it depend on the row order). ``N/A`` is the one non-number that is
skipped, with its reason counted.

:meth:`TaskParser.feed` takes any bytes-like object (``bytes``, ``bytearray``, ``memoryview``) and
``max_line_length`` any real number of characters (a float is rounded down; ``inf`` means no
limit), identically on the pure and the accelerated path.

Rows that are not tasks are counted, not dropped silently: ``PROFILING_ENABLE`` /
``PROFILING_DISABLE`` control rows and rows whose duration is ``N/A`` land in
:attr:`TaskParser.skipped` with the reason, so ``len(tasks) + sum(skipped.values())`` equals the
number of data rows. After an error the parser is poisoned: every later call raises again.

C accelerator
-------------
The pure-Python row loop (``_rows``) is the reference. On a 1,000,000-row op_summary it ran at
3.4 µs/row, 3.5x polars' time, ~18 % of it in the cyclic GC: ``ProfilingTask`` was a NamedTuple
subclass (a slotted dataclass now) and CPython untracks only exact tuples, so every task stayed
tracked and each full collection walks every task parsed so far, which stalled the event loop
~150 ms near a million tasks (benchmarks/RESULTS.md, sections 1 and 3). The optional extension
``_cparser`` (built at install when a compiler is there; ``ACCELERATED`` says whether new
parsers use it, and ``ASC_APROF_PURE_PYTHON=1`` or ``TaskParser(accelerated=False)`` turns it
off) runs the row loop on the undecoded complete-lines region of each feed.

Its contract: results are identical to the pure path for every input -- tasks, ``skipped``,
``data_rows``, and errors with their file and line. C handles only the plain case (no ``"`` in
the first k fields, quotes after them that follow the quoting rule, the right field count, plain
finite numbers, valid UTF-8 name and type, control rows); for any other line it stops at that
line and Python decodes it and runs the pure path's code on it (``_lines``: the length check in
characters, the header, quoted fields, ``N/A``/``host``, every error), then C resumes at the
next line. When fallbacks come back to back, Python takes a growing batch of lines (up to 256)
before C tries again, so input C cannot take costs about what the pure path costs. Processing
any run of lines through ``_lines`` is the reference by definition, and decoding it separately
equals decoding the chunk and splitting: ``\n`` is never part of a UTF-8 sequence and
"replace" never swallows an ASCII byte.

The C records are ``ProfilingTask`` instances (their slots set through the slots' descriptors,
``_record_new.h``) taken out of the cyclic GC
(``PyObject_GC_UnTrack``): they hold only str/int/float/None and have no ``__dict__``, so they
can never be part of a cycle, and full collections no longer scale with the tasks parsed.
Measured the same way: 0.48 µs/row (0.62x polars' time, GC share ~0), and one full collection
of ~12 ms instead of eight up to ~150-235 ms while ``profile()`` parses a million tasks.

Columnar mode (``columnar=``, :mod:`asc_aprof._plans._columns`) makes no record at all: C appends each
plain row's duration, id and the codes of its device, name and type to byte buffers, coding
strings through the same per-call cache (a name already seen in the call costs a memcmp, not a
str) and the run's shared tables, all after the row is fully checked so a fallback leaves no
trace. Lines C leaves go through ``_lines`` as always and their tasks are converted by the one
pure-Python conversion, which is the reference: both paths give the same bytes and tables.
"""

from __future__ import annotations

import math
import operator
import os
import sys
from array import array
from collections.abc import Callable, Iterable, Sequence
from typing import Final

from .._model._counters import NAN, TaskCounters, counter_indexes
from .._model._errors import ParseError
from .._model._records import ProfilingTask, new_task
from ._columns import ID_MAX, NO_ID, ColumnBatch, Tables


def _load_accelerator() -> Callable[..., tuple[int, int, int, bool]] | None:
    try:
        from ._cparser import parse_rows
    except ImportError:  # built without a compiler: the extension is optional
        return None
    return parse_rows


_parse_rows: Final = _load_accelerator()

#: Most lines handed to the pure path at once when C keeps falling back.
_FALLBACK_BATCH: Final = 256
#: Quoted stretches a parser remembers (the first ones seen), and the longest it remembers.
_STRETCHES: Final = 256
_STRETCH_LENGTH: Final = 512

#: Whether new parsers use the C row loop by default: the extension is built and
#: ``ASC_APROF_PURE_PYTHON`` is not ``1``.
ACCELERATED: bool = _parse_rows is not None and os.environ.get("ASC_APROF_PURE_PYTHON") != "1"

#: Header aliases, first match wins (op_summary, task_time, torch_npu kernel_details).
DEVICE_COLUMNS: Final = ("Device_id",)
ID_COLUMNS: Final = ("Task ID", "task_id")
NAME_COLUMNS: Final = ("Op Name", "kernel_name", "Name")
TYPE_COLUMNS: Final = ("Task Type", "kernel_type", "Accelerator Core")
DURATION_COLUMNS: Final = ("Task Duration(us)", "task_time(us)", "Duration(us)")

CONTROL_TYPES: Final = frozenset({"PROFILING_ENABLE", "PROFILING_DISABLE"})
SKIP_NA_DURATION: Final = "duration N/A"
DEFAULT_MAX_LINE_LENGTH: Final = 1 << 20


def _find(header: list[str], aliases: Iterable[str]) -> int | None:
    for alias in aliases:
        if alias in header:
            return header.index(alias)
    return None


class TaskParser:
    """Incremental parser: feed bytes, get tasks.

    :param source: the file name (or stream name) used in error messages
    :param device: the device for every task when the CSV has no ``Device_id`` column
        (old per-device layout: ``device_N/summary/op_summary_*.csv``)
    :param max_line_length: longest line accepted, in characters (bounds the buffered tail); any
        real number >= 0 (a float is rounded down, ``inf`` means no limit)
    :param accelerated: use the C row loop (True), the pure-Python one (False), or the default
        (None: :data:`ACCELERATED`); the results are identical either way
    :param keep: extra columns to keep per task, each given as its header aliases (first match
        wins); the raw cells of every task go to :attr:`kept`, in task order (``None`` for a
        column the header lacks). Keeping runs the pure-Python row loop.
    :param counters: also read every PMU counter column of the file (see
        :mod:`asc_aprof._model._counters`: every column that does not describe the task) as a number,
        ``N/A`` as None; :meth:`take_counters` hands them out, aligned with the tasks returned.
        A counter cell that is neither a finite number nor ``N/A`` is a :class:`ParseError`.
        Both row loops read them, with identical results.
    :param columnar: build no task: :meth:`feed` and :meth:`close` return ``[]`` and every task
        goes to columns (:meth:`take_columns`), its device, name and type coded with these
        :class:`~asc_aprof._plans._columns.Tables` (``True``: new ones). The C row loop fills them
        straight from the bytes; the pure one converts its tasks (the reference). Ids must fit
        in int64 (a :class:`ParseError` otherwise).
    :raises RuntimeError: for ``accelerated=True`` when the extension is not built
    """

    def __init__(
        self,
        source: str = "<stream>",
        *,
        device: int | None = None,
        max_line_length: int = DEFAULT_MAX_LINE_LENGTH,
        accelerated: bool | None = None,
        keep: Sequence[Sequence[str]] = (),
        counters: bool = False,
        columnar: Tables | bool = False,
    ) -> None:
        if accelerated and _parse_rows is None:
            raise RuntimeError(
                "asc_aprof._plans._cparser is not built: only the pure-Python parser is available"
            )
        if accelerated and keep:
            raise RuntimeError("keep= needs the pure-Python row loop (accelerated=False)")
        #: whether this parser runs the C row loop
        self.accelerated: bool = (ACCELERATED if accelerated is None else accelerated) and not keep
        if keep and columnar:
            raise RuntimeError("keep= and columnar= cannot be combined")
        #: the value tables of a columnar parser (None: it returns tasks)
        self.tables: Tables | None = (
            columnar if isinstance(columnar, Tables) else (Tables.new() if columnar else None)
        )
        self._col_out: list[bytearray] = [bytearray() for _ in range(5)] if self.tables else []
        self._columnar_args: tuple[object, ...] | None = None
        if self.tables is not None:
            t = self.tables
            self._columnar_args = (
                self._col_out,
                t.names.codes,
                t.names.values,
                t.types.codes,
                t.types.values,
                t.devices.codes,
                t.devices.values,
            )
        self._keep_aliases = tuple(tuple(aliases) for aliases in keep)
        #: the kept cells of each task returned so far, one tuple per task (see ``keep``)
        self.kept: list[tuple[str | None, ...]] = []
        self._i_keep: tuple[int | None, ...] = ()
        #: whether the PMU counter columns are read (see ``counters``)
        self.counters = bool(counters)
        #: the counter columns of the header (empty until it is read, or without ``counters``)
        self.counter_columns: tuple[str, ...] = ()
        self._i_counters: tuple[int, ...] = ()
        # one array per counter column, aligned with the tasks returned since take_counters()
        self._counter_values: list[array[float]] = []
        self._scratch: list[bytearray] = []  # what one C call read, per column
        self._untaken = 0  # tasks returned since take_counters()
        self.source = source
        self.default_device = device
        self.max_line_length = max_line_length
        #: ``"op_summary"``, ``"task_time"`` or ``"kernel_details"`` once the header is read
        self.kind: str | None = None
        #: the header's column names
        self.columns: tuple[str, ...] = ()
        #: data rows seen so far (tasks + skipped)
        self.data_rows = 0
        #: rows that are not tasks, by reason
        self.skipped: dict[str, int] = {}
        self._pending = b""
        self._line = 0  # lines consumed so far (1-based number of the last one)
        self._crlf = False
        self._error: ParseError | None = None
        self._closed = False
        self._ncols = 0
        self._split_at = 0  # fields the pure row loop splits (covers the counter columns)
        self._split_c = 0  # fields the C row loop splits (the counter columns it walks to)
        self._i_dev: int | None = None
        self._i_id: int | None = None
        self._i_name = 0
        self._i_type = 0
        self._i_dur = 0
        # quoted stretches of rows already checked -> commas inside their quotes (bounded)
        self._stretches: dict[str, int] = {}

    @property
    def max_line_length(self) -> int:
        """The longest line accepted, in characters."""
        return self._max_line_length

    @max_line_length.setter
    def max_line_length(self, value: float) -> None:
        self._max_line_length = _line_limit(value)

    # -- public -----------------------------------------------------------------------------
    def feed(self, data: bytes | bytearray | memoryview) -> list[ProfilingTask]:
        """Consume *data* (any bytes-like object); return the tasks of every line it completed.

        :raises TypeError: when *data* is not bytes-like (a ``str``, say)
        """
        self._check_usable()
        if type(data) is not bytes:
            data = _as_bytes(data)
        if not data:
            return []
        pending = self._pending
        if self.accelerated and pending:
            cut = data.rfind(b"\n")
            if cut >= 0:
                # The pending tail completes at the first newline: parse that line on its own and
                # the rest in place, rather than copying the whole chunk behind the tail.
                first = data.find(b"\n")
                head = pending + data[: first + 1]
                self._pending = data[cut + 1 :]
                before = self._columnar_rows()
                tasks = self._fast_lines(head, len(head) - 1)
                if first < cut:
                    tasks += self._fast_lines(data, cut, first + 1)
                self._untaken += len(tasks) + self._columnar_rows() - before
                self._check_tail()
                return tasks
        buf = pending + data if pending else data
        cut = buf.rfind(b"\n")
        if cut < 0:
            self._pending = buf
            self._check_tail()
            return []
        self._pending = buf[cut + 1 :]
        before = self._columnar_rows()
        if self.accelerated:
            tasks = self._fast_lines(buf, cut)
        else:
            tasks = self._emit(self._lines(buf[:cut].decode("utf-8", "replace").split("\n")))
        self._untaken += len(tasks) + self._columnar_rows() - before
        self._check_tail()
        return tasks

    def _columnar_rows(self) -> int:
        return len(self._col_out[0]) // 8 if self._col_out else 0

    def _emit(self, tasks: list[ProfilingTask]) -> list[ProfilingTask]:
        """*tasks* as they are returned: themselves, or (columnar) appended to the columns."""
        if self.tables is None or not tasks:
            return tasks
        batch = ColumnBatch.from_tasks(tasks, self.tables)  # ids checked by _rows
        for column, part in zip(self._col_out, batch[:5], strict=True):
            column += part
        return []

    def _check_tail(self) -> None:
        # A UTF-8 character is at most 4 bytes: a tail over 4x the limit is an over-long line
        # however it continues, so the verdict does not depend on how the bytes were split.
        if len(self._pending) > 4 * self.max_line_length:
            self._fail(f"line longer than {self.max_line_length} characters", self._line + 1)

    def close(self) -> list[ProfilingTask]:
        """Signal the end of input; return the tasks of a final line without newline.

        :raises ParseError: when the input was empty or ended inside a row
        """
        self._check_usable()
        tail, self._pending = self._pending, b""
        before = self._columnar_rows()
        if not tail.strip():
            tasks = []
        elif self.accelerated:
            tasks = self._fast_lines(tail, len(tail))
        else:
            tasks = self._emit(self._lines([tail.decode("utf-8", "replace")]))
        self._closed = True
        if self.kind is None:
            self._fail("empty file: no header row", 0)
        self._untaken += len(tasks) + self._columnar_rows() - before
        return tasks

    def take_counters(self) -> TaskCounters:
        """The counters of the tasks returned since the last call (all of them, the first time).

        Aligned with those tasks, in order; empty (no column) without ``counters`` or when the
        file has no PMU column.
        """
        values = dict(zip(self.counter_columns, self._counter_values, strict=True))
        self._counter_values = [array("d") for _ in self._counter_values]
        length, self._untaken = self._untaken, 0
        return TaskCounters._wrap(values, length)

    def take_columns(self) -> ColumnBatch:
        """A columnar parser's tasks since the last call (with their counters, when read).

        Call it after :meth:`feed` / :meth:`close`; codes refer to :attr:`tables`.
        """
        if self.tables is None:
            raise RuntimeError("take_columns() needs TaskParser(columnar=...)")
        length = self._untaken
        counters = self.take_counters() if self.counters else None
        self._untaken = 0
        duration, ids, device, name, ttype = (bytes(column) for column in self._col_out)
        for column in self._col_out:
            column.clear()
        return ColumnBatch(duration, ids, device, name, ttype, length, counters)

    @property
    def tasks_out(self) -> int:
        """Data rows that became tasks."""
        return self.data_rows - sum(self.skipped.values())

    # -- internals --------------------------------------------------------------------------
    def _check_usable(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise RuntimeError("TaskParser is closed")

    def _fail(self, message: str, line: int) -> None:
        self._error = ParseError(message, source=self.source, line=line)
        raise self._error

    def _header(self, line: str) -> None:
        if line.startswith("\ufeff"):
            line = line[1:]
        if line.endswith("\r"):
            self._crlf = True
            line = line[:-1]
        try:
            header = [c.strip().strip('"') for c in _split_quoted(line)]
        except _RowError as exc:
            self._fail(f"unreadable header: {exc}", self._line)
            raise AssertionError from exc  # unreachable: _fail raises
        i_dur = _find(header, DURATION_COLUMNS)
        i_name = _find(header, NAME_COLUMNS)
        i_type = _find(header, TYPE_COLUMNS)
        if i_dur is None or i_name is None or i_type is None:
            shown = ",".join(header[:8]) + (",..." if len(header) > 8 else "")
            self._fail(
                "unknown header: expected an op_summary (Op Name, Task Type, Task Duration(us)), "
                f"task_time (kernel_name, kernel_type, task_time(us)) or kernel_details CSV, got {shown!r}",
                self._line,
            )
            raise AssertionError  # unreachable: _fail raises
        self.columns = tuple(header)
        self.kind = (
            "task_time"
            if header[i_name] == "kernel_name"
            else ("kernel_details" if header[i_name] == "Name" else "op_summary")
        )
        self._ncols = len(header)
        self._i_dev = _find(header, DEVICE_COLUMNS)
        self._i_id = _find(header, ID_COLUMNS)
        self._i_name, self._i_type, self._i_dur = i_name, i_type, i_dur
        self._i_keep = tuple(_find(header, aliases) for aliases in self._keep_aliases)
        used = [i for i in (self._i_dev, self._i_id, i_name, i_type, i_dur, *self._i_keep) if i is not None]
        self._split_c = max(used) + 1
        if self.counters:
            self._i_counters = counter_indexes(header)
            self.counter_columns = tuple(header[i] for i in self._i_counters)
            self._counter_values = [array("d") for _ in self._i_counters]
            self._scratch = [bytearray() for _ in self._i_counters]
        self._split_at = max([*used, *self._i_counters]) + 1

    def _lines(self, lines: list[str]) -> list[ProfilingTask]:
        limit = self.max_line_length
        if lines and max(map(len, lines)) > limit:
            index = next(i for i, line in enumerate(lines) if len(line) > limit)
            self._rows(lines[:index])
            self._fail(f"line longer than {limit} characters", self._line + 1)
        return self._rows(lines)

    def _fast_lines(self, buf: bytes, end: int, start: int = 0) -> list[ProfilingTask]:
        """The lines of ``buf[start:end]`` through the C row loop; the lines it leaves go to _lines."""
        assert _parse_rows is not None
        out: list[ProfilingTask] = []
        pos = start
        batch = 1
        while True:
            if self.kind is not None:
                rows, lines, pos, fallback = _parse_rows(
                    out,
                    buf,
                    pos,
                    end,
                    self._ncols,
                    self._split_c,
                    -1 if self._i_dev is None else self._i_dev,
                    -1 if self._i_id is None else self._i_id,
                    self._i_name,
                    self._i_type,
                    self._i_dur,
                    self.default_device,
                    self._crlf,
                    self.skipped,
                    ProfilingTask,
                    min(self._max_line_length, sys.maxsize),
                    self._i_counters,
                    self._scratch,
                    self._columnar_args,
                )
                self.data_rows += rows
                self._line += lines
                for values, scratch in zip(self._counter_values, self._scratch, strict=True):
                    values.frombytes(scratch)
                    scratch.clear()
                if not fallback:
                    return out
                # Back-to-back fallbacks (C consumed nothing): hand Python a growing batch, so
                # input C cannot take costs about what the pure path costs, not a call per line.
                batch = 1 if lines else min(2 * batch, _FALLBACK_BATCH)
            # The header, or lines C left: the pure path's code on them.
            stop = pos - 1
            for _ in range(batch):
                stop = buf.find(b"\n", stop + 1, end)
                if stop < 0:
                    stop = end
                    break
            out += self._emit(self._lines(buf[pos:stop].decode("utf-8", "replace").split("\n")))
            if stop == end:
                return out
            pos = stop + 1

    def _rows(self, lines: list[str]) -> list[ProfilingTask]:
        out: list[ProfilingTask] = []
        append = out.append
        first = self._line + 1
        if self.kind is None:
            while lines and self.kind is None:
                head = lines.pop(0)
                self._line += 1
                first += 1
                if head.strip():
                    self._header(head)
        ncols = self._ncols
        k = self._split_at
        i_dev, i_id, i_name, i_type, i_dur = (
            self._i_dev,
            self._i_id,
            self._i_name,
            self._i_type,
            self._i_dur,
        )
        default_device = self.default_device
        crlf = self._crlf
        skipped = self.skipped
        stretches = self._stretches
        rows = 0
        i_keep = self._i_keep
        keep_append = self.kept.append
        i_counters = self._i_counters
        counter_values = self._counter_values
        counter_names = self.counter_columns
        check_ids = self.tables is not None and i_id is not None
        index = -1
        try:
            for index, line in enumerate(lines):  # noqa: B007 - index names the bad line
                if crlf and line.endswith("\r"):
                    line = line[:-1]
                if not line:
                    continue
                parts = line.split(",", k)
                q = line.find('"')
                if q < 0:
                    nfields = len(parts) if len(parts) <= k else k + 1 + parts[k].count(",")
                elif len(parts) > k and q >= len(line) - len(parts[k]):
                    # Quotes only after the k-th comma (msprof's shape cells): the fields read are
                    # split right; check and count the rest. The stretch from the first quote to
                    # the last decides both (_check_quotes, inlined; even segments lie outside
                    # quotes, odd ones inside); it repeats from row to row (a kernel launched N
                    # times has the same shapes), so stretches already checked are remembered
                    # with their quoted commas.
                    rest = parts[k]
                    start = q - (len(line) - len(rest))
                    end = rest.rfind('"') + 1
                    stretch = rest[start:end]
                    inside = stretches.get(stretch)
                    if inside is None:
                        segments = stretch.split('"')
                        if not len(segments) & 1:
                            raise _RowError("unbalanced quotes (truncated or corrupt row)")
                        for between in segments[2:-1:2]:
                            if between and (between[0] != "," or between[-1] != ","):
                                raise _RowError(_MISPLACED_QUOTE)
                        inside = "".join(segments[1::2]).count(",")
                        if len(stretches) < _STRETCHES and len(stretch) <= _STRETCH_LENGTH:
                            stretches[stretch] = inside
                    if (start and rest[start - 1] != ",") or (end < len(rest) and rest[end] != ","):
                        raise _RowError(_MISPLACED_QUOTE)
                    nfields = k + 1 + rest.count(",") - inside
                else:
                    parts = _split_quoted(line)
                    nfields = len(parts)
                if nfields != ncols:
                    raise _RowError(f"expected {ncols} fields, got {nfields}")
                rows += 1
                ttype = parts[i_type]
                if ttype in CONTROL_TYPES:
                    skipped[ttype] = skipped.get(ttype, 0) + 1
                    continue
                dur_text = parts[i_dur]
                try:
                    duration = float(dur_text)
                except ValueError:
                    if dur_text.strip().strip('"') == "N/A":
                        skipped[SKIP_NA_DURATION] = skipped.get(SKIP_NA_DURATION, 0) + 1
                        continue
                    duration = _number(dur_text, float, "duration")
                if duration - duration:  # nan or +-inf (finite values give 0.0)
                    raise _RowError(f"duration is not a finite number: {dur_text!r}")
                if i_id is None:
                    task_id = None
                else:
                    id_text = parts[i_id]
                    try:
                        task_id = int(id_text)
                    except ValueError:
                        task_id = _optional_int(id_text, "task id")
                    if check_ids and task_id is not None and not NO_ID < task_id <= ID_MAX:
                        raise _RowError(f"task id {task_id} does not fit the 64-bit id column")
                if i_dev is None:
                    device = default_device
                else:
                    dev_text = parts[i_dev]
                    try:
                        device = int(dev_text)
                    except ValueError:
                        device = _device(dev_text)
                if i_counters:
                    row_counters = [_counter(parts[i], counter_names, j) for j, i in enumerate(i_counters)]
                append(new_task((task_id, parts[i_name], ttype, duration, device)))
                if i_keep:
                    keep_append(tuple(None if i is None else parts[i] for i in i_keep))
                if i_counters:
                    for values, value in zip(counter_values, row_counters, strict=True):
                        values.append(value)
        except _RowError as exc:
            self.data_rows += rows
            self._line = first + index - 1
            self._fail(str(exc), first + index)
        self.data_rows += rows
        self._line = first + len(lines) - 1
        return out


class _RowError(Exception):
    """A bad row inside the hot loop; turned into ParseError with the line number."""


_MISPLACED_QUOTE: Final = "misplaced quote (a '\"' inside an unquoted field, or text after a closing quote)"


def _check_quotes(segments: list[str]) -> None:
    """Raise unless ``line.split('"')`` is a line quoted by the RFC 4180 rule.

    The even segments lie outside quotes: the first must be empty or end a field (``,``), the last
    be empty or start one, and each one between two quoted pieces be empty (the pieces are the two
    halves of an escaped ``""``) or both.
    """
    if not len(segments) & 1:
        raise _RowError("unbalanced quotes (truncated or corrupt row)")
    first, last = segments[0], segments[-1]
    if (first and first[-1] != ",") or (last and last[0] != ","):
        raise _RowError(_MISPLACED_QUOTE)
    for between in segments[2:-1:2]:
        if between and (between[0] != "," or between[-1] != ","):
            raise _RowError(_MISPLACED_QUOTE)


def _fields(segments: list[str]) -> list[str]:
    """The fields of a line checked by :func:`_check_quotes`, unquoted (as :mod:`csv` gives them)."""
    fields = [""]
    last = len(segments) - 1
    for index, segment in enumerate(segments):
        if index & 1:
            fields[-1] += segment  # quoted text, commas and all
        elif not segment:
            if 0 < index < last:
                fields[-1] += '"'  # an escaped "" inside a quoted field
        else:
            pieces = segment.split(",")
            fields[-1] += pieces[0]
            fields += pieces[1:]
    return fields


def _split_quoted(line: str) -> list[str]:
    """Split one line by the quoting rule; :class:`_RowError` when it breaks it."""
    if '"' not in line:
        return line.split(",")
    segments = line.split('"')
    _check_quotes(segments)
    return _fields(segments)


def _as_bytes(data: object) -> bytes:
    try:
        return bytes(memoryview(data))  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"TaskParser.feed() takes bytes, not {type(data).__name__}") from None


def _line_limit(value: object) -> int:
    """*value* as a whole number of characters (floats rounded down, ``inf`` for no limit)."""
    if isinstance(value, float):
        if math.isnan(value) or value < 0:
            raise ValueError(f"max_line_length must be a number >= 0, got {value!r}")
        return sys.maxsize if math.isinf(value) else math.floor(value)
    try:
        limit = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"max_line_length must be a number, got {type(value).__name__}") from None
    if limit < 0:
        raise ValueError(f"max_line_length must be a number >= 0, got {value!r}")
    return limit


def _number(text: str, kind: type[float], what: str) -> float:
    stripped = text.strip().strip('"').strip()
    try:
        return kind(stripped)
    except ValueError:
        raise _RowError(f"{what} is not a number: {text!r}") from None


def _counter(text: str, names: tuple[str, ...], j: int) -> float:
    """One counter cell: its finite value, or NaN for ``N/A`` (None in :class:`TaskCounters`)."""
    try:
        value = float(text)
    except ValueError:
        stripped = text.strip().strip('"').strip()
        if stripped == "N/A":
            return NAN
        try:
            value = float(stripped)
        except ValueError:
            raise _RowError(f"counter {names[j]!r} is not a number or N/A: {text!r}") from None
    if value - value:  # nan or +-inf
        raise _RowError(f"counter {names[j]!r} is not a finite number: {text!r}")
    return value


def _optional_int(text: str, what: str) -> int | None:
    stripped = text.strip().strip('"').strip()
    if stripped == "N/A":
        return None
    try:
        return int(stripped)
    except ValueError:
        raise _RowError(f"{what} is not an integer: {text!r}") from None


def _device(text: str) -> int | None:
    stripped = text.strip().strip('"').strip()
    if stripped in ("host", "N/A"):
        return None
    try:
        return int(stripped)
    except ValueError:
        raise _RowError(f"Device_id is not an integer or 'host': {text!r}") from None


def parse_bytes(data: bytes, source: str = "<bytes>", *, device: int | None = None) -> list[ProfilingTask]:
    """Parse a whole CSV held in memory."""
    parser = TaskParser(source, device=device)
    tasks = parser.feed(data)
    tasks.extend(parser.close())
    return tasks
