"""Records, the median and the public surface."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

import asc_aprof
from asc_aprof import AicoreMetrics, ProfileType, ProfilingResult, ProfilingTask, task_time_median


def test_public_api_is_exactly_all() -> None:
    assert isinstance(asc_aprof.__all__, tuple)
    submodules = {"sim", "cli", "pytest_plugin", "ray_sweep", "stats", "report"}
    public = {n for n in dir(asc_aprof) if n.isidentifier() and not n.startswith("_")} - submodules
    public -= {"annotations"}
    # the curated names, and the names kept from before the curation (they still resolve)
    assert public == (set(asc_aprof.__all__) | set(asc_aprof._WHERE)) - {"__version__"} - submodules
    for name in asc_aprof.__all__:
        assert hasattr(asc_aprof, name)


def test_enum_values_match_acl_prof_h() -> None:
    assert [m.value for m in AicoreMetrics] == [0, 1, 2, 3, 4, 5, 6, 7, 8, 0xFF]
    assert ProfileType.TASK_TIME | ProfileType.AICORE_METRICS | ProfileType.L2CACHE == 0x16
    assert int(ProfileType.TASK_TIME_L0) == 0x800 and int(ProfileType.OP_ATTR) == 0x4000
    assert int(ProfileType.MSPROFTX) == 0x80 and int(ProfileType.TASK_MEMORY) == 0x1000


def test_task_is_frozen_and_slotted() -> None:
    task = ProfilingTask(1, "k", "AI_CORE", 2.5)
    assert task.device is None and task.id == 1
    with pytest.raises(AttributeError):
        task.duration = 3.0  # type: ignore[misc]
    assert not hasattr(task, "__dict__")
    result = ProfilingResult((task,), "PROF_1", dt.datetime.now(dt.timezone.utc))
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.run_id = "x"  # type: ignore[misc]
    assert not hasattr(result, "__dict__")


def tasks_of(*spec: tuple[str, str, float]) -> list[ProfilingTask]:
    return [ProfilingTask(i, n, t, d) for i, (n, t, d) in enumerate(spec)]


def test_median_rules() -> None:
    tasks = tasks_of(
        ("PROFILING_X", "EVENT_RECORD", 100.0),
        ("kernel", "AI_CORE", 9.0),
        ("other", "AI_VECTOR_CORE", 1.0),
        ("kernel", "MIX_AIC", 3.0),
        ("kernel", "AI_CPU", 500.0),
        ("kernel", "KERNEL_AICORE", 5.0),
        ("kernel", "AIV_SQE", 4.0),
    )
    assert task_time_median(tasks) == 4.5  # first AI Core task is "kernel": 9, 3, 5, 4
    assert task_time_median(tasks, name="other") == 1.0
    assert task_time_median(tasks, name="kernel", skip=1) == 4.0  # 3, 5, 4
    assert task_time_median(tasks_of(("k", "AI_CORE", 1.0001234))) == 1.0


def test_median_errors_say_why() -> None:
    tasks = tasks_of(("k", "AI_CORE", 1.0), ("k", "AI_CORE", 2.0))
    with pytest.raises(ValueError, match="skip=-1"):
        task_time_median(tasks, skip=-1)
    with pytest.raises(ValueError, match="no AI Core task"):
        task_time_median(tasks_of(("k", "AI_CPU", 1.0)))
    with pytest.raises(ValueError, match="'missing'"):
        task_time_median(tasks, name="missing")
