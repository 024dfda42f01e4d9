"""The simulator's PMU counters: real column names for every metric group and chip, the values a
launch sets coming back through the library, and plausible values for the rest."""

from __future__ import annotations

import csv
import json
import re
import struct
from pathlib import Path

import pytest

from asc_aprof import AicoreMetrics, Profiler, UsageError, sim
from asc_aprof.sim import _pmu

from ..reference import REAL_CSV, REAL_RUNS, needs_real_csv, needs_real_runs

GROUPS = [m for m in AicoreMetrics if m is not AicoreMetrics.NONE]
#: sample.json's ai_core_metrics of a real collection -> the group asked for
REAL_GROUP_NAMES = {"PipeUtilizationExct": 1, "PipeUtilization": 1, "PipelineExecuteUtilization": 7}


def pmu_part(header: list[str]) -> tuple[str, ...]:
    return tuple(header[header.index("Context ID") + 1 :])


def set_values(columns: tuple[str, ...]) -> dict[str, float | None]:
    """A distinct value for every column (whole cycle and cache counts, ratios in [0, 1]) and one
    N/A."""
    values: dict[str, float | None] = {}
    for i, column in enumerate(columns):
        if column.endswith("total_cycles"):  # a bandwidth's event count then rounds well below 1e-3
            values[column] = float(10_000_000 + i)
        elif "cache" in column and not column.endswith("rate"):  # L2 cache cells: event counts
            values[column] = float(100 * (i + 1))
        else:
            values[column] = round(0.011 * (i + 1), 3)
    if columns:
        values[columns[-1]] = None
    return values


@pytest.mark.parametrize("chip", sim.CHIPS)
@pytest.mark.parametrize("metric", GROUPS, ids=lambda m: m.name)
def test_every_group_round_trips(chip: str, metric: AicoreMetrics) -> None:
    sim.control().configure(chip=chip)
    columns = sim.COUNTER_COLUMNS[chip].get(int(metric), ())
    # what the main core's PMU record can carry (the cycles, not also the time they give)
    kernel = _pmu.Kernel(chip, int(metric), True, "MIX_AIC", 1)
    settable = [c for c in _pmu.settable(kernel) if not c.endswith("_time(us)")]
    values = {c: v for c, v in set_values(tuple(settable)).items() if v is not None and c in columns}
    profiler = Profiler(toolkit=sim.toolkit())
    with profiler.profile(metrics=metric, counters=True) as run:
        sim.launch("set_k", task_type="MIX_AIC", duration_us=40.0, count=2, counters=values)
        sim.launch("other_k", task_type="MIX_AIV", duration_us=25.0, count=2)
    result = run.result
    assert result is not None and result.counters is not None
    assert result.counters.columns == columns
    for index, task in enumerate(result.tasks):
        row = result.counters.row(index)
        if task.name == "set_k":
            assert {c: row[c] for c in values} == values
        else:
            assert_plausible(row, task.duration, chip, int(metric))


def test_counters_the_record_cannot_carry_are_refused() -> None:
    sim.control().configure(chip="910B")
    profiler = Profiler(toolkit=sim.toolkit())
    with profiler.profile(metrics=AicoreMetrics.PIPE_UTILIZATION):
        for column in ("aiv_vec_time(us)", "aic_mac_ratio", "vec_exe_ratio", "cube_utilization(%)"):
            with pytest.raises(
                UsageError, match=rf"'{re.escape(column)}' cannot be encoded.*settable: aiv_time"
            ):
                sim.launch("k", task_type="AI_VECTOR_CORE", counters={column: 0.5})
        with pytest.raises(UsageError, match="None"):
            sim.launch("k", task_type="AI_VECTOR_CORE", counters={"aiv_vec_ratio": None})
        with pytest.raises(UsageError, match="not both"):
            sim.launch("k", task_type="AI_CORE", counters={"aicore_time(us)": 1.0, "aic_total_cycles": 9.0})
    sim.control().configure(chip="310B")
    refused = pytest.raises(UsageError, match="'vec_ratio' cannot be encoded")  # the 310B prints it N/A
    with profiler.profile(metrics=AicoreMetrics.PIPE_UTILIZATION), refused:
        sim.launch("k", counters={"vec_ratio": 0.5})


