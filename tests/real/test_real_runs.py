"""Conformance on real CANN data: every real run, exported by CANN's real msprof.py, through the
library's own code paths, equals the exporter's CSV read independently (with :mod:`csv`).

What is compared, and where the host's own export (``expected/``, CANN's C++ export path on the
device host) is allowed to differ, is written in ``docs/real_cann.md``.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from contextlib import redirect_stdout
from pathlib import Path

import numpy
import pytest

from asc_aprof import AsyncProfiler, Profiler, ProfilingTask, Toolkit, task_time_median
from asc_aprof._model._join import NEAREST_START_BOUND_NS
from asc_aprof._model._records import AICORE_TASK_TYPES, CONTROL_TASK_TYPES
from asc_aprof.cli import main as cli_main

from ..reference import REAL_RUNS, needs_real_runs, real_run_names
from .conftest import copy_run

pytestmark = needs_real_runs

RUNS = real_run_names()
#: The four runs the reference README describes one by one.
HEADLINE = ["910b_l1_div", "910b_l0_add_ascendc", "910b_l0_matmul_torch", "310b_addcmul"]
CONTROL = {"PROFILING_ENABLE", "PROFILING_DISABLE"}


def newest(directory: Path, kind: str) -> list[Path]:
    files = sorted(directory.glob(f"{kind}_*.csv"))
    if not files:
        return []
    stamp = files[-1].stem.rsplit("_", 1)[-1]
    return [f for f in files if f.stem.endswith(stamp)]


def read_rows(paths: list[Path]) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    for path in paths:
        with open(path, newline="", encoding="utf-8") as stream:
            rows.extend(csv.DictReader(stream))
    return rows


def start_ns(text: str, header: str) -> int:
    from decimal import Decimal

    return int(Decimal(text.strip()) * (1 if header.endswith("(ns)") else 1000))


def expected_tasks(output: Path) -> list[ProfilingTask]:
    """The tasks an exported run holds, read with csv alone (an independent reference).

    op_summary rows, unless the export wrote none (then task_time rows); control rows and ``N/A``
    durations are not tasks; an ``N/A`` Task Type takes task_time's ``kernel_type`` joined on
    device, stream, task id and start time, else (the pure-Python export of the PyPTO runs) on
    device, stream and task id with the nearest start within the documented bound, each task_time
    row taken once.
    """
    op_rows = read_rows(newest(output, "op_summary"))
    time_rows = read_rows(newest(output, "task_time"))
    types: dict[tuple[str, str, str, int], str] = {}
    for row in time_rows:
        start_col = "task_start(us)" if "task_start(us)" in row else "task_start(ns)"
        key = (
            row["Device_id"],
            row["stream_id"].strip(),
            row["task_id"],
            start_ns(row[start_col], start_col),
        )
        types[key] = row["kernel_type"]
    taken: set[tuple[str, str, str, int]] = set()
    out: list[ProfilingTask] = []
    if op_rows:
        for row in op_rows:
            if row["Task Type"] in CONTROL or row["Task Duration(us)"].strip() == "N/A":
                continue
            ttype = row["Task Type"]
            if ttype == "N/A":
                key = (
                    row["Device_id"],
                    row["Stream ID"].strip(),
                    row["Task ID"],
                    start_ns(row["Task Start Time(us)"], "(us)"),
                )
                if key not in types:
                    near = [
                        (abs(k[3] - key[3]), k[3], k)
                        for k, kind in types.items()
                        if k[:3] == key[:3]
                        and abs(k[3] - key[3]) <= NEAREST_START_BOUND_NS
                        and k not in taken
                        and kind not in CONTROL_TASK_TYPES
                    ]
                    key = min(near)[2] if near else key
                taken.add(key)
                ttype = types.get(key, "N/A")
            task_id = None if row["Task ID"] == "N/A" else int(row["Task ID"])
            device = None if row["Device_id"] == "host" else int(row["Device_id"])
            out.append(ProfilingTask(task_id, row["Op Name"], ttype, float(row["Task Duration(us)"]), device))
        return out
    for row in time_rows:
        if row["kernel_type"] in CONTROL or row["task_time(us)"].strip() == "N/A":
            continue
        device = None if row["Device_id"] == "host" else int(row["Device_id"])
        out.append(
            ProfilingTask(
                int(row["task_id"]),
                row["kernel_name"],
                row["kernel_type"],
                float(row["task_time(us)"]),
                device,
            )
        )
    return out


def first_kernel_median(tasks: list[ProfilingTask]) -> tuple[str, float] | None:
    aicore = [t for t in tasks if t.type in AICORE_TASK_TYPES]
    if not aicore:
        return None
    name = aicore[0].name
    samples = [t.duration for t in aicore if t.name == name]
    return name, float(numpy.round(numpy.median(numpy.array(samples)), 3))


def output_of(result_path: Path, run_id: str) -> Path:
    return result_path / run_id / "mindstudio_profiler_output"


def test_every_real_run_is_here() -> None:
    # 4 described runs and 32 of the corpus; a lost run would silently shrink the conformance.
    assert len(RUNS) == 36
    assert set(HEADLINE) <= set(RUNS)


@pytest.mark.parametrize("name", RUNS)
def test_store_result_equals_the_exporters_csv(
    name: str, exported: dict[str, tuple[Path, str]], real_toolkit: Toolkit
) -> None:
    result_path, run_id = exported[name]
    expected = expected_tasks(output_of(result_path, run_id))
    assert expected, f"{name}: the real exporter wrote no task"
    result = Profiler(result_path, toolkit=real_toolkit, reader="msprof").store_result(run_id)
    assert list(result.tasks) == expected
    assert result.run_id == run_id
    assert all(t.type != "N/A" for t in result.tasks)
    join = result.level0_join
    if is_multi_stream(name):
        # The pure-Python export gives MIX tasks of several streams a start in op_summary about
        # 1 µs before the one in task_time: they take their type by the nearest start.
        assert join is not None and join.nearest == sum(t.type == "KERNEL_MIX_AIC" for t in result.tasks) > 0
    else:
        assert join is None or not join.tolerant
    picked = first_kernel_median(expected)
    if name == "310b_08lpnormv2_OKKRIB":
        # Its only export is a task_time CSV holding nothing but control rows.
        assert picked is None and {t.type for t in result.tasks} == {"DEVICE_RINGBUFFER_CONTROL"}
        with pytest.raises(RuntimeError, match="no AI Core task"):
            task_time_median(result.tasks)
        return
    assert picked is not None, f"{name}: no AI Core task"
    assert task_time_median(result.tasks) == picked[1]
    kernel = picked[0]
    samples = [
        t.duration for t in expected if t.name == kernel and (t.type in AICORE_TASK_TYPES or t.type == "N/A")
    ]
    assert task_time_median(result.tasks, name=kernel) == float(numpy.round(numpy.median(samples), 3))
    kept = samples[1:] if len(samples) > 1 else samples  # upstream's skip rule
    assert task_time_median(result.tasks, name=kernel, skip=1) == float(numpy.round(numpy.median(kept), 3))


@pytest.mark.parametrize("name", RUNS)
async def test_iter_tasks_streams_the_same_tasks(
    name: str, exported: dict[str, tuple[Path, str]], real_toolkit: Toolkit
) -> None:
    result_path, run_id = exported[name]
    profiler = AsyncProfiler(result_path, toolkit=real_toolkit, reader="msprof")
    streamed = [task async for task in profiler.iter_tasks(run_id)]
    assert streamed == expected_tasks(output_of(result_path, run_id))
    stored = await profiler.store_result(run_id)
    assert list(stored.tasks) == streamed


def test_level0_types_come_from_task_time(
    exported: dict[str, tuple[Path, str]], real_toolkit: Toolkit
) -> None:
    for name in ("910b_l0_add_ascendc", "910b_l0_matmul_torch"):
        result_path, run_id = exported[name]
        raw = read_rows(newest(output_of(result_path, run_id), "op_summary"))
        assert {r["Task Type"] for r in raw} == {"N/A"}, "not a level-0 export"
        tasks = Profiler(result_path, toolkit=real_toolkit).store_result(run_id).tasks
        assert len(tasks) == 700
        assert {t.type for t in tasks} <= {"KERNEL_AIVEC", "KERNEL_AICORE"}
    add = exported["910b_l0_add_ascendc"]
    tasks = Profiler(add[0], toolkit=real_toolkit).store_result(add[1]).tasks
    assert {t.type for t in tasks} == {"KERNEL_AIVEC"} and {t.name for t in tasks} == {"add_kernel"}


def is_multi_stream(name: str) -> bool:
    # PyPTO kernels run on several streams; the two export paths differ by a few percent there.
    return "_pypto_" in name


@pytest.mark.parametrize("name", RUNS)
def test_agrees_with_the_collecting_hosts_export(
    name: str, exported: dict[str, tuple[Path, str]], real_toolkit: Toolkit
) -> None:
    result_path, run_id = exported[name]
    ours = Profiler(result_path, toolkit=real_toolkit).store_result(run_id).tasks
    host = expected_tasks(REAL_RUNS / name / "expected")
    assert [(t.id, t.name, t.device) for t in ours] == [(t.id, t.name, t.device) for t in host]
    # (the PyPTO runs' MIX tasks by the nearest start on the pure-Python export, exactly on the host's)
    assert [t.type for t in ours] == [t.type for t in host]
    # The host's C++ export prints 3 decimals, the pure-Python one rounds to 2.
    tolerance = 0.2 if is_multi_stream(name) else 0.0051
    worst = max(
        abs(a.duration - b.duration) / (1.0 if not is_multi_stream(name) else max(b.duration, 1e-9))
        for a, b in zip(ours, host, strict=True)
    )
    assert worst <= tolerance, f"{name}: durations differ by up to {worst:.4f}"


@pytest.mark.parametrize("name", HEADLINE)
async def test_async_export_with_the_real_msprof(name: str, real_toolkit: Toolkit, tmp_path: Path) -> None:
    result_path, run_id = copy_run(name, tmp_path)
    profiler = AsyncProfiler(result_path, toolkit=real_toolkit, export_timeout=300)
    run_dir = await profiler.export(run_id)
    assert run_dir == result_path / run_id
    result = await profiler.store_result(run_id)
    assert list(result.tasks) == expected_tasks(output_of(result_path, run_id))
    assert (
        REAL_RUNS / name / next((REAL_RUNS / name).glob("PROF_*")).name
    ).is_dir()  # the source is untouched


def test_cli_summary_exports_a_run_nobody_exported_yet(
    real_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result_path, run_id = copy_run("910b_l0_add_ascendc", tmp_path)
    assert not (result_path / run_id / "mindstudio_profiler_output").exists()
    monkeypatch.setenv("ASCEND_HOME_PATH", str(real_root))

    def summary(*extra: str) -> dict[tuple[int, str], dict[str, object]]:
        out = io.StringIO()
        with redirect_stdout(out):
            assert cli_main(["summary", str(result_path / run_id), "--json", *extra]) == 0
        return {(k["device"], k["name"]): k for k in json.loads(out.getvalue())["kernels"]}

    # the default reads the raw data natively: no toolkit used, nothing exported
    native = summary()
    assert not (result_path / run_id / "mindstudio_profiler_output").exists()
    # --reader msprof exports it with the real msprof.py found through ASCEND_HOME_PATH
    kernels = summary("--reader", "msprof")
    add = kernels[(0, "add_kernel")]
    assert add["type"] == "KERNEL_AIVEC" and add["count"] == 700
    expected = expected_tasks(output_of(result_path, run_id))
    assert add["median_us"] == float(numpy.round(numpy.median([t.duration for t in expected]), 3))
    # the native read gives the export's statistics, and the clock the CSVs do not carry
    assert {key: k.pop("aic_mhz") for key, k in native.items()} == {key: 1650.0 for key in native}
    assert native == kernels
    shutil.rmtree(tmp_path / "910b_l0_add_ascendc")
