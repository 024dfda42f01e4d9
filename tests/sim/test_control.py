"""The simulator's build and public Python API: the toolkit tree, SimControl's knobs, launch."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import asc_aprof
from asc_aprof import sim
from asc_aprof._model._errors import AprofError
from asc_aprof._model._toolkit import Toolkit
from asc_aprof.sim import _build

from ._support import (
    Acl,
    prof_dirs,
)


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
        "ASC_APROF_SIM_EXPORT_TIME": "",
    }
    default = sim.toolkit().env
    assert default["ASC_APROF_SIM_EXPORT_FAULT"] == ""
    assert default["ASC_APROF_SIM_HEADER"] == ""  # the export follows the run's CANN version
    assert sim.toolkit(export_time=1.5e9).env["ASC_APROF_SIM_EXPORT_TIME"] == "1500000000.0"
    with pytest.raises(ValueError):
        sim.toolkit(layout="sideways")
    with pytest.raises(ValueError):
        sim.toolkit(header="7.0")
    with pytest.raises(ValueError):
        sim.toolkit(export_time=-1.0)


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
    monkeypatch.setenv("ASC_APROF_SIM_PREBUILT", "0")  # the run-time build, as without a wheel's library
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(sim.SimulatorBuildError, match="install gcc") as info:
        sim.root()
    assert isinstance(info.value, AprofError)
    assert str(info.value).startswith("no C compiler found to build the simulated libmsprofiler.so")
    monkeypatch.setenv("CC", "/nonexistent/cc")
    with pytest.raises(sim.SimulatorBuildError, match=r"^\$CC='/nonexistent/cc' is not an executable"):
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
    assert (prof / "device_3" / "data" / "stars_soc.data.3.slice_0").is_file()  # reset flushed the run


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


def test_launch_only_records_profiled_devices(
    acl: Acl, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sim, "_warned_unprofiled", False)
    caplog.set_level(logging.DEBUG, logger="asc_aprof.sim")
    assert sim.launch("k") == 0
    assert not caplog.records  # nothing profiled: running a kernel, nothing to say
    assert acl.init(tmp_path) == 0
    assert acl.start(acl.config([1])) == 0
    assert sim.launch("k", device=0, count=3) == 0
    assert sim.launch("k", device=0, count=2) == 0
    first, second = caplog.records
    assert first.levelno == logging.WARNING and "said once per process" in first.getMessage()
    assert "device 0 is not being profiled (profiled now: 1), so its 3 kernel(s)" in first.getMessage()
    assert second.levelno == logging.DEBUG  # once per process at WARNING, then quiet
    assert sim.launch("k", device=1, count=0) == 0  # nothing asked, nothing to say
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


def test_million_kernels_are_recorded(acl: Acl, tmp_path: Path) -> None:
    assert acl.init(tmp_path) == 0
    cfg = acl.config([0])
    assert acl.start(cfg) == 0
    assert sim.launch("bulk", duration_us=1.0, count=1_000_000) == 1_000_000
    assert acl.stop(cfg) == 0
    (prof,) = prof_dirs(tmp_path)
    # A start and an end stars_soc record per task, one launch and one runtime task per kernel
    # (task ids past 65535 continue on the next stream), one name.
    soc = prof / "device_0" / "data" / "stars_soc.data.0.slice_0"
    assert soc.stat().st_size == 64 * 2 * (1_000_000 + 3)
    assert (prof / "host" / "data" / "aging.api_event.data.slice_0").stat().st_size == 40 * 1_000_000
    track = prof / "host" / "data" / "aging.compact.task_track.slice_0"
    assert track.stat().st_size == 64 * (1_000_000 + 3)
    names = (prof / "host" / "data" / "unaging.additional.hash_dic.slice_0").read_text().splitlines()
    assert [line.split(":", 1)[1] for line in names] == ["bulk"]