def assert_plausible(row: dict[str, float | None], duration: float, chip: str, metric: int) -> None:
    """What a default value of a MIX_AIV kernel must satisfy: its record is the vector core's, so
    on the 910B the cube core's cells read 0 (as real runs show for the unused core), and cells
    the exporter prints N/A on the chip are None."""
    blocked = _pmu.NOT_APPLICABLE.get(chip, {}).get(metric, frozenset())
    core = {
        "aic": row.get("aicore_time(us)", 0.0),
        "aiv": row.get("aiv_time(us)", 0.0),
        "": row.get("aicore_time(us)", 0.0),
    }
    for column, value in row.items():
        if column in blocked:
            assert value is None, column
            continue
        assert value is not None and value >= 0, column
        side = "" if chip == "310B" else column[:3] if column[:4] in ("aic_", "aiv_") else "aic"
        if side == "aic":
            assert value == 0, column
            continue
        if column.endswith(("_ratio", "_rate")):
            assert value <= 1, column
        elif column in ("aicore_time(us)", "aiv_time(us)"):
            assert 0 < value <= duration, column
        elif column.endswith("_time(us)"):  # a pipe's time: its ratio of the core's busy time
            ratio, busy = row[column[: -len("_time(us)")] + "_ratio"], core[side]
            assert ratio is not None and busy is not None
            assert abs(value - ratio * busy) <= 0.0006 * busy + 0.001, column
        elif column.endswith("total_cycles"):
            assert value > 0 and value == int(value), column
        elif column == "memory_bound":
            mte2 = next(v for k, v in row.items() if k.startswith("mte2") and k.endswith("ratio"))
            compute = max(
                v or 0 for k, v in row.items() if k.startswith(("mac", "vec")) and k.endswith("ratio")
            )
            assert mte2 is not None and value == pytest.approx(mte2 / compute, abs=1e-3)


def test_a_set_ratio_moves_its_time_and_the_derived_cells() -> None:
    sim.control().configure(chip="310B")
    profiler = Profiler(toolkit=sim.toolkit())
    with profiler.profile(metrics=AicoreMetrics.PIPE_EXECUTE_UTILIZATION, counters=True) as run:
        sim.launch(
            "k",
            task_type="AI_VECTOR_CORE",
            duration_us=50.0,
            counters={"vec_exe_ratio": 0.5, "mte2_exe_ratio": 0.8},
        )
    assert run.result is not None and run.result.counters is not None
    row = run.result.counters.row(0)
    core = row["aicore_time(us)"]
    assert core is not None and row["vec_exe_time(us)"] == pytest.approx(0.5 * core, abs=1e-3)
    assert row["mte2_exe_time(us)"] == pytest.approx(0.8 * core, abs=1e-3)
    assert row["memory_bound"] == pytest.approx(0.8 / 0.5, abs=1e-3)  # mte2 / max(mac, vec)


def test_launch_refuses_unknown_columns_and_bad_values() -> None:
    with pytest.raises(ValueError, match="'aiv_vec_rat' is not a PMU column"):
        sim.launch("k", counters={"aiv_vec_rat": 0.5})
    for bad in (float("nan"), float("inf"), "0.5"):
        with pytest.raises(ValueError, match="finite number or None"):
            sim.launch("k", counters={"aiv_vec_ratio": bad})  # type: ignore[dict-item]


def test_unsupported_groups_write_no_pmu_column() -> None:
    assert int(AicoreMetrics.PIPE_EXECUTE_UTILIZATION) not in sim.COUNTER_COLUMNS["910B"]
    assert (
        int(AicoreMetrics.MEMORY_ACCESS) not in sim.COUNTER_COLUMNS["910B"]
    )  # the real msprof.py writes none
    assert int(AicoreMetrics.MEMORY_ACCESS) not in sim.COUNTER_COLUMNS["310B"]
    for chip, table in sim.COUNTER_COLUMNS.items():
        prefixed = all(c.startswith(("aic_", "aiv_")) or c in ("aicore_time(us)", "cube_utilization(%)")
                       for columns in table.values() for c in columns)  # fmt: skip
        assert prefixed == (chip == "910B")


# -- names against real CANN output ------------------------------------------------------------------


