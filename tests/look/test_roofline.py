"""The report's roofline and speed-of-light charts (issue 31): which kernels go where, the roofs,
the verdict in the header, and a sentence where there is neither (the browser test draws them:
tests/look/test_browser.py)."""

from __future__ import annotations

import datetime as dt
import html
import re
from collections.abc import Mapping
from pathlib import Path

import pytest

from asc_aprof import (
    AsyncProfiler,
    Profiler,
    ProfilingResult,
    ProfilingTask,
    SweepItem,
    Timeline,
    Toolkit,
    bound_verdict,
    sim,
    speed_of_light,
    sweep_timelines,
    write_report,
)
from asc_aprof._model._chips import CUBE_FP16_OPS_PER_CYCLE, VECTOR_FP16_OPS_PER_CYCLE, chip_spec
from asc_aprof._outputs._report_html import render
from asc_aprof._outputs._report_model import RooflineKind, Slice, bound_verdict_text, build_model
from asc_aprof._outputs._report_write import model_of
from asc_aprof._runs._info import RunInfo
from asc_aprof._runs._timeline import TimedTask

from ..extras import require

require("plotly")  # the report is drawn with it

#: What the simulated 910B's info.json says (sim/_pmu.py): MHz, AI Cores, vector cores.
MHZ, CUBES, VECTORS = 1650.0, 20, 40
#: Per kernel: type, duration (µs), counters of several groups (cycles, fops ratios, GM
#: bandwidths, pipe ratios); the simulator fills the columns not set.
KERNELS: dict[str, tuple[str, float, dict[str, float]]] = {
    "vk": (
        "AI_VECTOR_CORE",
        50.0,
        {
            "aiv_total_cycles": VECTORS * MHZ * 50.0 * 0.9,
            "aiv_vec_fp16_ratio": 0.5,
            "aiv_main_mem_read_bw(GB/s)": 20.0,
            "aiv_main_mem_write_bw(GB/s)": 5.0,
            "aiv_vec_ratio": 0.5,
            "aiv_mte2_ratio": 0.3,
        },
    ),
    "ck": (
        "AI_CORE",
        30.0,
        {
            "aic_total_cycles": CUBES * MHZ * 30.0 * 0.8,
            "aic_mac_fp16_ratio": 0.7,
            "aic_main_mem_read_bw(GB/s)": 40.0,
            "aic_mac_ratio": 0.7,
        },
    ),
    "sk": ("AI_VECTOR_CORE", 20.0, {"aiv_total_cycles": VECTORS * MHZ * 20.0 * 0.5, "aiv_scalar_ratio": 0.9}),
}
#: ArithmeticUtilization (fops), PipeUtilization (ratios), Memory (GM bandwidth): one sweep each.
GROUPS = (0, 1, 2)
CASES = 3  # on one device: a case's kernels are the same (case, device) in every group's sweep


def run_case(case: int, device: int) -> None:
    for name, (task_type, duration, counters) in KERNELS.items():
        for _ in range(3):
            sim.launch(name, device=device, task_type=task_type, duration_us=duration, counters=counters)


async def roofline_sweep(toolkit: Toolkit, root: Path) -> list[Timeline]:
    """The same sweep once per group in GROUPS, on the simulated 910B: every case's kernels get
    every group's counters when the timelines are reported together."""
    items: list[SweepItem[int]] = []
    for group in GROUPS:
        profiler = AsyncProfiler(root, toolkit=toolkit)
        async with profiler.sweep(range(CASES), run_case, devices=[0], metrics=group) as stream:
            async for item in stream:
                assert item.error is None
                items.append(item)
    return sweep_timelines(items, root)


async def test_roofline_of_a_sweep_with_several_groups(toolkit: Toolkit, tmp_path: Path) -> None:
    timelines = await roofline_sweep(toolkit, tmp_path / "sweep")
    model = model_of(timelines)
    (view,) = model.rooflines
    assert view.kind is RooflineKind.ROOFLINE and model.roofline_note is None
    # one point per (case, kernel); the run's own cores and clock, the table's rates
    assert len(view.kernels) == CASES * len(KERNELS) == len(model.kernels)
    chip = view.chip
    assert (chip.mhz, chip.cube_cores, chip.vector_cores, chip.from_run) == (MHZ, CUBES, VECTORS, True)
    hz = MHZ * 1e6
    gm_rate = chip_spec("5").gm_bytes_per_cycle
    assert gm_rate is not None
    assert dict(view.roofs) == pytest.approx(
        {
            "cube": CUBE_FP16_OPS_PER_CYCLE * CUBES * hz,
            "vector": VECTOR_FP16_OPS_PER_CYCLE * VECTORS * hz,
            "gm": gm_rate * CUBES * hz,
            "l2": 110.0 * CUBES * hz,
        }
    )
    for kernel in view.kernels:
        assert kernel.sol == speed_of_light(kernel.counters, kernel.median.median, chip)
        assert kernel.sol is not None and kernel.sol.intensity is not None and kernel.sol.flops
        assert kernel.verdict == bound_verdict_text(kernel.counters, kernel.median.median, chip)
        assert kernel.bound == bound_verdict(kernel.counters, kernel.median.median, chip)
    # vk's set counters: GM read 20 + write 5 GiB/s of core time, 90% of its 40 cores busy
    vk = next(k for k in view.kernels if k.name == "vk")
    cells = {name: value for name, value in vk.counters.items() if value is not None}
    assert cells["aiv_main_mem_read_bw(GB/s)"] == 20.0
    gm_bytes = sum(
        cells[f"{side}_main_mem_{way}_bw(GB/s)"] * 2**30 * cells[f"{side}_total_cycles"] / hz
        for side in ("aic", "aiv")
        for way in ("read", "write")
    )
    fops = cells["aic_cube_fops"] + cells["aiv_vector_fops"]
    assert vk.sol is not None and vk.sol.intensity == pytest.approx(fops / gm_bytes)
    assert model.headline.startswith("vk: ") and "of peak" in model.headline
    text = html.unescape(render(model)[0])
    assert text.count('data-chart="roofline:') == 1 and "Speed of light: vk: " in text
    assert f"{MHZ:g} MHz (from the run's info.json)" in text


