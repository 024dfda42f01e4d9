"""``AsyncProfiler``: the per-call protocol driven by awaiting, on anyio (asyncio and trio).

How the twins are built: one protocol with thin drivers (see :mod:`asc_aprof._protocol`).
Nothing here calls aclprof or parses CSV by itself:

* aclprof calls run on the collector's dedicated thread; tasks wait for its latches without a
  thread of their own (the collector wakes them through their event loop), so the event loop
  never blocks and the thread count does not grow with the number of waiting callers;
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
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, Final, Generic, Literal, TypeVar, overload

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ._binding import ProfileTypes
from ._collector import DeviceTasks, get_collector, remove_run_dir, timeout_error
from ._core import (
    ProfilerBase,
    ProfileRun,
    before_manual_start,
    enter_profile_body,
    exit_profile_body,
    mark_manual_start,
)
from ._enums import AicoreMetrics
from ._errors import UsageError
from ._export import run_export_async
from ._protocol import Call, Export, Parse, Step, Steps, Wait
from ._reader import DeviceSplit, RunTasks, aiter_file_batches, aiter_file_tasks, summary_csvs_or_error
from ._records import ProfilingResult, ProfilingTask, make_result
from ._runguard import exporting_async, wait_for_export_async

CaseT = TypeVar("CaseT")
T = TypeVar("T")


async def perform_async(step: Step, limiter: anyio.CapacityLimiter | None = None) -> Any:
    """One protocol step, awaited; *limiter* bounds concurrent exports (waiters hold no token)."""
    if isinstance(step, Wait):
        with anyio.CancelScope(shield=step.shield):
            done = await step.latch.wait_async(step.timeout)
        if not done and step.strict:
            raise timeout_error(step.what, step.timeout)
        return None
    if isinstance(step, Export):
        # The run's slot first: waiting for another export of it must not hold a limiter token.
        async with exporting_async(step.run_dir), (limiter or contextlib.nullcontext()):
            return await run_export_async(step.toolkit, step.run_dir, timeout=step.timeout)
    if isinstance(step, Parse):
        if step.counters:
            split = DeviceSplit(True)
            async with contextlib.aclosing(aiter_file_batches(step.files, counters=True)) as counted:
                async for found in counted:
                    split.add(found)
                    await anyio.lowlevel.checkpoint()
            return split.per_device()
        per_device: dict[int | None, list[ProfilingTask]] = {}
        async with contextlib.aclosing(aiter_file_tasks(step.files)) as batches:
            async for batch in batches:
                for task in batch:
                    per_device.setdefault(task.device, []).append(task)
        return await _freeze(per_device)
    with anyio.CancelScope(shield=True):
        await anyio.to_thread.run_sync(remove_run_dir, step.run_dir, step.root)
    return None


async def drive_async(steps: Steps[T], limiter: anyio.CapacityLimiter | None = None) -> T:
    """Run a protocol phase to its end, awaiting; exceptions of a step are thrown back into it."""
    outcome: Any = None
    failure: BaseException | None = None
    while True:
        try:
            step = steps.send(outcome) if failure is None else steps.throw(failure)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        outcome, failure = None, None
        try:
            outcome = await perform_async(step, limiter)
        except BaseException as exc:
            failure = exc


async def _freeze(per_device: dict[int | None, list[ProfilingTask]]) -> dict[int | None, DeviceTasks]:
    """Turn the per-device lists into the tuples results share, releasing the lists in slices.

    ``tuple(list)`` is one C call (about 16 ms per million tasks here); dropping a million-item
    list at once is another ~10 ms, so that part is done in slices between checkpoints.
    """
    frozen: dict[int | None, DeviceTasks] = {}
    for device, tasks in per_device.items():
        frozen[device] = (tuple(tasks), None)
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


class SweepItems(Generic[CaseT]):
    """The items of a running :meth:`AsyncProfiler.sweep`, in the order they finish.

    ``async for item in items`` (or ``await items.receive()``). Each item received frees a place
    for the workers to start another case (see ``max_pending``).
    """

    __slots__ = ("_places", "_receive")

    def __init__(self, receive: MemoryObjectReceiveStream[SweepItem[CaseT]], places: anyio.Semaphore) -> None:
        self._receive = receive
        self._places = places

    async def receive(self) -> SweepItem[CaseT]:
        """The next item.

        :raises anyio.EndOfStream: when every case has been received
        Cancelled: no item is lost (the stream is unchanged).
        """
        item = await self._receive.receive()
        self._places.release()
        return item

    def __aiter__(self) -> SweepItems[CaseT]:
        return self

    async def __anext__(self) -> SweepItem[CaseT]:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


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
        before_manual_start()
        call = self._call(device_id, metrics, profile_types)
        await drive_async(call.enter())
        self._manual = call
        mark_manual_start(call)

    async def stop(self) -> None:
        """Stop collecting (finalize when no other collection waits).

        Cancellation does not interrupt it: stop/destroy/finalize are awaited shielded, bounded
        by ``call_timeout``.
        """
        call, self._manual = self._manual, None
        if call is None:
            raise UsageError("stop() called without start()")
        await drive_async(call.stop())

    async def export(self, run_id: str | None = None, *, timeline: bool = False) -> Path:
        """Export one run (default: the newest) with ``msprof.py export summary``.

        Cancelled: the export's process group is killed and reaped; the raw data is kept.
        """
        run_dir = self._run_dir(run_id) if run_id is not None else self._last_run_dir()
        async with exporting_async(run_dir):
            await run_export_async(self.toolkit, run_dir, timeout=self.export_timeout)
            if timeline:
                await run_export_async(self.toolkit, run_dir, what="timeline", timeout=self.export_timeout)
        return run_dir

    async def store_result(self, run_id: str, *, counters: bool = False) -> ProfilingResult:
        """Parse run *run_id*'s CSVs into ``last_result``.

        :param counters: also read every task's PMU counters into the result's ``counters``
        Cancelled: parsing stops; ``last_result`` is unchanged.
        """
        return await self._store(self._run_dir(run_id), counters)

    async def store_last_result(self, *, counters: bool = False) -> ProfilingResult:
        """Parse the newest run this profiler created (else the newest in the result path).

        :param counters: as for :meth:`store_result`
        Cancelled: parsing stops; ``last_result`` is unchanged.
        """
        return await self._store(self._last_run_dir(), counters)

    async def _store(self, run_dir: Path, counters: bool = False) -> ProfilingResult:
        await wait_for_export_async(run_dir)
        files = summary_csvs_or_error(run_dir)
        if counters:
            gathered = RunTasks(True)
            async with contextlib.aclosing(aiter_file_batches(files, counters=True)) as counted:
                async for found in counted:
                    gathered.add(found)
            self.last_result = make_result(gathered.tasks, run_dir.name, gathered.counters())
            return self.last_result
        tasks: list[ProfilingTask] = []
        async with contextlib.aclosing(aiter_file_tasks(files)) as batches:
            async for batch in batches:
                tasks.extend(batch)
        self.last_result = make_result(tasks, run_dir.name)
        return self.last_result

    @overload
    def iter_tasks(
        self, run_id: str | None = None, *, counters: Literal[False] = False
    ) -> AsyncGenerator[ProfilingTask, None]: ...

    @overload
    def iter_tasks(
        self, run_id: str | None = None, *, counters: Literal[True]
    ) -> AsyncGenerator[tuple[ProfilingTask, dict[str, float | None]], None]: ...

    @overload
    def iter_tasks(
        self, run_id: str | None = None, *, counters: bool
    ) -> AsyncGenerator[ProfilingTask | tuple[ProfilingTask, dict[str, float | None]], None]: ...

    async def iter_tasks(
        self, run_id: str | None = None, *, counters: bool = False
    ) -> AsyncGenerator[ProfilingTask | tuple[ProfilingTask, dict[str, float | None]], None]:
        """Yield a run's tasks as its CSV is read and parsed (default: the newest run).

        Pull-based: one 32 KiB chunk is read and parsed at a time, only when the consumer asks, so
        memory stays bounded however large the file. With *counters*, each item is a pair
        ``(task, {column: value or None})`` of the task and its PMU counters. Cancelled or closed
        early: the file is closed; nothing else happens.
        """
        run_dir = self._run_dir(run_id) if run_id is not None else self._last_run_dir()
        await wait_for_export_async(run_dir)
        files = summary_csvs_or_error(run_dir)
        if counters:
            async with contextlib.aclosing(aiter_file_batches(files, counters=True)) as counted:
                async for found in counted:
                    assert found.counters is not None
                    for task, row in zip(found.tasks, found.counters.rows(), strict=True):
                        yield task, row
            return
        async with contextlib.aclosing(aiter_file_tasks(files)) as batches:
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
        *,
        counters: bool = False,
    ) -> AsyncIterator[ProfileRun]:
        """``async with profiler.profile(device_id=d) as run:`` start, body, stop, export, parse.

        *counters*: put every task's PMU counters (of the *metrics* group) in the result's
        ``counters`` (:class:`~asc_aprof.TaskCounters`).

        Cancelled while waiting for the window: leaves it, nothing else happens. Cancelled (or
        raising) in the body: leaves the window at once and, when it was the last body, waits
        shielded for stop/destroy/finalize; the exception propagates unchanged; its tasks are
        discarded. Cancelled during the export or the parse: the export's process group is
        killed, the raw data is kept (the others in the window re-run the export).
        """
        token = enter_profile_body()
        try:
            call = self._call(device_id, metrics, profile_types, counters=counters)
            await drive_async(call.enter())
            try:
                yield call.run
            except BaseException:
                await drive_async(call.abort())
                raise
        finally:
            exit_profile_body(token)
        call.leave()
        await drive_async(call.finish(cleanup))

    @contextlib.asynccontextmanager
    async def sweep(
        self,
        cases: Iterable[CaseT],
        run: Callable[[CaseT, int], Awaitable[Any]] | Callable[[CaseT, int], Any],
        devices: Iterable[int] = (0,),
        *,
        export_limit: int | anyio.CapacityLimiter | None = None,
        max_pending: int | None = None,
        cleanup: bool = True,
        metrics: AicoreMetrics | int = AicoreMetrics.PIPE_UTILIZATION,
        profile_types: ProfileTypes | None = None,
        counters: bool = False,
    ) -> AsyncIterator[SweepItems[CaseT]]:
        """Profile every case on the devices, pipelined; items stream out as they are parsed.

        ``async with profiler.sweep(cases, run, devices=[0, 1, 2, 3]) as items:
        async for item in items: ...``. One worker per device takes the next case, profiles
        ``run(case, device)`` (a coroutine function, or a plain function run in a worker thread),
        and hands the stopped collection to an export task, so the device moves on to the next
        case while earlier windows export. Workers on different devices share collection windows.
        Exports run concurrently up to *export_limit* (default: CPU count). With *counters*,
        every item's result carries its tasks' PMU counters.

        Backpressure: at most *max_pending* cases (default: twice the number of devices) are
        started and not yet received by the consumer; a worker waits for a free place before it
        starts the next case. So a consumer that stops reading holds the sweep to that many
        results in memory.

        A failing case never raises out of the sweep: its item carries ``error`` and the other
        cases go on. Leaving the block early (``break``) or cancelling cancels the remaining
        work: bodies leave their windows, collections are stopped, exports are killed, raw data
        of unfinished runs is kept.
        """
        device_list = list(dict.fromkeys(int(d) for d in devices))
        if not device_list:
            raise UsageError("sweep() needs at least one device")
        pending_limit = 2 * len(device_list) if max_pending is None else int(max_pending)
        if pending_limit < 1:
            raise UsageError(f"max_pending must be >= 1, got max_pending={max_pending}")
        if isinstance(export_limit, anyio.CapacityLimiter):
            limiter = export_limit
        else:
            limiter = anyio.CapacityLimiter(export_limit or os.cpu_count() or 1)
        places = anyio.Semaphore(pending_limit)
        pending = iter(cases)
        is_async = inspect.iscoroutinefunction(run)
        send, receive = anyio.create_memory_object_stream[SweepItem[CaseT]](pending_limit)

        async def call_run(case: CaseT, device: int) -> None:
            if is_async:
                await run(case, device)
            else:
                await anyio.to_thread.run_sync(run, case, device)

        async def finish(call: Call, case: CaseT, out: MemoryObjectSendStream[SweepItem[CaseT]]) -> None:
            async with out:
                try:
                    result = await drive_async(call.finish(cleanup), limiter)
                except Exception as exc:
                    await out.send(SweepItem(case, call.device, None, exc))
                else:
                    await out.send(SweepItem(case, call.device, result))

        async def worker(
            device: int,
            first: tuple[CaseT, Call] | None,
            tg: anyio.abc.TaskGroup,
            out: MemoryObjectSendStream[SweepItem[CaseT]],
        ) -> None:
            async with out:
                while True:
                    if first is not None:
                        (case, call), first = first, None  # its place was taken with the first round
                    else:
                        await places.acquire()
                        try:
                            case = next(pending)
                        except StopIteration:
                            places.release()
                            return
                        call = self._call(device, metrics, profile_types, counters=counters)
                    try:
                        await drive_async(call.enter())
                    except Exception as exc:
                        await out.send(SweepItem(case, device, None, exc))
                        continue
                    try:
                        await call_run(case, device)
                    except Exception as exc:
                        await drive_async(call.abort())
                        await out.send(SweepItem(case, device, None, exc))
                        continue
                    except BaseException:
                        await drive_async(call.abort())
                        raise
                    # Leave before handing over: a finish task cancelled before it runs must not
                    # keep the window open.
                    call.leave()
                    tg.start_soon(finish, call, case, out.clone())

        # The first round joins one window atomically, so it covers every device from the start.
        first_cases = list(itertools.islice(pending, min(len(device_list), pending_limit)))
        for _ in first_cases:
            places.acquire_nowait()
        first_round = get_collector().join_many(
            self._key(metrics, profile_types),
            device_list[: len(first_cases)],
            library_owned=self.owns_result_path,
        )
        if first_round:
            self._remember(first_round[0].window)

        async with anyio.create_task_group() as tg:
            async with send:
                for index, device in enumerate(device_list):
                    first = (
                        (first_cases[index], self._call_of(first_round[index], counters=counters))
                        if index < len(first_cases)
                        else None
                    )
                    tg.start_soon(worker, device, first, tg, send.clone())
            items = SweepItems(receive, places)
            try:
                yield items
            finally:
                tg.cancel_scope.cancel()
                await receive.aclose()
