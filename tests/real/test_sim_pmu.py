"""The simulator's raw PMU records against the real exporter: for every metric group each chip
collects, 910B-like and 310B-like, runs with AI Core, AI Vector and MIX kernels (task time levels
0 and 1, one and two devices) exported by the real ``msprof.py`` through ``Profiler.export()``
print the PMU columns real CANN prints for that group (as real runs print them where a real run
of the group exists), the cells ``sim.launch(counters=...)`` set (to the exporter's 3-decimal
rounding, and for a bandwidth to the step one event count makes), and plausible values in the
cells a launch leaves unset.

The differential part: on the same runs (and on runs without PMU records: no AICORE_METRICS bit,
a group the chip does not collect), the raw reader's PMU cells (``export_rows(pmu=True)``, what
the simulated ``msprof.py`` prints) equal the real exporter's op_summary cells, cell by cell, and
its counters (``read_run(counters=True)``, accepted for these collections) equal what the CSV
path reads from the real export. This is the evidence for the groups the raw reader accepts as
"verified by the real exporter on generated data" (``_raw._pmu.GENERATED_GROUPS``).
"""

from __future__ import annotations

import concurrent.futures
import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from asc_aprof import Profiler, Toolkit, sim
from asc_aprof._plans._raw import ExportRows, RawResult
from asc_aprof._runs._raw_files import read_export_rows, read_run
from asc_aprof.sim import _pmu

from ..reference import REAL_RUNS, needs_real_runs
from ..sim._support import AICORE_METRICS, TASK_TIME, TASK_TIME_L0, Acl, finish

pytestmark = needs_real_runs

KINDS = {0: ("AI_CORE", "AI_VECTOR_CORE", "MIX_AIC"), 1: ("AI_VECTOR_CORE", "AI_CORE", "MIX_AIV")}
BLOCK_DIM = 24  # more blocks than the 910B's 20 cube cores: the exporter's waves of blocks matter


class Case(NamedTuple):
    chip: str
    metric: int
    level: int
    devices: tuple[int, ...]
    collected: bool = True  # the AICORE_METRICS bit


CASES = [
    Case(chip, metric, (metric + (chip == "310B")) % 2, (0,) if metric % 3 else (0, 3))
    for chip in sim.CHIPS
    for metric in _pmu._GROUPS[chip]
]


#: Runs without PMU records: no AICORE_METRICS bit, or a group the chip does not collect.
NO_PMU_CASES = [
    Case("910B", 1, 1, (0,), collected=False),
    Case("310B", 7, 0, (0, 3), collected=False),
    Case("310B", 8, 1, (0,)),
]


def case_id(case: Case) -> str:
    bit = "" if case.collected else "_nopmu"
    return f"{case.chip}_m{case.metric}_l{case.level}_{len(case.devices)}dev{bit}"


def kernel(case: Case, task_type: str) -> _pmu.Kernel:
    return _pmu.Kernel(case.chip, case.metric, bool(case.level), task_type, BLOCK_DIM)


def chosen(case: Case, task_type: str, index: int) -> dict[str, float]:
    """Distinct values for every column a launch of this kind can set (the cycles on one kind,
    the time they give on the others)."""
    values: dict[str, float] = {}
    for i, column in enumerate(_pmu.settable(kernel(case, task_type))):
        if column.endswith("total_cycles"):
            if index == 1:  # 4 us of core time
                values[column] = float(round(_pmu._cycles_per_us(kernel(case, task_type)) * 4.0) + i)
        elif column.endswith("_time(us)"):
            if index != 1:
                values[column] = 6.25 + index
        elif column.endswith("(GB/s)"):
            values[column] = 3.0 + 1.5 * i
        elif column.endswith("icache_miss_rate"):
            values[column] = 0.012
        elif "cache" in column:
            values[column] = 1000.0 + 7 * i
        else:
            values[column] = round(0.05 + 0.07 * i, 3)
    return values


