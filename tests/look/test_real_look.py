"""Real CANN runs, exported by the real msprof.py: exact timelines, valid traces, a report that renders.

Four runs cover what differs: 910B task time level 1 with PipeUtilization counters, 910B level 0
(types only in task_time) with a kernel on three streams, 310B with unprefixed counters, and a
310B run whose only CSV is task_time.
"""

from __future__ import annotations

import concurrent.futures
from pathlib import Path

import pytest

from asc_aprof import Profiler, Toolkit, read_timeline, write_report, write_trace
from asc_aprof._cann._layout import find_summary_csvs
from asc_aprof._outputs._report_model import RooflineKind
from asc_aprof._outputs._report_write import model_of
from asc_aprof._runs._csv import iter_file_tasks

from ..extras import require
from ..real.conftest import copy_run
from ..reference import needs_real_runs
from . import trace_format
from .browser_support import assert_renders, open_report
from .test_timeline import csv_starts

require("plotly")  # the report is drawn with it

pytestmark = needs_real_runs

LOOKED = ("910b_l1_div", "910b_l0_add_pypto_b16", "310b_addcmul", "310b_08lpnormv2_OKKRIB")


@pytest.fixture(scope="module")
def real_runs(real_toolkit: Toolkit, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The four runs, copied and exported with the real msprof.py (two at a time)."""
    into = tmp_path_factory.mktemp("real_look")
    copies = {name: copy_run(name, into) for name in LOOKED}

    def export(name: str) -> Path:
        result_path, run_id = copies[name]
        Profiler(result_path, toolkit=real_toolkit, export_timeout=300).export(run_id, timeline=False)
        return result_path / run_id

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(LOOKED, pool.map(export, LOOKED), strict=True))


@pytest.mark.parametrize("name", LOOKED)
def test_real_timeline_and_trace_are_exact(real_runs: dict[str, Path], name: str, tmp_path: Path) -> None:
    run = real_runs[name]
    files = find_summary_csvs(run)
    timeline = read_timeline(run)
    assert [t.task for t in timeline.tasks] == [t for batch in iter_file_tasks(files) for t in batch]
    kind = "op_summary" if any(f.kind == "op_summary" for f in files) else "task_time"
    expected = [row for f in files if f.kind == kind for row in csv_starts(f.path)]
    assert [(t.task.name, t.stream, t.start_ns) for t in timeline.tasks] == expected
    if name.startswith("910b_l0"):  # level 0: types joined in from task_time, as the default read does
        assert {t.task.type for t in timeline.tasks} - {"N/A"} and all(
            t.task.type.startswith(("KERNEL_", "N/A")) for t in timeline.tasks
        )
    data = trace_format.load(write_trace([timeline], tmp_path / f"{name}.json.gz"))
    assert trace_format.check(data) == []
    origin = int(data["otherData"]["origin_unix_ns"])
    events = trace_format.complete_events(data)
    assert sorted(origin + int(e["ts"] * 1000) for e in events) == sorted(s for _, _, s in expected)
    assert all(int(e["args"]["start_unix_ns"]) == origin + int(e["ts"] * 1000) for e in events)
    threads = {name for (pid, tid), name in trace_format.names(data, "thread_name").items() if name != "Runs"}
    assert threads == {f"Stream {s}" for _, s, _ in expected}  # no overlap lanes on real data


def test_real_counters_are_the_csv_values(real_runs: dict[str, Path]) -> None:
    div = read_timeline(real_runs["910b_l1_div"]).tasks[0]
    assert div.counters is not None
    assert (div.counters["aiv_vec_ratio"], div.counters["aiv_mte2_ratio"]) == (0.423, 0.198)
    assert div.counters["aic_mac_ratio"] == 0.0
    addcmul = read_timeline(real_runs["310b_addcmul"]).tasks[0]
    assert addcmul.counters is not None and {"vec_exe_ratio", "memory_bound"} <= set(addcmul.counters)


def test_real_report_renders_in_the_browser(
    real_runs: dict[str, Path], browser: object, tmp_path: Path
) -> None:
    timelines = {name: [read_timeline(run)] for name, run in real_runs.items()}
    page = write_report(timelines, tmp_path / "real.html", title="Real 910B and 310B runs")
    text = page.read_text(encoding="utf-8")
    assert "aiv_vec_ratio" in text and "vec_exe_ratio" in text
    # the bound verdict by default: 910b_l1_div's aiv_scalar_ratio median is 0.977 (tests/real)
    assert "scalar-bound" in text
    check = open_report(browser, page, "report-real")
    assert_renders(check, text.count('class="aprof-chart"'))
    names = {c["name"] for c in check.charts}
    assert {"timeline", "counters:ratios"} <= names and not any(n.startswith("cases:") for n in names)
    # PipeUtilization gives fractions, not an intensity: speed-of-light bars, a point per kernel
    # (910b_l1_div's one kernel; the 310B runs' kernels, with the table's 310B entry)
    kernels = {(k.group, k.name) for k in model_of(timelines).kernels if k.sol and k.sol.fractions}
    assert check.points and sum(check.points.values()) == len(kernels)
    assert all(name.startswith("sol:") for name in check.points)


def test_real_l1_div_roofline_renders(real_runs: dict[str, Path], browser: object, tmp_path: Path) -> None:
    """910b_l1_div alone: its run's cores and clock (info.json: 20 AI Cores, 40 vector, 1650 MHz),
    one point, the verdict in roofline terms in the header."""
    timeline = read_timeline(real_runs["910b_l1_div"])
    assert timeline.info is not None and timeline.info.core_mhz == 1650.0
    model = model_of([timeline])
    (view,) = model.rooflines
    assert view.kind is RooflineKind.SOL_BARS and view.chip.from_run and view.chip.mhz == 1650.0
    (kernel,) = view.kernels
    assert kernel.bound is not None and model.headline.startswith(f"{kernel.name}: {kernel.bound.label}")
    page = write_report([timeline], tmp_path / "l1_div.html", title="910b_l1_div")
    check = open_report(browser, page, "report-real-roofline")
    assert_renders(check, page.read_text(encoding="utf-8").count('class="aprof-chart"'))
    assert check.points == {f"sol:{view.chip.name}": 1}
