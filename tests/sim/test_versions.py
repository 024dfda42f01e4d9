"""The simulator's CANN-version and chip settings, checked against real runs where they exist.

One setting (``SimControl.configure``) drives the library and, through the run's metadata, the
export: these tests collect with the raw library under each version and chip and compare what
comes out with real runs of that kind.
"""

from __future__ import annotations

import csv
import datetime
import json
import os
import re
from pathlib import Path

import pytest

from asc_aprof import sim

from ._support import (
    AICORE_METRICS,
    DEFAULT_TYPES,
    MSPROFTX,
    REAL_RUNS,
    TASK_TIME,
    TASK_TIME_L0,
    Acl,
    collect,
    export,
    header,
    needs_real_runs,
    outputs,
    prof_dirs,
    read_rows,
    real_expected,
    real_prof,
)

PIPE_UTILIZATION = 1
PIPELINE_EXECUTE_UTILIZATION = 7
MEMORY_ACCESS = 8
NAME_WITH_PID = re.compile(r"^PROF_(\d{6})_(\d{17})_(\d{8})([A-R]{8})$")
NAME_WITHOUT_PID = re.compile(r"^PROF_(\d{6})_(\d{17})_([A-R]{16})$")
OLD_VERSIONS = [v for v in sim.CANN_VERSIONS if v < "8.5"]
PID_VERSIONS = [v for v in sim.CANN_VERSIONS if v >= "8.5"]
# (chip, data types, metric, real run of that kind)
KINDS = {
    "910B level 1 PipeUtilization": ("910B", TASK_TIME | AICORE_METRICS, PIPE_UTILIZATION, "910b_l1_div"),
    "910B level 0 PipeUtilization": (
        "910B",
        TASK_TIME_L0 | AICORE_METRICS,
        PIPE_UTILIZATION,
        "910b_l0_add_ascendc",
    ),
    "310B level 1 PipelineExecuteUtilization": (
        "310B",
        TASK_TIME | AICORE_METRICS,
        PIPELINE_EXECUTE_UTILIZATION,
        "310b_addcmul",
    ),
}


def block_names(version: str) -> tuple[str, str]:
    """Real runs: ``Block Dim`` up to CANN 8.5, ``Block Num`` from 9.0."""
    return ("Block Num", "Mix Block Num") if version >= "9.0" else ("Block Dim", "Mix Block Dim")


def with_block_names(real: str, version: str) -> str:
    block, mix = block_names(version)
    columns = real.split(",")
    renamed = {"Block Dim": block, "Block Num": block, "Mix Block Dim": mix, "Mix Block Num": mix}
    return ",".join(renamed.get(column, column) for column in columns)


def all_cells(rows: list[dict[str, str]], test: str) -> set[str]:
    """Columns whose cell is N/A (``test="na"``) or zero (``"zero"``) on every row."""

    def matches(value: str) -> bool:
        value = value.strip()
        if test == "na":
            return value == "N/A"
        try:
            return float(value) == 0
        except ValueError:
            return False

    return {column for column in rows[0] if all(matches(row[column]) for row in rows)}


# ---------------------------------------------------------------------------------------------
# Settings


def test_configure_and_reset() -> None:
    control = sim.control()
    assert (control.cann, control.chip) == (sim.DEFAULT_CANN, sim.DEFAULT_CHIP) == ("8.5", "910B")
    control.configure(cann="9.2")
    assert (control.cann, control.chip) == ("9.2", "910B")
    control.configure(chip="310B")
    assert (control.cann, control.chip) == ("9.2", "310B")
    control.set_cann("9.x")  # the older spelling of the 9.x overlap behaviour
    assert control.cann == "9.0"
    for bad in ({"cann": "7.0"}, {"cann": "9.3"}, {"cann": "9"}, {"chip": "910A"}):
        with pytest.raises(ValueError):
            control.configure(**bad)
    assert (control.cann, control.chip) == ("9.0", "310B")
    control.reset()
    assert (control.cann, control.chip) == ("8.5", "910B")


