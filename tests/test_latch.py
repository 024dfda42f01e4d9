"""``Latch``: set from any thread, waited on by threads and by tasks that park no thread.

The thread checks compare this process's OS threads (``/proc/self/task``) and
``threading.active_count()`` before and while tasks wait: no new thread may appear. (Threads that
other tests left may end meanwhile, so the check is "nothing new", not "exactly equal".)
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from asc_aprof import AsyncProfiler, Profiler, ProfileRun, Toolkit, sim
from asc_aprof._model._latch import Latch
from asc_aprof.sim import SimControl

WAIT = 10.0  # bound on waits that must succeed, so a lost wake-up fails instead of hanging


def os_threads() -> set[int]:
    return {int(tid) for tid in os.listdir("/proc/self/task")}


def wakers(latch: Latch) -> list[Callable[[], None]]:
    """The wakers registered on *latch* (white box: which waits took the thread-free path)."""
    with latch._lock:
        return list(latch._wakers)


async def until_registered(*latches: Latch, count: int = 1) -> None:
    """Let every other task block, then check each latch has *count* wakers (none took a thread)."""
    await anyio.wait_all_tasks_blocked()
    assert [len(wakers(latch)) for latch in latches] == [count] * len(latches)


# -- threads -----------------------------------------------------------------------------------------


def test_set_from_another_thread_wakes_a_blocked_thread() -> None:
    latch = Latch()
    outcome: list[bool] = []
    waiter = threading.Thread(target=lambda: outcome.append(latch.wait(WAIT)))
    waiter.start()
    setter = threading.Thread(target=latch.set)
    setter.start()
    setter.join()
    waiter.join()
    assert outcome == [True] and latch.is_set()


def test_a_thread_wait_times_out_with_false_and_a_set_latch_stays_set() -> None:
    latch = Latch()
    assert latch.wait(0.01) is False and not latch.is_set()
    latch.set()
    latch.set()  # setting twice is harmless
    assert latch.wait(0) is True and latch.wait(None) is True


# -- tasks ---------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_set_from_another_thread_wakes_a_waiting_task() -> None:
    latch = Latch()
    outcome: list[bool] = []

    async def waiter() -> None:
        outcome.append(await latch.wait_async(WAIT))

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await until_registered(latch)
        setter = threading.Thread(target=latch.set)
        setter.start()
    setter.join()
    assert outcome == [True]
    assert wakers(latch) == []


@pytest.mark.anyio
async def test_a_set_latch_returns_at_once_for_tasks() -> None:
    latch = Latch()
    latch.set()
    assert await latch.wait_async(0) is True
    assert await latch.wait_async(None) is True
    assert wakers(latch) == []


@pytest.mark.anyio
async def test_a_task_wait_times_out_with_false_and_withdraws_its_waker() -> None:
    latch = Latch()
    assert await latch.wait_async(0.01) is False
    assert wakers(latch) == [] and not latch.is_set()
    latch.set()  # nobody to wake
    assert await latch.wait_async(0.01) is True


@pytest.mark.anyio
async def test_a_cancelled_task_withdraws_its_waker_and_leaves_the_latch_unchanged() -> None:
    latch = Latch()
    async with anyio.create_task_group() as tg:
        tg.start_soon(latch.wait_async, None)
        await until_registered(latch)
        tg.cancel_scope.cancel()
    assert wakers(latch) == [] and not latch.is_set()
    outcome: list[bool] = []

    async def waiter() -> None:
        outcome.append(await latch.wait_async(WAIT))

    async with anyio.create_task_group() as tg:  # the latch still works for the next waiter
        tg.start_soon(waiter)
        await until_registered(latch)
        threading.Thread(target=latch.set).start()
    assert outcome == [True]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_setting_after_the_waiters_loop_finished_does_not_raise(backend: str) -> None:
    """set() takes the wakers, then calls them: the loop may end in between."""
    latch = Latch()
    taken: list[Callable[[], None]] = []

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(latch.wait_async, None)
            await until_registered(latch)
            taken.extend(wakers(latch))
            tg.cancel_scope.cancel()

    anyio.run(main, backend=backend)
    assert len(taken) == 1 and wakers(latch) == []
    taken[0]()  # the waker of a finished loop: nothing to wake, no error
    with latch._lock:
        latch._wakers.extend(taken)  # as if set() had taken it just before the loop ended
    latch.set()
    assert latch.is_set()


# -- no thread per waiter --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_500_waiting_tasks_park_no_thread() -> None:
    shared = Latch()
    own = [Latch() for _ in range(250)]
    outcome: list[bool] = []

    async def waiter(latch: Latch) -> None:
        outcome.append(await latch.wait_async(WAIT))

    before, before_count = os_threads(), threading.active_count()
    async with anyio.create_task_group() as tg:
        for latch in own:
            tg.start_soon(waiter, latch)
            tg.start_soon(waiter, shared)
        await until_registered(*own)
        await until_registered(shared, count=250)
        new_threads, during_count = os_threads() - before, threading.active_count()

        def set_all() -> None:
            shared.set()
            for latch in own:
                latch.set()

        setter = threading.Thread(target=set_all)
        setter.start()
    setter.join()
    assert new_threads == set(), "waiting tasks started threads"
    assert during_count <= before_count
    assert outcome == [True] * 500


@pytest.mark.anyio
async def test_tasks_waiting_for_a_collection_park_no_thread(
    toolkit: Toolkit, simctl: SimControl, result_dir: Path
) -> None:
    """128 profile() callers queued behind a collection a thread holds open wait without threads."""
    simctl.set_device_count(64)
    inside, release = threading.Event(), threading.Event()

    def holder() -> None:
        with Profiler(result_dir, toolkit=toolkit).profile(device_id=0):
            inside.set()
            release.wait(WAIT)

    holding = threading.Thread(target=holder)
    holding.start()
    try:
        assert await anyio.to_thread.run_sync(inside.wait, WAIT)
        profiler = AsyncProfiler(result_dir, toolkit=toolkit)
        runs: list[ProfileRun] = []
        entered = 0

        async def caller(device: int) -> None:
            nonlocal entered
            async with profiler.profile(device_id=device) as run:
                entered += 1
                sim.launch(f"k{device}", device=device)
            runs.append(run)

        before, before_count = os_threads(), threading.active_count()
        async with anyio.create_task_group() as tg:
            for index in range(128):
                tg.start_soon(caller, index % 64)
            await anyio.wait_all_tasks_blocked()
            new_threads, during_count = os_threads() - before, threading.active_count()
            assert entered == 0, "the held collection cannot have stopped yet"
            release.set()
    finally:
        release.set()
        holding.join(WAIT)
    assert new_threads == set(), "callers waiting for their window started threads"
    assert during_count <= before_count
    assert len(runs) == 128
    for run in runs:
        assert run.result is not None and [t.name for t in run.result.tasks] == [f"k{run.device}"]
