"""The per-call protocol of ``profile()``, ``start()``/``stop()`` and the sweep, written once.

Theory of operation
-------------------
A call goes through the same steps whoever drives it: join a window (done when the
:class:`Call` is made), wait until the window started, run the body, leave, wait until it
stopped, get the window's shared result (export and parse it when first, else wait for whoever
does), take this device's tasks, and vote on deleting the run. Every rule about those steps lives
here, as generators that *yield what they need done* (sans-IO, as the parser is):

* :class:`~asc_aprof._runs._steps.Wait` a latch (with a timeout, optionally shielded from cancellation),
* read the run by the one reading policy (``yield from`` :func:`asc_aprof._runs._run.obtain`: raw data
  natively, else an export with ``msprof.py``, under the profiler's ``reader``), then
  :class:`~asc_aprof._runs._steps.Offload` the split of raw tasks by device, or
  :class:`~asc_aprof._runs._steps.Parse` the exported CSVs,
* :class:`~asc_aprof._runs._steps.Remove` a run.

A driver (:mod:`asc_aprof._runs._drive`) sends each step's outcome back, or throws its exception in, so
the protocol decides what an interrupt means at every point. The two drivers only differ in how
they wait: blocking or awaiting, and the sweep runs the awaiting one. The rules:

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

import functools
import logging
import time
from pathlib import Path
from typing import Protocol, TypeVar

from .._cann._collector import (
    REMOVED_BY_CLEANUP_CALL,
    REMOVED_BY_CLEANUP_TRUE,
    Claim,
    DeviceTasks,
    Participant,
    Window,
    get_collector,
)
from .._model._clock import TaskClocks
from .._model._counters import TaskCounters
from .._model._errors import AprofError
from .._model._progress import EventKind
from .._model._records import CONTROL_TASK_TYPES, ProfilingResult, make_result
from .._plans._raw import Reader
from .._runs._info import RunInfo, read_info
from .._runs._run import obtain
from .._runs._steps import Offload, Parse, Release, Remove, Steps, Wait


class CallOwner(Protocol):
    """What a call needs of the profiler that made it (:class:`asc_aprof._profilers._base.ProfilerBase`)."""

    call_timeout: float | None
    export_timeout: float | None
    reader: Reader
    _manual: Call | None  # the call of a manual start(), until stop()

    def _keep_result(self, result: ProfilingResult) -> None: ...

    def _emit(self, kind: EventKind, window: Window, seconds: float = 0.0, rows: int = 0) -> None: ...

    def _stopped_run_dir(self, window: Window) -> Path: ...


class ProfileRun:
    """The handle ``profile()`` yields: which device, which run, and (after exit) the result.

    :ivar device: the device profiled
    :ivar run_id: the ``PROF_*`` directory name (set once the collection started)
    :ivar run_dir: its path
    :ivar result: this call's :class:`ProfilingResult` (set when the block exits normally)
    :ivar info: what the run's metadata says (:class:`~asc_aprof.RunInfo`), read before the run
        may be deleted, when the call asked for it (bench's windows do); else None
    :ivar clocks: the AI Core clock at the start of each of ``result.tasks`` and the rated clock
        (``TaskClocks``), set with the result where the run was read from its raw data and has
        clock data (910B); else None
    """

    __slots__ = ("clocks", "device", "info", "result", "run_dir", "run_id")

    def __init__(self, device: int) -> None:
        self.device = device
        self.run_id: str | None = None
        self.run_dir: Path | None = None
        self.result: ProfilingResult | None = None
        self.info: RunInfo | None = None
        self.clocks: TaskClocks | None = None

    def __repr__(self) -> str:
        tasks = None if self.result is None else len(self.result.tasks)
        return f"ProfileRun(device={self.device}, run_id={self.run_id!r}, tasks={tasks})"


T = TypeVar("T")


logger = logging.getLogger("asc_aprof")

START = "aclprofInit/aclprofStart"
STOP = "aclprofStop/aclprofFinalize"


class Call:
    """One caller's part in one window: the protocol's phases as step generators.

    Made by :meth:`asc_aprof._profilers._base.ProfilerBase._call`, which joins the window. Used by
    one task or thread.
    """

    __slots__ = ("counters", "info", "keep", "participant", "profiler", "run")

    def __init__(
        self,
        profiler: CallOwner,
        participant: Participant,
        run: ProfileRun,
        *,
        counters: bool = False,
        keep: bool = True,
        info: bool = False,
    ) -> None:
        self.profiler = profiler
        self.participant = participant
        self.run = run
        #: whether this caller's result carries the PMU counters
        self.counters = counters
        #: whether the result goes into the profiler's ``results`` (not a bench or tune window's)
        self.keep = keep
        #: whether to read the run's metadata into ``run.info`` (before its deletion is voted)
        self.info = info

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
            clocks = window.shared.clocks(self.device)
            if self.counters and counters is None:
                counters = TaskCounters(length=len(tasks))  # no task of this device in the run
            result = make_result(tasks, run_dir.name, counters if self.counters else None)
            if self.info:  # before the vote below: the run may be deleted right after it
                self.run.info = yield Offload(functools.partial(_quiet_info, run_dir))
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
        self.run.clocks = clocks
        if self.keep:
            self.profiler._keep_result(result)
        if self.keep and all(task.type in CONTROL_TASK_TYPES for task in result.tasks):
            # (bench and tune windows say what went wrong their own way; tune's probe is empty by design)
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
                counters = shared.counters_wanted
                began = time.monotonic()

                def on_export(finished: bool, seconds: float) -> None:
                    profiler._emit("export_finished" if finished else "export_started", window, seconds)

                found = yield from obtain(
                    run_dir,
                    counters=counters,
                    reader=profiler.reader,
                    toolkit=window.key.toolkit,
                    export_timeout=profiler.export_timeout,
                    on_export=on_export,
                    packed=True,  # (split into public records per device)
                )
                clocks: dict[int | None, TaskClocks] = {}
                if found.raw is not None:
                    box: list[object] = [found.raw]  # the raw tasks' only holder from here
                    split = found.raw.split_by_device
                    del found
                    tasks: dict[int | None, DeviceTasks]
                    tasks, clocks = yield Offload(split)
                    del split
                    yield Release(box)  # freed in slices by the awaiting driver, not at once
                else:
                    began = time.monotonic()
                    tasks = yield Parse(found.files, counters)  # (CSVs carry no clock)
                rows = sum(len(v[0]) for v in tasks.values())
                profiler._emit("parse_finished", window, time.monotonic() - began, rows)
            except AprofError as exc:
                shared.publish(None, exc)
            except BaseException:
                shared.abandon()  # another consumer takes over
                raise
            else:
                shared.publish(tasks, None, clocks)
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


def _quiet_info(run_dir: Path) -> RunInfo | None:
    """*run_dir*'s :class:`RunInfo`, or None where its metadata cannot be read (a figure that
    needs it is then left out, never the measurement)."""
    try:
        return read_info(run_dir)
    except (AprofError, OSError):
        return None
