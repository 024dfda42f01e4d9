"""``AsyncProfiler``: the async shell over the shared core, on anyio (asyncio and trio).

How the twins are built: a shared blocking core with thin shells (see :mod:`asc_aprof._core`).
Nothing here calls aclprof or parses CSV by itself:

* aclprof calls run on the collector's dedicated thread; this module only waits for the
  collector's events, from a worker thread, so the event loop never blocks;
* the export runs through ``anyio.open_process`` in its own process group, stderr drained;
* parsing is fed from 32 KiB ``anyio`` file reads, one chunk between checkpoints.

Cancellation (every public coroutine documents its own case): a caller cancelled while waiting
for a window leaves it; a caller cancelled in its body leaves the window and, when it was the
last body, waits (shielded, bounded by ``call_timeout``) for stop/destroy/finalize; a cancelled
export kills the export's process group and keeps the raw ``PROF_*`` data; other callers in the
same window are not disturbed (one of them takes over the export).
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import itertools
import os
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Final, Generic, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ._binding import ProfileTypes
from ._collector import CollectionTimeout, Participant, Window, get_collector, remove_run_dir
from ._core import (
    ProfilerBase,
    ProfileRun,
    enter_profile_body,
    exit_profile_body,
    make_result,
)
from ._enums import AicoreMetrics
from ._errors import AprofError, UsageError
from ._export import run_export_async
from ._reader import aiter_file_tasks, summary_csvs_or_error
from ._records import ProfilingResult, ProfilingTask

CaseT = TypeVar("CaseT")


async def wait_thread_event(event: threading.Event, timeout: float | None, what: str) -> None:
    """Await a ``threading.Event`` without blocking the loop (abandoned on cancellation)."""
    if event.is_set():
        await anyio.lowlevel.checkpoint()
        return
    # A parked worker thread per waiter, on a limiter of its own: waiters must never hold tokens
    # of the default limiter, which the export's file reads and sync run() functions need, or a
    # sweep with many windows in flight would starve its own exports and deadlock.
    done = await anyio.to_thread.run_sync(
        event.wait, timeout, abandon_on_cancel=True, limiter=anyio.CapacityLimiter(1)
    )
    if not done:
        raise CollectionTimeout(
            f"{what} did not finish within {timeout:g} s; the collector finishes the call in the "
            "background and accepts the next collection after it"
        )


async def _leave_and_settle(participant: Participant, timeout: float | None) -> None:
    """Leave the window; if this was the last body, wait (shielded) for the stop to finish."""
    if get_collector().leave(participant):
        with anyio.CancelScope(shield=True), contextlib.suppress(CollectionTimeout):
            await wait_thread_event(participant.window.stopped, timeout, "aclprofStop")


async def _wait_started(participant: Participant, timeout: float | None) -> None:
    window = participant.window
    try:
        await wait_thread_event(window.started, timeout, "aclprofInit/aclprofStart")
        window.check_started()
    except BaseException:
        await _leave_and_settle(participant, timeout)
        raise


async def _wait_stopped(window: Window, timeout: float | None) -> None:
    with anyio.CancelScope(shield=True):
        await wait_thread_event(window.stopped, timeout, "aclprofStop/aclprofFinalize")
    if window.stop_error is not None:
        raise window.stop_error


async def window_result_async(
    profiler: ProfilerBase,
    window: Window,
    device: int,
    limiter: anyio.CapacityLimiter | None = None,
) -> ProfilingResult:
    """Export and parse the window once (whoever asks first), then take this device's tasks.

    *limiter* bounds concurrent exports; callers waiting for another's export hold no token.
    """
    run_dir = profiler._stopped_run_dir(window)
    while True:
        claim, event = window.claim_result()
        if claim is None:
            break
        if claim is False:
            await wait_thread_event(event, None, "the shared export")
            continue
        try:
            async with limiter if limiter is not None else contextlib.nullcontext():
                profiler._emit("export_started", window)
                began = time.monotonic()
                files = await run_export_async(window.key.toolkit, run_dir, timeout=profiler.export_timeout)
            profiler._emit("export_finished", window, time.monotonic() - began)
            began = time.monotonic()
            per_device: dict[int | None, list[ProfilingTask]] = {}
            rows = 0
            async with contextlib.aclosing(aiter_file_tasks(files)) as batches:
                async for batch in batches:
                    rows += len(batch)
                    for task in batch:
                        per_device.setdefault(task.device, []).append(task)
            result = await _freeze(per_device)
            profiler._emit("parse_finished", window, time.monotonic() - began, rows)
        except AprofError as exc:
            window.publish_result(None, exc)
        except BaseException:
            window.publish_result(None, None)  # another caller may take over
            raise
        else:
            window.publish_result(result, None)
        break
    return make_result(window.take(device), run_dir.name)


async def _freeze(
    per_device: dict[int | None, list[ProfilingTask]],
) -> dict[int | None, tuple[ProfilingTask, ...]]:
    """Turn the per-device lists into the tuples results share, releasing the lists in slices.

    ``tuple(list)`` is one C call (about 16 ms per million tasks here); dropping a million-item
    list at once is another ~10 ms, so that part is done in slices between checkpoints.
    """
    frozen: dict[int | None, tuple[ProfilingTask, ...]] = {}
    for device, tasks in per_device.items():
        frozen[device] = tuple(tasks)
        await anyio.lowlevel.checkpoint()
        while tasks:
            del tasks[-_RELEASE_SLICE:]
            await anyio.lowlevel.checkpoint()
    return frozen


_RELEASE_SLICE: Final = 1 << 17


@dataclasses.dataclass(frozen=True, slots=True)
class SweepItem(Generic[CaseT]):
    """One case's outcome in :meth:`AsyncProfiler.sweep`.

    :ivar case: the case as given
    :ivar device: the device it ran on
    :ivar result: its tasks (None when it failed)
    :ivar error: the exception of the run function, the collection or the export (None on success)
    """

    case: CaseT
    device: int
    result: ProfilingResult | None
    error: BaseException | None = None


class AsyncProfiler(ProfilerBase):
    """The async twin of :class:`Profiler` (same parameters), for asyncio and trio via anyio.

    Concurrent ``profile()`` calls for different devices with the same result path, metrics and
    data types share one collection window: one config, one start, one stop, one export, with rows
    split by device. Profilers without a result path share the process-wide temporary root, so
    separate default profilers batch too.
    """

    async def start(
        self,
        device_id: int | None = None,
        metrics: AicoreMetrics | int = AicoreMetrics.PIPE_UTILIZATION,
        profile_types: ProfileTypes | None = None,
    ) -> None:
        """Start collecting on *device_id*.

        Cancelled while waiting for the window or the start: the caller leaves the window; if the
        start went through, the collection is stopped again (shielded), so nothing keeps running.
        """
        if self._manual is not None:
            raise UsageError("start() called twice without stop()")
        participant = self._join(device_id, metrics, profile_types)
        await _wait_started(participant, self.call_timeout)
        self._manual = participant
        self._record_started(participant)

    async def stop(self) -> None:
        """Stop collecting (finalize when no other collection waits).

        Cancellation does not interrupt it: stop/destroy/finalize are awaited shielded, bounded
        by ``call_timeout``.
        """
        participant, self._manual = self._manual, None
        if participant is None:
            raise UsageError("stop() called without start()")
        get_collector().leave(participant)
        await _wait_stopped(participant.window, self.call_timeout)
        self._stopped_run_dir(participant.window)

    async def export(self, run_id: str | None = None, *, timeline: bool = False) -> Path:
        """Export one run (default: the newest) with ``msprof.py export summary``.

        Cancelled: the export's process group is killed and reaped; the raw data is kept.
        """
        run_dir = self._run_dir(run_id) if run_id is not None else self._last_run_dir()
        await run_export_async(self.toolkit, run_dir, timeout=self.export_timeout)
        if timeline:
            await run_export_async(self.toolkit, run_dir, what="timeline", timeout=self.export_timeout)
        return run_dir

    async def store_result(self, run_id: str) -> ProfilingResult:
        """Parse run *run_id*'s CSVs into ``last_result``.

        Cancelled: parsing stops; ``last_result`` is unchanged.
        """
        return await self._store(self._run_dir(run_id))

    async def store_last_result(self) -> ProfilingResult:
        """Parse the newest run this profiler created (else the newest in the result path).

        Cancelled: parsing stops; ``last_result`` is unchanged.
        """
        return await self._store(self._last_run_dir())

    async def _store(self, run_dir: Path) -> ProfilingResult:
        tasks: list[ProfilingTask] = []
        async with contextlib.aclosing(aiter_file_tasks(summary_csvs_or_error(run_dir))) as batches:
            async for batch in batches:
                tasks.extend(batch)
        self.last_result = make_result(tasks, run_dir.name)
        return self.last_result

    async def iter_tasks(self, run_id: str | None = None) -> AsyncGenerator[ProfilingTask, None]:
        """Yield a run's tasks as its CSV is read and parsed (default: the newest run).

        Pull-based: one 32 KiB chunk is read and parsed at a time, only when the consumer asks, so
        memory stays bounded however large the file. Cancelled or closed early: the file is
        closed; nothing else happens.
        """
        run_dir = self._run_dir(run_id) if run_id is not None else self._last_run_dir()
        async with contextlib.aclosing(aiter_file_tasks(summary_csvs_or_error(run_dir))) as batches:
            async for batch in batches:
                for task in batch:
                    yield task

    async def cleanup(self) -> list[Path]:
        """Delete runs this profiler created in the temporary root (never in a path you gave).

        Cancelled: runs not yet removed stay; ``cleanup()`` can be called again.
        """
        return await anyio.to_thread.run_sync(self._cleanup)

    @contextlib.asynccontextmanager
    async def profile(
        self,
        device_id: int | None = None,
        cleanup: bool = True,
        metrics: AicoreMetrics | int = AicoreMetrics.PIPE_UTILIZATION,
        profile_types: ProfileTypes | None = None,
    ) -> AsyncIterator[ProfileRun]:
        """``async with profiler.profile(device_id=d) as run:`` start, body, stop, export, parse.

        Cancelled while waiting for the window: leaves it, nothing else happens. Cancelled (or
        raising) in the body: leaves the window at once and, when it was the last body, waits
        shielded for stop/destroy/finalize; the exception propagates unchanged; its tasks are
        discarded. Cancelled during the export or the parse: the export's process group is
        killed, the raw data is kept (the others in the window re-run the export).
        """
        token = enter_profile_body()
        try:
            participant = self._join(device_id, metrics, profile_types)
            run = ProfileRun(participant.device)
            await _wait_started(participant, self.call_timeout)
            self._record_started(participant, run)
            try:
                yield run
            except BaseException:
                await _leave_and_settle(participant, self.call_timeout)
                raise
        finally:
            exit_profile_body(token)
        get_collector().leave(participant, consume=True)
        await self._finish(participant, run, cleanup)

    async def _finish(
        self,
        participant: Participant,
        run: ProfileRun,
        cleanup: bool,
        limiter: anyio.CapacityLimiter | None = None,
    ) -> ProfilingResult:
        """Wait for the stop, then export/parse once; the caller has already left with consume=True."""
        window = participant.window
        done = False
        try:
            await _wait_stopped(window, self.call_timeout)
            self._emit("collection_stopped", window)
            result = await window_result_async(self, window, participant.device, limiter)
            done = True
        finally:
            doomed = window.consumed(cleanup and done and window.result_error is None)
            if doomed is not None:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(remove_run_dir, doomed, window.key.result_path)
        run.run_dir, run.run_id, run.result = window.run_dir, result.run_id, result
        self.last_result = result
        return result

    def _cases_for(
        self,
        device: int,
        first: tuple[CaseT, Participant] | None,
        pending: Iterator[CaseT],
        metrics: AicoreMetrics | int,
        profile_types: ProfileTypes | None,
    ) -> Iterator[tuple[CaseT, Participant]]:
        """The worker's cases, each with its place in a window (joined just before it runs)."""
        if first is None:
            return
        yield first
        for case in pending:
            yield case, self._join(device, metrics, profile_types)

    @contextlib.asynccontextmanager
    async def sweep(
        self,
        cases: Iterable[CaseT],
        run: Callable[[CaseT, int], Awaitable[Any]] | Callable[[CaseT, int], Any],
        devices: Iterable[int] = (0,),
        *,
        export_limit: int | anyio.CapacityLimiter | None = None,
        cleanup: bool = True,
        metrics: AicoreMetrics | int = AicoreMetrics.PIPE_UTILIZATION,
        profile_types: ProfileTypes | None = None,
    ) -> AsyncIterator[MemoryObjectReceiveStream[SweepItem[CaseT]]]:
        """Profile every case on the devices, pipelined; items stream out as they are parsed.

        ``async with profiler.sweep(cases, run, devices=[0, 1, 2, 3]) as items:
        async for item in items: ...``. One worker per device takes the next case, profiles
        ``run(case, device)`` (a coroutine function, or a plain function run in a worker thread),
        and hands the stopped collection to an export task, so the device moves on to the next
        case while earlier windows export. Workers on different devices share collection windows.
        Exports run concurrently up to *export_limit* (default: CPU count).

        A failing case never raises out of the sweep: its item carries ``error`` and the other
        cases go on. Leaving the block early (``break``) or cancelling cancels the remaining
        work: bodies leave their windows, collections are stopped, exports are killed, raw data
        of unfinished runs is kept.
        """
        device_list = list(dict.fromkeys(int(d) for d in devices))
        if not device_list:
            raise UsageError("sweep() needs at least one device")
        if isinstance(export_limit, anyio.CapacityLimiter):
            limiter = export_limit
        else:
            limiter = anyio.CapacityLimiter(export_limit or os.cpu_count() or 1)
        pending = iter(cases)
        is_async = inspect.iscoroutinefunction(run)
        send, receive = anyio.create_memory_object_stream[SweepItem[CaseT]](len(device_list))

        async def call_run(case: CaseT, device: int) -> None:
            if is_async:
                await run(case, device)
            else:
                await anyio.to_thread.run_sync(run, case, device)

        async def finish(
            participant: Participant, case: CaseT, device: int, out: MemoryObjectSendStream[SweepItem[CaseT]]
        ) -> None:
            async with out:
                handle = ProfileRun(device)
                try:
                    result = await self._finish(participant, handle, cleanup, limiter)
                except Exception as exc:
                    await out.send(SweepItem(case, device, None, exc))
                else:
                    await out.send(SweepItem(case, device, result))

        # The first round joins one window atomically, so it covers every device from the start.
        first_cases = list(itertools.islice(pending, len(device_list)))
        first_round = get_collector().join_many(
            self._key(metrics, profile_types),
            device_list[: len(first_cases)],
            library_owned=self.owns_result_path,
        )
        if first_round:
            self._remember(first_round[0].window)

        async def worker(
            device: int,
            first: tuple[CaseT, Participant] | None,
            tg: anyio.abc.TaskGroup,
            out: MemoryObjectSendStream[SweepItem[CaseT]],
        ) -> None:
            async with out:
                for case, participant in self._cases_for(device, first, pending, metrics, profile_types):
                    try:
                        await _wait_started(participant, self.call_timeout)
                    except Exception as exc:
                        await out.send(SweepItem(case, device, None, exc))
                        continue
                    self._record_started(participant)
                    try:
                        await call_run(case, device)
                    except Exception as exc:
                        await _leave_and_settle(participant, self.call_timeout)
                        await out.send(SweepItem(case, device, None, exc))
                        continue
                    except BaseException:
                        await _leave_and_settle(participant, self.call_timeout)
                        raise
                    # Leave before handing over: a finish task cancelled before it runs must not
                    # keep the window open.
                    get_collector().leave(participant, consume=True)
                    tg.start_soon(finish, participant, case, device, out.clone())

        async with anyio.create_task_group() as tg:
            async with send:
                for index, device in enumerate(device_list):
                    first = (first_cases[index], first_round[index]) if index < len(first_cases) else None
                    tg.start_soon(worker, device, first, tg, send.clone())
            try:
                yield receive
            finally:
                tg.cancel_scope.cancel()
                await receive.aclose()
