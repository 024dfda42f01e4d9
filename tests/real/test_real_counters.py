"""PMU counters on real CANN data: real runs exported by CANN's real msprof.py, read through the
library with ``counters=True``, equal the exporter's CSV read with :mod:`csv`; the verdict on the
two described runs, with its reasoning; and the simulator's column names for the metric groups no
real run collected, taken from the real msprof.py itself.
"""

from __future__ import annotations

import concurrent.futures
import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy
import pytest

from asc_aprof import AsyncProfiler, Profiler, Toolkit, VerdictKind, kernel_stats, sim

from ..reference import REAL_MSPROF, needs_real_runs, real_run_names
from .conftest import copy_run
from .test_real_runs import CONTROL, newest, output_of, read_rows

pytestmark = needs_real_runs

RUNS = real_run_names()
TASK_COLUMNS_READ = ("Task Type", "Task Duration(us)")


def exporter_counters(output: Path) -> tuple[list[str], dict[str, list[float | None]]]:
    """The counter columns of the exporter's op_summary (after ``Context ID``) and their values,
    task by task (control rows and N/A durations are no tasks), N/A as None."""
    paths = newest(output, "op_summary")
    if not paths:
        return [], {}
    with open(paths[0], newline="", encoding="utf-8") as stream:
        header = next(csv.reader(stream))
    columns = header[header.index("Context ID") + 1 :]
    values: dict[str, list[float | None]] = {c: [] for c in columns}
    for row in read_rows(paths):
        if row["Task Type"] in CONTROL or row["Task Duration(us)"].strip() == "N/A":
            continue
        for column in columns:
            cell = row[column].strip()
            values[column].append(None if cell == "N/A" else float(cell))
    return columns, values


@pytest.mark.parametrize("name", RUNS)
def test_counters_equal_the_exporters_csv(
    name: str, exported: dict[str, tuple[Path, str]], real_toolkit: Toolkit
) -> None:
    result_path, run_id = exported[name]
    columns, values = exporter_counters(output_of(result_path, run_id))
    result = Profiler(result_path, toolkit=real_toolkit, reader="msprof").store_result(run_id, counters=True)
    assert result.counters is not None and len(result.counters) == len(result.tasks)
    assert list(result.counters.columns) == columns
    assert result.counters.to_dict() == values
    if name == "310b_08lpnormv2_OKKRIB":  # only a task_time CSV: no PMU column at all
        assert columns == []


@pytest.mark.parametrize("name", ["910b_l1_div", "310b_addcmul", "910b_l0_matmul_torch"])
async def test_async_paths_give_the_same_counters(
    name: str, exported: dict[str, tuple[Path, str]], real_toolkit: Toolkit
) -> None:
    result_path, run_id = exported[name]
    sync = Profiler(result_path, toolkit=real_toolkit, reader="msprof").store_result(run_id, counters=True)
    profiler = AsyncProfiler(result_path, toolkit=real_toolkit, reader="msprof")
    stored = await profiler.store_result(run_id, counters=True)
    assert stored.tasks == sync.tasks and stored.counters == sync.counters
    assert sync.counters is not None
    streamed = [pair async for pair in profiler.iter_tasks(run_id, counters=True)]
    assert [t for t, _ in streamed] == list(sync.tasks)
    assert [row for _, row in streamed] == list(sync.counters.rows())


def _median(values: list[float | None]) -> float:
    return float(numpy.median([v for v in values if v is not None]))


def test_verdict_910b_l1_div_is_scalar_bound(
    exported: dict[str, tuple[Path, str]], real_toolkit: Toolkit
) -> None:
    """div_kernel, 510 AI_VECTOR_CORE tasks of ~375 µs on a 910B's vector cores.

    Reasoning: the vector core's scalar pipe is busy ~98% of the time (aiv_scalar_ratio median
    0.977 > 0.8), while the vector unit (0.43), MTE2 (0.14) and MTE3 (0.08) are each below 0.7 and
    together 0.65 < 0.9; the cube side is idle (a vector kernel). So the vector rule does not
    fire, the scalar pipe rule does: scalar-bound -- the kernel spends its time in scalar code
    (address arithmetic, loop control), not in vector instructions or data movement.
    """
    result_path, run_id = exported["910b_l1_div"]
    columns, values = exporter_counters(output_of(result_path, run_id))
    result = Profiler(result_path, toolkit=real_toolkit, reader="msprof").store_result(run_id, counters=True)
    (stats,) = kernel_stats(result)
    assert stats.name == "div_kernel" and stats.count == 510
    scalar, vec = _median(values["aiv_scalar_ratio"]), _median(values["aiv_vec_ratio"])
    mte2, mte3 = _median(values["aiv_mte2_ratio"]), _median(values["aiv_mte3_ratio"])
    assert scalar > 0.8 and max(vec, mte2, mte3) <= 0.7 and vec + mte2 + mte3 <= 0.9
    assert _median(values["aic_mac_ratio"]) == 0.0
    verdict = stats.verdict
    assert verdict is not None and verdict.kind is VerdictKind.BOUND and verdict.label == "scalar-bound"
    assert (verdict.column, verdict.ratio, verdict.core) == ("aiv_scalar_ratio", scalar, "vector")
    assert verdict.reason == f"aiv_scalar_ratio {scalar:.3g} > 0.8 (other pipes)"
    assert stats.counters["aiv_vec_ratio"] == vec and set(stats.counters) == set(columns)


