"""One front door for a run, on a real run (``910b_l1_div``) and without CANN: every public reader
applies the one reading rule and the one policy.

What is checked, per public reader (sync, and asyncio and trio where async): a link below the run
is refused naming it; a FIFO among the data files fails at once instead of hanging; a file over
its size bound is refused naming the bound; a run with a stray file and no toolkit gives every
source's reason; counters and collection metadata reach summary, report and trace.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

import asc_aprof
from asc_aprof import (
    AsyncProfiler,
    ExportError,
    Profiler,
    RunFileError,
    RunSource,
    RunUnreadable,
    ToolkitNotFoundError,
    aopen_run,
    aread_columns,
    open_run,
    read_columns,
    read_timeline,
    sim,
)
from asc_aprof.cli import main

from ..extras import require
from ..reference import REAL_RUNS, needs_real_runs

pytestmark = needs_real_runs

NAME = "910b_l1_div"
# (in CI the report reader is always among them: CI installs plotly, and its absence fails)
_PLOTLY = importlib.util.find_spec("plotly") is not None or os.environ.get("CI") == "true"


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """A fresh copy of the real run, never exported (no toolkit can be found for it)."""
    source = next((REAL_RUNS / NAME).glob("PROF_*"))
    target = tmp_path / "runs" / source.name
    shutil.copytree(source, target, symlinks=True)
    return target


@pytest.fixture(autouse=True)
def _no_toolkit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No CANN on this machine: discovery finds nothing (the raw reader needs none)."""
    for name in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASC_APROF_SIMULATE", "ASC_APROF_TOOLKIT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("asc_aprof._runs._run.discover_toolkit", _no_cann)


def _no_cann() -> asc_aprof.Toolkit:
    raise ToolkitNotFoundError("no CANN toolkit found", ["(test)"])


# -- every public reader ---------------------------------------------------------------------------
def _sync_readers(run: Path) -> dict[str, Callable[[], object]]:
    profiler = Profiler(run.parent)
    return {
        "store_result": lambda: profiler.store_result(run.name),
        "store_result(counters)": lambda: profiler.store_result(run.name, counters=True),
        "read_columns": lambda: read_columns(run),
        "read_timeline": lambda: read_timeline(run),
        "open_run.result": lambda: open_run(run).result(),
        "open_run.tasks": lambda: list(open_run(run).tasks()),
        "cli summary": lambda: _cli("summary", str(run)),
        "cli summary --metrics": lambda: _cli("summary", "--metrics", str(run)),
        "cli trace": lambda: _cli("trace", str(run), "-o", str(run.parent.parent / "t.json")),
        "cli compare": lambda: _cli("compare", str(run), str(run)),
        **(
            {"cli report": lambda: _cli("report", str(run), "-o", str(run.parent.parent / "r.html"))}
            if _PLOTLY
            else {}
        ),
    }


def _cli(*argv: str) -> None:
    if main(["--debug", *argv]) != 0:
        raise AssertionError(f"asc-aprof {' '.join(argv)} failed")


def _async_readers(run: Path) -> dict[str, Callable[[], Any]]:
    async def iter_tasks() -> list[object]:
        return [t async for t in AsyncProfiler(run.parent).iter_tasks(run.name)]

    async def tasks() -> list[object]:
        handle = await aopen_run(run)
        return [t async for t in handle.tasks()]

    async def timeline() -> object:
        return await (await aopen_run(run)).timeline()

    return {
        "AsyncProfiler.store_result": lambda: AsyncProfiler(run.parent).store_result(run.name),
        "AsyncProfiler.iter_tasks": iter_tasks,
        "aread_columns": lambda: aread_columns(run),
        "aopen_run.tasks": tasks,
        "aopen_run.timeline": timeline,
    }


def test_every_reader_reads_the_real_run_natively(run: Path) -> None:
    for name, read in _sync_readers(run).items():
        read()  # no toolkit: only the raw reader can give it
        assert open_run(run).info.source is None, name  # a fresh handle has read nothing yet


async def test_every_async_reader_reads_the_real_run_natively(run: Path) -> None:
    expected = Profiler(run.parent).store_result(run.name).tasks
    for name, read in _async_readers(run).items():
        got = await read()
        if isinstance(got, list):
            assert tuple(got) == expected, name