def collect(case: Case, base: Path, acl: Acl) -> Path:
    control = sim.control()
    control.reset()
    control.configure(cann="9.0", chip=case.chip)
    control.set_jitter(0.05, seed=3)
    types = (TASK_TIME if case.level == 1 else TASK_TIME_L0) | (AICORE_METRICS if case.collected else 0)
    assert acl.init(base) == 0
    cfg = acl.config(list(case.devices), types, case.metric)
    assert acl.start(cfg) == 0
    for device in case.devices:
        for index, task_type in enumerate(KINDS[case.metric % 2]):
            counters = chosen(case, task_type, index)
            launched = sim.launch(
                f"set_{index}", device=device, task_type=task_type, duration_us=9.0, block_dim=BLOCK_DIM,
                count=2, counters=counters,
            )  # fmt: skip
            assert launched == 2
            sim.launch(
                f"free_{index}", device=device, task_type=task_type, duration_us=7.0, block_dim=BLOCK_DIM
            )
    prof = finish(acl, cfg, base)
    control.reset()
    return prof


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory, real_toolkit: Toolkit) -> Iterator[dict[Case, Path]]:
    """Every case collected once and exported by the real msprof.py (two at a time)."""
    acl = Acl(sim.root() / "lib64" / "libmsprofiler.so")
    base = tmp_path_factory.mktemp("sim_pmu")
    runs = {case: collect(case, base / case_id(case), acl) for case in CASES + NO_PMU_CASES}

    def export(run: Path) -> None:
        Profiler(run.parent, toolkit=real_toolkit, reader="msprof", export_timeout=300).export(
            run.name, timeline=False
        )

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for future in [pool.submit(export, run) for run in runs.values()]:
            future.result()
    yield runs


def op_summary(run: Path) -> tuple[list[str], list[dict[str, str]]]:
    (path,) = sorted((run / "mindstudio_profiler_output").glob("op_summary_*.csv"))
    with open(path, newline="", encoding="utf-8") as stream:
        table = list(csv.reader(stream))
    return table[0], [dict(zip(table[0], row, strict=True)) for row in table[1:]]


def pmu_part(header: list[str]) -> tuple[str, ...]:
    return tuple(header[header.index("Context ID") + 1 :])


def real_pmu_header(run: str) -> tuple[str, ...]:
    (path,) = sorted((REAL_RUNS / run / "expected").glob("op_summary_*.csv"))
    with open(path, newline="", encoding="utf-8") as stream:
        return pmu_part(next(csv.reader(stream)))


def test_the_table_follows_real_runs_where_they_exist() -> None:
    assert _pmu.REAL_COLUMNS["910B"][1] == real_pmu_header("910b_l1_div")  # PipeUtilization(+Exct)
    assert _pmu.REAL_COLUMNS["310B"][7] == real_pmu_header("310b_addcmul")  # PipelineExecuteUtilization


