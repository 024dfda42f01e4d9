"""Concurrent callers, on every driver (threads or tasks): shared windows, and what is never shared."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from asc_aprof import ProfileRun, ProfilingTask, Toolkit, sim
from asc_aprof._cann._collector import get_collector
from asc_aprof.sim import SimControl

from .drivers import Driver, scenario


@pytest.mark.parametrize("cann", ["8.5", "9.x"])
@scenario
async def test_looping_callers_on_different_devices_get_exactly_their_own_tasks(
    driver: Driver, toolkit: Toolkit, simctl: SimControl, cann: str
) -> None:
    simctl.set_cann(cann)
    simctl.set_latency(start=0.01, stop=0.02)
    profiler = driver.profiler(toolkit=toolkit)
    seen: dict[int, list[ProfilingTask]] = {d: [] for d in range(4)}
    run_ids: dict[int, list[str]] = {d: [] for d in range(4)}

    async def loop(device: int) -> None:
        for round_ in range(4):
            async with profiler.profile(device_id=device) as run:
                await driver.sleep(0.005 * device)
                sim.launch(
                    f"kernel_{device}", device=device, duration_us=1.0 + device, count=device + 1 + round_
                )
            assert run.result is not None and run.run_id is not None
            seen[device].extend(run.result.tasks)
            run_ids[device].append(run.run_id)

    started = get_collector().windows_started
    await driver.gather(*(partial(loop, device) for device in range(4)))
    for device in range(4):
        assert [t.name for t in seen[device]] == [f"kernel_{device}"] * (4 * (device + 1) + 6)
        assert {t.device for t in seen[device]} == {device}
        assert {t.duration for t in seen[device]} == {1.0 + device}
    # windows were shared: fewer collections than the 16 profile() calls
    assert get_collector().windows_started - started < 16
    all_ids = [r for d in range(4) for r in run_ids[d]]
    assert len(set(all_ids)) < len(all_ids), "no window was shared"
    for device in range(4):
        assert len(set(run_ids[device])) == 4  # a device never shares a window with itself


@scenario
async def test_window_batches_many_devices_into_one_collection(
    driver: Driver, toolkit: Toolkit, simctl: SimControl, tmp_path: Path
) -> None:
    simctl.set_latency(init=0.2)  # callers arriving during init join the same window
    profiler = driver.profiler(tmp_path, toolkit=toolkit)
    runs: dict[int, ProfileRun] = {}

    async def one(device: int) -> None:
        async with profiler.profile(device_id=device) as run:
            sim.launch("k", device=device, count=2)
        runs[device] = run

    started = get_collector().windows_started
    await driver.gather(*(partial(one, device) for device in range(6)))
    assert get_collector().windows_started - started == 1
    assert len({r.run_id for r in runs.values()}) == 1
    run_dir = tmp_path / str(runs[0].run_id)
    assert sorted(p.name for p in run_dir.iterdir() if p.name.startswith("device_")) == [
        f"device_{d}" for d in range(6)
    ]
    for device, run in runs.items():
        assert run.result is not None and [t.device for t in run.result.tasks] == [device, device]


@scenario
async def test_separate_default_profilers_batch(driver: Driver, toolkit: Toolkit, simctl: SimControl) -> None:
    simctl.set_latency(init=0.2)
    runs: dict[int, ProfileRun] = {}

    async def one(device: int) -> None:
        async with driver.profiler(toolkit=toolkit).profile(device_id=device) as run:
            sim.launch("k", device=device)
        runs[device] = run

    await driver.gather(*(partial(one, device) for device in range(4)))
    assert len({r.run_id for r in runs.values()}) == 1
    assert all(r.result is not None and len(r.result.tasks) == 1 for r in runs.values())


@scenario
async def test_same_device_never_shares_a_window(
    driver: Driver, toolkit: Toolkit, simctl: SimControl
) -> None:
    simctl.set_latency(init=0.1)
    profiler = driver.profiler(toolkit=toolkit)
    runs: list[ProfileRun] = []

    async def one(i: int) -> None:
        async with profiler.profile(device_id=0) as run:
            sim.launch(f"k{i}")
        runs.append(run)

    await driver.gather(*(partial(one, i) for i in range(3)))
    assert len({r.run_id for r in runs}) == 3
    assert sorted(r.result.tasks[0].name for r in runs) == ["k0", "k1", "k2"]  # type: ignore[union-attr]


@scenario
async def test_body_exception_in_shared_window_propagates_unchanged(
    driver: Driver, toolkit: Toolkit, simctl: SimControl
) -> None:
    simctl.set_latency(init=0.1)
    profiler = driver.profiler(toolkit=toolkit)
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
            await driver.sleep(0.1)
        outcome["fine"] = [t.name for t in run.result.tasks]  # type: ignore[union-attr]

    await driver.gather(failing, fine)
    assert outcome == {"same": True, "fine": ["fine"]}


@scenario
async def test_two_profilers_with_their_own_paths(driver: Driver, toolkit: Toolkit, tmp_path: Path) -> None:
    a = driver.profiler(tmp_path / "a", toolkit=toolkit)
    b = driver.profiler(tmp_path / "b", toolkit=toolkit)
    async with a.profile() as ra:
        sim.launch("ka")
    async with b.profile() as rb:
        sim.launch("kb")
    async with a.profile() as ra2:
        sim.launch("ka2")
    assert ra.run_id and rb.run_id and ra2.run_id
    assert (tmp_path / "a" / ra.run_id).is_dir() and (tmp_path / "b" / rb.run_id).is_dir()
    assert [t.name for t in b.last_result.tasks] == ["kb"]
    assert [t.name for t in a.last_result.tasks] == ["ka2"]
