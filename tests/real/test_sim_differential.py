"""The simulator against the real exporter: runs the simulated ``libmsprofiler.so`` writes in CANN's
raw formats, exported by the simulated ``msprof.py`` and by the real one (both through
``Profiler.export()``), give the same op_summary and task_time rows, cell by cell, and the raw
reader reads them natively with the tasks the real export gives.

The matrix (:data:`CASES`, 10 runs) covers 1, 2, 3, 4 and 8 devices, task time levels 0 and 1,
every AI Core metric group (0-6 on the 910B-like chip, 7 and 8 and 1 on the 310B-like one), the
kernel kinds (AI Core, AI Vector, MIX, AI CPU), several kernels per device, a binary name at
level 0 and a name that needs CSV quoting. Several devices exported by the real exporter are a
behaviour no public real run shows. The simulated library writes context PMU records
(``ffts_profile``) and both exporters print PMU columns from them after ``Context ID`` (the
simulated one the raw reader's cells): every column is compared. Two cases set counters
(``sim.launch(counters=...)``), which both exports print.
Runs that launched no kernel (:data:`EMPTY`) have the same three control rows in both exports'
task_time, and no op_summary in either.
"""

from __future__ import annotations

import concurrent.futures
import csv
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from asc_aprof import Profiler, Toolkit, sim
from asc_aprof._plans._raw import RawResult
from asc_aprof._runs._raw_files import read_run

from ..reference import needs_real_runs
from ..sim._support import AICORE_METRICS, TASK_TIME, TASK_TIME_L0, Acl, finish, prof_dirs

pytestmark = needs_real_runs


class Case(NamedTuple):
    chip: str
    level: int
    devices: tuple[int, ...]
    metric: int
    kernels: tuple[tuple[str, str], ...]  # (name, task type) launched in turn on every device
    binary: str | None = None
    counters: dict[str, float] | None = None  # what sim.launch(counters=...) sets on every kernel


CASES: dict[str, Case] = {
    "910b_l1_pipe_1dev": Case(
        "910B", 1, (0,), 1, (("div_kernel", "AI_VECTOR_CORE"),), counters={"aiv_vec_ratio": 0.82}
    ),
    "910b_l1_arith_2dev_mix": Case("910B", 1, (0, 1), 0, (("matmul", "AI_CORE"), ("fused", "MIX_AIC"))),
    "910b_l1_memory_8dev": Case("910B", 1, tuple(range(8)), 2, (("add", "AI_CORE"),)),
    "910b_l0_memoryl0_4dev": Case("910B", 0, (0, 2, 5, 7), 3, (("aclnnAdd", "AI_VECTOR_CORE"),), "add_3a9f"),
    "910b_l0_conflict_mixaiv_aicpu": Case("910B", 0, (3,), 4, (("mixed", "MIX_AIV"), ("cpu_op", "AI_CPU"))),
    "910b_l1_memoryub_3dev": Case("910B", 1, (1, 4, 6), 5, (("relu", "AI_VECTOR_CORE"), ("mul", "AI_CORE"))),
    "910b_l1_l2cache_quoted": Case("910B", 1, (0,), 6, (('odd,"name"', "AI_CORE"),)),
    "310b_l1_pipeexec_1dev": Case("310B", 1, (0,), 7, (("addcmul", "AI_CORE"),)),
    "310b_l0_memaccess_2dev": Case("310B", 0, (0, 1), 8, (("spence", "AI_CORE"), ("cpu_op", "AI_CPU"))),
    "310b_l1_pipe_8dev": Case(
        "310B", 1, tuple(range(8)), 1, (("lpnormv2", "AI_CORE"),), counters={"mte2_ratio": 0.625}
    ),
}


def collect(case: Case, base: Path, acl: Acl) -> Path:
    """One simulated run of *case* (CANN 9.0, so both exporters name the block columns alike)."""
    control = sim.control()
    control.reset()
    control.configure(cann="9.0", chip=case.chip)
    control.set_jitter(0.05, seed=7)
    types = (TASK_TIME if case.level == 1 else TASK_TIME_L0) | AICORE_METRICS
    assert acl.init(base) == 0
    cfg = acl.config(list(case.devices), types, case.metric)
    assert acl.start(cfg) == 0
    for index, device in enumerate(case.devices):
        for name, task_type in case.kernels:
            launched = sim.launch(
                name,
                device=device,
                task_type=task_type,
                duration_us=7.5 + 3 * index,
                block_dim=8 + index,
                count=3 + index % 3,
                binary_name=case.binary,
                counters=case.counters,
            )
            assert launched > 0
    prof = finish(acl, cfg, base)
    control.reset()
    return prof


class Exports(NamedTuple):
    sim_run: Path
    real_run: Path


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory, real_toolkit: Toolkit) -> Iterator[dict[str, Exports]]:
    """Every case collected once, copied twice, exported by each msprof.py (two at a time)."""
    acl = Acl(sim.root() / "lib64" / "libmsprofiler.so")
    base = tmp_path_factory.mktemp("sim_differential")
    runs: dict[str, Exports] = {}
    for name, case in CASES.items():
        prof = collect(case, base / name / "collected", acl)
        copies = []
        for side in ("sim", "real"):
            target = base / name / side / prof.name
            shutil.copytree(prof, target)
            copies.append(target)
        runs[name] = Exports(*copies)
    sim_toolkit = sim.toolkit()

    def export(run: Path, toolkit: Toolkit) -> None:
        Profiler(run.parent, toolkit=toolkit, reader="msprof", export_timeout=300).export(
            run.name, timeline=False
        )

    jobs = [(e.sim_run, sim_toolkit) for e in runs.values()] + [
        (e.real_run, real_toolkit) for e in runs.values()
    ]
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for future in [pool.submit(export, run, toolkit) for run, toolkit in jobs]:
            future.result()
    yield runs


