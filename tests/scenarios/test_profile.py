"""``profile()`` for one caller, on every driver: the result, the body's exceptions, aclprof failures."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from asc_aprof import (
    AclError,
    AicoreMetrics,
    CollectionTimeout,
    Toolkit,
    UsageError,
    sim,
    task_time_median,
)
from asc_aprof._cann._collector import get_collector
from asc_aprof.sim import SimControl

from .drivers import Driver, scenario


@scenario
async def test_spec_example_returns_the_median_of_simulated_durations(
    driver: Driver, toolkit: Toolkit
) -> None:
    profiler = driver.profiler(toolkit=toolkit)
    async with profiler.profile(metrics=AicoreMetrics.PIPE_UTILIZATION) as run:
        for duration in (10.0, 30.0, 20.0, 50.0, 40.0):
            sim.launch("kernel", duration_us=duration)
        sim.launch("other", duration_us=99.0, task_type="AI_VECTOR_CORE")
    assert profiler.last_result is not None and profiler.last_result is run.result
    assert task_time_median(profiler.last_result.tasks, name="kernel") == 30.0
    assert task_time_median(profiler.last_result.tasks, name="kernel", skip=1) == 35.0
    assert [t.name for t in profiler.last_result.tasks].count("kernel") == 5
    # naive local time, as upstream's datetime.now() (DECISIONS 8, revised)
    assert profiler.last_result.stored_at.tzinfo is None
    assert dt.timedelta(0) <= dt.datetime.now() - profiler.last_result.stored_at < dt.timedelta(hours=1)
    async with profiler.profile() as run:
        for duration in (10.0, 30.0, 20.0):
            sim.launch("kernel", duration_us=duration)
    assert run.result is not None and profiler.last_result is run.result
    assert task_time_median(run.result.tasks, name="kernel") == 20.0


@scenario
async def test_profile_yields_a_handle_with_the_result(
    driver: Driver, toolkit: Toolkit, result_dir: Path
) -> None:
    profiler = driver.profiler(result_dir, toolkit=toolkit)
    async with profiler.profile(device_id=3) as run:
        sim.launch("k", device=3, duration_us=5.0, count=4)
    assert run.device == 3 and run.result is not None
    assert run.run_id is not None and re.match(r"PROF_\d{6}_\d{17}_", run.run_id)
    assert all(t.device == 3 and t.name == "k" for t in run.result.tasks)
    assert len(run.result.tasks) == 4
    # a user path is never deleted by cleanup=True
    assert (result_dir / run.run_id).is_dir()
    assert await profiler.cleanup() == []
    assert (result_dir / run.run_id).is_dir()


@pytest.mark.parametrize(("layout", "header"), [("old", "8.5"), ("new", "9.0"), ("new", "8.5")])
@scenario
async def test_layouts_and_headers(driver: Driver, simctl: SimControl, layout: str, header: str) -> None:
    profiler = driver.profiler(toolkit=sim.toolkit(layout=layout, header=header))
    async with profiler.profile(device_id=2):
        sim.launch("k", device=2, duration_us=3.25, count=2)
    assert profiler.last_result is not None
    assert [(t.name, t.duration, t.device) for t in profiler.last_result.tasks] == [("k", 3.25, 2)] * 2


@scenario
async def test_raising_body_stops_collection_and_propagates_unchanged(
    driver: Driver, toolkit: Toolkit, simctl: SimControl
) -> None:
    profiler = driver.profiler(toolkit=toolkit)

    class Boom(Exception):
        pass

    boom = Boom("kernel crashed")
    with pytest.raises(Boom) as info:
        async with profiler.profile():
            sim.launch("k")
            assert simctl.running_devices() == [0]
            raise boom
    assert info.value is boom
    assert simctl.running_devices() == [] and simctl.live_configs() == 0
    assert not simctl.initialized()
    assert not profiler.results


@scenario
async def test_start_twice_and_nested_profile_are_usage_errors(driver: Driver, toolkit: Toolkit) -> None:
    profiler = driver.profiler(toolkit=toolkit)
    await profiler.start()
    with pytest.raises(UsageError, match="twice"):
        await profiler.start()
    await profiler.stop()
    async with profiler.profile():
        with pytest.raises(UsageError, match="nested"):
            async with driver.profiler(toolkit=toolkit).profile(device_id=1):
                pass


@scenario
async def test_collector_finalizes_when_idle(driver: Driver, toolkit: Toolkit, simctl: SimControl) -> None:
    profiler = driver.profiler(toolkit=toolkit)
    async with profiler.profile():
        assert simctl.initialized()
    assert not simctl.initialized() and get_collector().idle()


# -- aclprof failures and timeouts ------------------------------------------------------------------


@scenario
async def test_start_failure_leaves_nothing_running(
    driver: Driver, toolkit: Toolkit, simctl: SimControl
) -> None:
    simctl.inject("aclprofStart", 500005)
    profiler = driver.profiler(toolkit=toolkit)
    with pytest.raises(AclError) as info:
        async with profiler.profile():
            pytest.fail("body must not run")
    assert (info.value.code, info.value.symbol, info.value.function) == (
        500005,
        "ACL_ERROR_PROFILING_FAILURE",
        "aclprofStart",
    )
    async with profiler.profile():
        sim.launch("k")
    assert profiler.last_result is not None and len(profiler.last_result.tasks) == 1


@scenario
async def test_stop_failure_still_destroys_and_finalizes(
    driver: Driver, toolkit: Toolkit, simctl: SimControl
) -> None:
    simctl.inject("aclprofStop", 500005)
    profiler = driver.profiler(toolkit=toolkit)
    with pytest.raises(AclError, match="aclprofStop"):
        async with profiler.profile():
            sim.launch("k")
    assert simctl.running_devices() == [] and simctl.live_configs() == 0 and not simctl.initialized()


@scenario
async def test_running_under_msprof_cli_is_explained(
    driver: Driver, toolkit: Toolkit, simctl: SimControl
) -> None:
    simctl.set_cmd_mode(True)
    with pytest.raises(AclError) as info:
        async with driver.profiler(toolkit=toolkit).profile():
            pass
    assert info.value.code == 100042 and "msprof command line" in info.value.hint


@scenario
async def test_a_start_slower_than_call_timeout_is_a_collection_timeout(
    driver: Driver, toolkit: Toolkit, simctl: SimControl, result_dir: Path
) -> None:
    simctl.set_latency(start=0.3)
    impatient = driver.profiler(result_dir, toolkit=toolkit, call_timeout=0.05)
    with pytest.raises(CollectionTimeout, match=r"aclprofInit/aclprofStart did not finish within 0\.05 s"):
        async with impatient.profile():
            pytest.fail("the body must not run")
    # the collector finishes that start (and stops it again); the next caller gets its collection
    simctl.set_latency()
    profiler = driver.profiler(result_dir, toolkit=toolkit)
    async with profiler.profile() as run:
        sim.launch("after")
    assert run.result is not None and [t.name for t in run.result.tasks] == ["after"]