@pytest.mark.parametrize("cann", sim.CANN_VERSIONS)
@pytest.mark.parametrize("chip", sim.CHIPS)
def test_metadata_records_version_chip_and_pid(acl: Acl, tmp_path: Path, cann: str, chip: str) -> None:
    sim.control().configure(cann=cann, chip=chip)
    prof = collect(acl, tmp_path, devices=(1,))
    platform = {"910B": "5", "310B": "7"}[chip]
    for path in (prof / "host" / "info.json", prof / "device_1" / "info.json.1"):
        info = json.loads(path.read_text())
        assert info["pid"] == str(os.getpid())  # a string, as in real runs
        assert info["platform_version"] == platform and info["version"] == "1.0"
        assert (info["aprofsim_cann_version"], info["aprofsim_chip"]) == (cann, chip)
    device = json.loads((prof / "device_1" / "info.json.1").read_text())
    assert device["devices"] == "1" and device["DeviceInfo"][0]["id"] == 1


@needs_real_runs
def test_metadata_keys_are_those_of_real_runs(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path)
    for run in ("910b_l1_div", "310b_addcmul"):
        real = real_prof(run)
        for part in ("host/info.json", "device_0/info.json.0"):
            real_info = json.loads((real / part).read_text())
            ours = json.loads((prof / part).read_text())
            shared = {"pid", "platform_version", "version", "devices", "DeviceInfo", "hostname", "drvVersion"}
            assert shared <= real_info.keys() and shared <= ours.keys(), part
            assert type(ours["pid"]) is type(real_info["pid"]) is str
        real_sample = json.loads((real / "device_0" / "sample.json").read_text())
        ours_sample = json.loads((prof / "device_0" / "sample.json").read_text())
        for key in ("ai_core_metrics", "aiv_metrics", "ai_core_profiling_mode", "devices"):
            assert key in real_sample and key in ours_sample, key


# ---------------------------------------------------------------------------------------------
# Run names


@pytest.mark.parametrize("cann", sim.CANN_VERSIONS)
def test_run_names_by_version(acl: Acl, tmp_path: Path, cann: str) -> None:
    sim.control().configure(cann=cann)
    assert acl.init(tmp_path) == 0
    cfg = acl.config([0])
    for _ in range(2):
        assert acl.start(cfg) == 0
        assert acl.stop(cfg) == 0
    names = [p.name for p in prof_dirs(tmp_path)]
    if cann < "8.5":
        matches = [NAME_WITHOUT_PID.match(name) for name in names]
        assert all(matches), names
    else:
        matches = [NAME_WITH_PID.match(name) for name in names]
        assert all(matches), names
        assert {m.group(3) for m in matches if m} == {f"{os.getpid():08d}"}
    counters = sorted(int(m.group(1)) for m in matches if m)
    assert counters[1] == counters[0] + 1


@needs_real_runs
def test_name_patterns_match_real_runs() -> None:
    old = [p.name for p in REAL_RUNS.glob("310b_*/PROF_*")]
    new = [p.name for p in REAL_RUNS.glob("910b_*/PROF_*")]
    assert old and new
    assert all(NAME_WITHOUT_PID.match(name) for name in old), old  # 2024 runs: no pid
    assert all(NAME_WITH_PID.match(name) for name in new), new  # CANN 9.0: pid + 8 letters
    assert not any(NAME_WITH_PID.match(name) for name in old)


def _name_time(name: str) -> datetime.datetime:
    return datetime.datetime.strptime(name.split("_")[2], "%Y%m%d%H%M%S%f")


def test_clock_offset_steps_the_name_time_back(acl: Acl, tmp_path: Path) -> None:
    control = sim.control()
    assert acl.init(tmp_path) == 0
    cfg = acl.config([0])
    assert acl.start(cfg) == 0
    assert acl.stop(cfg) == 0
    control.set_clock_offset(-3600.0)  # the clock steps back an hour
    assert acl.start(cfg) == 0
    assert sim.launch("after") == 1
    assert acl.stop(cfg) == 0
    first, second = sorted(prof_dirs(tmp_path), key=lambda p: int(p.name.split("_")[1]))
    # The later run's name says it started about an hour before the earlier one.
    assert (_name_time(first.name) - _name_time(second.name)).total_seconds() > 3000
    begin = [
        int(json.loads((p / "host" / "start_info").read_text())["collectionTimeBegin"])
        for p in (first, second)
    ]
    assert begin[0] - begin[1] > 3000 * 1_000_000  # start_info (us) follows the same clock
    control.reset()
    assert acl.init(tmp_path / "again") == 0
    assert acl.start(acl.config([0])) == 0
    (third,) = prof_dirs(tmp_path / "again")
    assert _name_time(third.name) > _name_time(second.name)  # reset clears the offset