def test_verdict_310b_addcmul_is_not_bound(
    exported: dict[str, tuple[Path, str]], real_toolkit: Toolkit
) -> None:
    """Addcmul, one AI_VECTOR_CORE task of 18.5 µs on a 310B (one core, unprefixed columns).

    Reasoning: MTE2 is the busiest pipe (mte2_exe_ratio 0.498), then scalar (0.429), MTE3
    (0.143) and the vector unit (0.106); no ratio is above 0.7 and vec + mte2 + mte3 = 0.747 <
    0.9, the cube unit is idle (mac 0) and no other pipe is above 0.8: no pipe is saturated. The
    task is shorter than 20 µs, so it is not latency-bound either: not bound, with data movement
    in (MTE2) the largest share (MindStudio's memory_bound, mte2 / max(mac, vec), reads 4.7).
    """
    result_path, run_id = exported["310b_addcmul"]
    _, values = exporter_counters(output_of(result_path, run_id))
    result = Profiler(result_path, toolkit=real_toolkit, reader="msprof").store_result(run_id, counters=True)
    (stats,) = kernel_stats(result)
    assert stats.name == "Addcmul" and stats.count == 1 and stats.median_us <= 20
    ratios = {p: _median(values[f"{p}_exe_ratio"]) for p in ("vec", "mac", "scalar", "mte1", "mte2", "mte3")}
    assert max(ratios.values()) == ratios["mte2"] < 0.7
    assert ratios["vec"] + ratios["mte2"] + ratios["mte3"] <= 0.9 and ratios["mac"] == 0.0
    verdict = stats.verdict
    assert verdict is not None and verdict.kind is VerdictKind.NOT_BOUND and verdict.label == "not bound"
    assert (verdict.pipe, verdict.column, verdict.core) == ("mte2", "mte2_exe_ratio", None)
    assert "no pipe rule fired" in verdict.reason and "<= 20 us" in verdict.reason
    assert stats.counters["memory_bound"] == _median(values["memory_bound"]) > 1


# -- column names of the groups no real run collected ------------------------------------------------

#: sample.json's names of the AicoreMetrics groups (the 910B's cube side calls PipeUtilization
#: "PipeUtilizationExct", as real runs show).
GROUP_NAMES = {
    0: "ArithmeticUtilization",
    1: "PipeUtilization",
    2: "Memory",
    3: "MemoryL0",
    4: "ResourceConflictRatio",
    5: "MemoryUB",
    6: "L2Cache",
    8: "MemoryAccess",
}
#: (chip, group) -> the real run to rewrite; the groups the real runs collected are checked
#: against their own exports in tests/sim/test_counters.py.
DERIVED = {("910B", g): "910b_l1_div" for g in (0, 2, 3, 4, 5, 6, 8)} | {
    ("310B", g): "310b_addcmul" for g in (0, 1, 2, 3, 4, 5, 6)
}

EVENTS_SCRIPT = """
import json, re, sys
sys.path.insert(0, sys.argv[1])
from msconfig.ai_core_config import AICoreConfig
from common_func.platform.ai_core_metrics_manager import AiCoreMetricsManager
formulas = dict(AICoreConfig.DATA_DEFAULT["formula"])
formulas.update(dict(AICoreConfig.DATA_DEFAULT["metrics"]))
out = {}
for group, metrics in AiCoreMetricsManager.AICORE_METRICS_LIST_DEFAULT.items():
    events = []
    for metric in metrics.split(","):
        for event in re.findall(r"\\br([0-9a-f]+)\\b", formulas.get(metric, "")):
            if "0x" + event not in events:
                events.append("0x" + event)
    out[group] = events[:8]
print(json.dumps(out))
"""


def group_events() -> dict[str, list[str]]:
    """The PMU events each group's metrics are computed from, per the real msprof.py's own tables."""
    analysis = REAL_MSPROF.parents[1]
    done = subprocess.run(
        [sys.executable, "-c", EVENTS_SCRIPT, str(analysis)], capture_output=True, text=True, check=True
    )
    events: dict[str, list[str]] = json.loads(done.stdout)
    return events


def export_as_group(
    run: str, chip: str, group: int, events: dict[str, list[str]], toolkit: Toolkit, into: Path
) -> tuple[str, ...]:
    """Export a copy of real run *run* whose sample.json asks for *group*; its PMU header."""
    result_path, run_id = copy_run(run, into / f"{chip}_{group}")
    sample_path = result_path / run_id / "device_0" / "sample.json"
    sample = json.loads(sample_path.read_text())
    name = GROUP_NAMES[group]
    aic = "PipeUtilizationExct" if (chip, group) == ("910B", 1) else name
    sample["ai_core_metrics"], sample["aiv_metrics"] = aic, name
    for key, group_name in (("ai_core_profiling_events", aic), ("aiv_profiling_events", name)):
        chosen = events.get(group_name, [])
        old = [e for e in sample[key].split(",") if e not in chosen]
        sample[key] = ",".join([*chosen, *old][:8])
    sample_path.chmod(0o640)
    sample_path.write_text(json.dumps(sample))
    Profiler(result_path, toolkit=toolkit, export_timeout=300).export(run_id, timeline=False)
    (path,) = newest(output_of(result_path, run_id), "op_summary")
    with open(path, newline="", encoding="utf-8") as stream:
        header = next(csv.reader(stream))
    shutil.rmtree(result_path)
    return tuple(header[header.index("Context ID") + 1 :])


def test_simulated_names_of_every_group_come_from_the_real_exporter(
    real_toolkit: Toolkit, tmp_path: Path
) -> None:
    events = group_events()
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {
            kind: pool.submit(export_as_group, run, *kind, events, real_toolkit, tmp_path)
            for kind, run in DERIVED.items()
        }
        real = {kind: future.result() for kind, future in futures.items()}
    for (chip, group), columns in real.items():
        assert columns == sim.COUNTER_COLUMNS[chip].get(group, ()), (chip, group)
    assert real[("910B", 8)] == ()  # MemoryAccess: the real msprof.py writes no PMU column
