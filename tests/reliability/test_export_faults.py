"""Every way ``msprof.py export`` can fail, through ``Profiler`` and ``AsyncProfiler``.

Each case profiles two kernels into the library's temporary root with ``cleanup=True`` (the
harshest setting: a lost run would be deleted there) using a toolkit whose export fails, then
checks:

* a typed error naming the command (:class:`ExportError`) or the file (:class:`ParseError`), and
  the raw run's path in the message;
* no export process is left: not the ``msprof.py`` process, not the helper it forked into its
  process group (``hang``), not an unreaped child;
* the raw ``PROF_*`` directory is kept, and a retry with a good toolkit exports and parses it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import anyio
import pytest

from asc_aprof import AsyncProfiler, ExportError, ParseError, Profiler, ProfileRun, Toolkit, sim
from asc_aprof._cann._paths import default_result_root
from asc_aprof.sim import SimControl

from ..helpers import HANG_MARKER, live_processes_with, wait_gone
from ._support import assert_nothing_left, child_pids

pytestmark = pytest.mark.anyio

HANG_TIMEOUT = 0.5
LAUNCHED = 2

FAULTS = [
    *(f"exit:{n}" for n in range(1, 14)),
    "hang",
    "signal:9",
    "nocsv",
    "truncate",
    "badheader",
    "script-missing",
    "python-missing",
]


def failing_toolkit(fault: str, tmp_path: Path) -> Toolkit:
    if fault == "script-missing":
        return dataclasses.replace(sim.toolkit(), msprof_script=tmp_path / "no such dir" / "msprof.py")
    if fault == "python-missing":
        return sim.toolkit(python="/nonexistent/python")
    return sim.toolkit(export_fault=fault)


def check_error(error: BaseException, fault: str, toolkit: Toolkit, run_dir: Path) -> None:
    """The error's type and what it names, per fault."""
    assert str(run_dir) in str(error), "the message must say where the raw data is kept"
    if fault in ("truncate", "badheader"):
        assert isinstance(error, ParseError)
        source = Path(error.source)
        assert source.suffix == ".csv" and source.is_relative_to(run_dir)
        assert error.source in str(error)
        if fault == "truncate":
            assert error.line >= 2 and "expected" in str(error)
        else:
            assert "unknown header" in str(error)
        return
    assert isinstance(error, ExportError)
    assert error.command[:2] == (toolkit.python, str(toolkit.msprof_script))
    assert error.command[2:] == ("export", "summary", "-dir", str(run_dir))
    assert " ".join(error.command) in str(error)
    if fault.startswith("exit:"):
        code = int(fault.partition(":")[2])
        assert error.returncode == code and f"exited with {code}" in str(error)
        # On stdout, as real msprof.py's [ERROR] lines: shown first, as the reason.
        assert "[ERROR] [MSVP]" in error.diagnostics and "simulated export failure" in error.diagnostics
        assert f"msprof.py errors and warnings (last):\n    {error.diagnostics}" in str(error)
    elif fault == "hang":
        assert error.returncode is None
        assert f"did not finish within {HANG_TIMEOUT:g} s" in str(error)
    elif fault == "signal:9":
        assert error.returncode == -9 and "killed by signal 9" in str(error)
    elif fault == "nocsv":
        assert error.returncode == 0 and "wrote no" in str(error)
    elif fault == "script-missing":
        assert str(toolkit.msprof_script) in str(error) and "not found" in str(error)
    elif fault == "python-missing":
        assert error.returncode is None and "cannot run the export" in str(error)
        assert "/nonexistent/python" in str(error)
    else:  # pragma: no cover - every fault is listed above
        raise AssertionError(fault)


def check_no_process_left(toolkit: Toolkit, run_dir: Path) -> None:
    # The export itself is reaped before the error propagates: nothing is checked with a delay.
    assert live_processes_with(str(run_dir)) == [], "an msprof.py export process is still alive"
    assert child_pids() == [], "a child process was left running or unreaped"
    # The hang fault's helper is a grandchild in the export's process group: SIGKILLed with the
    # group, it may need a moment to be reaped by init.
    assert wait_gone(HANG_MARKER, timeout=2.0) == []


def check_kept_and_retry_sync(run: ProfileRun, failing: Profiler) -> None:
    run_dir = run.run_dir
    assert run_dir is not None and run.run_id == run_dir.name
    assert run_dir.is_dir() and (run_dir / "device_0").is_dir() and (run_dir / "host").is_dir()
    retry = Profiler(toolkit=sim.toolkit())
    assert retry.export(run.run_id) == run_dir
    tasks = retry.store_result(run.run_id).tasks
    assert [(t.name, t.device) for t in tasks] == [("k", 0)] * LAUNCHED
    # The failing profiler still owns the run in its temporary root and removes it on request.
    assert failing.cleanup() == [run_dir]
    assert not run_dir.exists()