def test_clock_offset_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        sim.control().set_clock_offset(float("nan"))
    with pytest.raises(ValueError):
        sim.control().set_clock_offset(1e12)


# ---------------------------------------------------------------------------------------------
# Runs of other processes in the same result path


@pytest.mark.parametrize("cann", ["8.0", "8.5", "9.0"])
def test_write_foreign_run(acl: Acl, tmp_path: Path, cann: str) -> None:
    control = sim.control()
    control.configure(cann=cann)
    run = control.write_foreign_run(tmp_path, pid=4242, kernel="theirs", count=3, device=2)
    assert run.parent == tmp_path and run.is_dir()
    pattern = NAME_WITH_PID if cann >= "8.5" else NAME_WITHOUT_PID
    match = pattern.match(run.name)
    assert match is not None and match.group(1) == "000001"  # a process of its own
    if cann >= "8.5":
        assert match.group(3) == "00004242"
    assert json.loads((run / "host" / "info.json").read_text())["pid"] == "4242"
    assert json.loads((run / "device_2" / "info.json.2").read_text())["pid"] == "4242"
    result = export(run)
    assert result.returncode == 0, result.stdout
    (op_path,) = outputs(run, "op_summary_*.csv")
    rows = read_rows(op_path)
    assert [(r["Device_id"], r["Op Name"]) for r in rows] == [("2", "theirs")] * 3
    assert control.live_configs() == 0 and not control.initialized()  # the library is untouched


def test_write_foreign_run_with_a_given_name(tmp_path: Path) -> None:
    control = sim.control()
    name = "PROF_000007_20260101000000000_00000099ABCDEFGH"
    run = control.write_foreign_run(tmp_path, pid=99, name=name)
    assert run == tmp_path / name
    with pytest.raises(FileExistsError):
        control.write_foreign_run(tmp_path, pid=99, name=name)
    for bad in ({"name": "../x"}, {"name": ""}, {"pid": -1}, {"kernel": ""}, {"device": 64}):
        arguments: dict[str, object] = {"pid": 1, **bad}
        with pytest.raises(ValueError):
            control.write_foreign_run(tmp_path, **arguments)  # type: ignore[arg-type]


def test_foreign_run_appears_during_the_next_start(acl: Acl, tmp_path: Path) -> None:
    control = sim.control()
    control.foreign_run_on_next_start(pid=31337, kernel="theirs")
    assert acl.init(tmp_path) == 0
    cfg = acl.config([0])
    assert acl.start(cfg) == 0
    assert sim.launch("ours") == 1
    assert acl.stop(cfg) == 0
    runs = prof_dirs(tmp_path)
    assert len(runs) == 2  # one start, two new entries: ours and the other process's
    pids = {json.loads((p / "host" / "info.json").read_text())["pid"]: p for p in runs}
    assert set(pids) == {str(os.getpid()), "31337"}
    assert control.running_devices() == []
    assert acl.start(cfg) == 0  # one shot: the next start makes only its own run
    assert len(prof_dirs(tmp_path)) == 3
    assert acl.stop(cfg) == 0
    assert export(pids["31337"]).returncode == 0
    (op_path,) = outputs(pids["31337"], "op_summary_*.csv")
    assert [r["Op Name"] for r in read_rows(op_path)] == ["theirs"]


# ---------------------------------------------------------------------------------------------
# Version rules of the library


@pytest.mark.parametrize("cann", sim.CANN_VERSIONS)
def test_start_without_init_initialises_itself_from_91(
    acl: Acl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cann: str
) -> None:
    control = sim.control()
    control.configure(cann=cann)
    monkeypatch.chdir(tmp_path)
    cfg = acl.config([0])
    if cann < "9.1":
        assert acl.start(cfg) == 100043
        assert acl.stop(cfg) == 100043
        assert acl.finalize() == 100043
        assert acl.lib.aclprofSetConfig(16, b"/x", 2) == 100001
        assert prof_dirs(tmp_path) == [] and not control.initialized()
        return
    assert acl.stop(cfg) == 0 and acl.finalize() == 0  # no-op successes without init
    assert acl.start(cfg) == 0  # initialises with the working directory
    assert control.initialized() and control.running_devices() == [0]
    assert acl.init(tmp_path) == 100002  # it really is initialised
    assert acl.stop(cfg) == 0
    assert acl.finalize() == 0
    assert len(prof_dirs(tmp_path)) == 1
    # a path given by aclprofSetConfig(ACL_PROF_PATH) before any init is used instead
    target = os.fsencode(tmp_path / "set by config")
    assert acl.lib.aclprofSetConfig(16, target, len(target)) == 0
    assert acl.start(cfg) == 0
    assert acl.stop(cfg) == 0
    assert len(prof_dirs(tmp_path / "set by config")) == 1


