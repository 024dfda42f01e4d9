"""The synchronous facade end to end on the simulated toolkit."""

from __future__ import annotations

import ctypes
import os
import re
import threading
from pathlib import Path

import pytest

from asc_aprof import (
    AclError,
    AicoreMetrics,
    ExportError,
    MsprofInterface,
    Profiler,
    ProfileType,
    ProfilingTask,
    Toolkit,
    ToolkitNotFoundError,
    UsageError,
    discover_toolkit,
    sim,
    task_time_median,
)
from asc_aprof._collector import get_collector
from asc_aprof._paths import default_result_root
from asc_aprof.sim import SimControl


def test_spec_example_returns_the_median_of_simulated_durations(toolkit: Toolkit) -> None:
    profiler = Profiler(toolkit=toolkit)
    with profiler.profile(metrics=AicoreMetrics.PIPE_UTILIZATION):
        for duration in (10.0, 30.0, 20.0, 50.0, 40.0):
            sim.launch("kernel", duration_us=duration)
        sim.launch("other", duration_us=99.0, task_type="AI_VECTOR_CORE")
    assert profiler.last_result is not None
    assert task_time_median(profiler.last_result.tasks, name="kernel") == 30.0
    assert task_time_median(profiler.last_result.tasks, name="kernel", skip=1) == 35.0
    assert [t.name for t in profiler.last_result.tasks].count("kernel") == 5
    assert profiler.last_result.stored_at.tzinfo is not None


def test_profile_yields_a_handle_with_the_result(toolkit: Toolkit, result_dir: Path) -> None:
    profiler = Profiler(result_dir, toolkit=toolkit)
    with profiler.profile(device_id=3) as run:
        sim.launch("k", device=3, duration_us=5.0, count=4)
    assert run.device == 3 and run.result is not None
    assert run.run_id is not None and re.match(r"PROF_\d{6}_\d{17}_", run.run_id)
    assert all(t.device == 3 and t.name == "k" for t in run.result.tasks)
    assert len(run.result.tasks) == 4
    # a user path is never deleted by cleanup=True
    assert (result_dir / run.run_id).is_dir()
    assert profiler.cleanup() == []
    assert (result_dir / run.run_id).is_dir()


def test_default_root_runs_are_cleaned_up(toolkit: Toolkit) -> None:
    profiler = Profiler(toolkit=toolkit)
    with profiler.profile() as run:
        sim.launch("k")
    assert run.run_id is not None
    assert not (default_result_root() / run.run_id).exists()
    with profiler.profile(cleanup=False) as kept:
        sim.launch("k")
    assert kept.run_id is not None and (default_result_root() / kept.run_id).is_dir()
    assert profiler.cleanup() == [default_result_root() / kept.run_id]
    assert not (default_result_root() / kept.run_id).exists()


def test_raising_body_stops_collection_and_propagates_unchanged(toolkit: Toolkit, simctl: SimControl) -> None:
    profiler = Profiler(toolkit=toolkit)

    class Boom(Exception):
        pass

    boom = Boom("kernel crashed")
    with pytest.raises(Boom) as info, profiler.profile():
        sim.launch("k")
        assert simctl.running_devices() == [0]
        raise boom
    assert info.value is boom
    assert simctl.running_devices() == [] and simctl.live_configs() == 0
    assert not simctl.initialized()
    assert profiler.last_result is None


def test_manual_start_stop_export_store(toolkit: Toolkit, result_dir: Path, simctl: SimControl) -> None:
    profiler = Profiler(result_dir, toolkit=toolkit)
    profiler.start(device_id=1)
    assert simctl.running_devices() == [1]
    sim.launch("k", device=1, duration_us=7.0, count=3)
    profiler.stop()
    assert simctl.running_devices() == [] and not simctl.initialized()
    run_dir = profiler.export()
    result = profiler.store_last_result()
    assert result.run_id == run_dir.name
    assert [(t.name, t.duration, t.device) for t in result.tasks] == [("k", 7.0, 1)] * 3
    assert (
        profiler.store_result(run_dir.name) == result
        or profiler.store_result(run_dir.name).tasks == result.tasks
    )
    with pytest.raises(UsageError):
        profiler.stop()


