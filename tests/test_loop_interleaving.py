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
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from asc_aprof import AsyncProfiler, Profiler, RunSource, Toolkit, aopen_run, sim
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


async def test_reads_keep_older_objects_out_of_full_collector_passes(raw_run: Path, toolkit: Toolkit) -> None:
    """While a run is read, the objects older than the read are frozen (a full pass of the
    collector would otherwise walk them all on the loop's thread), and thawed when it ends: after
    the whole stream, after a stream closed early, after store_result, and after a cancelled read."""
    assert gc.get_freeze_count() == 0
    profiler = AsyncProfiler(raw_run.parent, toolkit=toolkit)
    frozen_during: list[int] = []
    async for _ in profiler.iter_tasks(raw_run.name):
        if not frozen_during:
            frozen_during.append(gc.get_freeze_count())
    assert frozen_during[0] > 0
    assert gc.get_freeze_count() == 0
    async with contextlib.aclosing(profiler.iter_tasks(raw_run.name)) as tasks:
        async for _ in tasks:
            assert gc.get_freeze_count() > 0
            break
    assert gc.get_freeze_count() == 0
    result = await profiler.store_result(raw_run.name)
    assert len(result.tasks) == TASKS and gc.get_freeze_count() == 0
    with anyio.move_on_after(0):
        await profiler.store_result(raw_run.name)
    assert gc.get_freeze_count() == 0


async def test_a_programs_own_freeze_is_left_alone(raw_run: Path, toolkit: Toolkit) -> None:
    gc.freeze()
    try:
        mine = gc.get_freeze_count()
        result = await AsyncProfiler(raw_run.parent, toolkit=toolkit).store_result(raw_run.name)
        assert len(result.tasks) == TASKS
        # not thawed, nor grown by a freeze of the read's (frozen objects freed meanwhile leave it)
        assert 0 < gc.get_freeze_count() <= mine
    finally:
        gc.unfreeze()