@pytest.mark.parametrize("cann", sim.CANN_VERSIONS)
@pytest.mark.parametrize(
    ("chip", "metric"),
    [
        ("910B", 9),
        ("910B", -1),
        ("910B", PIPELINE_EXECUTE_UTILIZATION),
        ("310B", MEMORY_ACCESS),
        ("310B", 1000),
    ],
)
def test_bad_metric_refused_at_start_only_on_92_with_the_bit(
    acl: Acl, tmp_path: Path, cann: str, chip: str, metric: int
) -> None:
    sim.control().configure(cann=cann, chip=chip)
    assert acl.init(tmp_path) == 0
    with_bit = acl.create([0], TASK_TIME | AICORE_METRICS, metric)
    without_bit = acl.create([0], TASK_TIME, metric)
    assert with_bit is not None and without_bit is not None  # create never checks the metric
    if cann >= "9.2":
        assert acl.start(with_bit) == 100000
        assert prof_dirs(tmp_path) == []
    else:
        # ignored: the start succeeds and no PMU data is collected
        assert acl.start(with_bit) == 0
        assert sim.launch("k") == 1
        assert acl.stop(with_bit) == 0
        (prof,) = prof_dirs(tmp_path)
        assert json.loads((prof / "device_0" / "sample.json").read_text())["ai_core_metrics"] == ""
        assert export(prof).returncode == 0
        (op_path,) = outputs(prof, "op_summary_*.csv")
        assert header(op_path).endswith(",Context ID")
    assert acl.start(without_bit) == 0  # without the AICORE_METRICS bit the metric is never looked at
    assert acl.stop(without_bit) == 0


@pytest.mark.parametrize("cann", sim.CANN_VERSIONS)
def test_supported_metric_starts_on_every_version(acl: Acl, tmp_path: Path, cann: str) -> None:
    sim.control().configure(cann=cann, chip="310B")
    assert acl.init(tmp_path) == 0
    cfg = acl.config([0], TASK_TIME | AICORE_METRICS, PIPELINE_EXECUTE_UTILIZATION)
    assert acl.start(cfg) == 0
    assert acl.stop(cfg) == 0
    none = acl.config([0], TASK_TIME | AICORE_METRICS, 0xFF)  # NONE is valid everywhere
    assert acl.start(none) == 0
    assert acl.stop(none) == 0


@pytest.mark.parametrize("cann", sim.CANN_VERSIONS)
def test_zero_data_types_start(acl: Acl, tmp_path: Path, cann: str) -> None:
    sim.control().configure(cann=cann)
    assert acl.init(tmp_path) == 0
    cfg = acl.create([0], 0)
    assert cfg is not None
    assert acl.start(cfg) == 0  # CANN ORs an internal bit into the config
    assert sim.launch("k") == 1
    assert acl.stop(cfg) == 0
    (prof,) = prof_dirs(tmp_path)
    result = export(prof)
    assert result.returncode == 0 and "[WARNING]" in result.stdout  # nothing to export
    assert not (prof / "mindstudio_profiler_output").exists()


def test_msproftx_only_is_still_the_only_deviceless_config(acl: Acl) -> None:
    sim.control().configure(cann="9.2")
    assert acl.create([], TASK_TIME) is None
    assert acl.create([], MSPROFTX) is not None


# ---------------------------------------------------------------------------------------------
# Exported headers against real runs


