"""The simulated msprof.py: the exported CSV shapes, its command line and its export faults."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from asc_aprof import sim
from asc_aprof._plans._raw import RawResult
from asc_aprof._runs._raw_files import read_run

from ._support import (
    AICORE_METRICS,
    DEFAULT_TYPES,
    L2CACHE,
    MSPROFTX,
    PIPE_HEADER_85,
    REAL_MSPROF,
    REAL_RUNS,
    TASK_TIME_HEADER,
    TASK_TIME_L0,
    Acl,
    collect,
    copy_real_prof,
    export,
    header,
    needs_real_msprof,
    outputs,
    prof_dirs,
    read_rows,
    real_msprof,
    sim_msprof,
)

ACL_API = 0x1

# ---------------------------------------------------------------------------------------------
# msprof.py export: the new layout


def test_new_layout_matches_real_files(acl: Acl, tmp_path: Path) -> None:
    prof = collect(
        acl,
        tmp_path,
        task_type="AI_VECTOR_CORE",
        duration_us=18.542,
        block_dim=40,
        count=3,
        input_shapes=[(8, 2048), (8, 2048)],
        output_shapes=[(8, 2048)],
    )
    result = export(prof)
    assert result.returncode == 0, result.stderr
    (op_path,) = outputs(prof, "op_summary_*.csv")
    (task_path,) = outputs(prof, "task_time_*.csv")
    assert re.fullmatch(r"op_summary_\d{14}\.csv", op_path.name)
    assert task_path.name == op_path.name.replace("op_summary", "task_time")
    raw = op_path.read_bytes()
    assert not raw.startswith(b"\xef\xbb\xbf") and b"\r" not in raw
    lines = raw.decode().split("\n")
    assert lines[0] == PIPE_HEADER_85 and len(lines[0].split(",")) == 46
    # Shapes are not in the raw data the simulator writes (no tensor_info records yet): N/A, as
    # the real exporter prints them for that data.
    assert ",NO,N/A,N/A,N/A,N/A,N/A,N/A,N/A," in lines[1]
    rows = read_rows(op_path)
    assert len(rows) == 3 and all(len(r) == 46 for r in rows)
    row = rows[0]
    assert row["Device_id"] == "0" and row["Model ID"] == "4294967295" and row["Op Name"] == "Addcmul"
    assert row["Task Type"] == "AI_VECTOR_CORE" and row["OP State"] == "dynamic"
    assert row["Block Dim"] == "40" and row["Task Duration(us)"] == "18.542"
    assert re.fullmatch(r"\d{16}\.\d{3}\t", row["Task Start Time(us)"])
    # The wait is the gap to the previous task: the simulator's 2 us between kernels.
    assert rows[0]["Task Wait Time(us)"] == "0" and rows[1]["Task Wait Time(us)"] == "2.0"
    assert float(row["aiv_time(us)"]) > 0 and row["aicore_time(us)"] == "0.0"
    # start times are the device's exact ns (the raw reader's), formatted without float rounding
    outcome = read_run(prof)
    assert isinstance(outcome, RawResult)
    kernel_ns = [str(t.start_ns) for t in outcome.tasks]
    assert [r["Task Start Time(us)"] for r in rows] == [f"{ns[:-3]}.{ns[-3:]}\t" for ns in kernel_ns]
    assert not (prof / "device_0" / "summary").exists()  # per-device files merged and removed
    assert stat.S_IMODE(op_path.stat().st_mode) == 0o640
    assert stat.S_IMODE(op_path.parent.stat().st_mode) == 0o750


def test_task_time_rows(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path, task_type="MIX_AIC", count=2)
    assert export(prof).returncode == 0
    (task_path,) = outputs(prof, "task_time_*.csv")
    text = task_path.read_text()
    assert text.split("\n")[0] == TASK_TIME_HEADER
    rows = read_rows(task_path)
    assert [r["kernel_type"] for r in rows] == [
        "PROFILING_ENABLE",
        "MIX_AIC",
        "MIX_AIC",
        "PROFILING_DISABLE",
        "DEVICE_RINGBUFFER_CONTROL",
    ]
    for r in (rows[0], rows[3], rows[4]):
        assert r["kernel_name"] == "N/A" and r["stream_id"] == "0"
    assert rows[1]["kernel_name"] == "Addcmul" and rows[1]["task_time(us)"] == "10.0"
    assert rows[1]["task_start(us)"].endswith("\t") and rows[1]["task_stop(us)"].endswith("\t")
    start = int(rows[1]["task_start(us)"].strip().replace(".", ""))
    stop = int(rows[1]["task_stop(us)"].strip().replace(".", ""))
    assert stop - start == 10_000
    (op_path,) = outputs(prof, "op_summary_*.csv")
    op = read_rows(op_path)[0]
    # A MIX kernel without FFTS+ subtask records: the real exporter prints no context for it.
    assert op["Context ID"] == "N/A" and op["Mix Block Dim"] == "2"


def test_multi_device_merge_sorted_by_device(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path, devices=(3, 1), count=2)
    assert export(prof).returncode == 0
    (op_path,) = outputs(prof, "op_summary_*.csv")
    assert [r["Device_id"] for r in read_rows(op_path)] == ["1", "1", "3", "3"]


def test_header_90_uses_block_num(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path)
    assert export(prof, env={"ASC_APROF_SIM_HEADER": "9.0"}).returncode == 0
    (op_path,) = outputs(prof, "op_summary_*.csv")
    header = op_path.read_text().split("\n")[0].split(",")
    assert header[11:13] == ["Block Num", "Mix Block Num"] and "Block Dim" not in header
    assert len(header) == 46


def test_slices(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path, count=5)
    assert export(prof, env={"ASC_APROF_SIM_SLICE_ROWS": "2"}).returncode == 0
    slices = outputs(prof, "op_summary_slice_*.csv")
    assert [p.name.split("_")[3] for p in slices] == ["0", "1", "2"]
    assert outputs(prof, "op_summary_2*.csv") == []
    assert sum(len(read_rows(p)) for p in slices) == 5
    assert all(p.read_text().startswith("Device_id,") for p in slices)
    assert sum(len(read_rows(p)) for p in outputs(prof, "task_time_slice_*.csv")) == 8


def test_level0_only(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path, types=TASK_TIME_L0 | AICORE_METRICS, block_dim=8)
    assert export(prof).returncode == 0
    (op_path,) = outputs(prof, "op_summary_*.csv")
    row = read_rows(op_path)[0]
    assert row["Op Name"] == "Addcmul"
    for column in ("OP Type", "OP State", "Task Type", "HF32 Eligible", "Input Shapes", "Context ID"):
        assert row[column] == "N/A", column
    assert row["Block Dim"] == "0" and row["aicore_time(us)"] == "0.0"
    (task_path,) = outputs(prof, "task_time_*.csv")
    assert read_rows(task_path)[1]["kernel_type"] == "KERNEL_AICORE"


def test_no_task_time_exports_nothing_but_succeeds(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path, types=L2CACHE)
    result = export(prof)
    assert result.returncode == 0
    assert "[WARNING]" in result.stdout  # the real msprof.py logs to stdout
    assert not (prof / "mindstudio_profiler_output").exists()


def test_run_without_kernels_has_task_time_only(acl: Acl, tmp_path: Path) -> None:
    # As the real exporter writes a run without kernels (tests/real/test_sim_differential.py).
    assert acl.init(tmp_path) == 0
    cfg = acl.config([0])
    assert acl.start(cfg) == 0
    assert acl.stop(cfg) == 0
    (prof,) = prof_dirs(tmp_path)
    assert export(prof).returncode == 0
    assert not outputs(prof, "op_summary_*.csv")
    (task_path,) = outputs(prof, "task_time_*.csv")
    assert [r["kernel_type"] for r in read_rows(task_path)] == [
        "PROFILING_ENABLE",
        "PROFILING_DISABLE",
        "DEVICE_RINGBUFFER_CONTROL",
    ]


def test_parent_dir_exports_every_prof(acl: Acl, tmp_path: Path) -> None:
    assert acl.init(tmp_path / "runs") == 0
    cfg = acl.config([0])
    for _ in range(2):
        assert acl.start(cfg) == 0
        assert sim.launch("k") == 1
        assert acl.stop(cfg) == 0
    assert export(tmp_path / "runs").returncode == 0
    runs = prof_dirs(tmp_path / "runs")
    assert len(runs) == 2
    for prof in runs:
        assert len(outputs(prof, "op_summary_*.csv")) == 1


def test_grandparent_dir_exports_nothing(acl: Acl, tmp_path: Path) -> None:
    # The real tool walks -dir and its subdirectories only: PROF_* two levels down are warned about.
    prof = collect(acl, tmp_path / "runs")
    result = export(tmp_path)
    assert result.returncode == 0, result.stdout
    assert "Invalid parsing dir" in result.stdout
    assert not (prof / "mindstudio_profiler_output").exists()


def test_names_with_commas_are_quoted(acl: Acl, tmp_path: Path) -> None:
    assert acl.init(tmp_path) == 0
    cfg = acl.config([0])
    assert acl.start(cfg) == 0
    assert sim.launch('odd,"name"') == 1
    assert acl.stop(cfg) == 0
    (prof,) = prof_dirs(tmp_path)
    assert export(prof).returncode == 0
    (op_path,) = outputs(prof, "op_summary_*.csv")
    assert read_rows(op_path)[0]["Op Name"] == 'odd,"name"'


def test_timeline(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path, count=2)
    assert export(prof, "timeline").returncode == 0
    (trace,) = outputs(prof, "msprof_*.json")
    events = json.loads(trace.read_text())
    assert [e["name"] for e in events if e["ph"] == "X"].count("Addcmul") == 2
    assert outputs(prof, "*.csv") == []


# ---------------------------------------------------------------------------------------------
# msprof.py export: the old layout


def test_old_layout(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path, count=2, input_shapes=[(4, 4)])
    assert export(prof, env={"ASC_APROF_SIM_LAYOUT": "old"}).returncode == 0
    assert not (prof / "mindstudio_profiler_output").exists()
    (op_path,) = (prof / "device_0" / "summary").glob("op_summary_0_1_*.csv")
    (task_path,) = (prof / "device_0" / "summary").glob("task_time_0_1_*.csv")
    header = op_path.read_text().split("\n")[0]
    assert header.startswith(
        "Model ID,Task ID,Stream ID,Op Name,OP Type,Task Type,Task Start Time,Task Duration(us),"
        "Task Wait Time(us),Block Dim,"
    )
    # the PMU cells after the old columns are the raw reader's (the 910B's PipeUtilization)
    assert header.endswith("Output Formats," + ",".join(sim.COUNTER_COLUMNS["910B"][1]))
    row = read_rows(op_path)[0]
    assert re.fullmatch(r"\d{16}\.\d{3}", row["Task Start Time"]) and row["Input Shapes"] == "N/A"
    assert task_path.read_text().split("\n")[0] == (
        "kernel_name,kernel_type,stream_id,task_id,task_time(us),task_start(ns),task_stop(ns)"
    )
    kernel = read_rows(task_path)[1]
    assert kernel["kernel_name"] == "Addcmul" and kernel["task_time(us)"] == "10.0"
    assert int(kernel["task_stop(ns)"]) - int(kernel["task_start(ns)"]) == 10_000


# ---------------------------------------------------------------------------------------------
# msprof.py command line and export faults


@pytest.mark.parametrize("argv", [["import", "-dir", "."], ["export"], ["export", "summary"], []])
def test_usage_errors(argv: list[str]) -> None:
    script = sim.root() / "tools/profiler/profiler_tool/analysis/msprof/msprof.py"
    result = subprocess.run([sys.executable, str(script), *argv], capture_output=True, text=True, check=False)
    if argv in ([], ["export"]):
        # as the real one: no -dir to look at prints the help on stdout and exits 1
        assert result.returncode == 1
        assert "usage" in result.stdout
    else:
        assert result.returncode == 2  # argparse: a missing -dir, or import (not simulated)
        assert "usage" in result.stderr


@pytest.mark.parametrize("bad", [";", "$", "`", "'", "\\", "|", "%"])
def test_rejected_path_characters(tmp_path: Path, bad: str) -> None:
    target = tmp_path / f"a{bad}b"
    target.mkdir()
    result = export(target)
    assert result.returncode == 1
    assert "[ERROR]" in result.stdout and "The path contains invalid character" in result.stdout


def test_missing_or_long_dir(tmp_path: Path) -> None:
    assert export(tmp_path / "missing").returncode == 2
    assert export(Path("/" + "a" * 4100)).returncode == 2


def test_collection_dir_long_option(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path)
    script = sim.root() / "tools/profiler/profiler_tool/analysis/msprof/msprof.py"
    result = subprocess.run(
        [sys.executable, str(script), "export", "summary", "--collection-dir", str(prof), "--clear"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0 and len(outputs(prof, "op_summary_*.csv")) == 1


def test_fault_exit_code(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path)
    result = export(prof, env={"ASC_APROF_SIM_EXPORT_FAULT": "exit:7"})
    # On stdout, as the real msprof.py prints its [ERROR] lines (common_func/common.py).
    assert result.returncode == 7 and result.stderr == ""
    assert re.search(r"\[ERROR\] \[MSVP\] \[\d+\] msprof.py: simulated export failure", result.stdout)
    assert not (prof / "mindstudio_profiler_output").exists()


def test_fault_unknown_is_rejected(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path)
    assert export(prof, env={"ASC_APROF_SIM_EXPORT_FAULT": "explode"}).returncode == 1


def test_fault_signal(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path)
    result = export(prof, env={"ASC_APROF_SIM_EXPORT_FAULT": f"signal:{int(signal.SIGTERM)}"})
    assert result.returncode == -signal.SIGTERM


def test_fault_nocsv(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path)
    result = export(prof, env={"ASC_APROF_SIM_EXPORT_FAULT": "nocsv"})
    assert result.returncode == 0 and result.stderr == "" and "[WARNING] [MSVP]" in result.stdout
    assert list(prof.rglob("*.csv")) == []


def test_fault_truncate(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path, count=3)
    assert export(prof, env={"ASC_APROF_SIM_EXPORT_FAULT": "truncate"}).returncode == 0
    (op_path,) = outputs(prof, "op_summary_*.csv")
    text = op_path.read_text()
    assert not text.endswith("\n")
    last = next(csv.reader(io.StringIO(text.split("\n")[-1])))
    assert 0 < len(last) < 46


def test_fault_badheader(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path)
    assert export(prof, env={"ASC_APROF_SIM_EXPORT_FAULT": "badheader"}).returncode == 0
    (op_path,) = outputs(prof, "op_summary_*.csv")
    header = op_path.read_text().split("\n")[0].split(",")
    assert not {"Op Name", "Task Duration(us)", "kernel_name", "Task ID"} & set(header)


def test_export_latency(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path)
    began = time.monotonic()
    assert export(prof, env={"ASC_APROF_SIM_EXPORT_LATENCY_MS": "300"}).returncode == 0
    assert time.monotonic() - began >= 0.3


def test_fault_hang_and_process_group_kill(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path)
    script = sim.root() / "tools/profiler/profiler_tool/analysis/msprof/msprof.py"
    log = tmp_path / "stdout.txt"
    with open(log, "w") as stdout:  # its [INFO] line, like the real tool's, is on stdout
        proc = subprocess.Popen(
            [sys.executable, str(script), "export", "summary", "-dir", str(prof)],
            env={**os.environ, "ASC_APROF_SIM_EXPORT_FAULT": "hang"},
            stdout=stdout,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 30
        while "helper pid" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        helper = int(log.read_text().split("helper pid")[1].split()[0])
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=0.3)
        assert os.getpgid(helper) == proc.pid  # the helper shares the export's process group
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while _alive(helper):
        if time.monotonic() > deadline:
            pytest.fail("the helper process survived the process-group kill")
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    """True while *pid* runs; a zombie waiting for a reaper counts as dead."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def test_slice_limit_boundary_exports_completely(acl: Acl, tmp_path: Path) -> None:
    # The real limit is 1,000,000 rows (ASC_APROF_SIM_SLICE_ROWS' default); the same boundary
    # at 3,000 keeps the export (through the raw reader) quick.
    assert acl.init(tmp_path) == 0
    cfg = acl.config([0])
    assert acl.start(cfg) == 0
    assert sim.launch("bulk", duration_us=1.0, count=3_000) == 3_000
    assert acl.stop(cfg) == 0
    (prof,) = prof_dirs(tmp_path)
    result = export(prof, env={"ASC_APROF_SIM_SLICE_ROWS": "3000"})
    assert result.returncode == 0, result.stderr
    (op_path,) = outputs(prof, "op_summary_*.csv")  # exactly the row limit: one file
    with open(op_path, "rb") as file:
        assert sum(1 for _ in file) == 3_000 + 1
    slices = outputs(prof, "task_time_slice_*.csv")  # 3 control rows more: sliced
    assert len(slices) == 2
    total = 0
    for path in slices:
        with open(path, "rb") as file:
            total += sum(1 for _ in file) - 1
    assert total == 3_003


