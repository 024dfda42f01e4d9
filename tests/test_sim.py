"""The simulated CANN toolkit: CANN's rules in the C library, real CSV shapes from msprof.py.

The library is driven through raw ctypes (not asc_aprof's binding) so these tests pin the
simulator itself.
"""

from __future__ import annotations

import csv
import ctypes
import io
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import asc_aprof
from asc_aprof import sim
from asc_aprof._errors import AprofError
from asc_aprof._toolkit import Toolkit
from asc_aprof.sim import _build

TASK_TIME = 0x2
AICORE_METRICS = 0x4
L2CACHE = 0x10
MSPROFTX = 0x80
TASK_TIME_L0 = 0x800
DEFAULT_TYPES = TASK_TIME | AICORE_METRICS | L2CACHE
PIPE_UTILIZATION = 1

PROF_NAME = re.compile(r"^PROF_(\d{6})_(\d{17})_(\d{8})([A-R]{8})$")
PIPE_HEADER_85 = (
    "Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,Task Start Time(us),"
    "Task Duration(us),Task Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,"
    "Input Data Types,Input Formats,Output Shapes,Output Data Types,Output Formats,Context ID,"
    "aicore_time(us),aic_total_cycles,aic_mac_time(us),aic_mac_ratio,aic_scalar_time(us),"
    "aic_scalar_ratio,aic_mte1_time(us),aic_mte1_ratio,aic_mte2_time(us),aic_mte2_ratio,"
    "aic_fixpipe_time(us),aic_fixpipe_ratio,aic_icache_miss_rate,aiv_time(us),aiv_total_cycles,"
    "aiv_vec_time(us),aiv_vec_ratio,aiv_scalar_time(us),aiv_scalar_ratio,aiv_mte2_time(us),"
    "aiv_mte2_ratio,aiv_mte3_time(us),aiv_mte3_ratio,aiv_icache_miss_rate,cube_utilization(%)"
)
TASK_TIME_HEADER = (
    "Device_id,kernel_name,kernel_type,stream_id,task_id,task_time(us),task_start(us),task_stop(us)"
)
SIM_ENV = (
    "ASC_APROF_SIM_LAYOUT",
    "ASC_APROF_SIM_HEADER",
    "ASC_APROF_SIM_SLICE_ROWS",
    "ASC_APROF_SIM_EXPORT_FAULT",
    "ASC_APROF_SIM_EXPORT_LATENCY_MS",
    "PROFILING_MODE",
)


class Acl:
    """The CANN prototypes over ctypes, exactly as a binding would declare them."""

    def __init__(self, library: Path) -> None:
        lib = ctypes.CDLL(str(library))
        c_int, c_void_p, c_size_t = ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t
        lib.aclprofInit.argtypes = [ctypes.c_char_p, c_size_t]
        lib.aclprofInit.restype = c_int
        lib.aclprofFinalize.argtypes = []
        lib.aclprofFinalize.restype = c_int
        lib.aclprofCreateConfig.argtypes = [
            ctypes.POINTER(ctypes.c_uint32),
            ctypes.c_uint32,
            c_int,
            c_void_p,
            ctypes.c_uint64,
        ]
        lib.aclprofCreateConfig.restype = c_void_p
        for name in ("aclprofDestroyConfig", "aclprofStart", "aclprofStop"):
            getattr(lib, name).argtypes = [c_void_p]
            getattr(lib, name).restype = c_int
        lib.aclprofSetConfig.argtypes = [c_int, ctypes.c_char_p, c_size_t]
        lib.aclprofSetConfig.restype = c_int
        self.lib = lib

    def init(self, path: str | os.PathLike[str]) -> int:
        raw = os.fsencode(path)
        return int(self.lib.aclprofInit(raw, len(raw)))

    def create(
        self,
        devices: Sequence[int] | None,
        types: int = DEFAULT_TYPES,
        metric: int = PIPE_UTILIZATION,
        *,
        count: int | None = None,
        events: int | None = None,
    ) -> int | None:
        array = None if devices is None else (ctypes.c_uint32 * max(len(devices), 1))(*devices)
        n = count if count is not None else len(devices or ())
        value = self.lib.aclprofCreateConfig(array, n, metric, events, types)
        return int(value) if value else None

    def config(
        self, devices: Sequence[int], types: int = DEFAULT_TYPES, metric: int = PIPE_UTILIZATION
    ) -> int:
        cfg = self.create(devices, types, metric)
        assert cfg is not None
        return cfg

    def start(self, cfg: int | None) -> int:
        return int(self.lib.aclprofStart(cfg))

    def stop(self, cfg: int | None) -> int:
        return int(self.lib.aclprofStop(cfg))

    def destroy(self, cfg: int | None) -> int:
        return int(self.lib.aclprofDestroyConfig(cfg))

    def finalize(self) -> int:
        return int(self.lib.aclprofFinalize())


