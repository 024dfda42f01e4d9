"""Timelines as a Trace Event Format file that Perfetto and chrome://tracing open.

Theory of operation
-------------------
The file is the JSON object form of the Trace Event Format (``{"traceEvents": [...], ...}``),
gzip-compressed when its name ends in ``.gz`` (both viewers open that as it is):

* one *process* per device (``pid`` = device + 1, named ``Device N``; host rows, which have no
  device, go to ``pid`` 0, named ``Host``), one *thread* per stream (``tid`` = the stream id,
  named ``Stream N``), each named by ``process_name`` / ``thread_name`` metadata events and
  ordered by ``process_sort_index`` / ``thread_sort_index``;
* one complete event (``"ph": "X"``) per task: ``name`` the kernel, ``cat`` its task type, and
  in ``args`` the type, task id, stream, run, case (when labelled), the exact start as a string of
  Unix-epoch nanoseconds (19 digits do not fit a JSON reader's double), the duration in ns and the
  counters (when read);
* per device, a counter track (``"ph": "C"``) for each PMU counter that varies between the
  device's tasks: the task's value from its start to its end, 0 between tasks;
* per device whose tasks carry the AI Core clock (runs read from their raw data on a 910B), a
  counter track :data:`CLOCK_TRACK`: the clock in effect at each task's start (the real
  exporter's ``freq.db``), a point wherever it differs from the previous task's, so a change
  between two tasks shows at the start of the second; the task's ``args`` hold it as ``aic_mhz``;
* per device, a ``Runs`` thread on top with one complete event per run (named by its case when
  the run is labelled, else by the run id) spanning that run's tasks on the device, so sweeps
  read case by case.

Times: ``ts`` and ``dur`` are microseconds, the format's unit, relative to the first task of
all the timelines (``otherData.origin_unix_ns`` holds that start exactly). They are written from
integer nanoseconds as decimal text with exactly three decimals, so the file is exact to 1 ns
whatever the span (a reader converting to doubles keeps 1 ns for about 52 days of span).

Complete events on one thread must nest: the viewers draw a thread as a stack. A stream runs its
tasks one after another, so real exports never overlap on a stream (checked on every real run
we have); when a file does (two runs of different machines merged, say), the overlapping task
goes to an extra thread of the same device named ``Stream N (overlap k)``, so no event is lost
or drawn across another.
"""

from __future__ import annotations

import gzip
import io
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Final

from .._model._errors import UsageError
from .._runs._timeline import TimedTask, Timeline
from .._version import __version__
from ._replace import replacing

#: ``tid`` base of the threads that are not a stream (the Runs lane, overlap lanes, no stream id).
SYNTHETIC_TID: Final = 1 << 20
HOST_PID: Final = 0
#: The name of the AI Core clock's counter track (one per device).
CLOCK_TRACK: Final = "AI Core clock (MHz)"


def _us(ns: int) -> str:
    """Integer nanoseconds as microseconds with exactly three decimals (exact decimal text)."""
    sign = "-" if ns < 0 else ""
    whole, frac = divmod(abs(ns), 1000)
    return f"{sign}{whole}.{frac:03d}"


def pid_of(device: int | None) -> int:
    """The trace process of a device (host rows: :data:`HOST_PID`)."""
    return HOST_PID if device is None else device + 1


class _Lanes:
    """Threads of one process: a lane is a list of disjoint intervals, first fit in start order."""

    def __init__(self) -> None:
        self.ends: dict[object, list[int]] = {}  # lane group -> end of each lane's last interval

    def place(self, group: object, start: int, end: int) -> int:
        ends = self.ends.setdefault(group, [])
        for lane, last in enumerate(ends):
            if start >= last:
                ends[lane] = end
                return lane
        ends.append(end)
        return len(ends) - 1


#: One event before writing: (ts ns, pid, tid, duration ns, name, category, args).
_Event = tuple[int, int, int, int, str, str, dict[str, Any]]


def _task_args(timeline: Timeline, timed: TimedTask) -> dict[str, Any]:
    task = timed.task
    args: dict[str, Any] = {"type": task.type, "task_id": task.id, "stream": timed.stream}
    args["run"] = timeline.run_id
    case = timeline.case(task.device)
    if case is not None:
        args["case"] = case
    args["start_unix_ns"] = str(timed.start_ns)
    args["duration_ns"] = timed.duration_ns
    if timed.aic_mhz == timed.aic_mhz:  # not NaN
        args["aic_mhz"] = timed.aic_mhz
    if timed.counters:
        args["counters"] = dict(timed.counters)
    return args