# ---------------------------------------------------------------------------------------------
# msprof.py command line and exit statuses, against the real one


def _scenario(name: str, base: Path) -> tuple[Path, list[str]]:
    """A directory laid out for *name*, and the extra arguments of that scenario."""
    prof = base / "PROF_000001_20260101000000000_00000001ABCDEFGH"
    if name == "missing path":
        return base / "missing", []
    if name == "empty PROF dir":
        prof.mkdir(parents=True)
        return prof, []
    if name == "PROF dir with an empty device dir":
        (prof / "device_0").mkdir(parents=True)
        return prof, []
    if name == "no info.json anywhere":
        for sub in ("host/data", "device_0/data"):
            (prof / sub).mkdir(parents=True)
        return prof, []
    if name == "forbidden character":
        target = base / "a;b"
        target.mkdir(parents=True)
        return target, []
    if name == "a file, not a directory":
        base.mkdir(parents=True, exist_ok=True)
        (base / "file").write_text("x")
        return base / "file", []
    raise AssertionError(name)


SCENARIOS = {
    "missing path": 2,
    "empty PROF dir": 2,
    "PROF dir with an empty device dir": 2,
    "no info.json anywhere": 0,
    "forbidden character": 1,
    "a file, not a directory": 2,
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_exit_status_of_directory_scenarios(tmp_path: Path, name: str) -> None:
    target, extra = _scenario(name, tmp_path)
    result = sim_msprof("export", "summary", "-dir", str(target), *extra)
    assert result.returncode == SCENARIOS[name], result.stdout + result.stderr
    if result.returncode:
        assert "[ERROR]" in result.stdout
    assert not list(tmp_path.rglob("mindstudio_profiler_output"))


@needs_real_msprof
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_exit_status_of_directory_scenarios_is_the_real_ones(tmp_path: Path, name: str) -> None:
    target, extra = _scenario(name, tmp_path / "real")
    real = real_msprof("export", "summary", "-dir", str(target), *extra)
    assert real.returncode == SCENARIOS[name], real.stdout[-2000:]
    target, extra = _scenario(name, tmp_path / "sim")
    assert sim_msprof("export", "summary", "-dir", str(target), *extra).returncode == real.returncode


ARGUMENT_CASES = {
    "model id alone": (["summary", "--model-id", "1"], 1),
    "iteration id alone": (["summary", "--iteration-id", "1"], 1),
    "bad format": (["summary", "--format", "xml"], 2),
    "reports on summary": (["summary", "-reports", "r.json"], 2),
    "format on timeline": (["timeline", "--format", "json"], 2),
    "iteration count not a number": (["summary", "--iteration-count", "x"], 2),
    "unknown option": (["summary", "--output", "x"], 2),
    "missing reports file": (["timeline", "-reports", "/nonexistent/r.json"], 2),
}


@pytest.mark.parametrize("case", sorted(ARGUMENT_CASES))
def test_argument_errors(acl: Acl, tmp_path: Path, case: str) -> None:
    argv, code = ARGUMENT_CASES[case]
    prof = collect(acl, tmp_path)
    result = sim_msprof("export", argv[0], "-dir", str(prof), *argv[1:])
    assert result.returncode == code, result.stdout + result.stderr
    assert not (prof / "mindstudio_profiler_output").exists()


@needs_real_msprof
@pytest.mark.parametrize("case", sorted(ARGUMENT_CASES))
def test_argument_errors_are_the_real_ones(tmp_path: Path, case: str) -> None:
    argv, code = ARGUMENT_CASES[case]
    # These are refused before any data is read, so an empty PROF-like dir is enough for both.
    target = tmp_path / "PROF_000001_20260101000000000_00000001ABCDEFGH" / "host" / "data"
    target.mkdir(parents=True)
    real = real_msprof("export", argv[0], "-dir", str(target.parents[1]), *argv[1:])
    assert real.returncode == code, real.stdout[-2000:] + real.stderr[-2000:]
    result = sim_msprof("export", argv[0], "-dir", str(target.parents[1]), *argv[1:])
    assert result.returncode == real.returncode


def test_model_and_iteration_id_together_export_nothing_on_single_op_data(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path)
    for model in ("0", "4294967295"):
        result = sim_msprof(
            "export", "summary", "-dir", str(prof), "--model-id", model, "--iteration-id", "1"
        )
        assert result.returncode == 0, result.stdout  # as the real one: an error line, exit 0
        assert "[ERROR]" in result.stdout
        assert not (prof / "mindstudio_profiler_output").exists()


def test_iteration_count_and_clear_are_accepted(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path)
    result = sim_msprof("export", "summary", "-dir", str(prof), "--iteration-count", "3", "--clear")
    assert result.returncode == 0
    assert "iteration-count" in result.stdout  # warned about, as the real one does in all-export mode
    assert len(outputs(prof, "op_summary_*.csv")) == 1


def test_timeline_reports_option(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path)
    reports = tmp_path / "reports.json"
    reports.write_text('{"json_process": {"ascend": true}}')
    result = sim_msprof("export", "timeline", "-dir", str(prof), "-reports", str(reports))
    assert result.returncode == 0, result.stdout
    assert len(outputs(prof, "msprof_*.json")) == 1
    assert (prof / "mindstudio_profiler_output" / "README.txt").is_file()


def test_export_db_is_refused_like_the_python_path(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path)
    result = sim_msprof("export", "db", "-dir", str(prof))
    assert result.returncode == 0  # the real pure-Python msprof.py: a warning, exit 0, no db
    assert "Does not support exporting the msprof.db" in result.stdout
    assert list(prof.rglob("*.db")) == [] and not (prof / "mindstudio_profiler_output").exists()
    assert sim_msprof("export", "db", "-dir", str(tmp_path / "missing")).returncode == 2


@needs_real_msprof
def test_export_db_exit_status_is_the_real_ones(acl: Acl, tmp_path: Path) -> None:
    copy = copy_real_prof("310b_addcmul", tmp_path / "real")  # a small run: one kernel
    real = real_msprof("export", "db", "-dir", str(copy))
    assert real.returncode == 0 and not (copy / "mindstudio_profiler_output").exists()
    assert list(copy.glob("*.db")) == []
    prof = collect(acl, tmp_path / "sim")
    assert sim_msprof("export", "db", "-dir", str(prof)).returncode == real.returncode


def test_host_only_run_exports_nothing(acl: Acl, tmp_path: Path) -> None:
    assert acl.init(tmp_path) == 0
    cfg = acl.create([], types=MSPROFTX)
    assert acl.start(cfg) == 0
    assert acl.stop(cfg) == 0
    (prof,) = prof_dirs(tmp_path)
    result = export(prof)
    assert result.returncode == 0 and "[WARNING]" in result.stdout
    assert not (prof / "mindstudio_profiler_output").exists()


# ---------------------------------------------------------------------------------------------
# The other files of an export


@pytest.fixture(scope="module")
def real_l1_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mindstudio_profiler_output of the real msprof.py's export of a copy of a level-1 real run."""
    if not (REAL_MSPROF.is_file() and REAL_RUNS.is_dir()):
        pytest.skip(f"the real msprof.py and runs are not under {REAL_MSPROF.parents[3]}")
    copy = copy_real_prof("310b_addcmul", tmp_path_factory.mktemp("real"))  # small, level 1
    result = real_msprof("export", "summary", "-dir", str(copy))
    assert result.returncode == 0, result.stdout[-2000:]
    return copy / "mindstudio_profiler_output"


def _readme_entries(path: Path) -> dict[str, list[str]]:
    """README.txt's sections and the ``<n>.<file>`` entries listed in each."""
    sections: dict[str, list[str]] = {}
    current = ""
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line.endswith("file description:"):
            current = line
            sections[current] = []
        elif re.match(r"^\d+\.[a-z_]+\.(csv|json):", line):
            sections[current].append(line.split(":", 1)[0].split(".", 1)[1])
    return sections


def test_extra_files_beside_op_summary(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path, types=DEFAULT_TYPES | ACL_API, task_type="AI_VECTOR_CORE", count=4)
    assert export(prof).returncode == 0
    out = prof / "mindstudio_profiler_output"
    stamp = outputs(prof, "op_summary_*.csv")[0].name.split("_")[-1]
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(
        [
            "README.txt",
            *(f"{kind}_{stamp}" for kind in ("op_summary", "task_time", "op_statistic", "api_statistic")),
        ]
    )
    (stat_row,) = read_rows(out / f"op_statistic_{stamp}")
    assert stat_row["OP Type"] == "Addcmul" and stat_row["Core Type"] == "AI_VECTOR_CORE"
    assert (
        stat_row["Count"] == "4" and stat_row["Total Time(us)"] == "40.0" and stat_row["Ratio(%)"] == "100.0"
    )
    api = read_rows(out / f"api_statistic_{stamp}")
    assert {(r["Level"], r["API Name"], r["Count"]) for r in api} == {
        ("acl", "aclrtLaunchKernelWithHostArgs", "4"),
        ("node", "launch", "4"),
    }
    assert _readme_entries(out / "README.txt") == {
        "Timeline file description:": [],
        "Summary file description:": sorted(
            ["op_summary.csv", "task_time.csv", "op_statistic.csv", "api_statistic.csv"]
        ),
    }


def test_no_api_statistic_without_api_data_and_no_op_statistic_at_level0(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path, types=TASK_TIME_L0 | AICORE_METRICS)
    assert export(prof).returncode == 0
    kinds = sorted(p.name.rsplit("_", 1)[0] for p in outputs(prof, "*.csv"))
    assert kinds == ["op_summary", "task_time"]


@needs_real_msprof
def test_extra_files_have_the_real_exporters_shapes(acl: Acl, tmp_path: Path, real_l1_export: Path) -> None:
    prof = collect(acl, tmp_path, types=DEFAULT_TYPES | ACL_API, task_type="AI_VECTOR_CORE", count=4)
    assert export(prof).returncode == 0
    ours = prof / "mindstudio_profiler_output"
    for kind in ("op_statistic", "api_statistic", "op_summary", "task_time"):
        (real_file,) = real_l1_export.glob(f"{kind}_*.csv")
        (our_file,) = ours.glob(f"{kind}_*.csv")
        assert re.fullmatch(rf"{kind}_\d{{14}}\.csv", our_file.name)
        if kind in ("op_statistic", "api_statistic", "task_time"):
            assert header(our_file) == header(real_file), kind
    assert _readme_entries(ours / "README.txt") == {
        section: sorted(entries)
        for section, entries in _readme_entries(real_l1_export / "README.txt").items()
    }
    (real_stat,) = read_rows(next(real_l1_export.glob("op_statistic_*.csv")))
    (our_stat,) = read_rows(next(ours.glob("op_statistic_*.csv")))
    assert (real_stat["Core Type"], real_stat["Ratio(%)"]) == (our_stat["Core Type"], our_stat["Ratio(%)"])


def test_second_export_in_the_same_second_keeps_the_first_as_bak(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path, types=DEFAULT_TYPES | ACL_API)
    same_second = {"ASC_APROF_SIM_EXPORT_TIME": "1800000000.25"}
    assert export(prof, env=same_second).returncode == 0
    first = {p.name: p.read_bytes() for p in outputs(prof, "*.csv")}
    assert len(first) == 4
    assert export(prof, env=same_second).returncode == 0
    out = prof / "mindstudio_profiler_output"
    for name, data in first.items():
        assert (out / f"{name}.bak").read_bytes() == data  # the older file, renamed
        assert (out / name).is_file()
    assert not (out / "README.txt.bak").exists()
    assert export(prof, env={"ASC_APROF_SIM_EXPORT_TIME": "1800000100"}).returncode == 0
    assert len(outputs(prof, "op_summary_*.csv")) == 2  # another second: a file of its own


def test_export_time_names_the_files(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path)
    moment = 1_700_000_000.0
    assert export(prof, env={"ASC_APROF_SIM_EXPORT_TIME": repr(moment)}).returncode == 0
    expected = time.strftime("%Y%m%d%H%M%S", time.localtime(moment))
    assert [p.name for p in outputs(prof, "op_summary_*.csv")] == [f"op_summary_{expected}.csv"]


def test_summary_as_json(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path, devices=(0, 1), types=DEFAULT_TYPES | ACL_API, count=2)
    assert export(prof, "summary", None, "--format", "json").returncode == 0
    out = prof / "mindstudio_profiler_output"
    assert outputs(prof, "*.csv") == [] and not (out / ".aprofsim_json").exists()
    kinds = sorted(p.name.rsplit("_", 1)[0] for p in outputs(prof, "*.json"))
    assert kinds == ["api_statistic", "op_statistic", "op_summary", "task_time"]
    ops = json.loads(next(out.glob("op_summary_*.json")).read_text())
    assert len(ops) == 2  # as the real tool: one device's copy survives (the last)
    first = ops[0]
    assert "Device_id" not in first and first["Model ID"] == 4294967295 and first["Op Name"] == "Addcmul"
    assert isinstance(first["Task Duration(us)"], float) and first["Task Start Time(us)"].endswith("\t")
    assert _readme_entries(out / "README.txt")["Timeline file description:"] == [f"{k}.json" for k in kinds]


@needs_real_msprof
def test_summary_as_json_has_the_real_keys(acl: Acl, tmp_path: Path) -> None:
    copy = copy_real_prof("910b_l0_add_ascendc", tmp_path / "real")
    assert real_msprof("export", "summary", "-dir", str(copy), "--format", "json").returncode == 0
    real = json.loads(next((copy / "mindstudio_profiler_output").glob("op_summary_*.json")).read_text())
    sim.control().configure(cann="9.0")
    prof = collect(acl, tmp_path / "sim", types=TASK_TIME_L0 | AICORE_METRICS, task_type="AI_VECTOR_CORE")
    assert export(prof, "summary", None, "--format", "json").returncode == 0
    ours = json.loads(next((prof / "mindstudio_profiler_output").glob("op_summary_*.json")).read_text())
    assert list(ours[0]) == list(real[0])
    for key in ("Model ID", "Task ID", "Task Duration(us)", "Task Start Time(us)", "OP Type", "Block Num"):
        assert type(ours[0][key]) is type(real[0][key]), key
