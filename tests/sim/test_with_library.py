"""asc-aprof's own profilers on the simulator's CANN versions and chips (asyncio and trio).

These pin what the simulator hands the library under each setting: a run per window, the
kernel names and durations, and the run's recorded version, through the real binding and export.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from asc_aprof import AsyncProfiler, Profiler, ProfileType, Toolkit, sim
from asc_aprof.sim import SimControl

# Versions whose run names carry the pid (the library still needs it to find its run).
PID_VERSIONS = [version for version in sim.CANN_VERSIONS if version >= "8.5"]


@pytest.mark.parametrize("chip", sim.CHIPS)
@pytest.mark.parametrize("cann", PID_VERSIONS)
async def test_async_profile_on_each_version_and_chip(
    toolkit: Toolkit, simctl: SimControl, result_dir: Path, cann: str, chip: str
) -> None:
    simctl.configure(cann=cann, chip=chip)
    profiler = AsyncProfiler(result_dir, toolkit=toolkit)
    async with profiler.profile() as run:
        await anyio.lowlevel.checkpoint()
        sim.launch("kernel", duration_us=12.5, count=3)
    assert run.result is not None and run.run_id is not None
    assert [(t.name, t.duration) for t in run.result.tasks] == [("kernel", 12.5)] * 3
    info = json.loads((result_dir / run.run_id / "device_0" / "info.json.0").read_text())
    assert (info["aprofsim_cann_version"], info["aprofsim_chip"]) == (cann, chip)


async def test_async_profile_after_an_init_less_start_version(
    toolkit: Toolkit, simctl: SimControl, result_dir: Path
) -> None:
    # 9.1 accepts the library's usual init / start / stop / finalize unchanged.
    simctl.configure(cann="9.1")
    profiler = AsyncProfiler(result_dir, toolkit=toolkit)
    for round_ in range(2):
        async with profiler.profile() as run:
            sim.launch(f"k{round_}", count=round_ + 1)
        assert run.result is not None
        assert [t.name for t in run.result.tasks] == [f"k{round_}"] * (round_ + 1)
    assert not simctl.initialized()


def test_profile_level0_keeps_op_summary_names(
    toolkit: Toolkit, simctl: SimControl, result_dir: Path
) -> None:
    simctl.configure(cann="9.0")
    profiler = Profiler(result_dir, toolkit=toolkit)
    types = ProfileType.TASK_TIME_L0 | ProfileType.AICORE_METRICS
    with profiler.profile(profile_types=types) as run:
        sim.launch(
            "aclnnAdd", task_type="AI_VECTOR_CORE", binary_name="Add_93b3f8e9_high_performance", count=2
        )
    assert run.result is not None
    # op_summary is the source of names; task_time's kernel_name is the binary's
    assert [t.name for t in run.result.tasks] == ["aclnnAdd"] * 2