class _Builder:
    def __init__(self) -> None:
        self.events: list[_Event] = []
        self.lanes: dict[int, _Lanes] = {}
        self.threads: dict[tuple[int, int], tuple[str, int]] = {}  # (pid, tid) -> (name, sort index)
        self.synthetic: dict[tuple[int, str, int], int] = {}
        self.processes: dict[int, str] = {}
        self.skipped = 0
        #: per (pid, counter column): (start, end, value) of each task that has the counter
        self.counter_spans: dict[tuple[int, str], list[tuple[int, int, float]]] = {}
        #: per pid: (start, AI Core clock) of each task whose clock is known
        self.clocks: dict[int, list[tuple[int, float]]] = {}

    def _tid(self, pid: int, stream: int | None, lane: int) -> int:
        base = "Stream ?" if stream is None else f"Stream {stream}"
        name = base if lane == 0 else f"{base} (overlap {lane})"
        index = 64 * (2 + (-1 if stream is None else stream)) + lane  # after the Runs lanes
        if stream is not None and 0 <= stream < SYNTHETIC_TID and lane == 0:
            self.threads.setdefault((pid, stream), (name, index))
            return stream
        return self._lane_tid(pid, f"stream {stream}", lane, name, index)

    def _lane_tid(self, pid: int, group: str, lane: int, name: str, index: int) -> int:
        key = (pid, group, lane)
        tid = self.synthetic.get(key, 0)
        if not tid:
            tid = self.synthetic[key] = SYNTHETIC_TID + len(self.synthetic) + 1
            self.threads[(pid, tid)] = (name, index)
        return tid

    def add(self, timelines: Sequence[Timeline], origin: int) -> None:
        """Every task, placed in start order over all *timelines* (so input order never matters)."""
        timed = [(t.start_ns - origin, t, tl) for tl in timelines for t in tl.tasks if t.start_ns is not None]
        self.skipped += sum(len(tl.tasks) for tl in timelines) - len(timed)
        timed.sort(key=lambda item: item[0])
        spans: dict[tuple[int, int | None], list[Any]] = {}  # (timeline index, device) -> span
        index = {id(tl): i for i, tl in enumerate(timelines)}
        for start, task, timeline in timed:
            device = task.task.device
            pid = pid_of(device)
            self.processes.setdefault(pid, "Host" if device is None else f"Device {device}")
            end = start + max(task.duration_ns, 0)
            lane = self.lanes.setdefault(pid, _Lanes()).place(("stream", task.stream), start, end)
            tid = self._tid(pid, task.stream, lane)
            self.events.append(
                (start, pid, tid, end - start, task.task.name, task.task.type, _task_args(timeline, task))
            )
            if task.aic_mhz == task.aic_mhz:  # not NaN
                self.clocks.setdefault(pid, []).append((start, task.aic_mhz))
            if task.counters:
                for column, value in task.counters.items():
                    if value is not None:
                        self.counter_spans.setdefault((pid, column), []).append((start, end, value))
            key = (index[id(timeline)], device)
            span = spans.get(key)
            if span is None:
                spans[key] = [start, end, 1, timeline]
            else:
                span[1], span[2] = max(span[1], end), span[2] + 1
        for (_, device), (first, last, count, timeline) in sorted(spans.items(), key=lambda kv: kv[1][0]):
            pid = pid_of(device)
            lane = self.lanes[pid].place("runs", first, last)
            tid = self._lane_tid(pid, "runs", lane, "Runs" if lane == 0 else f"Runs (overlap {lane})", lane)
            case = timeline.case(device)
            args: dict[str, Any] = {"run": timeline.run_id, "tasks": count}
            if case is not None:
                args["case"] = case
            self.events.append((first, pid, tid, last - first, case or timeline.run_id, "run", args))

    def lines(self, origin: int, runs: Sequence[str]) -> Iterator[str]:
        other = {
            "generator": f"asc-aprof {__version__}",
            "origin_unix_ns": str(origin),
            "time_unit": "ts and dur in microseconds since origin_unix_ns, three decimals (exact ns)",
            "runs": list(runs),
            "tasks_without_start": self.skipped,
        }
        yield '{"displayTimeUnit": "ns", "otherData": ' + json.dumps(other) + ', "traceEvents": [\n'
        meta: list[dict[str, Any]] = []
        for pid, name in sorted(self.processes.items()):
            meta.append({"ph": "M", "pid": pid, "tid": 0, "name": "process_name", "args": {"name": name}})
            meta.append(
                {"ph": "M", "pid": pid, "tid": 0, "name": "process_sort_index", "args": {"sort_index": pid}}
            )
        for (pid, tid), (name, index) in sorted(self.threads.items()):
            meta.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}})
            meta.append(
                {
                    "ph": "M",
                    "pid": pid,
                    "tid": tid,
                    "name": "thread_sort_index",
                    "args": {"sort_index": index},
                }
            )
        first = True
        for event in meta:
            yield ("" if first else ",\n") + json.dumps(event)
            first = False
        self.events.sort(key=lambda e: (e[0], e[1], e[2], -e[3]))
        for ts, pid, tid, dur, name, cat, args in self.events:
            yield (
                ("" if first else ",\n")
                + f'{{"ph": "X", "pid": {pid}, "tid": {tid}, "ts": {_us(ts)}, "dur": {_us(dur)}, '
                f'"name": {json.dumps(name)}, "cat": {json.dumps(cat)}, "args": {json.dumps(args)}}}'
            )
            first = False
        for ts, pid, name, value in self.counter_events():
            yield ("" if first else ",\n") + (
                f'{{"ph": "C", "pid": {pid}, "tid": 0, "ts": {_us(ts)}, "name": {json.dumps(name)}, '
                f'"args": {{"value": {json.dumps(value)}}}}}'
            )
            first = False
        yield "\n]}\n"

    def counter_events(self) -> list[tuple[int, int, str, float]]:
        """Counter tracks (``"ph": "C"``): per device, each counter that varies between its tasks
        takes the task's value at its start and 0 at its end (a constant counter stays in the
        tasks' args only); the AI Core clock (:data:`CLOCK_TRACK`) takes each task's clock at its
        start where it changes (shown even when constant). (ts, pid, column, value), in time
        order per track."""
        out: list[tuple[int, int, str, float]] = []
        for (pid, column), spans in sorted(self.counter_spans.items()):
            if len({value for _, _, value in spans}) < 2:
                continue
            points: list[tuple[int, int, float]] = []  # (ts, 0 = an end, 1 = a start, value)
            for start, end, value in spans:
                points.append((start, 1, value))
                points.append((end, 0, 0.0))
            points.sort()
            out.extend((ts, pid, column, value) for ts, _, value in points)
        for pid, starts in sorted(self.clocks.items()):
            last = None
            for ts, mhz in sorted(starts, key=lambda p: p[0]):  # (stable: input order at one instant)
                if mhz != last:
                    out.append((ts, pid, CLOCK_TRACK, mhz))
                    last = mhz
        return out


