"""A naive implementation that overlaps starts gets wrong results on the simulator, as on hardware.

This is what makes the window tests meaningful: the simulator reproduces CANN 8.5 (second run has
no host data, so no kernel names) and 9.x (second start silently does nothing) overlap behaviour.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from asc_aprof import AicoreMetrics, MsprofInterface, ProfileType, Toolkit, sim
from asc_aprof._cann._export import run_export
from asc_aprof._cann._layout import list_runs
from asc_aprof._runs._csv import iter_file_tasks
from asc_aprof.sim import SimControl


def naive_overlapping_collections(toolkit: Toolkit, result: Path) -> dict[int, list[tuple[str, str]]]:
    """Two 'profilers' that each start their own config while the other one runs."""
    iface = MsprofInterface(toolkit)
    iface.init(result)
    types = ProfileType.TASK_TIME | ProfileType.AICORE_METRICS
    a = iface.create_config([0], AicoreMetrics.PIPE_UTILIZATION, types)
    b = iface.create_config([1], AicoreMetrics.PIPE_UTILIZATION, types)
    iface.start(a)
    iface.start(b)  # overlaps a: accepted by 8.5, a silent no-op on 9.x
    sim.launch("kernel_a", device=0, count=3)
    sim.launch("kernel_b", device=1, count=3)
    iface.stop(a)
    iface.stop(b)
    iface.destroy_config(a)
    iface.destroy_config(b)
    iface.finalize()
    names: dict[int, list[tuple[str, str]]] = {0: [], 1: []}
    for run in list_runs(result):
        for batch in iter_file_tasks(run_export(toolkit, run)):
            for task in batch:
                if task.device in names:
                    names[task.device].append((task.name, task.type))
    return names


@pytest.mark.parametrize("cann", ["8.5", "9.x"])
def test_naive_overlap_loses_data(toolkit: Toolkit, simctl: SimControl, tmp_path: Path, cann: str) -> None:
    simctl.set_cann(cann)
    names = naive_overlapping_collections(toolkit, tmp_path)
    assert names[0] == [("kernel_a", "AI_CORE")] * 3
    # device 1's kernels lost their names (8.5) or were never collected (9.x)
    assert ("kernel_b", "AI_CORE") not in names[1]
    if cann == "8.5":
        # No host data: task_time only, typed by the SQE, so the device's control tasks (real runs:
        # PLACE_HOLDER_SQE SQEs) are listed beside its kernels, every one named N/A.
        assert sorted(names[1]) == [("N/A", "AI_CORE")] * 3 + [("N/A", "PLACE_HOLDER_SQE")] * 3
    else:
        assert names[1] == []