def test_sample_json_names_the_groups_events_as_real_runs() -> None:
    for run, chip, metric in (("910b_l1_div", "910B", 1), ("310b_addcmul", "310B", 7)):
        (sample,) = (REAL_RUNS / run).glob("PROF_*/device_0/sample.json")
        config = json.loads(sample.read_text())
        events = (config["ai_core_profiling_events"], config["aiv_profiling_events"])
        assert _pmu.events(chip, metric) == events


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_real_exporter_prints_the_encoded_counters(case: Case, exports: dict[Case, Path]) -> None:
    run = exports[case]
    for device in case.devices:  # the library's sample.json, as the Python side encodes
        config = json.loads((run / f"device_{device}" / "sample.json").read_text())
        events = (config["ai_core_profiling_events"], config["aiv_profiling_events"])
        assert _pmu.events(case.chip, case.metric) == events
    header, rows = op_summary(run)
    expected = _pmu.REAL_COLUMNS[case.chip].get(case.metric, ())
    assert pmu_part(header) == expected
    assert len(rows) == 3 * 3 * len(case.devices)
    assert sorted({int(r["Device_id"]) for r in rows}) == sorted(case.devices)
    if not expected:
        return  # MemoryAccess on the 910B: the exporter prints no PMU column
    mhz = _pmu.CHIP_CLOCK[case.chip][0]
    checked = 0
    for row in rows:
        name = row["Op Name"]
        index = int(name[-1])
        task_type = KINDS[case.metric % 2][index]
        mine = kernel(case, task_type)
        given = chosen(case, task_type, index) if name.startswith("set_") else {}
        prefix = (
            "" if case.chip == "310B" else ("aiv_" if task_type in ("AI_VECTOR_CORE", "MIX_AIV") else "aic_")
        )
        cycles = float(row[prefix + "total_cycles"])
        assert cycles > 0
        for column, value in given.items():
            printed = float(row[column])
            if column.endswith("_time(us)"):
                tolerance = 0.005  # 2 decimals
            elif column.endswith("(GB/s)"):  # one event more or less moves it by this much
                tolerance = (
                    0.0005 + _pmu._BYTES[column.removeprefix(prefix)] * mhz * 1e6 / cycles / 2.0**33 / 2
                )
            else:
                tolerance = 0.0005
            assert abs(printed - value) <= tolerance + 1e-9, (name, column, printed, value)
            checked += 1
        duration = float(row["Task Duration(us)"])
        blocked = _pmu.NOT_APPLICABLE.get(case.chip, {}).get(case.metric, frozenset())
        main = set(_pmu.settable(mine))
        for column in expected:
            cell = row[column]
            if column in blocked:
                assert cell == "N/A", column
                continue
            number = float(cell)
            assert number >= 0, column
            if column.endswith(("_ratio", "_rate")) and column not in given:
                assert number <= 1, (name, column)
            if column.endswith("_time(us)") and column not in given:
                assert number <= duration, (name, column)
                if not case.level:
                    assert number == 0.0, column  # level 0: no block count, so no time
            other_core = column.startswith(("aic_", "aiv_")) or column in ("aicore_time(us)", "aiv_time(us)")
            if case.chip == "910B" and other_core and not column.startswith(prefix) and column not in main:
                assert number == 0.0, (name, column)  # the other core reads 0 (real runs)
    assert checked > 0


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_raw_reader_still_reads_runs_with_pmu_records(case: Case, exports: dict[Case, Path]) -> None:
    run = exports[case]
    assert all(
        (run / f"device_{d}" / "data" / f"ffts_profile.data.{d}.slice_0").is_file() for d in case.devices
    )
    outcome = read_run(run)
    assert isinstance(outcome, RawResult), outcome
    assert len(outcome.tasks) == 3 * 3 * len(case.devices)


def test_the_matrix_covers_every_group_chip_level_and_kind() -> None:
    assert {(c.chip, c.metric) for c in CASES} == {
        (chip, m) for chip in sim.CHIPS for m in _pmu._GROUPS[chip]
    }
    assert {(c.chip, c.level) for c in CASES} == {(chip, level) for chip in sim.CHIPS for level in (0, 1)}
    assert {len(c.devices) for c in CASES} == {1, 2}
    assert {k for kinds in KINDS.values() for k in kinds} == {
        "AI_CORE",
        "AI_VECTOR_CORE",
        "MIX_AIC",
        "MIX_AIV",
    }


@pytest.mark.parametrize("case", CASES + NO_PMU_CASES, ids=case_id)
def test_raw_reader_pmu_cells_equal_the_real_exporters(
    case: Case, exports: dict[Case, Path], real_toolkit: Toolkit
) -> None:
    run = exports[case]
    header, rows = op_summary(run)
    real = [tuple(row[c] for c in pmu_part(header)) for row in rows]
    found = read_export_rows(run, pmu=True)
    assert isinstance(found, ExportRows), found
    assert {d.pmu_header for d in found.devices} == {pmu_part(header)}
    ours = [cells for d in found.devices for cells in (d.pmu_cells or [()] * len(d.op_summary))]
    assert len(ours) == len(real)
    for index, (mine, theirs) in enumerate(zip(ours, real, strict=True)):
        differ = [(h, a, b) for h, a, b in zip(pmu_part(header), mine, theirs, strict=True) if a != b]
        assert mine == theirs, (index, differ)
    expected = Profiler(run.parent, toolkit=real_toolkit).store_result(run.name, counters=True).counters
    outcome = read_run(run, counters=True)  # the raw data, not the exported CSVs
    assert isinstance(outcome, RawResult), outcome
    assert outcome.counters is not None
    assert expected is not None
    assert outcome.counters.columns == expected.columns
    assert outcome.counters.to_dict() == expected.to_dict()
