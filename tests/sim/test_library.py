"""The simulated libmsprofiler.so: CANN's aclprof* rules, PROF_* layout and overlap behaviour."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from asc_aprof import sim
from asc_aprof._plans._raw import RawResult
from asc_aprof._runs._raw_files import read_run

from ._support import (
    AICORE_METRICS,
    MSPROFTX,
    PIPE_UTILIZATION,
    PROF_AICPU_MODEL,
    PROF_NAME,
    TASK_TIME,
    TASK_TIME_L0,
    Acl,
    export,
    outputs,
    prof_dirs,
    read_rows,
)

# ---------------------------------------------------------------------------------------------
# aclprofInit / Finalize / SetConfig


def test_init_argument_errors(acl: Acl, tmp_path: Path) -> None:
    raw = os.fsencode(tmp_path)
    assert acl.lib.aclprofInit(None, 5) == 100000
    assert acl.lib.aclprofInit(raw, 0) == 100000
    assert acl.lib.aclprofInit(raw, len(raw) + 1) == 100000
    long = b"/" + b"a" * 4096
    assert acl.lib.aclprofInit(long, len(long)) == 100000
    assert not sim.control().initialized()


def test_init_length_is_the_byte_length(acl: Acl, tmp_path: Path) -> None:
    path = str(tmp_path / "résultat")
    assert acl.lib.aclprofInit(path.encode(), len(path)) == 100000  # len(str) is the classic bug
    assert acl.init(path) == 0


def test_init_dynamic_mode_and_repeat(acl: Acl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFILING_MODE", "dynamic")
    assert acl.init(tmp_path) == 200006
    monkeypatch.delenv("PROFILING_MODE")
    assert acl.init(tmp_path) == 0
    assert acl.init(tmp_path) == 100002
    assert acl.finalize() == 0
    assert acl.init(tmp_path) == 0  # init/finalize pairs may repeat


def test_init_creates_relative_dirs(acl: Acl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert acl.init("a/b/c") == 0
    for part in ("a", "a/b", "a/b/c"):
        assert stat.S_IMODE((tmp_path / part).stat().st_mode) == 0o750
    cfg = acl.config([0])
    assert acl.start(cfg) == 0
    assert len(prof_dirs(tmp_path / "a/b/c")) == 1


def test_init_invalid_file(acl: Acl, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert acl.init(blocker) == 100003
    assert acl.init(blocker / "below") == 100003
    assert not sim.control().initialized()


def test_finalize_and_set_config(acl: Acl, tmp_path: Path) -> None:
    assert acl.finalize() == 100043
    assert acl.lib.aclprofSetConfig(16, b"x", 1) == 100001
    assert acl.init(tmp_path) == 0
    assert acl.lib.aclprofSetConfig(16, b"x" * 257, 257) == 100000
    assert acl.lib.aclprofSetConfig(16, b"/tmp", 4) == 0
    assert acl.finalize() == 0
    assert acl.finalize() == 100043


def test_finalize_stops_running_devices_but_keeps_configs(acl: Acl, tmp_path: Path) -> None:
    assert acl.init(tmp_path) == 0
    cfg = acl.config([0, 1])
    assert acl.start(cfg) == 0
    assert sim.launch("k", device=1, count=4) == 4
    assert acl.finalize() == 0
    assert sim.control().running_devices() == []
    assert sim.control().live_configs() == 1
    (prof,) = prof_dirs(tmp_path)
    outcome = read_run(prof)
    assert isinstance(outcome, RawResult), outcome
    assert [(t.device, t.name, t.type) for t in outcome.tasks] == [(1, "k", "AI_CORE")] * 4
    assert acl.destroy(cfg) == 0


# ---------------------------------------------------------------------------------------------
# aclprofCreateConfig / DestroyConfig


@pytest.mark.parametrize(
    ("devices", "kwargs"),
    [
        ([0], {"events": 0x1234}),
        (None, {"count": 1}),
        (list(range(9)), {}),  # more than the 8 simulated devices
        ([8], {}),
        ([1, 1], {}),
        ([], {"types": TASK_TIME}),  # no devices needs MSPROFTX
    ],
)
def test_create_config_returns_null(acl: Acl, devices: list[int] | None, kwargs: dict[str, int]) -> None:
    assert acl.create(devices, **kwargs) is None
    assert sim.control().live_configs() == 0


@pytest.mark.parametrize("cann", ["8.0", "8.5", "9.0", "9.2"])
@pytest.mark.parametrize("metric", [9, -1, 7, 1000])
def test_create_config_does_not_check_the_metric(acl: Acl, cann: str, metric: int) -> None:
    sim.control().configure(cann=cann)
    assert acl.create([0], metric=metric) is not None  # real CANN looks at it at start, if ever
    assert sim.control().live_configs() == 1


def test_create_config_limits(acl: Acl) -> None:
    control = sim.control()
    control.set_device_count(64)
    assert acl.create(list(range(64))) is not None
    assert acl.create(list(range(64)), count=65) is None
    control.set_device_count(2)
    assert acl.create([2]) is None
    assert acl.create([0, 1], metric=0xFF) is not None
    assert acl.create([], types=MSPROFTX) is not None
    assert control.live_configs() == 3


def test_destroy_config_fails_only_on_null(acl: Acl) -> None:
    control = sim.control()
    cfg = acl.config([0])
    assert acl.destroy(None) == 100000
    assert control.invalid_destroys() == 0
    # CANN frees whatever it is given: an unknown pointer or a second destroy returns 0 there
    # (and is a double free); the simulator returns 0, frees nothing and counts it.
    assert acl.destroy(cfg + 8) == 0
    assert control.live_configs() == 1 and control.invalid_destroys() == 1
    assert acl.destroy(cfg) == 0
    assert control.live_configs() == 0 and control.invalid_destroys() == 1
    assert acl.destroy(cfg) == 0
    assert control.invalid_destroys() == 2
    control.reset()
    assert control.invalid_destroys() == 0


# ---------------------------------------------------------------------------------------------
# aclprofStart / Stop


def test_start_errors(acl: Acl, tmp_path: Path) -> None:
    cfg = acl.config([0])
    assert acl.start(cfg) == 100043
    assert acl.init(tmp_path) == 0
    assert acl.start(None) == 100000
    assert acl.start(cfg + 16) == 100000
    sim.control().set_cmd_mode(True)
    assert acl.start(cfg) == 100042
    sim.control().set_cmd_mode(False)
    assert acl.start(acl.config([0], types=TASK_TIME | 0x400)) == 200007
    assert acl.start(acl.config([0], types=TASK_TIME | (1 << 40))) == 200007
    dead = acl.config([0])
    assert acl.destroy(dead) == 0
    assert acl.start(dead) == 100000
    assert prof_dirs(tmp_path) == []
    assert acl.start(cfg) == 0
    assert acl.start(acl.config([1, 0])) == 100042  # device 0 already started
    assert sim.control().running_devices() == [0]


def test_stop_errors(acl: Acl, tmp_path: Path) -> None:
    cfg = acl.config([0])
    assert acl.stop(cfg) == 100043
    assert acl.init(tmp_path) == 0
    assert acl.stop(cfg) == 100000  # nothing running
    assert acl.start(cfg) == 0
    assert acl.stop(None) == 100000
    assert acl.stop(acl.config([0], types=TASK_TIME_L0)) == 100010
    assert sim.control().running_devices() == [0]
    assert acl.stop(cfg) == 0
    assert acl.stop(cfg) == 100000


def test_stop_of_other_device_config_is_invalid_param(acl: Acl, tmp_path: Path) -> None:
    assert acl.init(tmp_path) == 0
    cfg = acl.config([0])
    assert acl.start(cfg) == 0
    assert acl.stop(acl.config([1])) == 100000
    assert sim.control().running_devices() == [0]


def test_create_config_adds_task_time_l0(acl: Acl, tmp_path: Path) -> None:
    assert acl.init(tmp_path) == 0
    cfg = acl.config([0], types=TASK_TIME | AICORE_METRICS)
    assert acl.start(cfg) == 0
    # stop with the explicit L0|L1 value matches what the device was started with
    assert acl.stop(acl.config([0], types=TASK_TIME | AICORE_METRICS | TASK_TIME_L0)) == 0
    (prof,) = prof_dirs(tmp_path)
    sample = json.loads((prof / "device_0" / "sample.json").read_text())
    # CANN also ORs its internal PROF_AICPU_MODEL bit into every config
    assert sample["dataTypeConfig"] == TASK_TIME | AICORE_METRICS | TASK_TIME_L0 | PROF_AICPU_MODEL
    assert sample["aicoreMetrics"] == PIPE_UTILIZATION
    assert sample["taskTime"] == "on" and sample["prof_level"] == "level1"  # as real runs spell it
    assert sample["ai_core_metrics"] == "PipeUtilizationExct" and sample["aiv_metrics"] == "PipeUtilization"


def test_prof_dir_layout(acl: Acl, tmp_path: Path) -> None:
    assert acl.init(tmp_path) == 0
    cfg = acl.config([0, 2])
    for _ in range(2):
        assert acl.start(cfg) == 0
        assert acl.stop(cfg) == 0
    assert acl.finalize() == 0
    assert acl.init(tmp_path) == 0
    assert acl.start(cfg) == 0
    assert acl.stop(cfg) == 0
    names = [p.name for p in prof_dirs(tmp_path)]
    matches = [PROF_NAME.match(name) for name in names]
    assert all(matches), names
    counters = [int(m.group(1)) for m in matches if m]
    assert counters == sorted(counters) and len(set(counters)) == 3  # never reset by finalize
    assert all(m.group(3) == f"{os.getpid():08d}" for m in matches if m)
    prof = prof_dirs(tmp_path)[-1]
    assert sorted(p.name for p in prof.iterdir()) == ["device_0", "device_2", "host"]
    host_files = ("info.json", "sample.json", "start_info", "end_info", "host_start.log")
    host_data = ("api_event.data", "compact.node_basic_info", "compact.task_track")
    for name in (*host_files, *(f"data/aging.{kind}.slice_0" for kind in host_data)):
        assert (prof / "host" / name).is_file(), name
        assert (prof / "host" / f"{name}.done").is_file(), name
    device_files = (
        "info.json.2",
        "start_info.2",
        "end_info.2",
        "sample.json",
        "dev_start.log.2",
        "host_start.log.2",
    )
    for name in (*device_files, "data/stars_soc.data.2.slice_0"):
        assert (prof / "device_2" / name).is_file(), name
    for path in [prof, *prof.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o750 if path.is_dir() else 0o640), path
    info = json.loads((prof / "device_2" / "info.json.2").read_text())
    assert info["devices"] == "2"


def test_msproftx_only_config_makes_a_host_only_dir(acl: Acl, tmp_path: Path) -> None:
    assert acl.init(tmp_path) == 0
    cfg = acl.create([], types=MSPROFTX)
    assert acl.start(cfg) == 0
    assert acl.stop(cfg) == 0
    assert acl.stop(cfg) == 100000
    (prof,) = prof_dirs(tmp_path)
    assert [p.name for p in prof.iterdir()] == ["host"]


# ---------------------------------------------------------------------------------------------
# Overlapping collections


def test_overlap_85_second_dir_has_no_host_and_loses_names(acl: Acl, tmp_path: Path) -> None:
    assert acl.init(tmp_path) == 0
    a, b = acl.config([0]), acl.config([1])
    assert acl.start(a) == 0
    assert acl.start(b) == 0  # 8.5 accepts the overlap
    prof_a, prof_b = prof_dirs(tmp_path)
    assert (prof_a / "host").is_dir() and not (prof_b / "host").exists()
    assert sim.launch("early", device=0, count=2) == 2
    assert sim.launch("early_b", device=1, count=2) == 2
    assert acl.stop(a) == 0
    assert sim.launch("late_b", device=1, count=3) == 3
    assert acl.stop(b) == 0
    assert acl.finalize() == 0
    assert export(tmp_path).returncode == 0
    (op_a,) = outputs(prof_a, "op_summary_*.csv")
    assert [r["Op Name"] for r in read_rows(op_a)] == ["early", "early"]
    # No host data: as the real exporter, task_time only, kernels named N/A with their SQE type.
    assert outputs(prof_b, "op_summary_*.csv") == []
    (task_b,) = outputs(prof_b, "task_time_*.csv")
    rows_b = [r for r in read_rows(task_b) if r["kernel_type"] == "AI_CORE"]
    assert len(rows_b) == 5 and {r["kernel_name"] for r in rows_b} == {"N/A"}


def test_overlap_85_host_cut_by_first_stop(acl: Acl, tmp_path: Path) -> None:
    assert acl.init(tmp_path) == 0
    a, b = acl.config([0]), acl.config([1])
    assert acl.start(a) == 0
    assert acl.start(b) == 0
    assert acl.stop(b) == 0  # the second collection stops first: the owner's host stream is cut
    assert sim.launch("after_cut", device=0) == 1
    assert acl.stop(a) == 0
    assert export(prof_dirs(tmp_path)[0]).returncode == 0
    # The kernel's name never reached the host: no op_summary row (as the real exporter), and
    # task_time lists it unnamed with its SQE type.
    assert outputs(prof_dirs(tmp_path)[0], "op_summary_*.csv") == []
    (task_a,) = outputs(prof_dirs(tmp_path)[0], "task_time_*.csv")
    assert [r["kernel_name"] for r in read_rows(task_a) if r["kernel_type"] == "AI_CORE"] == ["N/A"]


def test_overlap_85_different_types_stop_fails_until_finalize(acl: Acl, tmp_path: Path) -> None:
    assert acl.init(tmp_path) == 0
    a = acl.config([0])
    b = acl.config([1], types=TASK_TIME | AICORE_METRICS)
    assert acl.start(a) == 0
    assert acl.start(b) == 0
    assert acl.stop(b) == 100010  # the host still carries a's data types
    assert acl.stop(a) == 0
    assert acl.stop(b) == 100010
    assert sim.control().running_devices() == [1]
    assert acl.finalize() == 0
    assert sim.control().running_devices() == []
    assert (prof_dirs(tmp_path)[1] / "device_1" / "end_info.1").is_file()


def test_overlap_9x_second_start_is_a_no_op(acl: Acl, tmp_path: Path) -> None:
    control = sim.control()
    control.set_cann("9.x")
    assert acl.init(tmp_path) == 0
    a, b = acl.config([0]), acl.config([1])
    assert acl.start(a) == 0
    assert acl.start(b) == 0
    assert len(prof_dirs(tmp_path)) == 1
    assert control.running_devices() == [0]
    assert sim.launch("k", device=1) == 0  # device 1 never started
    assert acl.start(acl.config([1], types=TASK_TIME_L0)) == 100010
    assert acl.start(a) == 0  # even the same config again is a silent no-op
    assert acl.stop(b) == 0  # any stop stops every running device
    assert control.running_devices() == []
    assert acl.stop(a) == 0
    assert acl.start(b) == 0  # the flag was cleared: a real start again
    assert control.running_devices() == [1]
    assert len(prof_dirs(tmp_path)) == 2


def test_overlap_9x_stop_stops_everything(acl: Acl, tmp_path: Path) -> None:
    sim.control().set_cann("9.x")
    assert acl.init(tmp_path) == 0
    a = acl.config([0, 1])
    assert acl.start(a) == 0
    assert acl.stop(acl.config([0])) == 0
    assert sim.control().running_devices() == []