@pytest.fixture(scope="session")
def acl() -> Acl:
    return Acl(sim.root() / "lib64" / "libmsprofiler.so")


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in SIM_ENV:
        monkeypatch.delenv(name, raising=False)
    sim.control().reset()
    yield
    sim.control().reset()


def prof_dirs(base: Path) -> list[Path]:
    return sorted(base.glob("PROF_*"))


def collect(
    acl: Acl, base: Path, devices: Sequence[int] = (0,), types: int = DEFAULT_TYPES, **launch: object
) -> Path:
    """One complete init → start → launch → stop → finalize run; returns its PROF dir."""
    assert acl.init(base) == 0
    cfg = acl.config(devices, types)
    assert acl.start(cfg) == 0
    for device in devices:
        assert sim.launch("Addcmul", device=device, **launch) > 0  # type: ignore[arg-type]
    assert acl.stop(cfg) == 0
    assert acl.destroy(cfg) == 0
    assert acl.finalize() == 0
    (prof,) = prof_dirs(base)
    return prof


def export(
    target: Path, kind: str = "summary", env: dict[str, str] | None = None, *extra: str
) -> subprocess.CompletedProcess[str]:
    script = sim.root() / "tools/profiler/profiler_tool/analysis/msprof/msprof.py"
    return subprocess.run(
        [sys.executable, str(script), "export", kind, "-dir", str(target), *extra],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def outputs(prof: Path, pattern: str) -> list[Path]:
    return sorted((prof / "mindstudio_profiler_output").glob(pattern))


def read_rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as file:
        return list(csv.DictReader(file))


# ---------------------------------------------------------------------------------------------
# Build and public API


def test_import_builds_nothing(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = {
        **os.environ,
        "ASC_APROF_SIM_CACHE": str(cache),
        "PYTHONPATH": str(Path(asc_aprof.__file__).parents[1]),
    }
    subprocess.run([sys.executable, "-c", "import asc_aprof.sim"], env=env, check=True, timeout=60)
    assert not cache.exists()


def test_toolkit_tree_looks_like_cann() -> None:
    root = sim.root()
    assert root.name == f"sim-{_build.source_hash()}"
    assert (root / "lib64" / "libmsprofiler.so").is_file()
    assert "def main" in (root / "tools/profiler/profiler_tool/analysis/msprof/msprof.py").read_text()
    assert f"export ASCEND_HOME_PATH={root}" in (root / "set_env.sh").read_text()
    found = Toolkit.from_root(root)
    assert found.library == (root / "lib64" / "libmsprofiler.so").resolve()


def test_toolkit_env_carries_export_settings() -> None:
    kit = sim.toolkit(
        layout="old", header="9.0", export_latency=0.25, export_fault="nocsv", python="/x/python"
    )
    assert kit.python == "/x/python"
    assert kit.library.is_file() and kit.msprof_script.name == "msprof.py"
    assert kit.env == {
        "ASC_APROF_SIM_LAYOUT": "old",
        "ASC_APROF_SIM_HEADER": "9.0",
        "ASC_APROF_SIM_EXPORT_LATENCY_MS": "250.0",
        "ASC_APROF_SIM_EXPORT_FAULT": "nocsv",
    }
    assert sim.toolkit().env["ASC_APROF_SIM_EXPORT_FAULT"] == ""
    with pytest.raises(ValueError):
        sim.toolkit(layout="sideways")
    with pytest.raises(ValueError):
        sim.toolkit(header="7.0")


def test_concurrent_builds_share_one_tree(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = {
        **os.environ,
        "ASC_APROF_SIM_CACHE": str(cache),
        "PYTHONPATH": str(Path(asc_aprof.__file__).parents[1]),
    }
    code = "from asc_aprof import sim; print(sim.root())"
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    roots = {proc.communicate(timeout=120)[0].strip() for proc in procs}
    assert all(proc.returncode == 0 for proc in procs)
    assert len(roots) == 1
    assert [p.name for p in cache.iterdir()] == [f"sim-{_build.source_hash()}"]  # no temp dirs left


def test_missing_compiler_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASC_APROF_SIM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(sim.SimulatorBuildError, match="install gcc") as info:
        sim.root()
    assert isinstance(info.value, AprofError)
    monkeypatch.setenv("CC", "/nonexistent/cc")
    with pytest.raises(sim.SimulatorBuildError, match="gcc"):
        sim.root()


def test_control_shares_state_with_the_raw_library(acl: Acl, tmp_path: Path) -> None:
    control = sim.control()
    assert not control.initialized()
    assert acl.init(tmp_path) == 0
    assert control.initialized()
    cfg = acl.config([0, 3])
    assert control.live_configs() == 1
    assert acl.start(cfg) == 0
    assert control.running_devices() == [0, 3]
    control.reset()
    assert not control.initialized() and control.live_configs() == 0 and control.running_devices() == []
    (prof,) = prof_dirs(tmp_path)
    assert (prof / "device_3" / "data" / "aprofsim_tasks.data").is_file()  # reset flushed the run


def test_control_rejects_bad_values() -> None:
    control = sim.control()
    with pytest.raises(ValueError):
        control.set_cann("10")
    with pytest.raises(ValueError):
        control.inject("aclprofNope", 1)
    with pytest.raises(ValueError):
        control.set_device_count(65)
    with pytest.raises(ValueError):
        control.set_latency(start=-1.0)


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
    lines = (prof / "device_1" / "data" / "aprofsim_tasks.data").read_text().splitlines()
    assert [line.split()[-1] for line in lines[1:]].count("AI_CORE") == 4
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
        ([0], {"metric": 9}),
        ([0], {"metric": -1}),
    ],
)
def test_create_config_returns_null(acl: Acl, devices: list[int] | None, kwargs: dict[str, int]) -> None:
    assert acl.create(devices, **kwargs) is None
    assert sim.control().live_configs() == 0


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


def test_destroy_config(acl: Acl) -> None:
    cfg = acl.config([0])
    assert acl.destroy(None) == 100000
    assert acl.destroy(cfg + 8) == 100000  # an unknown pointer is detected, not dereferenced
    assert acl.destroy(cfg) == 0
    assert acl.destroy(cfg) == 100000
    assert sim.control().live_configs() == 0


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
    assert acl.start(acl.config([0], types=0)) == 100000
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
    assert sample["dataTypeConfig"] == TASK_TIME | AICORE_METRICS | TASK_TIME_L0
    assert sample["aicoreMetrics"] == PIPE_UTILIZATION and sample["taskTime"] == "l1"


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
    for name in ("info.json", "start_info", "end_info", "data/aprofsim_names.data"):
        assert (prof / "host" / name).is_file(), name
        assert (prof / "host" / f"{name}.done").is_file(), name
    for name in ("info.json.2", "start_info.2", "end_info.2", "sample.json", "data/aprofsim_tasks.data"):
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
    (op_b,) = outputs(prof_b, "op_summary_*.csv")
    rows_b = read_rows(op_b)
    assert len(rows_b) == 5
    assert {r["Op Name"] for r in rows_b} == {"N/A"} and {r["OP Type"] for r in rows_b} == {"N/A"}
    assert {r["Task Type"] for r in rows_b} == {"AI_CORE"}


def test_overlap_85_host_cut_by_first_stop(acl: Acl, tmp_path: Path) -> None:
    assert acl.init(tmp_path) == 0
    a, b = acl.config([0]), acl.config([1])
    assert acl.start(a) == 0
    assert acl.start(b) == 0
    assert acl.stop(b) == 0  # the second collection stops first: the owner's host stream is cut
    assert sim.launch("after_cut", device=0) == 1
    assert acl.stop(a) == 0
    assert export(prof_dirs(tmp_path)[0]).returncode == 0
    (op_a,) = outputs(prof_dirs(tmp_path)[0], "op_summary_*.csv")
    assert [r["Op Name"] for r in read_rows(op_a)] == ["N/A"]


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


# ---------------------------------------------------------------------------------------------
# Fault injection, latency, launch


def test_injected_start_fault(acl: Acl, tmp_path: Path) -> None:
    control = sim.control()
    assert acl.init(tmp_path) == 0
    cfg = acl.config([0])
    control.inject("aclprofStart", 500005, times=2)
    assert acl.start(cfg) == 500005
    assert acl.start(cfg) == 500005
    assert prof_dirs(tmp_path) == []
    assert acl.start(cfg) == 0


def test_injected_create_config_fault(acl: Acl) -> None:
    sim.control().inject("aclprofCreateConfig", 1)
    assert acl.create([0]) is None
    assert acl.create([0]) is not None


def test_failed_stop_leaves_devices_running_and_finalize_recovers(acl: Acl, tmp_path: Path) -> None:
    control = sim.control()
    assert acl.init(tmp_path) == 0
    cfg = acl.config([0])
    assert acl.start(cfg) == 0
    control.inject("aclprofStop", 500005)
    assert acl.stop(cfg) == 500005
    assert control.running_devices() == [0]
    control.inject("aclprofFinalize", 507021)
    assert acl.finalize() == 507021
    assert control.initialized()
    assert acl.finalize() == 0
    assert control.running_devices() == [] and not control.initialized()


def test_clear_faults_and_other_functions(acl: Acl, tmp_path: Path) -> None:
    control = sim.control()
    control.inject("aclprofInit", 100003, times=5)
    control.inject("aclprofDestroyConfig", 1)
    control.inject("aclprofSetConfig", 2)
    cfg = acl.config([0])
    assert acl.destroy(cfg) == 1
    assert control.live_configs() == 1
    control.clear_faults()
    assert acl.init(tmp_path) == 0
    assert acl.lib.aclprofSetConfig(16, b"x", 1) == 0


def test_modelled_latency(acl: Acl, tmp_path: Path) -> None:
    sim.control().set_latency(init=0.05, start=0.15)
    began = time.monotonic()
    assert acl.init(tmp_path) == 0
    assert acl.start(acl.config([0])) == 0
    assert time.monotonic() - began >= 0.2


def test_launch_only_records_profiled_devices(acl: Acl, tmp_path: Path) -> None:
    assert sim.launch("k") == 0
    assert acl.init(tmp_path) == 0
    assert acl.start(acl.config([1])) == 0
    assert sim.launch("k", device=0) == 0
    assert sim.launch("k", device=1, count=0) == 0
    assert sim.launch("k", device=1, count=7) == 7


@pytest.mark.parametrize(
    "kwargs",
    [
        {"name": ""},
        {"name": "a\nb"},
        {"task_type": "GPU"},
        {"duration_us": 0.0},
        {"duration_us": float("nan")},
        {"device": 8},
    ],
)
def test_launch_rejects_bad_arguments(kwargs: dict[str, object]) -> None:
    arguments: dict[str, object] = {"name": "k", **kwargs}
    with pytest.raises(ValueError):
        sim.launch(**arguments)  # type: ignore[arg-type]


def test_million_kernels_are_fast(acl: Acl, tmp_path: Path) -> None:
    assert acl.init(tmp_path) == 0
    cfg = acl.config([0])
    assert acl.start(cfg) == 0
    began = time.monotonic()
    assert sim.launch("bulk", duration_us=1.0, count=1_000_000) == 1_000_000
    assert time.monotonic() - began < 0.5
    assert acl.stop(cfg) == 0
    (prof,) = prof_dirs(tmp_path)
    names = (prof / "host" / "data" / "aprofsim_names.data").read_text().splitlines()
    assert names[1].split("\t")[:6] == ["0", "2", "0", "1000000", "AI_CORE", "bulk"]


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
    first = lines[1]
    assert (
        ',"""8,2048;8,2048""",FLOAT16;FLOAT16,FORMAT_ND;FORMAT_ND,"""8,2048""",FLOAT16,FORMAT_ND,N/A,'
        in first
    )
    rows = read_rows(op_path)
    assert len(rows) == 3 and all(len(r) == 46 for r in rows)
    row = rows[0]
    assert row["Device_id"] == "0" and row["Model ID"] == "4294967295" and row["Op Name"] == "Addcmul"
    assert row["Task Type"] == "AI_VECTOR_CORE" and row["OP State"] == "dynamic"
    assert row["Input Shapes"] == '"8,2048;8,2048"'  # literal quotes survive parsing
    assert row["Block Dim"] == "40" and row["Task Duration(us)"] == "18.542"
    assert re.fullmatch(r"\d{16}\.\d{3}\t", row["Task Start Time(us)"])
    assert rows[0]["Task Wait Time(us)"] == "0" and re.fullmatch(r"\d+\.\d{6}", rows[1]["Task Wait Time(us)"])
    assert float(row["aiv_time(us)"]) > 0 and row["aicore_time(us)"] == "0.0"
    # start times are the device's exact ns, formatted without float rounding
    tasks = (prof / "device_0" / "data" / "aprofsim_tasks.data").read_text().splitlines()[1:]
    kernel_ns = [line.split()[2] for line in tasks if line.endswith("AI_VECTOR_CORE")]
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
    assert rows[1]["kernel_name"] == "Addcmul" and rows[1]["task_time(us)"] == "10.000"
    assert rows[1]["task_start(us)"].endswith("\t") and rows[1]["task_stop(us)"].endswith("\t")
    start = int(rows[1]["task_start(us)"].strip().replace(".", ""))
    stop = int(rows[1]["task_stop(us)"].strip().replace(".", ""))
    assert stop - start == 10_000
    (op_path,) = outputs(prof, "op_summary_*.csv")
    op = read_rows(op_path)[0]
    assert op["Context ID"] == "0" and op["Mix Block Dim"] == "2"


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
    prof = collect(acl, tmp_path, types=0x1)
    result = export(prof)
    assert result.returncode == 0
    assert "WARNING" in result.stderr
    assert not (prof / "mindstudio_profiler_output").exists()


def test_run_without_kernels_lists_placeholders(acl: Acl, tmp_path: Path) -> None:
    assert acl.init(tmp_path) == 0
    cfg = acl.config([0])
    assert acl.start(cfg) == 0
    assert acl.stop(cfg) == 0
    (prof,) = prof_dirs(tmp_path)
    assert export(prof).returncode == 0
    (op_path,) = outputs(prof, "op_summary_*.csv")
    rows = read_rows(op_path)
    assert len(rows[0]) == 12 and {r["Task Type"] for r in rows} == {"PLACE_HOLDER_SQE"}


def test_parent_dir_exports_every_prof(acl: Acl, tmp_path: Path) -> None:
    assert acl.init(tmp_path / "runs") == 0
    cfg = acl.config([0])
    for _ in range(2):
        assert acl.start(cfg) == 0
        assert sim.launch("k") == 1
        assert acl.stop(cfg) == 0
    assert export(tmp_path).returncode == 0
    for prof in prof_dirs(tmp_path / "runs"):
        assert len(outputs(prof, "op_summary_*.csv")) == 1


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
    assert header.endswith("icache_miss_rate,memory_bound")
    row = read_rows(op_path)[0]
    assert re.fullmatch(r"\d{16}\.\d{3}", row["Task Start Time"]) and row["Input Shapes"] == "4,4"
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
    assert result.returncode == 2
    assert "usage" in result.stderr


@pytest.mark.parametrize("bad", [";", "$", "`", "'", "\\", "|", "%"])
def test_rejected_path_characters(tmp_path: Path, bad: str) -> None:
    target = tmp_path / f"a{bad}b"
    target.mkdir()
    result = export(target)
    assert result.returncode == 1
    assert "invalid character" in result.stderr


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
    assert result.returncode == 7 and "simulated export failure" in result.stderr
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
    assert result.returncode == 0 and "WARNING" in result.stderr
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
    log = tmp_path / "stderr.txt"
    with open(log, "w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, str(script), "export", "summary", "-dir", str(prof)],
            env={**os.environ, "ASC_APROF_SIM_EXPORT_FAULT": "hang"},
            stdout=subprocess.DEVNULL,
            stderr=stderr,
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


def test_million_kernels_export_in_seconds(acl: Acl, tmp_path: Path) -> None:
    assert acl.init(tmp_path) == 0
    cfg = acl.config([0])
    assert acl.start(cfg) == 0
    assert sim.launch("bulk", duration_us=1.0, count=1_000_000) == 1_000_000
    assert acl.stop(cfg) == 0
    (prof,) = prof_dirs(tmp_path)
    began = time.monotonic()
    result = export(prof)
    elapsed = time.monotonic() - began
    assert result.returncode == 0, result.stderr
    assert elapsed < 20  # a few seconds normally; generous for loaded CI machines
    (op_path,) = outputs(prof, "op_summary_*.csv")  # exactly the 1,000,000-row limit: one file
    with open(op_path, "rb") as file:
        assert sum(1 for _ in file) == 1_000_000 + 1
    slices = outputs(prof, "task_time_slice_*.csv")  # 3 control rows more: sliced
    assert len(slices) == 2
    total = 0
    for path in slices:
        with open(path, "rb") as file:
            total += sum(1 for _ in file) - 1
    assert total == 1_000_003
