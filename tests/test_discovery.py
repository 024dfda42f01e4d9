"""Finding the toolkit: the error that lists where it looked, ``$ASCEND_HOME_PATH``, the simulator switch."""

from __future__ import annotations

from pathlib import Path

import pytest

from asc_aprof import Profiler, ToolkitNotFoundError, discover_toolkit, sim, task_time_median
from asc_aprof.sim import SimControl


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
