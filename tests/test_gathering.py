"""Windows gathered across a driver's devices (cohorts), end to end on the simulator.

The linger is made long here so the counts are deterministic: a window then starts only when
every device still working joined it (or one withdrew), never because time ran out.
"""

from __future__ import annotations

import anyio
import pytest

from asc_aprof import AsyncProfiler, Profiler, ProgressEvent, Toolkit, sim
from asc_aprof._cann import _collector as collector_module
from asc_aprof._cann._collector import get_collector
from asc_aprof._model._enums import AicoreMetrics
from asc_aprof.sim import SimControl


@pytest.fixture
def long_linger(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collector_module, "DEFAULT_LINGER", 60.0)


def plain_case(case: int, device: int) -> None:
    sim.launch(f"k{case % 4}", device=device, duration_us=10.0, count=2)


async def async_case(case: int, device: int) -> None:
    await anyio.lowlevel.checkpoint()
    plain_case(case, device)


@pytest.mark.parametrize("kind", ["plain", "coroutine"])
async def test_64_cases_on_4_devices_make_16_windows(toolkit: Toolkit, long_linger: None, kind: str) -> None:
    collector = get_collector()
    started, lingered = collector.windows_started, collector.windows_lingered
    runs: dict[str, set[int]] = {}
    profiler = AsyncProfiler(toolkit=toolkit)
    run = plain_case if kind == "plain" else async_case
    async with profiler.sweep(range(64), run, devices=[0, 1, 2, 3]) as items:
        async for item in items:
            assert item.error is None and item.result is not None
            assert [t.name for t in item.result.tasks] == [f"k{item.case % 4}"] * 2
            runs.setdefault(item.result.run_id, set()).add(item.device)
    assert collector.windows_started - started == 16
    assert all(devices == {0, 1, 2, 3} for devices in runs.values())
    assert collector.windows_lingered == lingered


async def test_a_failing_case_does_not_hold_or_lose_the_others(toolkit: Toolkit, long_linger: None) -> None:
    def run(case: int, device: int) -> None:
        if case % 5 == 0:
            raise RuntimeError(f"case {case} has no tiling")
        plain_case(case, device)

    collector = get_collector()
    lingered = collector.windows_lingered
    failed: list[int] = []
    ok: list[int] = []
    async with AsyncProfiler(toolkit=toolkit).sweep(range(24), run, devices=[0, 1, 2]) as items:
        async for item in items:
            (failed if item.error is not None else ok).append(item.case)
    assert sorted(failed) == [0, 5, 10, 15, 20] and len(ok) == 19
    assert collector.windows_lingered == lingered  # nobody waited for the failed cases' devices


async def test_a_cancelled_device_stops_holding_the_others(toolkit: Toolkit, long_linger: None) -> None:
    profiler = AsyncProfiler(toolkit=toolkit)
    key = profiler._key(AicoreMetrics.PIPE_UTILIZATION, None)
    done: dict[int, int] = {}

    async def one(device: int) -> None:
        async with profiler.profile(device) as run:
            sim.launch("k", device=device)
        assert run.result is not None
        done[device] = len(run.result.tasks)

    scope = anyio.CancelScope()

    with get_collector().gather(key, [0, 1, 2]) as cohort:

        async def device_2() -> None:
            with scope, cohort.member(2):
                await anyio.sleep_forever()

        async with anyio.create_task_group() as tg:
            tg.start_soon(one, 0)
            tg.start_soon(one, 1)
            tg.start_soon(device_2)
            # device 2's driver is cancelled while 0 and 1 wait for it in a held window
            await anyio.wait_all_tasks_blocked()
            assert done == {}
            scope.cancel()
    assert done == {0: 1, 1: 1}


def test_sync_tune_on_4_devices_makes_one_window_per_round(
    toolkit: Toolkit, simctl: SimControl, long_linger: None
) -> None:
    simctl.set_jitter(0.03, seed=5)
    speeds = (12.0, 10.0, 10.3, 15.0, 11.0, 20.0, 13.0, 10.6)
    windows: list[tuple[str, tuple[int, ...]]] = []

    def seen(event: ProgressEvent) -> None:
        if event.kind == "collection_started":
            windows.append((str(event.run_id), event.devices))

    def run(config: int, device: int) -> None:
        sim.launch("tile", device=device, duration_us=speeds[config])

    result = Profiler(toolkit=toolkit, progress=seen).tune(range(8), run, [0, 1, 2, 3], cache=False, seed=2)
    assert result.best == 1
    # round 0 calibrates in its own window: each round is one window shared by its devices
    assert len({run_id for run_id, _ in windows}) == result.rounds
    assert sorted(windows[0][1]) == [0, 1, 2, 3]


async def test_async_tune_on_4_devices_makes_one_window_per_round(
    toolkit: Toolkit, simctl: SimControl, long_linger: None
) -> None:
    simctl.set_jitter(0.03, seed=5)
    speeds = (12.0, 10.0, 10.3, 15.0, 11.0, 20.0, 13.0, 10.6)
    run_ids: set[str] = set()

    def seen(event: ProgressEvent) -> None:
        if event.kind == "collection_started":
            run_ids.add(str(event.run_id))

    async def run(config: int, device: int) -> None:
        await anyio.lowlevel.checkpoint()
        sim.launch("tile", device=device, duration_us=speeds[config])

    profiler = AsyncProfiler(toolkit=toolkit, progress=seen)
    result = await profiler.tune(range(8), run, [0, 1, 2, 3], cache=False, seed=2)
    assert result.best == 1
    assert len(run_ids) == result.rounds
