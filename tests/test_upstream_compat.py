"""Code written for upstream ``asc.lib.profiling`` runs unchanged: errors, skip, rounding, types."""

from __future__ import annotations

import pickle
import subprocess
from pathlib import Path

import numpy
import pytest
from hypothesis import given
from hypothesis import strategies as st

from asc_aprof import (
    AclError,
    AprofError,
    ExportError,
    MsprofInterface,
    ParseError,
    Profiler,
    ProfileType,
    ProfilingTask,
    Toolkit,
    ToolkitNotFoundError,
    UsageError,
    sim,
    task_time_median,
)
from asc_aprof.sim import SimControl


def kernel(*durations: float, name: str = "k", type: str = "AI_CORE") -> list[ProfilingTask]:
    return [ProfilingTask(i, name, type, d, 0) for i, d in enumerate(durations)]


def test_every_error_is_a_runtime_error() -> None:
    for cls in (AprofError, AclError, UsageError, ExportError, ParseError, ToolkitNotFoundError):
        assert issubclass(cls, RuntimeError), cls
    # ParseError stays a ValueError as well (it was one before).
    assert issubclass(ParseError, ValueError)


def test_upstream_fixture_pattern_skip_one_after_a_single_launch() -> None:
    # upstream's pytest fixture: task_time_median(profiler.last_result.tasks, skip=1), one launch
    assert task_time_median(kernel(7.25), skip=1) == 7.25
    # skip applies only when more samples than skip exist
    assert task_time_median(kernel(100.0, 2.0), skip=1) == 2.0
    assert task_time_median(kernel(100.0, 2.0), skip=2) == 51.0
    assert task_time_median(kernel(100.0, 2.0, 4.0), skip=1) == 3.0


def test_no_sample_is_a_runtime_error_caught_as_upstream_code_does() -> None:
    try:
        task_time_median(kernel(1.0, type="AI_CPU"))
    except RuntimeError as exc:
        assert isinstance(exc, ValueError)
        assert "no AI Core task" in str(exc)
    else:
        pytest.fail("no error")
    with pytest.raises(RuntimeError, match="'other'"):
        task_time_median(kernel(1.0), name="other")


@given(st.lists(st.integers(min_value=0, max_value=10**7), min_size=1, max_size=12))
def test_median_rounds_as_numpy(raw: list[int]) -> None:
    # durations as the CSVs print them: up to 3 decimals (ns), so halves of the last digit occur
    durations = [r / 1000 for r in raw]
    expected = float(numpy.round(numpy.median(numpy.array(durations)), 3))
    assert task_time_median(kernel(*durations)) == expected


def test_median_rounding_differs_from_builtin_round_where_numpy_does() -> None:
    # (1.0005 + 1.0006)/2 etc.: a case where round(x, 3) and numpy.round(x, 3) disagree
    found = None
    for a in range(1000, 3000):
        pair = (a / 1000, (a + 1) / 1000)
        m = (pair[0] + pair[1]) / 2
        if round(m, 3) != float(numpy.round(m, 3)):
            found = pair
            break
    assert found is not None
    assert task_time_median(kernel(*found)) == float(numpy.round(numpy.median(found), 3))


def test_unknown_type_counts_only_when_the_kernel_is_named() -> None:
    tasks = kernel(5.0, 7.0, name="add_kernel", type="N/A") + kernel(1.0, name="other", type="AI_CPU")
    with pytest.raises(RuntimeError, match="no AI Core task"):
        task_time_median(tasks)
    assert task_time_median(tasks, name="add_kernel") == 6.0


def test_profile_types_accept_a_list_as_upstream_passes_it(
    toolkit: Toolkit, simctl: SimControl, tmp_path: Path
) -> None:
    profiler = Profiler(tmp_path / "out", toolkit=toolkit)
    with profiler.profile(profile_types=[ProfileType.TASK_TIME, ProfileType.AICORE_METRICS]) as run:
        sim.launch("add_custom", duration_us=3.0, device=0)
    assert run.result is not None and profiler.last_result is not None
    assert [t.name for t in run.result.tasks if t.type != "N/A"] == ["add_custom"]
    assert task_time_median(profiler.last_result.tasks, skip=1) == 3.0

    iface = MsprofInterface(toolkit)
    iface.init(tmp_path / "raw")
    try:
        config = iface.create_config([0], types=(ProfileType.TASK_TIME, int(ProfileType.L2CACHE)))
        iface.destroy_config(config)
    finally:
        iface.finalize()
    with (
        pytest.raises(RuntimeError, match="profile_types"),
        profiler.profile(
            profile_types=["TASK_TIME"]  # type: ignore[list-item]
        ),
    ):
        pass


def test_populate_tasks_appends_every_row_and_names_a_bad_line(tmp_path: Path) -> None:
    csv_file = tmp_path / "op_summary_0_1.csv"
    csv_file.write_text(
        "Task ID,Op Name,Task Type,Task Duration(us)\n3,add,AI_CORE,2.5\n4,N/A,PLACE_HOLDER_SQE,0.1\n",
        encoding="utf-8",
    )
    tasks: list[ProfilingTask] = [ProfilingTask(0, "before", "AI_CORE", 1.0)]
    columns = ("Task ID", "Op Name", "Task Type", "Task Duration(us)")
    assert Profiler.populate_tasks(csv_file, *columns, tasks) is None  # a classmethod, as upstream's
    assert tasks == [
        ProfilingTask(0, "before", "AI_CORE", 1.0),
        ProfilingTask(3, "add", "AI_CORE", 2.5),  # device None: the file says none
        ProfilingTask(4, "N/A", "PLACE_HOLDER_SQE", 0.1),  # control rows stay, as upstream keeps them
    ]
    bad = tmp_path / "bad.csv"
    bad.write_text("Task ID,Op Name,Task Type,Task Duration(us)\n3,add,AI_CORE,2.5\nx,add,AI_CORE,1\n")
    with pytest.raises(ParseError) as caught:
        Profiler.populate_tasks(str(bad), *columns, tasks)
    assert caught.value.source == str(bad) and caught.value.line == 3
    assert str(caught.value).startswith(f"{bad}:3: 'Task ID' is 'x', not an integer")
    with pytest.raises(ParseError, match="no column 'task_time\\(us\\)' in the header"):
        Profiler.populate_tasks(csv_file, "Task ID", "Op Name", "Task Type", "task_time(us)", [])


def test_export_error_pickles_as_a_called_process_error() -> None:
    error = ExportError(
        "msprof.py export summary exited with 3",
        command=["python3", "msprof.py", "export", "summary"],
        returncode=3,
        output_tail="[ERROR] no data",
        diagnostics="[ERROR] no data",
    )
    copy = pickle.loads(pickle.dumps(error))
    assert isinstance(copy, subprocess.CalledProcessError) and isinstance(copy, ExportError)
    # the fields upstream's callers read from a CalledProcessError, as the original has them
    fields = ("returncode", "cmd", "output", "stdout", "stderr")
    assert [getattr(copy, f) for f in fields] == [getattr(error, f) for f in fields]
    assert copy.cmd == ["python3", "msprof.py", "export", "summary"] and copy.returncode == 3
    assert copy.stderr == "[ERROR] no data" and copy.output is None and str(copy) == str(error)
    try:
        raise copy
    except subprocess.CalledProcessError as caught:  # upstream code's except clause
        assert caught is copy