def rows(run: Path, kind: str) -> tuple[list[str], list[list[str]]]:
    (path,) = sorted((run / "mindstudio_profiler_output").glob(f"{kind}_*.csv"))
    with open(path, newline="", encoding="utf-8") as stream:
        table = list(csv.reader(stream))
    return table[0], table[1:]


@pytest.mark.parametrize("kind", ["op_summary", "task_time"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_sim_and_real_exporters_write_the_same_rows(
    name: str, kind: str, exports: dict[str, Exports]
) -> None:
    real_header, real_rows = rows(exports[name].real_run, kind)
    sim_header, sim_rows = rows(exports[name].sim_run, kind)
    assert sim_header == real_header
    assert len(sim_rows) == len(real_rows) > 0
    for index, (ours, theirs) in enumerate(zip(sim_rows, real_rows, strict=True)):
        assert ours == theirs, f"{name} {kind} row {index}"
    case = CASES[name]
    assert sorted({int(row[0]) for row in real_rows}) == sorted(case.devices)
    if kind == "op_summary" and case.counters:
        for column, value in case.counters.items():
            at = sim_header.index(column)
            assert {row[at] for row in sim_rows} == {repr(value)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_raw_reader_reads_simulated_runs_as_the_real_export(
    name: str, exports: dict[str, Exports], real_toolkit: Toolkit
) -> None:
    run = exports[name].real_run
    outcome = read_run(run)
    assert isinstance(outcome, RawResult), outcome
    expected = list(Profiler(run.parent, toolkit=real_toolkit).store_result(run.name).tasks)
    assert outcome.profiling_tasks() == expected
    assert len(expected) == sum(3 + i % 3 for i in range(len(CASES[name].devices))) * len(CASES[name].kernels)


#: Collections in which no kernel was launched: (chip, task time level).
EMPTY: dict[str, tuple[str, int]] = {"910b_l1_empty": ("910B", 1), "310b_l0_empty": ("310B", 0)}


@pytest.fixture(scope="module")
def empty_exports(tmp_path_factory: pytest.TempPathFactory, real_toolkit: Toolkit) -> dict[str, Exports]:
    """Every :data:`EMPTY` collection, copied twice and exported by each msprof.py."""
    acl = Acl(sim.root() / "lib64" / "libmsprofiler.so")
    base = tmp_path_factory.mktemp("sim_differential_empty")
    runs: dict[str, Exports] = {}
    for name, (chip, level) in EMPTY.items():
        control = sim.control()
        control.reset()
        control.configure(cann="9.0", chip=chip)
        assert acl.init(base / name / "collected") == 0
        cfg = acl.config([0], (TASK_TIME if level == 1 else TASK_TIME_L0) | AICORE_METRICS, 1)
        assert acl.start(cfg) == 0
        assert acl.stop(cfg) == 0
        assert acl.destroy(cfg) == 0
        assert acl.finalize() == 0
        control.reset()
        (prof,) = prof_dirs(base / name / "collected")
        copies = []
        for side, toolkit in (("sim", sim.toolkit()), ("real", real_toolkit)):
            target = base / name / side / prof.name
            shutil.copytree(prof, target)
            Profiler(target.parent, toolkit=toolkit, reader="msprof", export_timeout=300).export(
                target.name, timeline=False
            )
            copies.append(target)
        runs[name] = Exports(*copies)
    return runs


@pytest.mark.parametrize("name", sorted(EMPTY))
def test_a_run_without_kernels_has_the_three_control_rows_of_the_real_export(
    name: str, empty_exports: dict[str, Exports]
) -> None:
    runs = empty_exports[name]
    real_header, real_rows = rows(runs.real_run, "task_time")
    sim_header, sim_rows = rows(runs.sim_run, "task_time")
    assert sim_header == real_header
    assert sim_rows == real_rows
    at = real_header.index("kernel_type")
    assert [row[at] for row in real_rows] == [
        "PROFILING_ENABLE",
        "PROFILING_DISABLE",
        "DEVICE_RINGBUFFER_CONTROL",
    ]
    # The raw reader's task_time rows are the real export's, cell for cell.
    outcome = read_run(runs.real_run, with_task_time=True)
    assert isinstance(outcome, RawResult) and outcome.task_time is not None, outcome
    assert [
        [str(t.device), t.name, t.type, str(t.stream_id), str(t.task_id), str(t.duration)]
        for t in outcome.task_time
    ] == [row[:6] for row in real_rows]
    assert [int(row[6].strip().replace(".", "")) for row in real_rows] == [
        t.start_ns for t in outcome.task_time
    ]
    # Neither exporter writes an op_summary for a run without kernels, and the raw reader gives the
    # tasks the CSV path reads from the real export's task_time.
    for run in runs:
        assert not list((run / "mindstudio_profiler_output").glob("op_summary_*.csv")), run
    assert outcome.source == "task_time"
    from_csv = Profiler(runs.real_run.parent, reader="msprof").store_result(runs.real_run.name)
    assert [t.task() for t in outcome.tasks] == list(from_csv.tasks)
    assert [(t.name, t.type) for t in from_csv.tasks] == [("N/A", "DEVICE_RINGBUFFER_CONTROL")]


def test_the_matrix_covers_every_metric_group_chip_and_level() -> None:
    assert {c.metric for c in CASES.values()} == set(range(9))
    assert {(c.chip, c.level) for c in CASES.values()} == {
        (chip, level) for chip in sim.CHIPS for level in (0, 1)
    }
    assert {len(c.devices) for c in CASES.values()} >= {1, 2, 8}