def _slice(counters: Mapping[str, float | None], info: RunInfo | None, name: str = "k") -> Slice:
    tasks = tuple(ProfilingTask(i, name, "AI_VECTOR_CORE", 40.0, 0) for i in range(5))
    timed = tuple(TimedTask(t, 1_000_000 * (i + 1), 2, counters) for i, t in enumerate(tasks))
    return Slice(None, None, "PROF_1", 0, tasks, timed, info)


INFO_910B = RunInfo("PROF_1", Path("PROF_1"), platform="5", ai_cores=20, vector_cores=40, core_mhz=1650.0)
#: PipeUtilization only: fractions of the pipes, no intensity.
RATIOS = {"aiv_total_cycles": 40 * 1650.0 * 40.0 * 0.5, "aiv_scalar_ratio": 0.96, "aiv_vec_ratio": 0.3}


def test_counters_without_an_intensity_give_speed_of_light_bars() -> None:
    model = build_model([(None, [_slice(RATIOS, INFO_910B)])])
    (view,) = model.rooflines
    assert view.kind is RooflineKind.SOL_BARS and len(view.kernels) == 1
    (kernel,) = view.kernels
    assert kernel.sol is not None and kernel.sol.intensity is None
    assert dict(kernel.sol.fractions) == pytest.approx({"scalar": 0.96 * 0.5, "vector": 0.3 * 0.5})
    assert kernel.verdict is not None and kernel.verdict.startswith("scalar-bound")
    assert model.headline == "k: scalar-bound, no roof reached (scalar at 48% of peak; vector at 15%)"
    text, _ = render(model)
    assert text.count('data-chart="sol:') == 1 and 'data-chart="roofline:' not in text


@pytest.mark.parametrize(
    ("counters", "info", "why"),
    [
        ({}, INFO_910B, "carry no hardware counters"),
        (RATIOS, None, "says which chip it ran on"),
        ({"aiv_icache_miss_rate": 0.1}, INFO_910B, "give no fraction of the chip's peaks"),
    ],
)
def test_no_roofline_says_why(counters: dict[str, float], info: RunInfo | None, why: str) -> None:
    model = build_model([(None, [_slice(counters, info)])])
    assert model.rooflines == () and model.roofline_note is not None and why in model.roofline_note
    assert model.headline == ""
    text, charts = render(model)
    assert (
        why in html.unescape(text) and 'data-chart="roofline:' not in text and 'data-chart="sol:' not in text
    )
    assert len(re.findall('class="aprof-chart"', text)) == charts


def test_a_report_of_results_without_a_chip_keeps_working(toolkit: Toolkit, tmp_path: Path) -> None:
    """Counters parsed into a result (no info.json read): the pipe verdict, no roofline, a sentence."""
    with Profiler(tmp_path / "runs", toolkit=toolkit).profile(counters=True) as run:
        sim.launch("k", task_type="AI_VECTOR_CORE", duration_us=8.0, count=4, counters={"aiv_vec_ratio": 0.9})
    assert run.result is not None
    text = html.unescape(write_report([run.result], tmp_path / "r.html").read_text(encoding="utf-8"))
    assert "vec-bound" in text and "No roofline: no run here says which chip" in text
    plain = ProfilingResult((ProfilingTask(0, "k", "AI_CORE", 3.0, 0),), "PROF_2", dt.datetime.now(dt.UTC))
    assert "No roofline: these inputs carry no hardware counters" in write_report(
        [plain], tmp_path / "p.html"
    ).read_text(encoding="utf-8")


def test_a_custom_verdict_is_still_given_two_arguments() -> None:
    seen: list[tuple[int, float]] = []

    def mine(counters: Mapping[str, float | None], median_us: float) -> str:
        seen.append((len(counters), median_us))
        return "mine"

    model = build_model([(None, [_slice(RATIOS, INFO_910B)])], verdict=mine)
    assert [k.verdict for k in model.kernels] == ["mine"] and seen == [(3, 40.0)]
    assert model.rooflines and model.headline  # the roofline's own verdict is still shown
    assert build_model([(None, [_slice(RATIOS, INFO_910B)])], verdict=None).headline == ""
