"""AsyncProfiler on asyncio and trio: windows, streaming, sweep, cancellation."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import pytest

from asc_aprof import (
    AsyncProfiler,
    ExportError,
    Profiler,
    ProfilingTask,
    Toolkit,
    sim,
    task_time_median,
)
from asc_aprof._collector import get_collector
from asc_aprof.sim import SimControl

from .helpers import HANG_MARKER, live_processes_with, wait_gone

pytestmark = pytest.mark.anyio


async def test_spec_example_async(toolkit: Toolkit) -> None:
    profiler = AsyncProfiler(toolkit=toolkit)
    async with profiler.profile() as run:
        for duration in (10.0, 30.0, 20.0):
            sim.launch("kernel", duration_us=duration)
    assert run.result is not None and profiler.last_result is run.result
    assert task_time_median(run.result.tasks, name="kernel") == 20.0


@pytest.mark.parametrize("cann", ["8.5", "9.x"])
async def test_four_looping_tasks_get_exactly_their_own_tasks(
    toolkit: Toolkit, simctl: SimControl, cann: str
) -> None:
    simctl.set_cann(cann)
    simctl.set_latency(start=0.01, stop=0.02)
    profiler = AsyncProfiler(toolkit=toolkit)
    seen: dict[int, list[ProfilingTask]] = {d: [] for d in range(4)}
    run_ids: dict[int, list[str]] = {d: [] for d in range(4)}

    async def loop(device: int) -> None:
        for round_ in range(4):
            async with profiler.profile(device_id=device) as run:
                await anyio.sleep(0.005 * device)
                sim.launch(f"kernel_{device}", device=device, duration_us=1.0 + device, count=round_ + 1)
            assert run.result is not None and run.run_id is not None
            seen[device].extend(run.result.tasks)
            run_ids[device].append(run.run_id)

    started = get_collector().windows_started
    async with anyio.create_task_group() as tg:
        for device in range(4):
            tg.start_soon(loop, device)
    for device in range(4):
        assert [t.name for t in seen[device]] == [f"kernel_{device}"] * 10
        assert {t.device for t in seen[device]} == {device}
        assert {t.duration for t in seen[device]} == {1.0 + device}
    # windows were shared: fewer collections than the 16 profile() calls
    assert get_collector().windows_started - started < 16
    all_ids = [r for d in range(4) for r in run_ids[d]]
    assert len(set(all_ids)) < len(all_ids), "no window was shared"
    for device in range(4):
        assert len(set(run_ids[device])) == 4  # a device never shares a window with itself


async def test_window_batches_many_devices_into_one_collection(
    toolkit: Toolkit, simctl: SimControl, tmp_path: Path
) -> None:
    simctl.set_latency(init=0.2)  # callers arriving during init join the same window
    profiler = AsyncProfiler(tmp_path, toolkit=toolkit)
    runs = {}

    async def one(device: int) -> None:
        async with profiler.profile(device_id=device) as run:
            sim.launch("k", device=device, count=2)
        runs[device] = run

    started = get_collector().windows_started
    async with anyio.create_task_group() as tg:
        for device in range(6):
            tg.start_soon(one, device)
    assert get_collector().windows_started - started == 1
    assert len({r.run_id for r in runs.values()}) == 1
    run_dir = tmp_path / str(runs[0].run_id)
    assert sorted(p.name for p in run_dir.iterdir() if p.name.startswith("device_")) == [
        f"device_{d}" for d in range(6)
    ]
    for device, run in runs.items():
        assert run.result is not None and [t.device for t in run.result.tasks] == [device, device]


async def test_separate_default_profilers_batch(toolkit: Toolkit, simctl: SimControl) -> None:
    simctl.set_latency(init=0.2)
    runs = {}

    async def one(device: int) -> None:
        async with AsyncProfiler(toolkit=toolkit).profile(device_id=device) as run:
            sim.launch("k", device=device)
        runs[device] = run

    async with anyio.create_task_group() as tg:
        for device in range(4):
            tg.start_soon(one, device)
    assert len({r.run_id for r in runs.values()}) == 1
    assert all(r.result is not None and len(r.result.tasks) == 1 for r in runs.values())


async def test_same_device_never_shares_a_window(toolkit: Toolkit, simctl: SimControl) -> None:
    simctl.set_latency(init=0.1)
    profiler = AsyncProfiler(toolkit=toolkit)
    runs = []

    async def one(i: int) -> None:
        async with profiler.profile(device_id=0) as run:
            sim.launch(f"k{i}")
        runs.append(run)

    async with anyio.create_task_group() as tg:
        for i in range(3):
            tg.start_soon(one, i)
    assert len({r.run_id for r in runs}) == 3
    assert sorted(r.result.tasks[0].name for r in runs) == ["k0", "k1", "k2"]  # type: ignore[union-attr]


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
    profiler = AsyncProfiler(tmp_path, toolkit=sim.toolkit(export_fault="hang"))
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


async def test_export_timeout_is_an_export_error(simctl: SimControl) -> None:
    profiler = AsyncProfiler(toolkit=sim.toolkit(export_fault="hang"), export_timeout=1.0)
    with pytest.raises(ExportError, match="did not finish within 1 s") as info:
        async with profiler.profile():
            sim.launch("k")
    assert "helper pid" in info.value.stderr_tail
    assert wait_gone(HANG_MARKER) == []


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


async def test_body_exception_in_shared_window_propagates_unchanged(
    toolkit: Toolkit, simctl: SimControl
) -> None:
    simctl.set_latency(init=0.1)
    profiler = AsyncProfiler(toolkit=toolkit)
    outcome: dict[str, object] = {}

    async def failing() -> None:
        err = KeyError("x")
        try:
            async with profiler.profile(device_id=0):
                raise err
        except KeyError as caught:
            outcome["same"] = caught is err

    async def fine() -> None:
        async with profiler.profile(device_id=1) as run:
            sim.launch("fine", device=1)
            await anyio.sleep(0.1)
        outcome["fine"] = [t.name for t in run.result.tasks]  # type: ignore[union-attr]

    async with anyio.create_task_group() as tg:
        tg.start_soon(failing)
        tg.start_soon(fine)
    assert outcome == {"same": True, "fine": ["fine"]}


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