def _plant_link(run: Path, where: str) -> Path:
    """Replace *where* (a folder or file below *run*) by a link to a copy of it beside the run."""
    path = run / where
    moved = run.parent.parent / f"moved_{path.name}"
    shutil.move(path, moved)
    path.symlink_to(moved, target_is_directory=moved.is_dir())
    return path


LINKS = ["host/data", "device_0/data", "device_0", "device_0/data/stars_soc.data.0.slice_0", "host/info.json"]


@pytest.mark.parametrize("where", LINKS)
def test_a_link_below_the_run_is_refused_by_every_reader_naming_it(run: Path, where: str) -> None:
    link = _plant_link(run, where)
    for name, read in _sync_readers(run).items():
        with pytest.raises(RunFileError) as info:
            read()
        assert str(link) in str(info.value) and "symbolic link" in str(info.value), name


@pytest.mark.parametrize("where", ["host/data", "device_0/data/stars_soc.data.0.slice_0"])
async def test_a_link_below_the_run_is_refused_by_every_async_reader(run: Path, where: str) -> None:
    link = _plant_link(run, where)
    for name, read in _async_readers(run).items():
        with pytest.raises(RunFileError) as info:
            await read()
        assert str(link) in str(info.value), name


def test_the_run_folder_itself_may_be_a_link_the_user_gave(run: Path, tmp_path: Path) -> None:
    given = tmp_path / "given"
    given.symlink_to(run, target_is_directory=True)
    assert len(open_run(given).result().tasks) == 510


def test_export_never_writes_through_a_planted_output_link(run: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / "mindstudio_profiler_output").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(RunFileError, match="mindstudio_profiler_output: is a symbolic link"):
        Profiler(run.parent, toolkit=sim.toolkit()).export(run.name)
    assert not any(elsewhere.iterdir())


def _fails_at_once(read: Callable[[], object]) -> BaseException | None:
    """*read*'s exception, from a thread that must end (a blocking open would hang it forever)."""
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            read()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(60)  # generous on a loaded machine: the failure is immediate, a hang is for ever
    assert not thread.is_alive(), "the reader hangs on the FIFO"
    return outcome[0]


@pytest.mark.parametrize(
    "where", ["device_0/data/stars_soc.data.0.slice_0", "host/start_info", "device_0/info.json.0"]
)
def test_a_fifo_fails_at_once_naming_it(run: Path, where: str) -> None:
    path = run / where
    path.unlink()
    os.mkfifo(path)
    for name, read in _sync_readers(run).items():
        failure = _fails_at_once(read)
        assert isinstance(failure, RunFileError), (name, failure)
        assert str(path) in str(failure) and "FIFO" in str(failure), name
    # listing the runs of a result path reads host/start_info too: it must not hang either
    assert _fails_at_once(lambda: asc_aprof._cann._layout.list_runs(run.parent)) is None


async def test_a_fifo_fails_at_once_for_async_readers(run: Path) -> None:
    path = run / "device_0/data/stars_soc.data.0.slice_0"
    path.unlink()
    os.mkfifo(path)
    for name, read in _async_readers(run).items():
        with anyio.fail_after(60), pytest.raises(RunFileError, match="FIFO"):
            await read()
        assert True, name


def test_an_oversized_file_is_refused_naming_the_bound(run: Path) -> None:
    stars = run / "device_0/data/stars_soc.data.0.slice_0"
    os.truncate(stars, 3 << 30)  # sparse: nothing is written
    for name, read in _sync_readers(run).items():
        with pytest.raises(RunFileError) as info:
            read()
        message = str(info.value)
        assert str(stars) in message and "bound of 2,147,483,648 bytes" in message, name


# -- one policy, every reason ----------------------------------------------------------------------
def test_a_stray_file_without_a_toolkit_names_every_sources_reason(run: Path) -> None:
    (run / "device_0/data/x.bin").write_bytes(b"x")
    with pytest.raises(RunUnreadable) as info:
        open_run(run).result()
    message = str(info.value)
    assert "raw data: unknown_file: device_0/data/x.bin" in message
    assert "exported CSVs: none in the run" in message
    assert "msprof.py export: no CANN toolkit found" in message
    assert "toolkit=" in message  # the fix, in Python words
    assert [s.source for s in info.value.skipped] == [RunSource.RAW, RunSource.CSV, RunSource.EXPORT]


