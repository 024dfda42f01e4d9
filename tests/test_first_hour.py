"""What a new user trips over in the first hour: each error says what to fix, each surprise is said.

Runs deleted by ``cleanup=True`` are named as such; the temporary root does not outlive the
process; ``stop()`` hands back the run; a broken progress callback is logged once; a collection
in which no kernel ran says so; a kernel-name typo lists the kernels there are; the toolkit
search says what to do first.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from asc_aprof import (
    AicoreMetrics,
    AsyncProfiler,
    InvalidArgumentError,
    Profiler,
    ProfileRun,
    ProfilingTask,
    ProgressEvent,
    Toolkit,
    ToolkitNotFoundError,
    UsageError,
    discover_toolkit,
    open_run,
    sim,
    task_time_median,
)
from asc_aprof._model._errors import NoSamplesError
from asc_aprof.sim import SimControl

KEEP_HINT = (
    "Runs in the library's temporary root last at most until the process exits (the root is removed "
    "then): to read a run again, pass cleanup=False; to keep it, give the profiler a result_path "
    "(runs in a path you give are never deleted)"
)
BY_CLEANUP_TRUE = "cleanup=True (the default of profile() and sweep()), after its result was parsed"


# -- runs deleted by the library -----------------------------------------------------------------
def test_a_run_deleted_by_cleanup_true_says_so(toolkit: Toolkit) -> None:
    profiler = Profiler(toolkit=toolkit)
    with profiler.profile() as run:
        sim.launch("add_custom", count=2)
    assert run.run_id is not None and run.run_dir is not None and not run.run_dir.exists()
    expected = (
        f"run {run.run_id!r} is gone from {profiler.result_path}: it was deleted by {BY_CLEANUP_TRUE}. "
        f"{KEEP_HINT}"
    )
    for look_up in (profiler.store_result, profiler.export):
        with pytest.raises(UsageError) as info:
            look_up(run.run_id)
        assert str(info.value) == expected
    with pytest.raises(UsageError, match=r"^no run 'PROF_000001_20300101000000000_00000001AAAAAAAA' in "):
        profiler.store_result("PROF_000001_20300101000000000_00000001AAAAAAAA")  # never existed


def test_store_last_result_after_cleanup_true_says_so(sim_root: Path) -> None:
    # a process of its own: the temporary root holds only this profiler's (deleted) run
    code = (
        "from asc_aprof import Profiler, UsageError, sim\n"
        "profiler = Profiler(toolkit=sim.toolkit())\n"
        "with profiler.profile() as run:\n"
        "    sim.launch('k')\n"
        "try:\n"
        "    profiler.store_last_result()\n"
        "except UsageError as exc:\n"
        "    print(profiler.result_path, run.run_id, exc, sep='\\n')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    root, run_id, message = done.stdout.splitlines()
    assert message == (
        f"no PROF_* run in {root}: the last one, {run_id}, was deleted by {BY_CLEANUP_TRUE}. {KEEP_HINT}"
    )


def test_a_run_deleted_by_cleanup_says_cleanup(toolkit: Toolkit) -> None:
    profiler = Profiler(toolkit=toolkit)
    with profiler.profile(cleanup=False) as run:
        sim.launch("add_custom")
    assert run.run_id is not None
    assert profiler.store_result(run.run_id).tasks  # kept until cleanup()
    assert profiler.cleanup() == [run.run_dir]
    with pytest.raises(UsageError, match=r"it was deleted by cleanup\(\)\. Runs in the library's temporary"):
        profiler.store_result(run.run_id)


async def test_the_async_quickstart_error_names_cleanup_true(toolkit: Toolkit) -> None:
    profiler = AsyncProfiler(toolkit=toolkit)
    async with profiler.profile(device_id=0) as run:
        sim.launch("add_custom", task_type="AI_VECTOR_CORE", count=3)
    assert run.result is not None and task_time_median(run.result.tasks, name="add_custom") == 10.0
    with pytest.raises(UsageError, match=r"it was deleted by cleanup=True \(the default"):
        async for _ in profiler.iter_tasks(run.run_id):
            pass


async def test_a_result_path_keeps_the_run_for_iter_tasks(toolkit: Toolkit, result_dir: Path) -> None:
    profiler = AsyncProfiler(result_dir, toolkit=toolkit)
    async with profiler.profile(device_id=0) as run:
        sim.launch("add_custom", task_type="AI_VECTOR_CORE", count=3)
    names = [task.name async for task in profiler.iter_tasks(run.run_id)]
    assert names == ["add_custom"] * 3


def test_the_temporary_root_is_gone_after_the_process_even_with_cleanup_false(
    sim_root: Path, tmp_path: Path
) -> None:
    kept = tmp_path / "kept"
    code = (
        "import sys\n"
        "from asc_aprof import Profiler, sim\n"
        "for path in (None, sys.argv[1]):\n"
        "    with Profiler(path, toolkit=sim.toolkit()).profile(cleanup=False) as run:\n"
        "        sim.launch('k')\n"
        "    print(run.run_dir)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(kept)], capture_output=True, text=True, timeout=120, check=True
    )
    temporary, given = (Path(line) for line in done.stdout.split())
    assert not temporary.exists() and not temporary.parent.exists()  # the root went at exit
    assert given.parent == kept and given.is_dir()  # a path you give is kept


# -- stop() returns the run ----------------------------------------------------------------------
def test_stop_returns_the_runs_handle(toolkit: Toolkit, result_dir: Path) -> None:
    profiler = Profiler(result_dir, toolkit=toolkit)
    profiler.start(device_id=2)
    sim.launch("k", device=2, count=4)
    run = profiler.stop()
    assert isinstance(run, ProfileRun)
    assert run.device == 2 and run.result is None
    assert run.run_dir is not None and run.run_dir.parent == result_dir and run.run_id == run.run_dir.name
    assert profiler.export(run.run_id) == run.run_dir
    assert [t.name for t in profiler.store_result(run.run_id).tasks] == ["k"] * 4


async def test_async_stop_returns_the_runs_handle(toolkit: Toolkit, result_dir: Path) -> None:
    profiler = AsyncProfiler(result_dir, toolkit=toolkit)
    await profiler.start(device_id=1)
    sim.launch("k", device=1, count=2)
    run = await profiler.stop()
    assert run.device == 1 and run.run_dir is not None and run.run_dir.is_dir()
    await profiler.export(run.run_id)
    assert len((await profiler.store_result(run.run_id or "")).tasks) == 2


# -- progress callbacks --------------------------------------------------------------------------
def test_a_raising_progress_callback_is_logged_once(
    toolkit: Toolkit, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[ProgressEvent] = []

    def broken(event: ProgressEvent) -> None:
        seen.append(event)
        raise KeyError("display gone")

    profiler = Profiler(toolkit=toolkit, progress=broken)
    with caplog.at_level(logging.WARNING, logger="asc_aprof"):
        for _ in range(2):
            with profiler.profile() as run:
                sim.launch("k")
            assert run.result is not None and len(run.result.tasks) == 1  # the run went on
    records = [r for r in caplog.records if "progress callback" in r.getMessage()]
    assert len(records) == 1, [r.getMessage() for r in records]
    assert records[0].name == "asc_aprof" and records[0].exc_info is not None
    assert "raised on a collection_started event" in records[0].getMessage()
    # every event was still delivered; a simulated run is read natively, with no export events
    assert [e.kind for e in seen] == ["collection_started", "collection_stopped", "parse_finished"] * 2


# -- a collection in which no kernel ran ---------------------------------------------------------
def test_an_empty_profile_says_no_kernel_ran(toolkit: Toolkit, caplog: pytest.LogCaptureFixture) -> None:
    profiler = Profiler(toolkit=toolkit)
    with caplog.at_level(logging.WARNING, logger="asc_aprof"), profiler.profile() as run:
        pass
    assert run.result is not None
    # kept as the export has them: the control task the real exporter's task_time keeps
    assert [(t.name, t.type) for t in run.result.tasks] == [("N/A", "DEVICE_RINGBUFFER_CONTROL")]
    (record,) = [r for r in caplog.records if "recorded no kernel" in r.getMessage()]
    assert record.getMessage().startswith(
        f"the collection on device 0 recorded no kernel: run {run.run_id} has 1 DEVICE_RINGBUFFER_CONTROL "
    )
    with pytest.raises(NoSamplesError) as info:
        task_time_median(run.result.tasks)
    assert str(info.value) == (
        "no AI Core task in the result, as no kernel ran while profiling: its 1 task(s) are CANN control "
        "tasks (DEVICE_RINGBUFFER_CONTROL (1); name N/A), which the export lists when no kernel was "
        "recorded. Launch the kernels inside the profile() block (or between start() and stop()), on the "
        "profiled device"
    )
    with pytest.raises(NoSamplesError, match=r"^no AI Core sample of kernel 'add': no AI Core task in the "):
        task_time_median(run.result.tasks, name="add")


def test_a_profile_with_kernels_logs_nothing(toolkit: Toolkit, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="asc_aprof"), Profiler(toolkit=toolkit).profile():
        sim.launch("k")
    assert not [r for r in caplog.records if "recorded no kernel" in r.getMessage()]


# -- a kernel-name typo --------------------------------------------------------------------------
def test_a_kernel_name_typo_lists_the_kernels_there_are() -> None:
    tasks = [
        *(ProfilingTask(i, "add_custom", "AI_VECTOR_CORE", 8.5) for i in range(10)),
        *(ProfilingTask(i, "matmul_custom", "MIX_AIC", 42.0) for i in range(10, 14)),
        ProfilingTask(14, "memcpy", "AI_CPU", 1.0),
    ]
    with pytest.raises(NoSamplesError) as info:
        task_time_median(tasks, name="add")
    assert str(info.value) == (
        "no AI Core sample of kernel 'add' in the result (did you mean 'add_custom'?); its AI Core "
        "kernels (samples): add_custom (10), matmul_custom (4)"
    )
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, ValueError)
    with pytest.raises(NoSamplesError, match=r"^no AI Core sample of kernel 'zzz' in the result; its AI"):
        task_time_median(tasks, name="zzz")  # nothing close: no guess
    with pytest.raises(NoSamplesError) as info:
        task_time_median([ProfilingTask(0, "memcpy", "AI_CPU", 1.0)])
    assert str(info.value) == (
        "no AI Core task in the result, so there is no kernel to take a median of (its 1 task(s) are of "
        "types AI_CPU (1); only AI Core types count, or N/A when name= is given)"
    )
    with pytest.raises(NoSamplesError, match=r"^the result has no task at all"):
        task_time_median([])


# -- finding CANN ----------------------------------------------------------------------------------
def test_toolkit_not_found_says_what_to_do_first(tmp_path: Path) -> None:
    missing = tmp_path / "no-cann"
    with pytest.raises(ToolkitNotFoundError) as info:
        discover_toolkit({"ASCEND_HOME_PATH": str(missing)})
    first, second, *listing = str(info.value).splitlines()
    assert first == (
        "no CANN toolkit found: `source <CANN install>/set_env.sh` (sets ASCEND_HOME_PATH) or pass "
        "toolkit=Toolkit.from_root(<CANN root>); without an NPU, set ASC_APROF_SIMULATE=1 or pass "
        "toolkit=asc_aprof.sim.toolkit() for the simulated toolkit"
    )
    assert second.startswith("A CANN root holds lib64/libmsprofiler.so and tools/profiler/")
    assert second.endswith("Searched:")
    assert listing == [f"  - {place}" for place in info.value.searched]
    assert listing[0] == "  - $ASCEND_TOOLKIT_HOME (not set)"
    assert f"  - {missing / 'lib64' / 'libmsprofiler.so'}" in listing


def test_the_simulator_is_picked_by_the_variable_the_readme_names(
    simctl: SimControl, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASC_APROF_SIMULATE", "1")
    assert discover_toolkit().library == sim.toolkit().library
    # the README's recipe, with the venv's python: the root it prints is a CANN root
    code = "import asc_aprof.sim as s; print(s.root())"
    env = {k: v for k, v in os.environ.items() if k != "ASC_APROF_SIMULATE"}
    root = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True, env=env
    ).stdout.strip()
    assert Toolkit.from_root(root).library == sim.toolkit().library


# -- the real-data conformance tests on a plain clone -----------------------------------------------
def test_real_data_tests_all_skip_with_the_reason_that_explains_them() -> None:
    from . import test_parser, test_parser_accel
    from .reference import SKIP_REASON

    assert SKIP_REASON.startswith("real-CANN conformance tests need the reference data")
    assert "CI runs them" in SKIP_REASON and "ASC_APROF_REFERENCE" in SKIP_REASON
    for test in (
        test_parser.test_real_msprof_files,
        test_parser.test_real_file_values,
        test_parser_accel.test_real_msprof_files_parse_identically,
    ):
        reasons = [m.kwargs.get("reason") for m in getattr(test, "pytestmark", []) if m.name == "skipif"]
        assert reasons == [SKIP_REASON], test.__name__


# -- metric groups as msprof spells them ---------------------------------------------------------
MSPROF_NAMES = {
    AicoreMetrics.PIPE_UTILIZATION: "PipeUtilizationExct",  # 910B's spelling (real 910B runs too)
    AicoreMetrics.ARITHMETIC_UTILIZATION: "ArithmeticUtilization",
    AicoreMetrics.MEMORY_BANDWIDTH: "Memory",
    AicoreMetrics.L0B_AND_WIDTH: "MemoryL0",
    AicoreMetrics.RESOURCE_CONFLICT_RATIO: "ResourceConflictRatio",
    AicoreMetrics.MEMORY_UB: "MemoryUB",
    AicoreMetrics.L2_CACHE: "L2Cache",
    # (the simulated 910B's sample.json names no group 7)
    AicoreMetrics.MEMORY_ACCESS: "MemoryAccess",
}


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("PipeUtilization", AicoreMetrics.PIPE_UTILIZATION),
        ("pipeutilization", AicoreMetrics.PIPE_UTILIZATION),
        ("ArithmeticUtilization", AicoreMetrics.ARITHMETIC_UTILIZATION),
        ("Memory", AicoreMetrics.MEMORY_BANDWIDTH),
        ("MemoryL0", AicoreMetrics.L0B_AND_WIDTH),
        ("ResourceConflictRatio", AicoreMetrics.RESOURCE_CONFLICT_RATIO),
        ("MemoryUB", AicoreMetrics.MEMORY_UB),
        ("L2Cache", AicoreMetrics.L2_CACHE),
        ("PipelineExecuteUtilization", AicoreMetrics.PIPE_EXECUTE_UTILIZATION),
        ("MemoryAccess", AicoreMetrics.MEMORY_ACCESS),
        ("PIPE_UTILIZATION", AicoreMetrics.PIPE_UTILIZATION),
        ("l2_cache", AicoreMetrics.L2_CACHE),
    ],
)
def test_profile_takes_the_metric_group_as_msprof_spells_it(
    toolkit: Toolkit, given: str, expected: AicoreMetrics
) -> None:
    profiler = Profiler(toolkit=toolkit)
    with profiler.profile(metrics=given, cleanup=False) as run:
        sim.launch("add_custom")
    assert run.result is not None and [t.name for t in run.result.tasks] == ["add_custom"]
    assert run.run_dir is not None
    # the group CANN was given, as the run's sample.json names it
    assert open_run(run.run_dir).info.metrics == MSPROF_NAMES.get(expected)


def test_a_metric_group_typo_lists_the_valid_ones(toolkit: Toolkit) -> None:
    profiler = Profiler(toolkit=toolkit)
    typo = r"^metrics='PipeUtilisation' is not a metric group; give one of: "
    with pytest.raises(InvalidArgumentError, match=typo), profiler.profile(metrics="PipeUtilisation"):
        pass
    with (
        pytest.raises(InvalidArgumentError, match="PipelineExecuteUtilization"),
        profiler.profile(metrics="pipe"),
    ):
        pass


# -- run ids and result paths ----------------------------------------------------------------------
def _two_runs(toolkit: Toolkit, result_dir: Path) -> list[Path]:
    profiler = Profiler(result_dir, toolkit=toolkit)
    for _ in range(2):
        with profiler.profile():
            sim.launch("add_custom")
    return sorted(result_dir.glob("PROF_*"))


def test_a_runs_absolute_path_is_a_run_id(toolkit: Toolkit, result_dir: Path) -> None:
    runs = _two_runs(toolkit, result_dir)
    profiler = Profiler(result_dir, toolkit=toolkit)
    assert [t.name for t in profiler.store_result(str(runs[0])).tasks] == ["add_custom"]
    assert [t.name for t in profiler.store_result(str(runs[1])).tasks] == ["add_custom"]
    elsewhere = result_dir.parent / "other" / runs[0].name
    with pytest.raises(UsageError, match=r"open_run\(path\)"):
        profiler.store_result(str(elsewhere))


def test_a_mistyped_run_id_names_the_runs_there_closest_first(toolkit: Toolkit, result_dir: Path) -> None:
    runs = _two_runs(toolkit, result_dir)
    typo = runs[1].name[:-3] + "zzz"
    with pytest.raises(UsageError) as info:
        Profiler(result_dir, toolkit=toolkit).store_result(typo)
    message = str(info.value)
    assert message.startswith(f"no run {typo!r} in {result_dir}; runs there: {runs[1].name}, {runs[0].name}")


def test_a_run_given_as_the_result_path_says_so(toolkit: Toolkit, result_dir: Path) -> None:
    (run,) = _two_runs(toolkit, result_dir)[:1]
    with pytest.raises(UsageError) as info:
        Profiler(run, toolkit=toolkit).store_last_result()
    assert str(info.value) == (
        f"{run} is a run itself, not a result path: give its parent ({result_dir}), or read it directly "
        f"with asc_aprof.open_run('{run}')"
    )


def test_runs_one_level_down_and_a_missing_result_path_are_said(toolkit: Toolkit, tmp_path: Path) -> None:
    _two_runs(toolkit, tmp_path / "outer" / "inner")
    with pytest.raises(UsageError, match=r"runs are one level down, in inner: give that folder$"):
        Profiler(tmp_path / "outer", toolkit=toolkit).store_last_result()
    with pytest.raises(UsageError, match=r"it does not exist \(check the result path\)$"):
        Profiler(tmp_path / "missing", toolkit=toolkit).store_last_result()
    with pytest.raises(UsageError, match=r"the result path .*missing does not exist$"):
        Profiler(tmp_path / "missing", toolkit=toolkit).store_result("PROF_1")


def test_the_missing_plotly_hint_says_what_works_from_a_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    from asc_aprof._outputs import _report_html

    monkeypatch.setitem(sys.modules, "plotly", None)  # import plotly now raises ImportError
    monkeypatch.setitem(sys.modules, "plotly.graph_objects", None)
    with pytest.raises(UsageError) as info:
        _report_html._plotly()
    checkout = Path(_report_html.__file__).resolve().parents[3]
    # this test runs from the repository: the hint names the checkout's own extra
    assert (checkout / "pyproject.toml").is_file()
    assert str(info.value) == (
        f"the HTML report needs plotly, which is not installed here: pip install -e '{checkout}[report]' "
        "(or pip install plotly)"
    )
