"""``AsyncProfiler``: the per-call protocol driven by awaiting, on anyio (asyncio and trio).

How the twins are built: one protocol with thin drivers (see :mod:`asc_aprof._profilers._protocol`).
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
import functools
import inspect
import os
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Final, Generic, Literal, TypeVar, cast, overload

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .._cann._binding import ProfileTypes
from .._cann._collector import get_collector, timeout_error
from .._cann._export import run_export_async
from .._cann._runguard import exporting_async
from .._model._defaults import (
    CONFIDENCE,
    DO_BENCH_REP_MS,
    DO_BENCH_WARMUP_MS,
    FIRST_REPS,
    MAX_REPS,
    MAX_TIME_S,
    MIN_REPS,
    REL_WIDTH,
    SEED,
    WARMUP_CALLS,
)
from .._model._enums import AicoreMetrics
from .._model._errors import UsageError
from .._model._metric_group import MetricsArg, metric_selection
from .._model._records import ProfilingResult, ProfilingTask
from .._model._warmup import warming_up
from .._plans._bench import (
    BenchConfig,
    BenchResult,
    Measure,
    Plan,
    bench_config,
    check_do_bench,
    do_bench_config,
    do_bench_value,
    with_grads,
)
from .._runs._drive import drive_async, perform_async
from .._runs._run import AsyncRun
from .._runs._steps import Offload
from ._base import (
    ProfilerBase,
    before_manual_start,
    bench_plan,
    enter_profile_body,
    exit_profile_body,
    mark_manual_start,
    window_of,
    without_pmu,
)
from ._protocol import Call, ProfileRun
from ._tune import TuneOptions, TuneResult, tune_async

CaseT = TypeVar("CaseT")
ConfigT = TypeVar("ConfigT")
T = TypeVar("T")


async def _call_maybe_async(fn: Callable[[], Any], is_async: bool) -> None:
    if is_async:
        await fn()
    else:
        fn()


@dataclasses.dataclass(frozen=True, slots=True)
class SweepItem(Generic[CaseT]):
    """One case's outcome in :meth:`AsyncProfiler.sweep`.

    :ivar case: the case as given
    :ivar device: the device it ran on (or was pinned to)
    :ivar result: its tasks (None when it failed, and in a ``bench=`` sweep)
    :ivar error: the exception of the run function, the collection or the export (None on success)
    :ivar bench: in a ``bench=`` sweep, the case's :class:`~asc_aprof.BenchResult`
    """

    case: CaseT
    device: int
    result: ProfilingResult | None
    error: BaseException | None = None
    bench: BenchResult | None = None


class SweepItems(Generic[CaseT]):
    """The items of a running :meth:`AsyncProfiler.sweep`, in the order they finish.

    ``async for item in items`` (or ``await items.receive()``). Each item received frees a place
    for the workers to start another case (see ``max_pending``).
    """

    __slots__ = ("_receive", "_received")

    def __init__(
        self, receive: MemoryObjectReceiveStream[SweepItem[CaseT]], received: Callable[[], None]
    ) -> None:
        self._receive = receive
        self._received = received

    async def receive(self) -> SweepItem[CaseT]:
        """The next item.

        :raises anyio.EndOfStream: when every case has been received
        Cancelled: no item is lost (the stream is unchanged).
        """
        item = await self._receive.receive()
        self._received()
        return item

    def __aiter__(self) -> SweepItems[CaseT]:
        return self

    async def __anext__(self) -> SweepItem[CaseT]:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class _Scheduler(Generic[CaseT]):
    """Which case a sweep's device takes next: pinned cases wait for their device, others go anywhere.

    Cases are pulled from the iterable lazily, each taking one of *places* (freed when the
    consumer receives its item: the sweep's backpressure). A case pulled by one worker but pinned
    to another device is queued for that device. State of one event loop, touched only by its
    tasks between checkpoints (no lock needed); ``_changed`` is replaced after every change.
    """

    def __init__(
        self,
        cases: Iterable[CaseT],
        placement: Callable[[CaseT], int | None] | None,
        devices: Sequence[int],
        places: int,
    ) -> None:
        self._pending = iter(cases)
        self._placement = placement
        self._devices = devices
        self._exhausted = False
        self._free = places
        self._pinned: dict[int, deque[CaseT]] = {d: deque() for d in devices}
        self._anywhere: deque[CaseT] = deque()
        self._misplaced: deque[tuple[CaseT, int, UsageError]] = deque()
        self._changed = anyio.Event()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def received(self) -> None:
        """The consumer received an item: a place is free."""
        self._free += 1
        self._wake()

    def _pull(self) -> None:
        try:
            case = next(self._pending)
        except StopIteration:
            self._exhausted = True
            self._wake()
            return
        self._free -= 1
        device = None if self._placement is None else self._placement(case)
        if device is None:
            self._anywhere.append(case)
        elif int(device) in self._pinned:
            self._pinned[int(device)].append(case)
        else:
            self._misplaced.append((case, int(device), _not_a_sweep_device(case, int(device), self._devices)))
        self._wake()

    def take_nowait(self, device: int) -> tuple[CaseT, int, UsageError | None] | None:
        """The next case for *device* if one can be had at once (None: none now, or never)."""
        while True:
            if self._misplaced:
                return self._misplaced.popleft()
            if self._pinned[device]:
                return self._pinned[device].popleft(), device, None
            if self._anywhere:
                return self._anywhere.popleft(), device, None
            if self._exhausted or self._free <= 0:
                return None
            self._pull()

    async def take(self, device: int) -> tuple[CaseT, int, UsageError | None] | None:
        """The next case for *device*, waiting for a place or a pinned case; None: no more for it.

        Cancelled: nothing is taken.
        """
        while True:
            got = self.take_nowait(device)
            if got is not None:
                return got
            if self._exhausted:
                return None
            await self._changed.wait()


def _not_a_sweep_device(case: object, device: int, devices: Sequence[int]) -> UsageError:
    return UsageError(
        f"sweep(): case {case!r} is pinned to device {device}, which is not among the sweep's devices "
        f"{list(devices)}: add it to devices= or change the placement"
    )


def _ranges(numbers: Sequence[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` as ``0-2, 5, 7-8``."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


#: Export slots counted by the default ``max_pending`` of a sweep (beyond: the memory it allows grows)
_PENDING_EXPORTS_MAX: Final = 16


def default_max_pending(devices: int, limiter: anyio.CapacityLimiter) -> int:
    """A sweep's default ``max_pending``: a window of *devices* cases for every export the limiter
    lets run at once (up to :data:`_PENDING_EXPORTS_MAX`), one collecting and one being received.

    Each window holds one case per device until its results are received, so with fewer places
    the sweep stops starting windows while the limiter still has room (twice the devices, the
    default before, let at most 2 exports run at once whatever the limit)."""
    tokens = limiter.total_tokens
    exports = _PENDING_EXPORTS_MAX if tokens >= _PENDING_EXPORTS_MAX else max(1, int(tokens))
    return devices * (exports + 2)


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
        metrics: AicoreMetrics | int | str = AicoreMetrics.PIPE_UTILIZATION,
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

    async def stop(self) -> ProfileRun:
        """Stop collecting (finalize when no other collection waits).

        :return: the run's :class:`ProfileRun` (``run_id``, ``run_dir``, ``device``; ``result`` is
            None: export and parse it with :meth:`export` and :meth:`store_result`)

        Cancellation does not interrupt it: stop/destroy/finalize are awaited shielded, bounded
        by ``call_timeout``.
        """
        call, self._manual = self._manual, None
        if call is None:
            raise UsageError("stop() called without start()")
        return await drive_async(call.stop())

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
        """Parse run *run_id*'s CSVs into ``last_result`` (a run not exported yet: see ``reader``).

        :param counters: also read every task's PMU counters into the result's ``counters``
            (of a run not exported yet, the raw reader's where it verified them; else
            ``reader="auto"`` exports the run)

        Cancelled: parsing (or the raw read, or the fallback export, whose process group is
        killed) stops; ``last_result`` is unchanged.
        """
        return await self._store(self._run_dir(run_id), counters)

    async def store_last_result(self, *, counters: bool = False) -> ProfilingResult:
        """Parse the newest run this profiler created (else the newest in the result path).

        :param counters: as for :meth:`store_result`

        Cancelled: parsing (or the raw read, or the fallback export) stops; ``last_result`` is
        unchanged.
        """
        return await self._store(self._last_run_dir(), counters)

    async def _sweep_devices(
        self,
        cases: Iterable[CaseT],
        devices: Iterable[int] | None,
        placement: Callable[[CaseT], int | None] | None,
        metrics: AicoreMetrics | int | str,
        profile_types: ProfileTypes | None,
    ) -> list[int]:
        """The sweep's devices, checked once before any case runs (see :meth:`sweep`)."""
        listed = isinstance(cases, Sequence)
        pins: list[tuple[CaseT, int]] = []
        if placement is not None and listed:
            assert isinstance(cases, Sequence)
            pins = [(case, int(d)) for case in cases if (d := placement(case)) is not None]
        if devices is not None:
            device_list = list(dict.fromkeys(int(d) for d in devices))
        elif placement is None:
            device_list = [0]
        elif listed:
            device_list = sorted({d for _, d in pins}) or [0]
        else:
            raise UsageError("sweep(placement=...) over cases that are not a sequence needs devices=")
        if not device_list:
            raise UsageError("sweep() needs at least one device")
        for device in device_list:
            self._device(device)
        for case, device in pins:
            if device not in device_list:
                raise _not_a_sweep_device(case, device, device_list)
        done, refused = get_collector().check_devices(self._key(metrics, profile_types), device_list)
        with anyio.CancelScope(shield=True):  # the check is quick; its result must not be lost
            finished = await done.wait_async(self.call_timeout)
        if not finished:
            raise timeout_error("checking the sweep's devices (aclprofCreateConfig)", self.call_timeout)
        if refused:
            # One clause per distinct reason, devices as ranges: 57 refused devices stay one line.
            reasons: dict[str, list[int]] = {}
            for d, exc in sorted(refused.items()):
                reasons.setdefault(str(exc).replace(f"device {d}", "device N"), []).append(d)
            bad = "; ".join(f"devices {_ranges(ds)}: {why}" for why, ds in reasons.items())
            good = [d for d in device_list if d not in refused]
            raise UsageError(
                f"sweep(): CANN refuses devices {_ranges(sorted(refused))} of {_ranges(device_list)}, so no "
                f"case ran ({bad}). Devices it accepts: {_ranges(good) if good else 'none'}"
            )
        return device_list

    async def _store(self, run_dir: Path, counters: bool = False) -> ProfilingResult:
        run = self.open_run_dir(run_dir)
        result = await run.result(counters=counters)
        self._keep_result(result)
        return result

    def open_run_dir(self, run_dir: Path) -> AsyncRun:
        return AsyncRun(run_dir, **self._reading())

    async def open_run(self, run: str | os.PathLike[str] | None = None) -> AsyncRun:
        """A run of this profiler's result path (a run id; default the newest, as
        :meth:`store_last_result` picks it) as an :class:`~asc_aprof.AsyncRun`, read with this
        profiler's ``reader``, toolkit and export timeout.

        Cancelled: returns at once (finding the run is a few system calls in a worker thread).
        """
        run_dir = self._last_run_dir() if run is None else self._run_dir(run)
        made: AsyncRun = await perform_async(Offload(lambda: self.open_run_dir(run_dir)))
        return made

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
        """Yield a run's tasks as they are read (default: the newest run), per ``reader``.

        Pull-based: from CSVs one 32 KiB chunk is read and parsed at a time, only when the
        consumer asks, so memory stays bounded however large the file; from raw data the run is
        decoded in a worker thread, then its tasks are made 2,048 at a time between checkpoints.
        With *counters*, each item is a pair ``(task, {column: value or None})`` of the task and
        its PMU counters. Cancelled or closed early: the file is closed (a decode in a worker
        thread finishes unseen); nothing else happens.
        """
        run_dir = self._run_dir(run_id) if run_id is not None else self._last_run_dir()
        run = self.open_run_dir(run_dir)
        async with contextlib.aclosing(run.batches(counters=counters)) as batches:
            async for batch in batches:
                if counters:
                    assert batch.counters is not None
                    for task, row in zip(batch.tasks, batch.counters.rows(), strict=True):
                        yield task, row
                else:
                    for task in batch.tasks:
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
        metrics: AicoreMetrics | int | str = AicoreMetrics.PIPE_UTILIZATION,
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
        async with self._collect(device_id, cleanup, metrics, profile_types, counters) as run:
            yield run

    async def bench(
        self,
        fn: Callable[[], Awaitable[object]] | Callable[[], object],
        device_id: int | None = None,
        *,
        flush: Callable[[], Awaitable[object]] | Callable[[], object] | None = None,
        warmup: int = WARMUP_CALLS,
        warmup_time: float | None = None,
        reps: int | None = None,
        rel_width: float = REL_WIDTH,
        min_reps: int = MIN_REPS,
        max_reps: int = MAX_REPS,
        max_time: float = MAX_TIME_S,
        batch: int | None = None,
        confidence: float = CONFIDENCE,
        kernels: int | None = None,
        task_types: Iterable[str] | None = None,
        cleanup: bool = True,
        metrics: MetricsArg = AicoreMetrics.PIPE_UTILIZATION,
        profile_types: ProfileTypes | None = None,
        drop_throttled: bool = False,
    ) -> BenchResult:
        """Measure ``fn()`` on *device_id*; the parameters are :meth:`Profiler.bench`'s.

        *fn* and *flush* may be coroutine functions (awaited) or plain functions (a window's
        repetitions then run in one worker thread). Benchmarks of other devices running
        concurrently (other tasks, or a ``bench=`` sweep) share collection windows.

        Cancelled: the window being measured is left as a cancelled ``profile()`` body leaves
        it (collection stopped, raw data kept); a batch of plain-function repetitions already in
        its worker thread finishes first. Nothing is returned.
        """
        config = bench_config(
            warmup=warmup,
            warmup_time=warmup_time,
            reps=reps,
            rel_width=rel_width,
            min_reps=min_reps,
            max_reps=max_reps,
            max_time=max_time,
            batch=batch,
            confidence=confidence,
            kernels=kernels,
            task_types=task_types,
            drop_throttled=drop_throttled,
        )
        return await self._bench(fn, device_id, flush, config, cleanup, metrics, profile_types)

    async def tune(
        self,
        configs: Iterable[ConfigT],
        run: Callable[[ConfigT, int], Awaitable[object]] | Callable[[ConfigT, int], object],
        devices: Iterable[int] | None = None,
        *,
        key: Any = None,
        flush: Callable[[int], Awaitable[object]] | Callable[[int], object] | None = None,
        rel_width: float = REL_WIDTH,
        confidence: float = CONFIDENCE,
        first_reps: int = FIRST_REPS,
        max_reps: int = MAX_REPS,
        warmup: int = WARMUP_CALLS,
        seed: int = SEED,
        racing: bool = True,
        cache: bool = True,
        retune: bool = False,
        cache_dir: str | os.PathLike[str] | None = None,
        chip: str | None = None,
        cann: str | None = None,
    ) -> TuneResult[ConfigT]:
        """The fastest of *configs*: ``run(config, device)`` raced on *devices* (default ``[0]``).

        Every candidate is measured a little (``first_reps`` calls), then candidates whose
        median interval lies entirely above the leader's are dropped and the others measured
        again, doubling their samples each round, until every remaining interval is at most
        *rel_width* of its median (or *max_reps* calls); rounds run the candidates in an order
        shuffled by *seed*. *flush(device)* runs before every repetition and never counts.
        A failing candidate is reported (status ``failed``), never raised; only when all fail
        :class:`~asc_aprof.TuneError` is raised. With a *key* (e.g. the kernel's name and
        shapes) the result is cached on disk per key, candidates, chip, CANN version and
        asc-aprof version, and a later process gets it back without measuring (``retune=True``
        measures again). *chip* / *cann* override what the toolkit reports. *racing=False*
        measures every candidate to the same width (the brute-force baseline). Several devices
        measure different candidates of a round at once (one task per device; *run* and *flush* may be
        coroutine functions). See :mod:`asc_aprof._profilers._tune` for the rule and the cache.

        Cancelled: the benchmark being measured is left as :meth:`bench` leaves it; nothing is
        cached or returned.
        """
        options = TuneOptions(rel_width, confidence, first_reps, max_reps, warmup, seed, racing)
        return await tune_async(
            self,
            configs,
            run,
            devices,
            key=key,
            flush=flush,
            options=options,
            cache=cache,
            retune=retune,
            cache_dir=cache_dir,
            chip=chip,
            cann=cann,
        )

    async def do_bench(
        self,
        fn: Callable[[], Awaitable[object]] | Callable[[], object],
        warmup: float = DO_BENCH_WARMUP_MS,
        rep: float = DO_BENCH_REP_MS,
        grad_to_none: Sequence[Any] | None = None,
        quantiles: Sequence[float] | None = None,
        return_mode: str = "mean",
        *,
        device_id: int | None = None,
        flush: Callable[[], object] | None = None,
        drop_throttled: bool = False,
    ) -> float | list[float]:
        """triton's ``do_bench`` (see :meth:`Profiler.do_bench`), in milliseconds.

        Cancelled: as :meth:`bench`.
        """
        check_do_bench(return_mode, quantiles)
        config = do_bench_config(warmup, rep, drop_throttled)
        result = await self._bench(fn, device_id, with_grads(flush, grad_to_none), config, True, None, None)
        return do_bench_value(result, quantiles, return_mode)

    async def _bench(
        self,
        fn: Callable[[], Awaitable[object]] | Callable[[], object],
        device_id: int | None,
        flush: Callable[[], Awaitable[object]] | Callable[[], object] | None,
        config: BenchConfig,
        cleanup: bool,
        metrics: MetricsArg | None,
        profile_types: ProfileTypes | None,
    ) -> BenchResult:
        device = self._device(device_id)
        selection = None if metrics is None else metric_selection(metrics)
        metric: AicoreMetrics | int | str = AicoreMetrics.PIPE_UTILIZATION
        if selection is None and metrics is not None:
            metric = cast(AicoreMetrics | int | str, metrics)
        steps: Plan = bench_plan(config, device=device, flush=flush is not None, selection=selection)
        fn_async = inspect.iscoroutinefunction(fn)
        flush_async = flush is not None and inspect.iscoroutinefunction(flush)
        threaded = not fn_async and not flush_async

        def repeat_sync(n: int, with_flush: bool, with_call: bool, seconds: float | None) -> int:
            began, calls = time.monotonic(), 0
            while calls < n or (seconds is not None and time.monotonic() - began < seconds):
                if with_flush and flush is not None:
                    flush()
                if with_call:
                    fn()
                calls += 1
            return calls

        async def repeat(
            n: int, with_flush: bool, with_call: bool = True, seconds: float | None = None
        ) -> int:
            if threaded:
                return await anyio.to_thread.run_sync(repeat_sync, n, with_flush, with_call, seconds)
            began, calls = time.monotonic(), 0
            while calls < n or (seconds is not None and time.monotonic() - began < seconds):
                if with_flush and flush is not None:
                    await _call_maybe_async(flush, flush_async)
                if with_call:
                    await _call_maybe_async(fn, fn_async)
                calls += 1
            return calls

        async def perform(step: Measure | Any) -> Any:
            began = time.monotonic()
            if isinstance(step, Measure):
                group = metric if step.metrics is None else step.metrics
                types = profile_types if step.pmu else without_pmu(profile_types)
                want = selection is not None
                async with self._collect(
                    device, cleanup, group, types, counters=step.counters, keep=False, info=want
                ) as run:
                    await repeat(step.reps, step.flush, step.call)
                return window_of(run, time.monotonic() - began)
            with warming_up():
                calls = await repeat(step.calls, True, True, step.seconds)
            return (calls, time.monotonic() - began)

        return await drive_async(steps, perform=perform)

    @contextlib.asynccontextmanager
    async def _collect(
        self,
        device_id: int | None,
        cleanup: bool,
        metrics: AicoreMetrics | int | str,
        profile_types: ProfileTypes | None,
        counters: bool = False,
        keep: bool = True,
        info: bool = False,
    ) -> AsyncIterator[ProfileRun]:
        token = enter_profile_body()
        try:
            call = self._call(device_id, metrics, profile_types, counters=counters, keep=keep, info=info)
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
        devices: Iterable[int] | None = None,
        *,
        placement: Callable[[CaseT], int | None] | None = None,
        bench: BenchConfig | None = None,
        flush: Callable[[int], Awaitable[Any]] | Callable[[int], Any] | None = None,
        export_limit: int | anyio.CapacityLimiter | None = None,
        max_pending: int | None = None,
        cleanup: bool = True,
        metrics: AicoreMetrics | int | str = AicoreMetrics.PIPE_UTILIZATION,
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

        Placement: ``placement(case)`` returns the device a case must run on, or None for any;
        e.g. cases given as ``(case, device)`` pairs with ``placement=operator.itemgetter(1)``.
        *devices* defaults to ``[0]``, or with a *placement* over a sequence of cases to the
        devices the cases are pinned to. Before any case runs, every device is checked once
        (CANN must accept its id), and with a sequence of cases every pinned device must be
        among *devices*: a bad one raises :class:`~asc_aprof.UsageError` naming it, instead of
        failing cases one by one. A case of a lazy iterable pinned elsewhere gets an item with
        that error.

        ``bench=BenchConfig(...)``: each case is measured with :meth:`bench` instead of one
        profile (items carry ``.bench``; ``flush(device)``, if given, runs before every
        repetition); the benchmarks of different devices share collection windows.

        Backpressure: at most *max_pending* cases are started and not yet received by the
        consumer; a worker waits for a free place before it starts the next case. So a consumer
        that stops reading holds the sweep to that many results in memory. The default,
        ``len(devices) * (export_limit + 2)`` (the limit counted up to 16), leaves room for a
        window on every device per export the limiter lets run, one collecting and one being
        received: a smaller one would cap the exports running at once below *export_limit*.

        A failing case never raises out of the sweep: its item carries ``error`` and the other
        cases go on. Leaving the block early (``break``) or cancelling cancels the remaining
        work: bodies leave their windows, collections are stopped, exports are killed, raw data
        of unfinished runs is kept. Cancelled while the devices are checked: nothing ran.
        """
        device_list = await self._sweep_devices(cases, devices, placement, metrics, profile_types)
        if isinstance(export_limit, anyio.CapacityLimiter):
            limiter = export_limit
        else:
            limiter = anyio.CapacityLimiter(export_limit or os.cpu_count() or 1)
        if max_pending is None:
            pending_limit = default_max_pending(len(device_list), limiter)
        else:
            pending_limit = int(max_pending)
        if pending_limit < 1:
            raise UsageError(f"max_pending must be >= 1, got max_pending={max_pending}")
        scheduler = _Scheduler(cases, placement, device_list, pending_limit)
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

        async def bench_case(case: CaseT, device: int, out: MemoryObjectSendStream[SweepItem[CaseT]]) -> None:
            assert bench is not None
            fn = functools.partial(run, case, device)
            flush_fn = None if flush is None else functools.partial(flush, device)
            try:
                result = await self._bench(fn, device, flush_fn, bench, cleanup, metrics, profile_types)
            except Exception as exc:
                await out.send(SweepItem(case, device, None, exc))
            else:
                await out.send(SweepItem(case, device, None, None, result))

        async def worker(
            device: int,
            first: tuple[tuple[CaseT, int, UsageError | None], Call | None] | None,
            tg: anyio.abc.TaskGroup,
            out: MemoryObjectSendStream[SweepItem[CaseT]],
        ) -> None:
            # However the worker ends (no more cases, cancelled), windows stop waiting for it.
            async with out:
                with cohort.member(device) if cohort is not None else contextlib.nullcontext():
                    await work(device, first, tg, out)

        async def work(
            device: int,
            first: tuple[tuple[CaseT, int, UsageError | None], Call | None] | None,
            tg: anyio.abc.TaskGroup,
            out: MemoryObjectSendStream[SweepItem[CaseT]],
        ) -> None:
            while True:
                call: Call | None = None
                if first is not None:
                    (case, pinned, misplaced), call = first
                    first = None
                else:
                    got = scheduler.take_nowait(device)
                    if got is None:
                        # Unpinned, a place freed by the consumer gives this device the next
                        # case soon: windows keep waiting for it. Pinned, nobody knows.
                        if cohort is not None and placement is not None:
                            cohort.withdraw(device)
                        got = await scheduler.take(device)
                        if got is None:
                            return
                        if cohort is not None:
                            cohort.expect(device)
                    case, pinned, misplaced = got
                if misplaced is not None:
                    await out.send(SweepItem(case, pinned, None, misplaced))
                    continue
                if bench is not None:
                    await bench_case(case, device, out)
                    continue
                if call is None:
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
        firsts: list[tuple[int, tuple[CaseT, int, UsageError | None]]] = []
        if bench is None:
            for device in device_list:
                got = scheduler.take_nowait(device)
                if got is not None:
                    firsts.append((device, got))
        joining = [device for device, got in firsts if got[2] is None]
        first_round = (
            get_collector().join_many(
                self._key(metrics, profile_types), joining, library_owned=self.owns_result_path
            )
            if joining
            else []
        )
        if first_round:
            self._remember(first_round[0].window)
        calls = {p.device: self._call_of(p, counters=counters) for p in first_round}
        first_of = {device: got for device, got in firsts}
        # Later windows wait for every device still working (see asc_aprof._cann._collector).
        cohort = (
            get_collector().gather(self._key(metrics, profile_types), device_list)
            if len(device_list) > 1
            else None
        )

        with cohort if cohort is not None else contextlib.nullcontext():
            async with anyio.create_task_group() as tg:
                async with send:
                    for device in device_list:
                        got = first_of.get(device)
                        first = None
                        if got is not None:
                            # a misplaced first case joined no window: the worker sends its error
                            first = (got, calls.get(device))
                        tg.start_soon(worker, device, first, tg, send.clone())
                items = SweepItems(receive, scheduler.received)
                try:
                    yield items
                finally:
                    tg.cancel_scope.cancel()
                    await receive.aclose()
