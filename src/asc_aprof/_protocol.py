"""The per-call protocol of ``profile()``, ``start()``/``stop()`` and the sweep, written once.

Theory of operation
-------------------
A call goes through the same steps whoever drives it: join a window (done when the
:class:`Call` is made), wait until the window started, run the body, leave, wait until it
stopped, get the window's shared result (export and parse it when first, else wait for whoever
does), take this device's tasks, and vote on deleting the run. Every rule about those steps lives
here, as generators that *yield what they need done* (sans-IO, as the parser is):

* :class:`Wait` a latch (with a timeout, optionally shielded from cancellation),
* :class:`ReadRaw` a run's raw data natively (unless the profiler's ``reader`` is ``msprof``),
* :class:`Export` a run with ``msprof.py``, :class:`Parse` its CSVs (when the raw reader
  declined, or is not used), :class:`Remove` a run.

A driver sends each step's outcome back, or throws its exception in, so the protocol decides what
an interrupt means at every point. The drivers only differ in how they wait: blocking
(:func:`asc_aprof._profiler.drive`) or awaiting (:func:`asc_aprof._async.drive_async`), and the
sweep runs the async driver. The rules:

* **leave before handing over**: a failed or cancelled start, or a body that raised, leaves the
  window at once; when it was the last body, the caller waits (shielded, bounded) for the stop,
  so nothing keeps running and the next collection can start;
* a body that ended normally leaves *as a consumer* (it will take a share of the result);
* the stop is awaited shielded; Ctrl+C during it waits for the stop before propagating;
* a body that ended normally and wants the PMU counters says so as it leaves (before the stop),
  so whoever produces the result reads them for everyone; callers that did not ask get none.
  The raw reader reads them too (where it declines, ``reader='auto'`` exports the run);
* the first consumer to claim the result produces it; an :class:`~asc_aprof.AprofError` while
  producing is published to every consumer; anything else (cancellation) abandons it, and the
  next consumer produces it instead, so one caller's cancellation never disturbs the others;
* the run is deleted only when it is in the library's temporary root, every consumer has its
  share, every one asked for cleanup and the result has no error.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ._collector import (
    REMOVED_BY_CLEANUP_CALL,
    REMOVED_BY_CLEANUP_TRUE,
    Claim,
    DeviceTasks,
    Participant,
    Window,
    get_collector,
)
from ._counters import TaskCounters
from ._errors import AprofError
from ._latch import Latch
from ._layout import CsvFile
from ._raw import Declined, RawResult, Reader, raw_or_fallback
from ._records import CONTROL_TASK_TYPES, ProfilingResult, make_result
from ._toolkit import Toolkit

if TYPE_CHECKING:
    from ._core import ProfilerBase, ProfileRun

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, slots=True)
class Wait:
    """Wait until *latch* is set; past *timeout*, raise CollectionTimeout (or return, if not *strict*)."""

    latch: Latch
    timeout: float | None
    what: str
    shield: bool = False
    strict: bool = True


@dataclasses.dataclass(frozen=True, slots=True)
class Export:
    """Run ``msprof.py export summary`` on *run_dir*; the outcome is the CSV files to parse."""

    toolkit: Toolkit
    run_dir: Path
    timeout: float | None


@dataclasses.dataclass(frozen=True, slots=True)
class Parse:
    """Parse *files* (with their PMU *counters*); the outcome: per device, tasks as a shared tuple
    and their counters (None without *counters*)."""

    files: Sequence[CsvFile]
    counters: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class ReadRaw:
    """Read *run_dir*'s raw ``PROF_*`` data natively (with the PMU *counters*); the outcome is a
    RawResult or a Declined."""

    run_dir: Path
    counters: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class Remove:
    """Delete *run_dir*, a run of the library's temporary root *root* (never followed out of it).

    *reason* is remembered, so a later look-up of the run can say who deleted it.
    """

    run_dir: Path
    root: Path
    reason: str


Step = Wait | ReadRaw | Export | Parse | Remove
#: A protocol phase: yields steps, is sent their outcomes, returns *T*.
Steps = Generator[Step, Any, T]

logger = logging.getLogger("asc_aprof")

START = "aclprofInit/aclprofStart"
STOP = "aclprofStop/aclprofFinalize"


class Call:
    """One caller's part in one window: the protocol's phases as step generators.

    Made by :meth:`ProfilerBase._call`, which joins the window. Used by one task or thread.
    """

    __slots__ = ("counters", "participant", "profiler", "run")

    def __init__(
        self, profiler: ProfilerBase, participant: Participant, run: ProfileRun, *, counters: bool = False
    ) -> None:
        self.profiler = profiler
        self.participant = participant
        self.run = run
        #: whether this caller's result carries the PMU counters
        self.counters = counters

    @property
    def window(self) -> Window:
        return self.participant.window

    @property
    def device(self) -> int:
        return self.participant.device

    # -- phases ---------------------------------------------------------------------------------
    def enter(self) -> Steps[None]:
        """Wait until the window started; on any failure or interrupt, leave it first."""
        window = self.window
        try:
            yield Wait(window.started, self.profiler.call_timeout, START)
            window.check_started(self.device)
        except BaseException:
            yield from self.abort()
            raise
        self.profiler._emit("collection_started", window)
        self.run.run_dir = window.run_dir
        self.run.run_id = window.run_dir.name if window.run_dir is not None else None

    def abort(self) -> Steps[None]:
        """Leave without a share (the body raised or was cancelled); settle the stop if last."""
        if get_collector().leave(self.participant):
            yield Wait(self.window.stopped, self.profiler.call_timeout, STOP, shield=True, strict=False)

    def leave(self) -> None:
        """The body ended normally: leave as a consumer of the window's result."""
        if self.counters:
            self.window.shared.want_counters()  # before the stop: no parse has begun
        get_collector().leave(self.participant, consume=True)

    def stop(self) -> Steps[ProfileRun]:
        """The manual ``stop()``: leave without a share, wait for the stop; the run's handle."""
        get_collector().leave(self.participant)
        yield from self._wait_stopped()
        run_dir = self.profiler._stopped_run_dir(self.window)
        self.run.run_dir, self.run.run_id = run_dir, run_dir.name
        return self.run

    def finish(self, cleanup: bool) -> Steps[ProfilingResult]:
        """After :meth:`leave`: wait for the stop, get the shared result, vote on the run's deletion."""
        window = self.window
        try:
            yield from self._wait_stopped()
            self.profiler._emit("collection_stopped", window)
            run_dir = self.profiler._stopped_run_dir(window)
            yield from self._produce_or_wait(run_dir)
            tasks, counters = window.shared.take(self.device)
            if self.counters and counters is None:
                counters = TaskCounters(length=len(tasks))  # no task of this device in the run
            result = make_result(tasks, run_dir.name, counters if self.counters else None)
        except BaseException:
            window.shared.release(False)  # an error or cancellation keeps the raw data
            if window.claim_removal() and window.run_dir is not None:
                # cleanup() asked meanwhile
                yield Remove(window.run_dir, window.key.result_path, REMOVED_BY_CLEANUP_CALL)
            raise
        window.shared.release(cleanup)
        if window.claim_removal():
            why = REMOVED_BY_CLEANUP_CALL if window.shared.cleanup_requested else REMOVED_BY_CLEANUP_TRUE
            yield Remove(run_dir, window.key.result_path, why)
        self.run.run_dir, self.run.run_id, self.run.result = run_dir, result.run_id, result
        self.profiler.last_result = result
        if all(task.type in CONTROL_TASK_TYPES for task in result.tasks):
            _log_no_kernel(result, self.device)
        return result

    # -- pieces ---------------------------------------------------------------------------------
    def _wait_stopped(self) -> Steps[None]:
        window = self.window
        timeout = self.profiler.call_timeout
        try:
            yield Wait(window.stopped, timeout, STOP, shield=True)
        except KeyboardInterrupt:
            # Ctrl+C while stopping: the stop is already under way; let it finish first.
            yield Wait(window.stopped, timeout, STOP, shield=True, strict=False)
            raise
        if window.stop_error is not None:
            raise window.stop_error

    def _produce_or_wait(self, run_dir: Path) -> Steps[None]:
        shared = self.window.shared
        profiler = self.profiler
        window = self.window
        while True:
            claim, changed = shared.claim()
            if claim is Claim.READY:
                return
            if claim is Claim.WAIT:
                yield Wait(changed, None, "the shared export")
                continue
            try:
                tasks: dict[int | None, DeviceTasks] | None = None
                counters = shared.counters_wanted
                if profiler.reader is not Reader.MSPROF:
                    began = time.monotonic()
                    outcome: RawResult | Declined = yield ReadRaw(run_dir, counters)
                    raw = raw_or_fallback(profiler.reader, outcome, run_dir)
                    if raw is not None:
                        tasks = raw.device_tasks()
                        rows = len(raw.tasks)
                        profiler._emit("parse_finished", window, time.monotonic() - began, rows)
                if tasks is None:
                    profiler._emit("export_started", window)
                    began = time.monotonic()
                    files = yield Export(window.key.toolkit, run_dir, profiler.export_timeout)
                    profiler._emit("export_finished", window, time.monotonic() - began)
                    began = time.monotonic()
                    tasks = yield Parse(files, counters)
                    rows = sum(len(v[0]) for v in tasks.values())
                    profiler._emit("parse_finished", window, time.monotonic() - began, rows)
            except AprofError as exc:
                shared.publish(None, exc)
            except BaseException:
                shared.abandon()  # another consumer takes over
                raise
            else:
                shared.publish(tasks, None)
            return


def _log_no_kernel(result: ProfilingResult, device: int) -> None:
    """Say that a collection recorded no kernel: its tasks (if any) are CANN's control tasks."""
    types: dict[str, int] = {}
    for task in result.tasks:
        types[task.type] = types.get(task.type, 0) + 1
    what = ", ".join(f"{count} {kind}" for kind, count in types.items()) or "no task at all"
    logger.warning(
        "the collection on device %d recorded no kernel: run %s has %s (CANN control tasks, name N/A, "
        "which never count for task_time_median); launch the kernels inside the profile() block, "
        "on device %d",
        device,
        result.run_id,
        what,
        device,
    )
