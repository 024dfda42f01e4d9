"""The event loop keeps running while a run is read natively (asyncio and trio).

A ticker task counts its turns (``checkpoint()`` in a loop) while a reader works. No wall-clock
time is asserted (that is ``python -m benchmarks --only rawread``): the test asserts the loop got
turns during the read and *between* consecutive batches of the stream, which fails whenever a
reader holds the loop for a whole run (the decode on the loop's thread, the public records built
in one piece). The longest gap between turns is reported in the test's properties.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from asc_aprof import AsyncProfiler, Profiler, RunSource, Toolkit, aopen_run, sim
from asc_aprof._runs._raw_files import HELD_THRESHOLD
from asc_aprof.sim import SimControl

pytestmark = pytest.mark.anyio

TASKS = 20_000


@pytest.fixture
def raw_run(toolkit: Toolkit, simctl: SimControl, tmp_path: Path) -> Path:
    with Profiler(tmp_path, toolkit=toolkit).profile(cleanup=False) as run:
        sim.launch("k", count=TASKS, duration_us=2.0)
    assert run.run_dir is not None
    return run.run_dir


class Ticker:
    """Counts the loop's turns given to another task, and the longest gap between two."""

    def __init__(self) -> None:
        self.turns = 0
        self.longest = 0.0
        self.running = True

    async def run(self) -> None:
        last = time.perf_counter()
        while self.running:
            await anyio.lowlevel.checkpoint()
            now = time.perf_counter()
            self.turns += 1
            self.longest = max(self.longest, now - last)
            last = now


async def _with_ticker(read: Callable[[Ticker], Awaitable[Any]]) -> tuple[Ticker, Any]:
    ticker = Ticker()
    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker.run)
        await anyio.lowlevel.checkpoint()
        try:
            got = await read(ticker)
        finally:
            ticker.running = False
    return ticker, got


async def test_iter_tasks_gives_the_loop_turns_between_batches(
    raw_run: Path, toolkit: Toolkit, record_property: Callable[[str, object], None]
) -> None:
    profiler = AsyncProfiler(raw_run.parent, toolkit=toolkit)
    seen: list[int] = []

    async def read(ticker: Ticker) -> int:
        count = 0
        async for _ in profiler.iter_tasks(raw_run.name):
            if count % 2048 == 0:
                seen.append(ticker.turns)
            count += 1
        return count

    ticker, count = await _with_ticker(read)
    record_property("longest_gap_s", ticker.longest)
    assert count == TASKS
    # the loop turned within every two slices of 2,048 tasks (trio runs a batch's tasks in a
    # random order, so one checkpoint may not show in the ticker's count at once)
    assert all(b > a for a, b in zip(seen, seen[2:], strict=False)), seen


async def test_store_result_and_open_run_give_the_loop_turns(
    raw_run: Path, toolkit: Toolkit, record_property: Callable[[str, object], None]
) -> None:
    profiler = AsyncProfiler(raw_run.parent, toolkit=toolkit)

    async def store(ticker: Ticker) -> int:
        before = ticker.turns
        result = await profiler.store_result(raw_run.name)
        assert len(result.tasks) == TASKS
        return ticker.turns - before

    ticker, turns = await _with_ticker(store)
    record_property("store_result_longest_gap_s", ticker.longest)
    # the decode ran in a worker thread and the records were handed over in ~10 slices
    assert turns >= TASKS // 2048

    async def columns(ticker: Ticker) -> int:
        before = ticker.turns
        run = await aopen_run(raw_run)
        got = await run.columns()
        assert len(got) == TASKS and run.info.source is RunSource.RAW
        return ticker.turns - before

    _, turns = await _with_ticker(columns)
    assert turns > 0


def _full_passes_held() -> bool:
    return gc.get_threshold()[2] == HELD_THRESHOLD


async def test_reads_hold_back_the_collectors_full_passes(raw_run: Path, toolkit: Toolkit) -> None:
    """While a run is read, the collector's full passes are held back (one would walk every
    object of the process on the loop's thread), and let come again when it ends: after the whole
    stream, after a stream closed early, after store_result, and after a cancelled read."""
    before = gc.get_threshold()
    assert not _full_passes_held()
    profiler = AsyncProfiler(raw_run.parent, toolkit=toolkit)
    held_during: list[bool] = []
    async for _ in profiler.iter_tasks(raw_run.name):
        if not held_during:
            held_during.append(_full_passes_held())
    assert held_during == [True]
    assert gc.get_threshold() == before
    async with contextlib.aclosing(profiler.iter_tasks(raw_run.name)) as tasks:
        async for _ in tasks:
            assert _full_passes_held()
            break
    assert gc.get_threshold() == before
    result = await profiler.store_result(raw_run.name)
    assert len(result.tasks) == TASKS and gc.get_threshold() == before
    with anyio.move_on_after(0):
        await profiler.store_result(raw_run.name)
    assert gc.get_threshold() == before


async def test_a_read_counts_no_full_pass_and_keeps_a_threshold_set_meanwhile(
    raw_run: Path, toolkit: Toolkit
) -> None:
    passes: list[int] = []

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            passes.append(1)

    before = gc.get_threshold()
    profiler = AsyncProfiler(raw_run.parent, toolkit=toolkit)
    kept: list[list[list[int]]] = []
    gc.callbacks.append(on_gc)
    try:
        async for _ in profiler.iter_tasks(raw_run.name):
            # what brings full passes otherwise: many tracked objects that survive
            kept.append([[] for _ in range(50)])
    finally:
        gc.callbacks.remove(on_gc)
    if sys.version_info < (3, 14):  # (3.14 collects the oldest generation in increments)
        assert passes == []
    kept.clear()
    set_meanwhile = False
    try:
        async for _ in profiler.iter_tasks(raw_run.name):
            if not set_meanwhile:
                set_meanwhile = True
                gc.set_threshold(before[0], before[1], 25)  # the program's own, set meanwhile
        assert gc.get_threshold() == (before[0], before[1], 25)
    finally:
        gc.set_threshold(*before)