def test_the_cli_says_every_reason_with_its_flags(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (run / "device_0/data/x.bin").write_bytes(b"x")
    assert main(["summary", str(run)]) == 1
    err = capsys.readouterr().err
    assert "unknown_file: device_0/data/x.bin" in err and "no CANN toolkit found" in err
    assert "toolkit=" not in err and "ASCEND_HOME_PATH" in err
    assert main(["summary", "--reader", "raw", str(run)]) == 1
    err = capsys.readouterr().err
    assert "--reader auto" in err and "reader='auto'" not in err


def test_an_export_failure_still_names_the_raw_readers_reason(run: Path) -> None:
    (run / "device_0/data/x.bin").write_bytes(b"x")
    with pytest.raises(ExportError) as info:
        open_run(run, toolkit=sim.toolkit()).result()
    assert str(info.value).startswith("raw data: unknown_file: device_0/data/x.bin; exported CSVs: none")


def test_a_truncated_slice_says_why(run: Path) -> None:
    stars = run / "device_0/data/stars_soc.data.0.slice_0"
    os.truncate(stars, stars.stat().st_size - 7)
    with pytest.raises(RunUnreadable, match="raw data: malformed"):
        open_run(run).result()


# -- counters and metadata reach every output ------------------------------------------------------
def test_info_says_what_the_run_says(run: Path) -> None:
    handle = open_run(run)
    info = handle.info
    assert (info.chip, info.level, info.metrics, info.devices) == (
        "Ascend 910B",
        "level1",
        "PipeUtilizationExct",
        (0,),
    )
    assert (
        info.collected_at is not None and info.collected_at.isoformat() == "2026-07-16T03:08:05.669436+00:00"
    )
    assert info.cann_version is None and info.driver_version == 467992  # real runs record no CANN version
    handle.result()
    assert handle.info.source is RunSource.RAW and handle.info.skipped == ()


def test_the_report_has_counters_and_the_collection(run: Path, tmp_path: Path) -> None:
    require("plotly")
    out = tmp_path / "r.html"
    assert main(["report", str(run), "-o", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert "No counters" not in page
    assert (
        "Ascend 910B · task time level1 · metrics PipeUtilizationExct · collected 2026-07-16 03:08 UTC"
        in page
    )


def test_the_trace_carries_counters_and_counter_tracks(run: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    assert main(["trace", str(run), "-o", str(out)]) == 0
    events = json.loads(out.read_text())["traceEvents"]
    tasks = [e for e in events if e["ph"] == "X" and e["cat"] != "run"]
    assert len(tasks) == 510 and all("aiv_vec_ratio" in e["args"]["counters"] for e in tasks)
    tracks = {e["name"] for e in events if e["ph"] == "C"}
    assert "aiv_vec_ratio" in tracks
    assert all(isinstance(e["args"]["value"], float) for e in events if e["ph"] == "C")


def test_summary_json_carries_the_collection(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", "--json", str(run)]) == 0
    data = json.loads(capsys.readouterr().out)
    collection = data["runs"][0]["collection"]
    assert collection["chip"] == "Ascend 910B" and collection["source"] == "raw data"
    assert collection["metrics"] == "PipeUtilizationExct"


def test_sweep_timelines_reads_runs_not_exported(tmp_path: Path) -> None:
    """The README's sweep example, as written: no reader= needed."""

    async def sweep() -> list[asc_aprof.SweepItem[int]]:
        profiler = AsyncProfiler(tmp_path / "sweep", toolkit=sim.toolkit())

        def launch(case: int, device: int) -> None:
            sim.launch("add_custom", device=device, count=case)

        async with profiler.sweep([1, 2], launch, devices=[0]) as items:
            return [item async for item in items]

    items = anyio.run(sweep)
    timelines = asc_aprof.sweep_timelines(items, tmp_path / "sweep")
    assert sorted(len(t.tasks) for t in timelines) == [1, 2]
    assert all(t.info is not None and t.info.source is RunSource.RAW for t in timelines)
