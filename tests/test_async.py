"""What only AsyncProfiler does, on asyncio and trio: streaming, the sweep, cancellation.

The scenarios both profilers share (results, windows, runs, errors) are in ``tests/scenarios``.
"""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import pytest

from asc_aprof import AsyncProfiler, Profiler, Toolkit, sim
from asc_aprof._model._progress import ProgressEvent
from asc_aprof.sim import SimControl

from .helpers import HANG_MARKER, live_processes_with, wait_gone

pytestmark = pytest.mark.anyio


async def test_iter_tasks_streams_with_a_slow_consumer(
    toolkit: Toolkit, simctl: SimControl, tmp_path: Path
) -> None:
    profiler = AsyncProfiler(tmp_path, toolkit=toolkit)
    async with profiler.profile(cleanup=False) as run:
        sim.launch("k", count=20000, duration_us=2.0)
    assert run.run_id is not None
    count = 0
    async for task in profiler.iter_tasks(run.run_id):
        if count % 5000 == 0:
            await anyio.sleep(0.01)
        assert task.name == "k"
        count += 1
    assert count == 20000
    stream = profiler.iter_tasks()
    first = await stream.__anext__()
    await stream.aclose()  # closing early is fine
    assert first.name == "k"


async def test_sweep_yields_items_and_a_failing_case_does_not_lose_others(toolkit: Toolkit) -> None:
    profiler = AsyncProfiler(toolkit=toolkit)

    async def run(case: int, device: int) -> None:
        if case == 5:
            raise RuntimeError("case 5 failed to compile")
        sim.launch(f"case{case}", device=device, count=case + 1)

    items = []
    async with profiler.sweep(range(12), run, devices=[0, 1, 2, 3]) as stream:
        async for item in stream:
            items.append(item)
    assert sorted(i.case for i in items) == list(range(12))
    failed = [i for i in items if i.error is not None]
    assert len(failed) == 1 and failed[0].case == 5 and "compile" in str(failed[0].error)
    for item in items:
        if item.case == 5:
            continue
        assert item.result is not None
        assert [t.name for t in item.result.tasks] == [f"case{item.case}"] * (item.case + 1)
        assert {t.device for t in item.result.tasks} == {item.device}


async def test_sweep_with_plain_function_and_early_break(toolkit: Toolkit) -> None:
    profiler = AsyncProfiler(toolkit=toolkit)

    def run(case: int, device: int) -> None:
        sim.launch("k", device=device)

    async with profiler.sweep(range(20), run, devices=[0, 1]) as stream:
        async for item in stream:
            assert item.result is not None
            break


@pytest.mark.parametrize(
    ("max_pending", "export_limit", "limit"), [(None, 1, 6), (None, 3, 10), (1, None, 1), (3, None, 3)]
)
async def test_sweep_starts_at_most_max_pending_cases_ahead_of_its_consumer(
    toolkit: Toolkit, simctl: SimControl, max_pending: int | None, export_limit: int | None, limit: int
) -> None:
    """A consumer that reads one item and waits holds the sweep to *limit* more (default:
    devices x (export_limit + 2))."""
    started = received = parsed = 0
    ahead: list[int] = []  # started - received, at every start of a case
    all_parsed = anyio.Event()

    def progress(event: ProgressEvent) -> None:
        nonlocal parsed
        if event.kind == "parse_finished":
            parsed += event.rows  # one task per case
            if parsed >= limit + 1:
                all_parsed.set()

    async def run(case: int, device: int) -> None:
        nonlocal started
        started += 1
        ahead.append(started - received)
        sim.launch(f"case{case}", device=device)

    profiler = AsyncProfiler(toolkit=toolkit, progress=progress)
    cases = 2 * limit + 3
    names: list[str] = []
    with anyio.fail_after(60):
        async with profiler.sweep(
            range(cases), run, devices=[0, 1], max_pending=max_pending, export_limit=export_limit
        ) as items:
            first = await items.receive()
            received += 1
            # the consumer waits: once what was started is parsed and handed over, nothing runs
            await all_parsed.wait()
            await anyio.wait_all_tasks_blocked()
            assert started == limit + 1, f"{started} cases started with 1 of them received"
            names.append(first.result.tasks[0].name)  # type: ignore[union-attr]
            async for item in items:
                received += 1
                assert item.error is None and item.result is not None
                names.append(item.result.tasks[0].name)
    assert max(ahead) == limit, ahead
    assert started == received == cases
    assert sorted(names) == sorted(f"case{case}" for case in range(cases))


async def test_sync_and_async_profilers_in_one_process(toolkit: Toolkit, simctl: SimControl) -> None:
    simctl.set_latency(start=0.01)
    sync_results: list[int] = []

    def sync_side() -> None:
        profiler = Profiler(toolkit=toolkit)
        for _ in range(3):
            with profiler.profile(device_id=7) as run:
                sim.launch("sync_k", device=7, count=2)
            assert run.result is not None
            sync_results.append(len(run.result.tasks))
            assert {t.name for t in run.result.tasks} == {"sync_k"}

    thread = threading.Thread(target=sync_side)
    thread.start()
    profiler = AsyncProfiler(toolkit=toolkit)
    for _ in range(3):
        async with profiler.profile(device_id=1) as run:
            sim.launch("async_k", device=1, count=3)
        assert run.result is not None and {t.name for t in run.result.tasks} == {"async_k"}
        assert len(run.result.tasks) == 3
    await anyio.to_thread.run_sync(thread.join)
    assert sync_results == [2, 2, 2]


