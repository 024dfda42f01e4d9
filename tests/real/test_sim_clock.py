"""The simulator's AI Core clock records against the real exporter.

Simulated 910B runs carry a device's clock (``lpmFreqConv`` before CANN 9.0, ``lpmInfoConv``
from it) and, for CANN 8.0, ``incompatible_features.json``; with a clock dip set
(``sim.control().set_clock_dip``) the records change the clock while the run collects. Exported by
the real ``msprof.py``: its ``freq.db`` holds the rows the raw reader builds, each task's
``aic_mhz`` is the exporter's clock at its start (the dip's for the kernels launched inside it),
and the tasks equal the real export's. The dip slows the kernels it holds: in the real export
their durations are the launched ones x 1650 / 800, their cycles (duration x clock) the others'.
"""

from __future__ import annotations

import math
import shutil
import time
from pathlib import Path

import pytest

from asc_aprof import Profiler, Toolkit, sim
from asc_aprof._plans._raw import RawResult
from asc_aprof._runs._raw_files import read_run

from ..reference import needs_real_runs
from ..sim._support import AICORE_METRICS, TASK_TIME, TASK_TIME_L0, Acl, finish
from .test_real_clock import exporter_clock, freq_db

pytestmark = needs_real_runs

DIP_MHZ = 800


def collect(base: Path, cann: str, level: int, dip: bool) -> Path:
    """Three groups of kernels, 5 ms apart; with *dip*, the clock dips around the middle group
    (set with an open end before its launch, so it slows them; narrowed once they ran)."""
    control = sim.control()
    control.reset()
    control.configure(cann=cann, chip="910B")
    acl = Acl(sim.root() / "lib64" / "libmsprofiler.so")
    assert acl.init(base) == 0
    cfg = acl.config([0], (TASK_TIME if level == 1 else TASK_TIME_L0) | AICORE_METRICS, 1)
    assert acl.start(cfg) == 0
    for group in range(3):
        time.sleep(0.005)
        before = time.time_ns()
        if dip and group == 1:
            control.set_clock_dip(DIP_MHZ, start_ns=before, end_ns=before + 60 * 10**9)
        assert sim.launch(f"k{group}", device=0, task_type="AI_VECTOR_CORE", duration_us=5.0, count=4) > 0
        time.sleep(0.001)
        if dip and group == 1:
            control.set_clock_dip(DIP_MHZ, start_ns=before, end_ns=time.time_ns())
    prof = finish(acl, cfg, base)
    control.reset()
    return prof


@pytest.mark.parametrize("level", [0, 1])
@pytest.mark.parametrize("cann", ["8.0", "9.0"])
@pytest.mark.parametrize("dip", [False, True], ids=["steady", "dip"])
def test_simulated_clock_equals_the_real_exporters_freq_db(
    cann: str, level: int, dip: bool, tmp_path: Path, real_toolkit: Toolkit
) -> None:
    prof = collect(tmp_path / "collected", cann, level, dip)
    kind = "lpmInfoConv" if cann == "9.0" else "lpmFreqConv"
    assert [p.name for p in (prof / "device_0" / "data").glob("lpm*.slice_0")] == [f"{kind}.data.0.slice_0"]
    features = [
        prof / "host" / "incompatible_features.json",
        prof / "device_0" / "incompatible_features.json",
    ]
    assert all(f.is_file() for f in features) == (cann == "8.0")
    run = tmp_path / "real" / prof.name
    shutil.copytree(prof, run)
    Profiler(run.parent, toolkit=real_toolkit, reader="msprof", export_timeout=300).export(
        run.name, timeline=False
    )
    outcome = read_run(run)
    assert isinstance(outcome, RawResult), outcome
    rows = freq_db(run, 0)
    assert sorted(set(outcome.clocks[0].rows)) == sorted(set(rows))
    clocks = outcome.aic_mhz()
    for task, mhz in zip(outcome.tasks, clocks, strict=True):
        assert mhz == exporter_clock(rows, 1650.0, task.start_cycles)
    by_name = {
        name: {m for t, m in zip(outcome.tasks, clocks, strict=True) if t.name == name}
        for name in ("k0", "k1", "k2")
    }
    assert by_name["k0"] == by_name["k2"] == {1650.0}
    assert by_name["k1"] == ({float(DIP_MHZ)} if dip else {1650.0})
    expected = Profiler(run.parent, toolkit=real_toolkit, reader="msprof").store_result(run.name).tasks
    assert outcome.profiling_tasks() == list(expected)
    durations = {name: {t.duration for t in expected if t.name == name} for name in ("k0", "k1", "k2")}
    assert durations["k0"] == durations["k2"] == {5.0}
    # 5 us x 1650 / 800 = 10312.5 ns, rounded to whole ns
    assert durations["k1"] == ({10.313} if dip else {5.0})
    cycles = {round(t.duration * m) for t, m in zip(expected, clocks, strict=True)}
    assert cycles == {round(5.0 * 1650)}
    counted = read_run(run, counters=True)
    assert isinstance(counted, RawResult), counted
    assert not any(math.isnan(m) for m in clocks)
    if level == 1:
        # Each PMU record's total time (and the pipe times made from it) is at the clock of the
        # record's end: the dip's kernels at 800 MHz, as the real exporter prints them.
        exported = Profiler(run.parent, toolkit=real_toolkit, reader="msprof")
        expected_counters = exported.store_result(run.name, counters=True).counters
        assert expected_counters is not None and counted.counters is not None
        assert counted.counters.columns == expected_counters.columns
        for column in expected_counters.columns:
            ours, theirs = counted.counters.column(column), expected_counters.column(column)
            assert list(ours) == list(theirs), column
        times = counted.counters.column("aiv_time(us)")
        by_task: dict[str, set[float | None]] = {t.name: set() for t in counted.tasks}
        for task, value in zip(counted.tasks, times, strict=True):
            by_task[task.name].add(value)
        if dip:  # the same cycles at 800 MHz take 1650 / 800 as long
            assert by_task["k1"] != by_task["k0"]
