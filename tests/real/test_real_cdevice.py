"""Every real run read with the C device loops (``_raw._cdevice``) and with the pure-Python
reference gives the same result, record for record and float for float: the tasks, every
task_time row and the PMU counters (``read_run``), the public records of the tasks, and the
rows and PMU cells of the CSVs the simulated ``msprof.py`` writes (``read_export_rows``).
Declines must match too. The simulated runs of the differential matrix (several devices, MIX
and AI CPU kernels, both levels) too."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from asc_aprof import sim
from asc_aprof._plans._raw import RawResult, _accel
from asc_aprof._runs._raw_files import read_export_rows, read_run

from ..reference import REAL_RUNS, needs_real_runs, real_run_names
from ..sim._support import Acl
from .test_sim_differential import CASES, collect

pytestmark = [
    needs_real_runs,
    pytest.mark.skipif(_accel.C is None, reason="the optional C extension _cdevice is not built"),
]


def both(call: Callable[[], object], monkeypatch: pytest.MonkeyPatch) -> tuple[object, object]:
    monkeypatch.delenv("ASC_APROF_PURE_PYTHON", raising=False)  # it would turn C off at every call
    monkeypatch.setattr(_accel, "ACCELERATED", True)
    fast = call()
    monkeypatch.setattr(_accel, "ACCELERATED", False)
    return fast, call()


def assert_same(fast: object, pure: object) -> None:
    assert fast == pure
    # repr tells -0.0 from 0.0 and names every record type, which == does not
    assert repr(fast) == repr(pure)


def read_alike(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert_same(*both(lambda: read_run(run_dir, with_task_time=True, counters=True), monkeypatch))
    result = read_run(run_dir)
    assert_same(*both(lambda: read_run(run_dir), monkeypatch))
    if isinstance(result, RawResult):
        assert_same(*both(result.profiling_tasks, monkeypatch))
    assert_same(*both(lambda: read_export_rows(run_dir, pmu=True), monkeypatch))


@pytest.mark.parametrize("name", real_run_names())
def test_c_and_pure_device_loops_read_real_runs_alike(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Reading only: the run stays where it is (nothing is written into it).
    (run_dir,) = (REAL_RUNS / name).glob("PROF_*")
    read_alike(run_dir, monkeypatch)


@pytest.mark.parametrize("name", sorted(CASES))
def test_c_and_pure_device_loops_read_simulated_runs_alike(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read_alike(collect(CASES[name], tmp_path, Acl(sim.root() / "lib64" / "libmsprofiler.so")), monkeypatch)