# -- cancellation at each checkpoint ---------------------------------------------------------------


async def test_cancel_while_waiting_for_the_window(toolkit: Toolkit, simctl: SimControl) -> None:
    simctl.set_latency(start=0.3)
    profiler = AsyncProfiler(toolkit=toolkit)
    with anyio.move_on_after(0.05):
        async with profiler.profile():
            pytest.fail("body must not run")
    # the collection that did start is stopped again; the next profile works
    async with profiler.profile() as run:
        sim.launch("after")
    assert run.result is not None and [t.name for t in run.result.tasks] == ["after"]


async def test_cancel_in_body_stops_collection(toolkit: Toolkit, simctl: SimControl) -> None:
    profiler = AsyncProfiler(toolkit=toolkit)
    with anyio.move_on_after(0.1):
        async with profiler.profile():
            sim.launch("k")
            await anyio.sleep(10)
    assert simctl.running_devices() == [] and simctl.live_configs() == 0


async def test_cancel_during_stop_still_finishes_it(toolkit: Toolkit, simctl: SimControl) -> None:
    simctl.set_latency(stop=0.3)
    profiler = AsyncProfiler(toolkit=toolkit)
    with anyio.move_on_after(0.1):
        async with profiler.profile():
            sim.launch("k")
    assert simctl.running_devices() == [] and simctl.live_configs() == 0


async def test_cancel_during_export_kills_the_process_group(simctl: SimControl, tmp_path: Path) -> None:
    profiler = AsyncProfiler(tmp_path, toolkit=sim.toolkit(export_fault="hang"), reader="msprof")
    run_dirs = []
    with anyio.move_on_after(1.5) as scope:
        async with profiler.profile() as run:
            sim.launch("k", count=3)
            run_dirs.append(run.run_dir)
    assert scope.cancelled_caught
    assert wait_gone(HANG_MARKER) == []
    assert run_dirs[0] is not None and run_dirs[0].is_dir()  # raw data kept for a retry
    retry = AsyncProfiler(tmp_path, toolkit=sim.toolkit())
    await retry.export(run_dirs[0].name)
    assert len((await retry.store_result(run_dirs[0].name)).tasks) == 3


async def test_one_cancelled_caller_does_not_disturb_the_window(toolkit: Toolkit, simctl: SimControl) -> None:
    simctl.set_latency(init=0.2)
    profiler = AsyncProfiler(toolkit=toolkit)
    results = {}

    async def good(device: int) -> None:
        async with profiler.profile(device_id=device) as run:
            sim.launch("good", device=device, count=2)
            await anyio.sleep(0.2)
        results[device] = run

    async def doomed() -> None:
        with anyio.move_on_after(0.3):
            async with profiler.profile(device_id=3):
                sim.launch("doomed", device=3)
                await anyio.sleep(10)

    async with anyio.create_task_group() as tg:
        for device in range(3):
            tg.start_soon(good, device)
        tg.start_soon(doomed)
    for device in range(3):
        result = results[device].result
        assert result is not None and [t.name for t in result.tasks] == ["good", "good"]
    assert live_processes_with(HANG_MARKER) == []


async def test_a_sweep_runs_as_many_exports_at_once_as_its_export_limit(simctl: SimControl) -> None:
    """Regression: the default max_pending (twice the devices) held a sweep to 2 windows in
    flight, so at most 2 exports ran at once whatever export_limit said."""
    running = most = 0

    def progress(event: ProgressEvent) -> None:
        nonlocal running, most
        if event.kind == "export_started":
            running += 1
            most = max(most, running)
        elif event.kind == "export_finished":
            running -= 1

    toolkit = sim.toolkit(export_latency=0.5)
    profiler = AsyncProfiler(toolkit=toolkit, reader="msprof", progress=progress)

    def run(case: int, device: int) -> None:
        sim.launch(f"case{case}", device=device)

    with anyio.fail_after(120):
        async with profiler.sweep(range(12), run, devices=[0, 1], export_limit=3) as items:
            got = [item async for item in items]
    assert all(item.error is None for item in got) and len(got) == 12
    assert most == 3, f"{most} exports ran at once with export_limit=3"


async def test_sweep_with_many_windows_in_flight_does_not_starve_its_exports(simctl: SimControl) -> None:
    """Regression: waiters parked on the default thread limiter starved the exports' file reads."""
    toolkit = sim.toolkit(export_latency=0.3)
    profiler = AsyncProfiler(toolkit=toolkit)

    def run(case: int, device: int) -> None:  # a plain function: runs on the default limiter
        sim.launch("k", device=device, count=10)

    done = 0
    with anyio.fail_after(90):
        async with profiler.sweep(range(64), run, devices=range(8), export_limit=1) as items:
            async for item in items:
                assert item.error is None and item.result is not None
                assert len(item.result.tasks) == 10
                done += 1
    assert done == 64
