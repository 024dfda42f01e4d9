"""PMU counters through every path: ``profile(counters=True)`` and ``store_result(counters=True)``
on every driver, shared windows, level 0, and the async-only ``iter_tasks`` and ``sweep``."""

from __future__ import annotations

from pathlib import Path

import pytest

from asc_aprof import (
    AicoreMetrics,
    AsyncProfiler,
    ProfileType,
    TaskCounters,
    Toolkit,
    VerdictKind,
    kernel_stats,
    sim,
)
from asc_aprof.sim import SimControl

from .drivers import Driver, scenario

SET = {"aiv_vec_ratio": 0.82, "aiv_mte2_ratio": 0.1, "aiv_mte3_ratio": 0.05}


@scenario
async def test_profile_with_counters(driver: Driver, toolkit: Toolkit, result_dir: Path) -> None:
    profiler = driver.profiler(result_dir, toolkit=toolkit)
    async with profiler.profile(counters=True) as run:
        sim.launch("vec_k", task_type="AI_VECTOR_CORE", duration_us=30.0, count=3, counters=SET)
        sim.launch("cpu_k", task_type="AI_CPU", duration_us=4.0)
        sim.launch("cube_k", task_type="AI_CORE", duration_us=12.0, count=2)
    result = run.result
    assert result is not None and result.counters is not None
    counters = result.counters
    assert len(counters) == len(result.tasks) == 6 and len(counters.columns) == 25
    rows = [counters.row(i) for i, t in enumerate(result.tasks) if t.name == "vec_k"]
    assert [r["aiv_vec_ratio"] for r in rows] == [0.82] * 3
    assert all(r["aic_mac_ratio"] == 0.0 for r in rows)  # the unused cube side reads 0 (real runs)
    cpu = counters.row(next(i for i, t in enumerate(result.tasks) if t.name == "cpu_k"))
    assert set(cpu.values()) == {None}  # AI CPU rows: N/A
    verdicts = {s.name: s.verdict for s in kernel_stats(result)}
    assert verdicts["vec_k"] is not None and verdicts["vec_k"].label == "vec-bound"
    assert verdicts["cpu_k"] is not None and verdicts["cpu_k"].kind is VerdictKind.NO_COUNTERS
    # the same run stored again, with and without counters
    assert run.run_id is not None
    again = await profiler.store_result(run.run_id, counters=True)
    assert again.tasks == result.tasks and again.counters == counters
    assert (await profiler.store_result(run.run_id)).counters is None
    assert (await profiler.store_last_result(counters=True)).counters == counters


@scenario
async def test_default_results_have_no_counters(driver: Driver, toolkit: Toolkit) -> None:
    profiler = driver.profiler(toolkit=toolkit)
    async with profiler.profile() as run:
        sim.launch("k", duration_us=5.0, counters={"aic_mac_ratio": 0.9})
    assert run.result is not None and run.result.counters is None


@scenario
async def test_a_shared_window_reads_counters_for_whoever_asked(
    driver: Driver, toolkit: Toolkit, simctl: SimControl
) -> None:
    simctl.set_latency(init=0.2)  # callers arriving during init join the same window
    profiler = driver.profiler(toolkit=toolkit)
    results = {}

    async def caller(device: int, counters: bool) -> None:
        async with profiler.profile(device_id=device, counters=counters) as run:
            sim.launch("k", device=device, duration_us=5.0 + device, count=2, counters={"aic_mac_ratio": 0.5})
        results[device] = run.result

    await driver.gather(lambda: caller(0, True), lambda: caller(1, False))
    with_counters, without = results[0], results[1]
    assert with_counters is not None and without is not None and with_counters.run_id == without.run_id
    assert without.counters is None
    assert with_counters.counters is not None and len(with_counters.counters) == 2
    assert with_counters.counters.column("aic_mac_ratio") == [0.5, 0.5]
    assert {t.device for t in with_counters.tasks} == {0}


@scenario
async def test_a_device_without_tasks_gets_empty_counters(
    driver: Driver, toolkit: Toolkit, simctl: SimControl
) -> None:
    simctl.set_latency(init=0.2)
    profiler = driver.profiler(toolkit=toolkit)
    results = {}

    async def caller(device: int) -> None:
        async with profiler.profile(device_id=device, counters=True) as run:
            if device == 0:
                sim.launch("k", device=0, duration_us=5.0)
        results[device] = run.result

    await driver.gather(lambda: caller(0), lambda: caller(1))
    idle = results[1]
    assert idle is not None and idle.tasks == () and idle.counters == TaskCounters(length=0)
    assert results[0] is not None and results[0].counters is not None and len(results[0].counters) == 1