@needs_real_runs
@pytest.mark.parametrize("cann", sim.CANN_VERSIONS)
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_headers_equal_real_runs(acl: Acl, tmp_path: Path, cann: str, kind: str) -> None:
    chip, types, metric, real_run = KINDS[kind]
    sim.control().configure(cann=cann, chip=chip)
    prof = collect(acl, tmp_path, types=types, metric=metric, task_type="AI_VECTOR_CORE", count=2)
    result = export(prof)  # the toolkit default: no header override, the run's version decides
    assert result.returncode == 0, result.stdout
    (op_path,) = outputs(prof, "op_summary_*.csv")
    (task_path,) = outputs(prof, "task_time_*.csv")
    real_op = header(real_expected(real_run, "op_summary"))
    assert header(op_path) == with_block_names(real_op, cann)
    assert header(task_path) == header(real_expected(real_run, "task_time"))
    rows = read_rows(op_path)
    assert all(len(row) == len(real_op.split(",")) for row in rows)


@needs_real_runs
def test_real_block_names_are_what_the_tests_assume() -> None:
    # 2024 (before 8.5) says Block Dim, the CANN 9.0 runs Block Num
    assert "Block Dim" in header(real_expected("310b_addcmul", "op_summary")).split(",")
    for run in ("910b_l1_div", "910b_l0_add_ascendc"):
        assert "Block Num" in header(real_expected(run, "op_summary")).split(",")


@pytest.mark.parametrize(
    ("override", "block"), [("8.5", "Block Dim"), ("9.0", "Block Num"), ("", "Block Num")]
)
def test_header_override_still_wins(acl: Acl, tmp_path: Path, override: str, block: str) -> None:
    sim.control().configure(cann="9.1")
    prof = collect(acl, tmp_path)
    assert export(prof, env={"ASC_APROF_SIM_HEADER": override}).returncode == 0
    (op_path,) = outputs(prof, "op_summary_*.csv")
    assert block in header(op_path).split(",")


def test_the_export_follows_each_runs_own_version(acl: Acl, tmp_path: Path) -> None:
    control = sim.control()
    assert acl.init(tmp_path) == 0
    cfg = acl.config([0])
    for cann in ("8.5", "9.0"):
        control.configure(cann=cann)
        assert acl.start(cfg) == 0
        assert sim.launch("k") == 1
        assert acl.stop(cfg) == 0
    control.configure(cann="8.0")  # what the library does now does not matter to old runs
    assert export(tmp_path).returncode == 0
    blocks = [header(outputs(prof, "op_summary_*.csv")[0]).split(",")[11] for prof in prof_dirs(tmp_path)]
    assert blocks == ["Block Dim", "Block Num"]


# ---------------------------------------------------------------------------------------------
# Task time level 0


def _join_key_op(row: dict[str, str]) -> tuple[str, str, str, str]:
    return (row["Device_id"], row["Stream ID"], row["Task ID"], row["Task Start Time(us)"])


def _join_key_task(row: dict[str, str]) -> tuple[str, str, str, str]:
    return (row["Device_id"], row["stream_id"], row["task_id"], row["task_start(us)"])


@pytest.mark.parametrize("cann", ["8.5", "9.0"])
def test_level0_types_only_in_task_time_joined_like_real_exports(acl: Acl, tmp_path: Path, cann: str) -> None:
    sim.control().configure(cann=cann)
    assert acl.init(tmp_path) == 0
    cfg = acl.config([0, 3], TASK_TIME_L0 | AICORE_METRICS)
    assert acl.start(cfg) == 0
    assert sim.launch("add_kernel", task_type="AI_VECTOR_CORE", count=3) == 3
    assert sim.launch("aclnnMatmul", device=3, binary_name="BatchMatMulV2_ND_98945", count=2) == 2
    assert sim.launch("mix", device=3, task_type="MIX_AIC", count=1) == 1
    assert acl.stop(cfg) == 0
    (prof,) = prof_dirs(tmp_path)
    assert export(prof).returncode == 0
    (op_path,) = outputs(prof, "op_summary_*.csv")
    (task_path,) = outputs(prof, "task_time_*.csv")
    ops = read_rows(op_path)
    assert len(ops) == 6
    for column in ("Task Type", "OP Type", "OP State"):
        assert {row[column] for row in ops} == {"N/A"}, column
    tasks = {_join_key_task(row): row for row in read_rows(task_path)}
    joined = [tasks[_join_key_op(row)] for row in ops]  # every op_summary row joins, TAB included
    assert all(row["Task Start Time(us)"].endswith("\t") for row in ops)
    assert [(t["kernel_name"], t["kernel_type"]) for t in joined] == [
        ("add_kernel", "KERNEL_AIVEC"),
        ("add_kernel", "KERNEL_AIVEC"),
        ("add_kernel", "KERNEL_AIVEC"),
        ("BatchMatMulV2_ND_98945", "KERNEL_AICORE"),  # the binary name, as real aclnn ops show
        ("BatchMatMulV2_ND_98945", "KERNEL_AICORE"),
        ("mix", "KERNEL_MIX_AIC"),
    ]
    assert [row["Op Name"] for row in ops] == ["add_kernel"] * 3 + ["aclnnMatmul"] * 2 + ["mix"]
    assert all(t["task_time(us)"] == o["Task Duration(us)"] for t, o in zip(joined, ops, strict=True))
    assert outputs(prof, "op_statistic_*.csv") == []  # real level-0 exports have none


