"""Every counter group in one bench call, and each kernel's speed of light (issue 31).

On the simulated 910B and 310B, ``bench(metrics="all")`` replays the call once per group the chip
supports plus once without PMU collection; each kernel's counters hold every column of every
group (``sim.COUNTER_COLUMNS``) and its fractions are what the counters set and the chip imply.
"""

from __future__ import annotations

import math

import anyio
import pytest

import asc_aprof
from asc_aprof import (
    AicoreMetrics,
    AsyncProfiler,
    AttributionError,
    BenchResult,
    InvalidArgumentError,
    Profiler,
    Toolkit,
    VerdictKind,
    bound_verdict,
    chip_facts,
    chip_spec,
    sim,
    speed_of_light,
)
from asc_aprof._plans._bench import SUPPORTED_GROUPS
from asc_aprof._plans._raw._pmu import CHIP_310B, CHIP_910B, GROUP_OF_METRIC
from asc_aprof.sim import SimControl

#: What the simulated chips' info.json say (sim/_pmu.py CHIP_CLOCK): MHz, AI Cores, vector cores.
CLOCK = {"910B": (1650.0, 20, 40), "310B": (1250.0, 1, 1)}
PLATFORM = {"910B": CHIP_910B, "310B": CHIP_310B}
VEC_US, CUBE_US = 50.0, 30.0


def vector_counters(chip: str) -> dict[str, float]:
    """Counters of several groups for the vector kernel (prefixed on the 910B)."""
    mhz, _, vectors = CLOCK[chip]
    prefix = "aiv_" if chip == "910B" else ""
    cores = vectors if chip == "910B" else 1
    return {
        f"{prefix}total_cycles": cores * mhz * VEC_US * 0.9,  # 90% of the cores busy
        (f"{prefix}vec_ratio" if chip == "910B" else "vec_exe_ratio"): 0.5,
        (f"{prefix}mte2_ratio" if chip == "910B" else "mte2_exe_ratio"): 0.3,
        f"{prefix}main_mem_read_bw(GB/s)": 20.0,
        f"{prefix}main_mem_write_bw(GB/s)": 5.0,
    }


def call_for(chip: str) -> None:
    sim.launch(
        "vk", task_type="AI_VECTOR_CORE", duration_us=VEC_US, block_dim=40, counters=vector_counters(chip)
    )
    sim.launch("ck", task_type="AI_CORE", duration_us=CUBE_US, block_dim=20)


def check_all_groups(result: BenchResult, chip: str) -> None:
    groups = SUPPORTED_GROUPS[PLATFORM[chip]]
    assert [g.group for g in result.groups] == list(groups)
    assert [g.name for g in result.groups] == [GROUP_OF_METRIC[g] for g in groups]
    assert all(g.run_ids and g.run_ids[0] not in result.run_ids for g in result.groups)
    every = {c for g in groups for c in sim.COUNTER_COLUMNS[chip].get(g, ())}
    mhz, cubes, vectors = CLOCK[chip]
    assert result.chip is not None and (result.chip.mhz, result.chip.cube_cores) == (mhz, cubes)
    for kernel in result.kernels:
        assert set(kernel.counters) == every, kernel.name
        assert kernel.speed_of_light, kernel.name
        again = speed_of_light(kernel.counters, kernel.median_us / kernel.per_call, result.chip)
        assert dict(again.fractions) == dict(kernel.speed_of_light)
    vk = next(k for k in result.kernels if k.name == "vk")
    assert vk.median_us == VEC_US  # the replay without PMU: exact durations
    set_ = vector_counters(chip)
    cores = vectors if chip == "910B" else 1
    busy = next(v for c, v in set_.items() if c.endswith("total_cycles")) / (
        cores * mhz * 1e6 * VEC_US * 1e-6
    )
    assert busy == pytest.approx(0.9)
    assert vk.speed_of_light["mte2"] == pytest.approx(0.3 * busy, rel=1e-3)
    # GM: (read + write) GiB/s of core time x core time / duration, over ddr_rate x AI Cores x clock
    spec = chip_spec(PLATFORM[chip])
    moved = 25.0 * 2**30 * busy * cores
    if spec.gm_bytes_per_cycle is not None:
        peak = spec.gm_bytes_per_cycle * cubes * mhz * 1e6
        assert vk.speed_of_light["gm"] == pytest.approx(moved / peak, rel=1e-3)
    else:
        assert "gm" not in vk.speed_of_light


@pytest.fixture
def toolkit_for(simctl: SimControl, request: pytest.FixtureRequest) -> Toolkit:
    simctl.configure(chip=request.param)
    return sim.toolkit()


@pytest.mark.parametrize("toolkit_for", ["910B", "310B"], indirect=True)
def test_bench_all_groups_gives_every_column_and_the_fractions(toolkit_for: Toolkit) -> None:
    chip = sim.control().chip
    result = asc_aprof.bench(lambda: call_for(chip), toolkit=toolkit_for, reps=5, metrics="all")
    check_all_groups(result, chip)
    data = result.to_dict()
    assert data["groups"][0]["run_ids"] and data["kernels"][0]["speed_of_light"]


@pytest.mark.anyio
@pytest.mark.parametrize("toolkit_for", ["910B", "310B"], indirect=True)
async def test_async_bench_all_groups(toolkit_for: Toolkit) -> None:
    chip = sim.control().chip
    profiler = AsyncProfiler(toolkit=toolkit_for)

    async def call() -> None:
        await anyio.to_thread.run_sync(call_for, chip)

    result = await profiler.bench(call, reps=5, metrics="all")
    check_all_groups(result, chip)