def trace_lines(timelines: Iterable[Timeline]) -> Iterator[str]:
    """The trace file of *timelines* as text pieces (see the module doc for the layout).

    :raises UsageError: when no task has a start time
    """
    chosen = list(timelines)
    starts = [t.start_ns for tl in chosen for t in tl.tasks if t.start_ns is not None]
    if not starts:
        runs = ", ".join(tl.run_id for tl in chosen) or "no run"
        raise UsageError(f"nothing to trace: no task with a start time in {runs}")
    origin = min(starts)
    builder = _Builder()
    builder.add(chosen, origin)
    return builder.lines(origin, [tl.run_id for tl in chosen])


def write_trace(timelines: Iterable[Timeline], path: str | os.PathLike[str]) -> Path:
    """Write *timelines* as a Trace Event Format file (gzip when *path* ends in ``.gz``).

    Open it in Perfetto (ui.perfetto.dev) or chrome://tracing: one process per device, one
    thread per stream, one complete event per task (type, ids, exact start and counters in its
    args), a ``Runs`` thread naming each run's case. Times are µs since the first task, exact to
    1 ns. The file appears complete or not at all (written beside it, then renamed).

    :raises UsageError: when no task has a start time
    :return: the path written
    """
    target = Path(path)
    lines = trace_lines(timelines)
    with replacing(target) as raw:
        stream: IO[bytes] = raw
        if target.suffix == ".gz":
            stream = gzip.GzipFile(target.name, "wb", fileobj=raw, mtime=0)  # type: ignore[assignment]
        with io.TextIOWrapper(stream, encoding="utf-8", newline="\n") as text:
            for piece in lines:
                text.write(piece)
    return target