@scenario
async def test_level_0_counters_stay_aligned_with_joined_types(
    driver: Driver, toolkit: Toolkit, simctl: SimControl
) -> None:
    simctl.configure(cann="9.0")
    profiler = driver.profiler(toolkit=toolkit)
    types = ProfileType.TASK_TIME_L0 | ProfileType.AICORE_METRICS
    async with profiler.profile(profile_types=types, counters=True) as run:
        sim.launch(
            "vec_k", task_type="AI_VECTOR_CORE", duration_us=8.0, count=2, counters={"aiv_vec_ratio": 0.75}
        )
        sim.launch("cube_k", task_type="AI_CORE", duration_us=9.0, counters={"aic_mac_ratio": 0.85})
    result = run.result
    assert result is not None and result.counters is not None
    assert [t.type for t in result.tasks] == ["KERNEL_AIVEC", "KERNEL_AIVEC", "KERNEL_AICORE"]
    assert result.counters.column("aiv_vec_ratio")[:2] == [0.75, 0.75]
    assert result.counters.column("aic_mac_ratio")[2] == 0.85
    assert result.counters.column("aiv_vec_time(us)") == [0.0, 0.0, 0.0]  # level 0: times read 0.0
    labels = {s.name: s.verdict.label for s in kernel_stats(result) if s.verdict is not None}
    assert labels == {"vec_k": "vec-bound", "cube_k": "mac-bound"}


# -- async only: streaming and the sweep ------------------------------------------------------------


@pytest.mark.anyio
async def test_iter_tasks_with_counters_streams_pairs(toolkit: Toolkit, result_dir: Path) -> None:
    profiler = AsyncProfiler(result_dir, toolkit=toolkit)
    async with profiler.profile(cleanup=False, counters=True) as run:
        sim.launch("k", duration_us=5.0, count=5000, counters={"aic_mac_ratio": 0.9})
        sim.launch("v", task_type="AI_VECTOR_CORE", duration_us=5.0, count=3)
    assert run.result is not None and run.result.counters is not None and run.run_id is not None
    pairs = [pair async for pair in profiler.iter_tasks(run.run_id, counters=True)]
    assert [task for task, _ in pairs] == list(run.result.tasks)
    assert [row for _, row in pairs] == list(run.result.counters.rows())
    assert pairs[0][1]["aic_mac_ratio"] == 0.9
    plain = [task async for task in profiler.iter_tasks(run.run_id)]
    assert plain == list(run.result.tasks)


@pytest.mark.anyio
async def test_iter_tasks_with_counters_on_a_csv_without_pmu_columns(
    toolkit: Toolkit, result_dir: Path
) -> None:
    profiler = AsyncProfiler(result_dir, toolkit=toolkit)
    async with profiler.profile(metrics=AicoreMetrics.NONE, cleanup=False, counters=True) as run:
        sim.launch("k", duration_us=5.0, count=2)
    assert run.result is not None and run.result.counters == TaskCounters(length=2)
    assert run.run_id is not None
    assert [row async for _, row in profiler.iter_tasks(run.run_id, counters=True)] == [{}, {}]


@pytest.mark.anyio
async def test_sweep_with_counters(toolkit: Toolkit) -> None:
    profiler = AsyncProfiler(toolkit=toolkit)

    def run_case(case: float, device: int) -> None:
        sim.launch(
            "k",
            device=device,
            task_type="AI_VECTOR_CORE",
            duration_us=10.0,
            count=2,
            counters={"aiv_vec_ratio": case},
        )

    seen = {}
    async with profiler.sweep([0.25, 0.5, 0.75], run_case, devices=[0, 1], counters=True) as items:
        async for item in items:
            assert item.error is None and item.result is not None and item.result.counters is not None
            seen[item.case] = item.result.counters.column("aiv_vec_ratio")
    assert seen == {0.25: [0.25, 0.25], 0.5: [0.5, 0.5], 0.75: [0.75, 0.75]}