def test_level1_keeps_types_in_op_summary_and_names_in_task_time(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path, types=TASK_TIME, task_type="AI_VECTOR_CORE", binary_name="Addcmul_123")
    assert export(prof).returncode == 0
    (op,) = read_rows(outputs(prof, "op_summary_*.csv")[0])
    assert (op["Op Name"], op["OP Type"], op["OP State"], op["Task Type"]) == (
        "Addcmul",
        "Addcmul",
        "dynamic",
        "AI_VECTOR_CORE",
    )
    kernel = read_rows(outputs(prof, "task_time_*.csv")[0])[1]
    assert (kernel["kernel_name"], kernel["kernel_type"]) == ("Addcmul", "AI_VECTOR_CORE")


@needs_real_runs
@pytest.mark.parametrize(
    ("real_run", "types", "task_type"),
    [
        ("910b_l0_add_ascendc", TASK_TIME_L0 | AICORE_METRICS, "AI_VECTOR_CORE"),
        ("910b_l0_matmul_torch", TASK_TIME_L0 | AICORE_METRICS, "AI_CORE"),
        ("910b_l1_div", TASK_TIME | AICORE_METRICS, "AI_VECTOR_CORE"),
    ],
)
def test_na_and_zero_columns_are_those_of_real_runs(
    acl: Acl, tmp_path: Path, real_run: str, types: int, task_type: str
) -> None:
    """The columns that are N/A, or zero, on every row are the same as in a real run of the kind."""
    sim.control().configure(cann="9.0")
    prof = collect(acl, tmp_path, types=types, task_type=task_type, block_dim=20, count=20)
    assert export(prof).returncode == 0
    ours = read_rows(outputs(prof, "op_summary_*.csv")[0])[1:]  # the first row has no wait time
    with open(real_expected(real_run, "op_summary"), encoding="utf-8", newline="") as file:
        real = list(csv.DictReader(file))[1:]
    assert all_cells(ours, "na") == all_cells(real, "na")
    # icache miss rates are ~0 or not depending on the kernel (div: 0.0, add: 0.137): not structural
    structural = {column for column in real[0] if not column.endswith("icache_miss_rate")}
    assert all_cells(ours, "zero") & structural == all_cells(real, "zero") & structural


def test_level0_on_310b(acl: Acl, tmp_path: Path) -> None:
    sim.control().configure(cann="8.0", chip="310B")
    prof = collect(acl, tmp_path, types=TASK_TIME_L0 | AICORE_METRICS, metric=PIPELINE_EXECUTE_UTILIZATION)
    assert export(prof).returncode == 0
    (row,) = read_rows(outputs(prof, "op_summary_*.csv")[0])
    assert (row["Task Type"], row["Block Dim"], row["vec_exe_time(us)"]) == ("N/A", "0", "0.0")
    assert float(row["total_cycles"]) > 0 and float(row["memory_bound"]) > 0


def test_default_is_still_85_level1(acl: Acl, tmp_path: Path) -> None:
    prof = collect(acl, tmp_path, types=DEFAULT_TYPES)
    assert NAME_WITH_PID.match(prof.name)
    assert export(prof).returncode == 0
    (row,) = read_rows(outputs(prof, "op_summary_*.csv")[0])
    assert row["Block Dim"] == "1" and row["Task Type"] == "AI_CORE"