def test_start_twice_and_nested_profile_are_usage_errors(toolkit: Toolkit) -> None:
    profiler = Profiler(toolkit=toolkit)
    profiler.start()
    with pytest.raises(UsageError, match="twice"):
        profiler.start()
    profiler.stop()
    with (
        profiler.profile(),
        pytest.raises(UsageError, match="nested"),
        Profiler(toolkit=toolkit).profile(device_id=1),
    ):
        pass


def test_two_profilers_with_their_own_paths(toolkit: Toolkit, tmp_path: Path) -> None:
    a, b = Profiler(tmp_path / "a", toolkit=toolkit), Profiler(tmp_path / "b", toolkit=toolkit)
    with a.profile() as ra:
        sim.launch("ka")
    with b.profile() as rb:
        sim.launch("kb")
    with a.profile() as ra2:
        sim.launch("ka2")
    assert ra.run_id and rb.run_id and ra2.run_id
    assert (tmp_path / "a" / ra.run_id).is_dir() and (tmp_path / "b" / rb.run_id).is_dir()
    assert [t.name for t in b.last_result.tasks] == ["kb"]  # type: ignore[union-attr]
    assert [t.name for t in a.last_result.tasks] == ["ka2"]  # type: ignore[union-attr]


def test_threads_profiling_different_devices_get_only_their_tasks(
    toolkit: Toolkit, simctl: SimControl
) -> None:
    simctl.set_latency(start=0.05)
    profiler = Profiler(toolkit=toolkit)
    results: dict[int, list[ProfilingTask]] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def worker(device: int) -> None:
        try:
            barrier.wait()
            for round_ in range(3):
                with profiler.profile(device_id=device) as run:
                    sim.launch(f"k{device}", device=device, count=device + 1 + round_)
                assert run.result is not None
                results.setdefault(device, []).extend(run.result.tasks)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(d,)) for d in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for device in range(4):
        assert {t.name for t in results[device]} == {f"k{device}"}
        assert {t.device for t in results[device]} == {device}
        assert len(results[device]) == 3 * (device + 1) + 3


@pytest.mark.parametrize(("layout", "header"), [("old", "8.5"), ("new", "9.0"), ("new", "8.5")])
def test_layouts_and_headers(simctl: SimControl, layout: str, header: str) -> None:
    profiler = Profiler(toolkit=sim.toolkit(layout=layout, header=header))
    with profiler.profile(device_id=2):
        sim.launch("k", device=2, duration_us=3.25, count=2)
    assert profiler.last_result is not None
    assert [(t.name, t.duration, t.device) for t in profiler.last_result.tasks] == [("k", 3.25, 2)] * 2