@pytest.mark.parametrize("fault", FAULTS)
def test_sync_export_fault(simctl: SimControl, tmp_path: Path, fault: str) -> None:
    toolkit = failing_toolkit(fault, tmp_path)
    # reader="msprof": the export path is under test (simulated runs are otherwise read natively)
    profiler = Profiler(
        toolkit=toolkit, reader="msprof", export_timeout=HANG_TIMEOUT if fault == "hang" else 60
    )
    with pytest.raises((ExportError, ParseError)) as info, profiler.profile() as run:
        sim.launch("k", count=LAUNCHED)
    assert run.run_dir is not None and run.run_dir.parent == default_result_root()
    check_error(info.value, fault, toolkit, run.run_dir)
    check_no_process_left(toolkit, run.run_dir)
    assert_nothing_left(simctl)
    assert profiler.results == {} and run.result is None
    check_kept_and_retry_sync(run, profiler)


@pytest.mark.parametrize("fault", FAULTS)
async def test_async_export_fault(simctl: SimControl, tmp_path: Path, fault: str) -> None:
    toolkit = failing_toolkit(fault, tmp_path)
    profiler = AsyncProfiler(
        toolkit=toolkit, reader="msprof", export_timeout=HANG_TIMEOUT if fault == "hang" else 60
    )
    with pytest.raises((ExportError, ParseError)) as info:
        async with profiler.profile() as run:
            sim.launch("k", count=LAUNCHED)
    assert run.run_dir is not None and run.run_dir.parent == default_result_root()
    check_error(info.value, fault, toolkit, run.run_dir)
    check_no_process_left(toolkit, run.run_dir)
    assert_nothing_left(simctl)
    assert profiler.results == {} and run.result is None
    assert run.run_dir.is_dir() and run.run_id == run.run_dir.name
    retry = AsyncProfiler(toolkit=sim.toolkit())
    assert await retry.export(run.run_id) == run.run_dir
    tasks = (await retry.store_result(run.run_id)).tasks
    assert [(t.name, t.device) for t in tasks] == [("k", 0)] * LAUNCHED
    assert await profiler.cleanup() == [run.run_dir]
    assert not run.run_dir.exists()


@pytest.mark.parametrize("fault", ["exit:2", "hang", "signal:9", "nocsv", "script-missing", "python-missing"])
def test_sync_manual_export_fault(simctl: SimControl, tmp_path: Path, fault: str) -> None:
    """``Profiler.export()`` on its own (start/stop/export/store): same errors, same cleanliness."""
    toolkit = failing_toolkit(fault, tmp_path)
    # Only the hang needs a short timeout; a short one elsewhere turns a slow machine into a failure.
    profiler = Profiler(
        tmp_path / "runs", toolkit=toolkit, export_timeout=HANG_TIMEOUT if fault == "hang" else 60
    )
    profiler.start()
    sim.launch("k", count=LAUNCHED)
    profiler.stop()
    [run_dir] = [p for p in (tmp_path / "runs").iterdir() if p.name.startswith("PROF_")]
    with pytest.raises(ExportError) as info:
        profiler.export()
    check_error(info.value, fault, toolkit, run_dir)
    check_no_process_left(toolkit, run_dir)
    assert_nothing_left(simctl)
    retry = Profiler(tmp_path / "runs", toolkit=sim.toolkit())
    retry.export(run_dir.name)
    assert len(retry.store_result(run_dir.name).tasks) == LAUNCHED


async def test_async_export_fault_in_a_shared_window(simctl: SimControl) -> None:
    """Four callers in one window share one failing export: each gets the error, one process ran."""
    simctl.set_latency(init=0.1)
    toolkit = sim.toolkit(export_fault="exit:5")
    profiler = AsyncProfiler(toolkit=toolkit, reader="msprof")
    errors: dict[int, BaseException] = {}
    runs: dict[int, ProfileRun] = {}

    async def one(device: int) -> None:
        try:
            async with profiler.profile(device_id=device) as run:
                runs[device] = run
                sim.launch("k", device=device)
        except ExportError as exc:
            errors[device] = exc

    async with anyio.create_task_group() as tg:
        for device in range(4):
            tg.start_soon(one, device)
    assert sorted(errors) == [0, 1, 2, 3]
    assert len({id(e) for e in errors.values()}) == 1, "the export ran more than once"
    run_dirs = {r.run_dir for r in runs.values()}
    assert len(run_dirs) == 1
    [run_dir] = run_dirs
    assert run_dir is not None and run_dir.is_dir()
    check_no_process_left(toolkit, run_dir)
    assert_nothing_left(simctl)
    assert await profiler.cleanup() == [run_dir]