def real_group(run: Path) -> tuple[str, int] | None:
    """(chip, group) of a real run from its device's sample.json and info.json."""
    (prof,) = run.glob("PROF_*")
    device = next(prof.glob("device_*"))
    sample = json.loads((device / "sample.json").read_text())
    info = json.loads(next(device.glob("info.json.*[0-9]")).read_text())
    chip = {"5": "910B", "7": "310B"}.get(str(info.get("platform_version")))
    group = REAL_GROUP_NAMES.get(sample.get("ai_core_metrics", ""))
    return None if chip is None or group is None else (chip, group)


@needs_real_runs
def test_names_equal_every_real_runs_export() -> None:
    checked = set()
    for path in sorted(REAL_RUNS.glob("*/expected/op_summary_*.csv")):
        kind = real_group(path.parents[1])
        assert kind is not None, path
        with open(path, newline="", encoding="utf-8") as stream:
            header = next(csv.reader(stream))
        assert pmu_part(header) == sim.COUNTER_COLUMNS[kind[0]][kind[1]], path
        checked.add(kind)
    assert checked == {("910B", 1), ("310B", 7)}


@needs_real_csv
@pytest.mark.parametrize(
    ("name", "group"),
    [
        ("vllm-project__vllm-ascend__op_summary_20260823165421.csv", AicoreMetrics.MEMORY_BANDWIDTH),
        ("Ascend__msprof-analyze__kernel_details.csv", AicoreMetrics.ARITHMETIC_UTILIZATION),
        ("A-Y-1__AscendC-S4__op_summary_20250401202358.csv", AicoreMetrics.PIPE_UTILIZATION),
    ],
)
def test_names_equal_real_910b_host_exports(name: str, group: AicoreMetrics) -> None:
    with open(REAL_CSV / name, newline="", encoding="utf-8") as stream:
        header = next(csv.reader(stream))
    real, ours = pmu_part(header), sim.COUNTER_COLUMNS["910B"][int(group)]
    if group is AicoreMetrics.PIPE_UTILIZATION:
        assert real == ours
    else:
        # These hosts' exports (CANN's C++ path) print more columns for the group (the L2
        # bandwidths, fops of both sides) than the pure-Python exporter prints for the same kind
        # of records; the simulator prints the latter's, in the same order.
        assert len(real) > len(ours) and [c for c in real if c in ours] == list(ours)


def test_launch_counters_are_encoded_into_ffts_profile_records(tmp_path: Path) -> None:
    sim.control().configure(chip="910B")
    profiler = Profiler(tmp_path, toolkit=sim.toolkit(), reader="raw")
    with profiler.profile(metrics=AicoreMetrics.PIPE_UTILIZATION) as run:
        sim.launch(
            "v", task_type="AI_VECTOR_CORE", duration_us=10.0, block_dim=4, counters={"aiv_vec_ratio": 0.82}
        )
        sim.launch(
            "c", task_type="AI_CORE", duration_us=20.0, block_dim=30, counters={"aicore_time(us)": 12.5}
        )
    assert run.run_id is not None
    (device,) = (tmp_path / run.run_id).glob("device_*")
    sample = json.loads((device / "sample.json").read_text())
    assert sample["ai_core_metrics"] == "PipeUtilizationExct" and sample["aiv_metrics"] == "PipeUtilization"
    assert (sample["ai_core_profiling_events"], sample["aiv_profiling_events"]) == _pmu.events("910B", 1)
    data = (device / "data" / f"ffts_profile.data.{device.name[7:]}.slice_0").read_bytes()
    records = [struct.unpack_from("<4HQ4HQ12Q", data, offset) for offset in range(0, len(data), 128)]
    assert len(data) == 256 and len(records) == 2
    vec, cube = records
    assert [r[0] & 0x3F for r in records] == [40, 40] and {r[1] for r in records} == {0x6BD3}
    assert [r[7] >> 13 for r in records] == [1, 0]  # AI Vector, then AI Cube
    assert vec[11] == cube[11] == 2**64 - 1  # the reserved word, as on real records
    assert vec[12] == round(0.82 * vec[10])  # aiv_vec_ratio: event 0x8 over the total cycles
    assert 0.6 * 10.0 * 1650 * 4 <= vec[10] <= 0.95 * 10.0 * 1650 * 4  # 60-95 % busy, 4 blocks
    assert cube[10] == round(12.5 * 1650 * 30 / 2)  # 30 blocks on 20 cube cores: two waves
    assert vec[21] - vec[20] == 10_000 and cube[21] - cube[20] == 20_000  # a 1 GHz system counter