@pytest.mark.parametrize("toolkit_for", ["910B"], indirect=True)
def test_a_list_of_groups_replays_those(toolkit_for: Toolkit) -> None:
    profiler = Profiler(toolkit=toolkit_for)
    result = profiler.bench(
        lambda: call_for("910B"), reps=3, metrics=["PipeUtilization", AicoreMetrics.MEMORY_BANDWIDTH, 1]
    )
    assert [g.name for g in result.groups] == ["PipeUtilization", "Memory"]
    vk = next(k for k in result.kernels if k.name == "vk")
    assert "aiv_vec_ratio" in vk.counters and "aiv_ub_read_bw(GB/s)" in vk.counters
    assert "aiv_vec_fp16_ratio" not in vk.counters  # ArithmeticUtilization was not asked for


@pytest.mark.parametrize("toolkit_for", ["910B"], indirect=True)
def test_one_group_keeps_one_collection_and_no_counters(toolkit_for: Toolkit) -> None:
    result = Profiler(toolkit=toolkit_for).bench(lambda: call_for("910B"), reps=3)
    assert result.groups == () and all(not k.counters and not k.speed_of_light for k in result.kernels)


@pytest.mark.parametrize("toolkit_for", ["910B"], indirect=True)
def test_a_replay_with_other_kernels_is_an_attribution_error(toolkit_for: Toolkit) -> None:
    calls = 0

    def call() -> None:
        nonlocal calls
        calls += 1
        call_for("910B")
        if calls > 4:  # 1 calibration + 3 measured: every replay with counters launches more
            sim.launch("extra", duration_us=5.0)

    with pytest.raises(AttributionError, match="replay launched other kernels than the replay without"):
        Profiler(toolkit=toolkit_for).bench(call, warmup=0, reps=3, metrics="all")


def test_unknown_groups_and_empty_lists_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="not a metric group"):
        Profiler(toolkit=sim.toolkit()).bench(lambda: None, metrics=["Pipes"])
    with pytest.raises(InvalidArgumentError, match="names no group"):
        Profiler(toolkit=sim.toolkit()).bench(lambda: None, metrics=[])


# -- the figures, by hand -----------------------------------------------------------------------------
def test_fractions_by_hand_on_a_split_chip() -> None:
    facts = chip_facts(platform="5", ai_cores=20, vector_cores=40, mhz=1000.0)
    assert facts is not None and facts.from_run and facts.spec is not None
    # 40 vector cores at 1 GHz for 10 us = 400,000 core cycles; the kernel used 200,000 of them
    counters = {
        "aiv_total_cycles": 200_000.0,
        "aiv_vec_ratio": 0.8,
        "aiv_main_mem_read_bw(GB/s)": 64.0,
        "aic_total_cycles": 0.0,
        "aic_mac_ratio": 0.0,
        "aiv_vector_fops": 2_560_000.0,
    }
    figures = speed_of_light(counters, 10.0, facts)
    # GM: 64 GiB/s x 200 us of core time = bytes; per 10 us; peak 32 B x 20 cores x 1 GHz
    gm = 64 * 2**30 * 200e-6 / 10e-6 / (32 * 20 * 1e9)
    vector = 2_560_000 / 10e-6 / (128 * 40 * 1e9)  # fops replace the pipe ratio's 0.8 x 0.5
    assert figures.fractions == pytest.approx({"gm": gm, "vector": vector})
    assert "cube" not in figures.fractions  # the cube side ran no cycle
    assert figures.intensity == pytest.approx(2_560_000 / (64 * 2**30 * 200e-6))
    limiter = figures.limiter
    assert limiter is not None and limiter[0] == "gm" and limiter[1] == pytest.approx(gm)


def test_no_chip_or_no_duration_gives_no_fraction() -> None:
    counters = {"aiv_total_cycles": 1.0, "aiv_vec_ratio": 0.5}
    assert not speed_of_light(counters, 10.0, None).fractions
    facts = chip_facts(platform="5", ai_cores=20, vector_cores=40, mhz=1000.0)
    assert not speed_of_light(counters, 0.0, facts).fractions
    assert chip_facts() is None


def test_verdict_in_roofline_terms_and_its_fallback() -> None:
    facts = chip_facts(platform="5", ai_cores=20, vector_cores=40, mhz=1000.0)
    counters: dict[str, float | None] = {
        "aiv_total_cycles": 400_000.0,  # every vector core busy for the 10 us
        "aiv_vec_ratio": 0.12,
        "aiv_mte2_ratio": 0.5,
        "aiv_main_mem_read_bw(GB/s)": 10.6,  # GiB/s x 40 cores: ~0.71 of 32 B x 20 x 1 GHz
    }
    verdict = bound_verdict(counters, 10.0, facts)
    assert verdict.kind is VerdictKind.MEMORY_BOUND and verdict.pipe == "gm"
    assert verdict.label == "memory-bound" and verdict.column is None and verdict.core is None
    assert verdict.reason.startswith("gm at 71% of peak; mte2 at 50%; vector at 12%")
    plain = bound_verdict(counters, 10.0)  # without the chip: today's pipe rule
    assert plain.kind is VerdictKind.NOT_BOUND and plain.label == "not bound"
    assert not plain.fractions
    assert type(verdict).from_dict(verdict.to_dict()) == verdict


def test_the_chip_table_names_a_source_for_every_entry() -> None:
    for spec in asc_aprof.CHIP_TABLE.values():
        assert spec.source and (spec.cube_cores or spec.mhz)
    assert chip_spec("910b3").name == "Ascend910B3" and chip_spec("7").name == "Ascend310B"
    with pytest.raises(InvalidArgumentError, match="no peaks known for chip 'Ascend999'"):
        chip_spec("Ascend999")
    assert math.isclose(chip_spec("Ascend910B3").cube_ops_per_cycle, 16 * 16 * 16 * 2)