def test_missing_toolkit_error_lists_places_and_points_to_sim(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ASCEND_HOME_PATH", str(tmp_path / "nowhere"))
    monkeypatch.delenv("ASCEND_TOOLKIT_HOME", raising=False)
    with pytest.raises(ToolkitNotFoundError) as info:
        discover_toolkit()
    text = str(info.value)
    assert str(tmp_path / "nowhere" / "lib64" / "libmsprofiler.so") in text
    assert "$ASCEND_TOOLKIT_HOME (not set)" in text
    assert "/usr/local/Ascend/cann" in text and "ascend-toolkit/latest" in text
    assert "ASCEND_HOME_PATH" in text and "set_env.sh" in text and "asc_aprof.sim" in text
    with pytest.raises(ToolkitNotFoundError):
        Profiler().start()


def test_real_layout_under_ascend_home_path_is_found(
    monkeypatch: pytest.MonkeyPatch, sim_root: Path, simctl: SimControl
) -> None:
    monkeypatch.setenv("ASCEND_HOME_PATH", str(sim_root))
    found = discover_toolkit()
    assert found.library == (sim_root / "lib64" / "libmsprofiler.so").resolve()
    profiler = Profiler()  # no toolkit=: discovery, like real CANN
    with profiler.profile():
        sim.launch("kernel", duration_us=4.0, count=3)
    assert profiler.last_result is not None
    assert task_time_median(profiler.last_result.tasks, name="kernel") == 4.0


def test_simulate_env_selects_the_simulator(monkeypatch: pytest.MonkeyPatch, sim_root: Path) -> None:
    monkeypatch.setenv("ASC_APROF_SIMULATE", "1")
    assert discover_toolkit().library.parent.parent == sim_root.resolve() or "sim-" in str(
        discover_toolkit().library
    )


def test_bad_run_ids(toolkit: Toolkit, result_dir: Path, tmp_path: Path) -> None:
    profiler = Profiler(result_dir, toolkit=toolkit)
    with profiler.profile() as run:
        sim.launch("k")
    outside = tmp_path / "outside"
    (outside / "PROF_000001_20260101000000000_00000001AAAAAAAA").mkdir(parents=True)
    (result_dir / "PROF_999999_20260101000000000_00000001AAAAAAAA").symlink_to(
        outside / "PROF_000001_20260101000000000_00000001AAAAAAAA"
    )
    for bad in (
        "..",
        "../outside",
        str(outside),
        "PROF_999999_20260101000000000_00000001AAAAAAAA",
        "missing",
        "",
    ):
        with pytest.raises(UsageError):
            profiler.store_result(bad)
    assert run.run_id is not None
    assert profiler.store_result(run.run_id).tasks


def test_store_last_result_uses_start_time_not_name(toolkit: Toolkit, result_dir: Path) -> None:
    profiler = Profiler(result_dir, toolkit=toolkit)
    with profiler.profile(cleanup=False):
        sim.launch("newest")
    # another process's older run with a higher counter
    other = Profiler(result_dir, toolkit=toolkit)
    old = result_dir / "PROF_000042_20200101000000000_00000001AAAAAAAA"
    old.mkdir()
    assert other.store_last_result().tasks[0].name == "newest"


def test_export_error_keeps_raw_data_and_retry_succeeds(simctl: SimControl, result_dir: Path) -> None:
    failing = Profiler(result_dir, toolkit=sim.toolkit(export_fault="exit:3"))
    with pytest.raises(ExportError) as info, failing.profile() as run:
        sim.launch("k", count=2)
    assert info.value.returncode == 3
    assert "msprof.py" in " ".join(info.value.command)
    assert run.run_id is not None and str(result_dir / run.run_id) in str(info.value)
    retry = Profiler(result_dir, toolkit=sim.toolkit())
    retry.export(run.run_id)
    assert len(retry.store_result(run.run_id).tasks) == 2


def test_no_csv_is_an_explained_error(simctl: SimControl) -> None:
    profiler = Profiler(toolkit=sim.toolkit(export_fault="nocsv"))
    with pytest.raises(ExportError, match="exits 0 when it exported nothing"), profiler.profile():
        sim.launch("k")


def test_start_failure_leaves_nothing_running(toolkit: Toolkit, simctl: SimControl) -> None:
    simctl.inject("aclprofStart", 500005)
    profiler = Profiler(toolkit=toolkit)
    with pytest.raises(AclError) as info, profiler.profile():
        pytest.fail("body must not run")
    assert (info.value.code, info.value.symbol, info.value.function) == (
        500005,
        "ACL_ERROR_PROFILING_FAILURE",
        "aclprofStart",
    )
    with profiler.profile():
        sim.launch("k")
    assert profiler.last_result is not None and len(profiler.last_result.tasks) == 1


def test_stop_failure_still_destroys_and_finalizes(toolkit: Toolkit, simctl: SimControl) -> None:
    simctl.inject("aclprofStop", 500005)
    profiler = Profiler(toolkit=toolkit)
    with pytest.raises(AclError, match="aclprofStop"), profiler.profile():
        sim.launch("k")
    assert simctl.running_devices() == [] and simctl.live_configs() == 0 and not simctl.initialized()


def test_running_under_msprof_cli_is_explained(toolkit: Toolkit, simctl: SimControl) -> None:
    simctl.set_cmd_mode(True)
    with pytest.raises(AclError) as info, Profiler(toolkit=toolkit).profile():
        pass
    assert info.value.code == 100042 and "msprof command line" in info.value.hint


# -- the binding -------------------------------------------------------------------------------------


def test_binding_declares_every_prototype(toolkit: Toolkit) -> None:
    iface = MsprofInterface(toolkit)
    lib = iface._lib
    assert lib.aclprofCreateConfig.restype is ctypes.c_void_p
    assert lib.aclprofInit.argtypes == [ctypes.c_char_p, ctypes.c_size_t]
    for name in ("aclprofInit", "aclprofFinalize", "aclprofDestroyConfig", "aclprofStart", "aclprofStop"):
        assert getattr(lib, name).restype is ctypes.c_int


def test_binding_full_cycle_and_error_codes(toolkit: Toolkit, simctl: SimControl, tmp_path: Path) -> None:
    iface = MsprofInterface(toolkit)
    path = tmp_path / "résultats avec espaces"
    with pytest.raises(AclError) as info:
        iface.start(iface.create_config([0], AicoreMetrics.NONE, ProfileType.TASK_TIME))
    assert info.value.code == 100043
    simctl.reset()
    iface.init(path)  # non-ASCII: the byte length is passed
    with pytest.raises(AclError) as info:
        iface.init(path)
    assert info.value.symbol == "ACL_ERROR_REPEAT_INITIALIZE"
    config = iface.create_config(range(8), AicoreMetrics.PIPE_UTILIZATION, ProfileType.TASK_TIME)
    iface.start(config)
    assert simctl.running_devices() == list(range(8))
    other = iface.create_config([3], AicoreMetrics.PIPE_UTILIZATION, ProfileType.TASK_TIME)
    with pytest.raises(AclError) as info:
        iface.start(other)
    assert info.value.code == 100042
    different = iface.create_config(
        range(8), AicoreMetrics.PIPE_UTILIZATION, ProfileType.TASK_TIME | ProfileType.L2CACHE
    )
    with pytest.raises(AclError) as info:
        iface.stop(different)
    assert info.value.code == 100010
    iface.stop(config)
    for c in (config, other, different):
        iface.destroy_config(c)
    assert simctl.invalid_destroys() == 0  # each config destroyed once (twice is a double free on CANN)
    iface.finalize()
    with pytest.raises(AclError) as info:
        iface.finalize()
    assert info.value.code == 100043
    assert any(p.name.startswith("PROF_") for p in path.iterdir())


def test_binding_null_config_and_bad_bits(toolkit: Toolkit, simctl: SimControl, tmp_path: Path) -> None:
    iface = MsprofInterface(toolkit)
    for devices in ([0, 0], [99], []):
        with pytest.raises(AclError) as info:
            iface.create_config(devices, AicoreMetrics.PIPE_UTILIZATION, ProfileType.TASK_TIME)
        assert (info.value.code, info.value.function) == (100000, "aclprofCreateConfig")
        assert "duplicate" in info.value.hint
    iface.init(tmp_path)
    config = iface.create_config([0], AicoreMetrics.PIPE_UTILIZATION, 1 << 40)
    with pytest.raises(AclError) as info:
        iface.start(config)
    assert info.value.code == 200007
    iface.destroy_config(config)
    iface.finalize()


def test_binding_path_rules(toolkit: Toolkit, simctl: SimControl, tmp_path: Path) -> None:
    iface = MsprofInterface(toolkit)
    with pytest.raises(UsageError, match="4096"):
        iface.init(tmp_path / ("x" * 5000))
    a_file = tmp_path / "file"
    a_file.write_text("")
    with pytest.raises(AclError) as info:
        iface.init(a_file)
    assert info.value.code == 100003
    os.environ["PROFILING_MODE"] = "dynamic"
    try:
        with pytest.raises(AclError) as info:
            iface.init(tmp_path)
        assert info.value.code == 200006
    finally:
        del os.environ["PROFILING_MODE"]


def test_collector_finalizes_when_idle(toolkit: Toolkit, simctl: SimControl) -> None:
    profiler = Profiler(toolkit=toolkit)
    with profiler.profile():
        assert simctl.initialized()
    assert not simctl.initialized() and get_collector().idle()


def test_task_time_fallback_is_logged(
    toolkit: Toolkit, result_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    profiler = Profiler(result_dir, toolkit=toolkit)
    with profiler.profile(cleanup=False) as run:
        sim.launch("k", count=2)
    assert run.run_id is not None
    for csv_file in (result_dir / run.run_id).rglob("op_summary_*.csv"):
        csv_file.unlink()
    with caplog.at_level("WARNING", logger="asc_aprof"):
        result = profiler.store_result(run.run_id)
    assert [t.duration for t in result.tasks if t.type.startswith(("AI_", "KERNEL_"))] == [10.0, 10.0]
    assert "using task_time" in caplog.text


def test_long_campaign_forgets_finished_windows(toolkit: Toolkit, result_dir: Path) -> None:
    profiler = Profiler(result_dir, toolkit=toolkit)
    for i in range(70):
        profiler.start()
        sim.launch(f"k{i}")
        profiler.stop()
    assert len(profiler._windows) <= 65
    profiler.export()
    assert profiler.store_last_result().tasks[0].name == "k69"
