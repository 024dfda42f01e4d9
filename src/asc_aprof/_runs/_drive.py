"""The two drivers of every plan: one blocking (:func:`drive`), one awaiting (:func:`drive_async`).

A plan (see :mod:`asc_aprof._runs._steps`) yields steps; a driver does each one and sends back the
outcome, or throws the step's exception into the plan, so the plan decides what an interrupt means
at every point. The drivers differ only in how they wait:

* blocking: latches are waited on, exports run with :func:`~asc_aprof._cann._export.run_export`, CSVs
  are read in 1 MiB chunks, raw data and offloaded work run inline;
* awaiting: latches wake the task through its event loop, exports run through anyio's process
  API, CSVs are read in 32 KiB slices between checkpoints, and raw data and offloaded work run
  in a worker thread, so the event loop never waits on them.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Final, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread

from .._cann._collector import DeviceTasks, remove_run_dir, timeout_error
from .._cann._export import run_export, run_export_async
from .._cann._files import check_tree
from .._cann._runguard import exporting, exporting_async
from .._model._records import ProfilingTask
from .._plans._raw._chunked import clear_items, to_tuple
from .._plans._raw._types import PackedRows
from ._csv import DeviceSplit, aiter_file_batches, aiter_file_tasks, gather, iter_file_batches
from ._raw_files import decoding, read_by_device, read_run, read_run_async, reading
from ._steps import Export, Offload, Parse, ReadRaw, Release, Step, Wait

T = TypeVar("T")


def perform(step: Step) -> Any:
    """One step, done by blocking this thread."""
    if isinstance(step, Wait):
        if not step.latch.wait(step.timeout) and step.strict:
            raise timeout_error(step.what, step.timeout)
        return None
    if isinstance(step, ReadRaw):
        if step.by_device and not step.counters:
            return read_by_device(step.run_dir, checked=step.checked)
        if step.checked:
            check_tree(step.run_dir)
        return read_run(step.run_dir, counters=step.counters, packed=step.packed)
    if isinstance(step, Export):
        with exporting(step.run_dir):
            if step.started is not None:
                step.started()
            return run_export(step.toolkit, step.run_dir, timeout=step.timeout)
    if isinstance(step, Parse):
        return gather(iter_file_batches(step.files, counters=step.counters), counters=step.counters)
    if isinstance(step, Offload):
        return step.fn()
    if isinstance(step, Release):
        step.box.clear()
        return None
    remove_run_dir(step.run_dir, step.root, step.reason)
    return None


def drive(steps: Generator[Any, Any, T], perform: Callable[[Any], Any] = perform) -> T:
    """Run a plan to its end, blocking; exceptions of a step are thrown back into it.

    *perform* does one step (default: the steps of :mod:`asc_aprof._runs._steps`); plans with steps of
    their own (bench, tune, the Ray sweep) pass theirs, so every plan runs on this one loop.
    """
    outcome: Any = None
    failure: BaseException | None = None
    while True:
        try:
            step = steps.send(outcome) if failure is None else steps.throw(failure)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        outcome, failure = None, None
        try:
            outcome = perform(step)
        except BaseException as exc:
            failure = exc


async def perform_async(step: Step, limiter: anyio.CapacityLimiter | None = None) -> Any:
    """One step, awaited; *limiter* bounds concurrent exports (waiters hold no token)."""
    if isinstance(step, Wait):
        with anyio.CancelScope(shield=step.shield):
            done = await step.latch.wait_async(step.timeout)
        if not done and step.strict:
            raise timeout_error(step.what, step.timeout)
        return None
    if isinstance(step, ReadRaw):
        if step.by_device and not step.counters:
            # Cancelled: returns at once; the thread's reads end unseen (their folder closed
            # when they are collected).
            return await anyio.to_thread.run_sync(
                functools.partial(read_by_device, step.run_dir, checked=step.checked), abandon_on_cancel=True
            )
        return await read_run_async(
            step.run_dir, counters=step.counters, checked=step.checked, packed=step.packed
        )
    if isinstance(step, Export):
        # The run's slot first: waiting for another export of it must not hold a limiter token.
        async with exporting_async(step.run_dir), limiter or contextlib.nullcontext():
            if step.started is not None:
                step.started()
            return await run_export_async(step.toolkit, step.run_dir, timeout=step.timeout)
    if isinstance(step, Parse):
        return await _parse_async(step)
    if isinstance(step, Offload):
        # Cancelled: returns at once; the thread finishes its (side-effect free) work unseen.
        return await anyio.to_thread.run_sync(decoding, step.fn, abandon_on_cancel=True)
    if isinstance(step, Release):
        await release(step.box)
        return None
    with anyio.CancelScope(shield=True):
        await anyio.to_thread.run_sync(remove_run_dir, step.run_dir, step.root, step.reason)
    return None


async def drive_async(
    steps: Generator[Any, Any, T],
    limiter: anyio.CapacityLimiter | None = None,
    *,
    perform: Callable[[Any], Awaitable[Any]] | None = None,
) -> T:
    """Run a plan to its end, awaiting; exceptions of a step are thrown back into it.

    *perform* awaits one step (default: :func:`perform_async` with *limiter*), as for :func:`drive`.
    While it runs, the collector's full passes are held back
    (:data:`~asc_aprof._runs._raw_files.reading`): the loop would wait each out whole.
    """
    outcome: Any = None
    failure: BaseException | None = None
    with reading():
        while True:
            try:
                step = steps.send(outcome) if failure is None else steps.throw(failure)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            outcome, failure = None, None
            try:
                outcome = await (perform(step) if perform is not None else perform_async(step, limiter))
            except BaseException as exc:
                failure = exc


async def _parse_async(step: Parse) -> dict[int | None, DeviceTasks]:
    if step.counters:
        split = DeviceSplit(True)
        async with contextlib.aclosing(aiter_file_batches(step.files, counters=True)) as counted:
            async for found in counted:
                split.add(found)
                await anyio.lowlevel.checkpoint()
        return split.per_device()
    # Each batch's tasks of a device go in as one tuple: a run's tasks in one list would make every
    # full pass of the collector touch each of them (a million untracked records in a tracked list
    # still cost a memory read each: 13 ms measured), where a chunk tuple of untracked records is
    # left out of the collector after its first pass.
    per_device: dict[int | None, list[tuple[ProfilingTask, ...]]] = {}
    async with contextlib.aclosing(aiter_file_tasks(step.files)) as batches:
        async for batch in batches:
            by_device: dict[int | None, list[ProfilingTask]] = {}
            for task in batch:
                by_device.setdefault(task.device, []).append(task)
            for device, tasks in by_device.items():
                per_device.setdefault(device, []).append(tuple(tasks))
    return await freeze(per_device)


def _joined(chunks: list[tuple[ProfilingTask, ...]]) -> tuple[ProfilingTask, ...]:
    made = to_tuple([task for chunk in chunks for task in chunk])
    chunks.clear()
    return made


async def freeze(
    per_device: dict[int | None, list[tuple[ProfilingTask, ...]]],
) -> dict[int | None, DeviceTasks]:
    """Turn each device's chunks into the one tuple results share, emptying the lists.

    ``tuple(list)`` of a million tasks is one C call that holds the GIL about 15 ms (measured: the
    longest stall of an exported 1,000,000-task ``profile()``), so each tuple is made in a worker
    thread by :func:`~asc_aprof._plans._raw._chunked.to_tuple`, which lets the GIL go every few
    items (the event loop runs meanwhile). Cancelled: waits for the tuple in hand (tens of
    milliseconds; the chunks are this call's own), then lets the rest go.
    """
    frozen: dict[int | None, DeviceTasks] = {}
    for device, chunks in per_device.items():
        with anyio.CancelScope(shield=True):
            made = await anyio.to_thread.run_sync(decoding, functools.partial(_joined, chunks))
        frozen[device] = (made, None)
        await anyio.lowlevel.checkpoint()
    return frozen


#: records freed per checkpoint by :func:`release`: each frees a dozen objects or so, about 0.3 µs
#: apiece, so a slice costs the loop some 0.5 ms (8,192 cost 3-5 ms)
_FREE_SLICE: Final = 1 << 10


async def release(box: list[Any]) -> None:
    """Empty *box*, freeing what it held in bounded slices between checkpoints.

    A :class:`~asc_aprof._plans._raw.RawResult` (or a tuple or list of records) freed at once is one long
    operation on the loop's thread. Packed rows (``PackedRows``) are freed in a worker thread (a
    few big blocks to unmap). A tuple only this holds has its records freed a slice at a time
    (``clear_items``, in C); otherwise the records are first copied into a list in slices (the
    tuple then goes with a decrement per record, nothing freed: still 6 ms for 500,000 records,
    the cache misses of touching each), and the list is emptied a slice at a time. Cancelled: what
    is left is freed at once (the references go with the frames).
    """
    while box:
        held = box.pop()
        records = getattr(held, "tasks", held)
        del held
        if isinstance(records, PackedRows):
            # a few big blocks: unmapping them takes milliseconds whether or not the GIL is
            # held, so a worker thread does it (the list is their only holder then)
            only: list[Any] = [records]
            del records
            with anyio.CancelScope(shield=True):  # (a hop to a thread: fractions of a millisecond)
                await anyio.to_thread.run_sync(only.clear)
            continue
        if not isinstance(records, tuple | list) or len(records) < _FREE_SLICE:
            del records
            await anyio.lowlevel.checkpoint()
            continue
        if isinstance(records, tuple):
            only = [records]  # its holder now, if nobody else holds it
            total = len(records)
            del records
            if clear_items(only, 0, _FREE_SLICE):
                for start in range(_FREE_SLICE, total, _FREE_SLICE):
                    await anyio.lowlevel.checkpoint()
                    clear_items(only, start, start + _FREE_SLICE)
                only.clear()  # (a tuple of None)
                await anyio.lowlevel.checkpoint()
                continue
            records = only.pop()
        kept: list[Any] = []
        for start in range(0, len(records), _FREE_SLICE):
            kept.extend(records[start : start + _FREE_SLICE])
            await anyio.lowlevel.checkpoint()
        del records
        await anyio.lowlevel.checkpoint()
        while kept:
            del kept[-_FREE_SLICE:]
            await anyio.lowlevel.checkpoint()
