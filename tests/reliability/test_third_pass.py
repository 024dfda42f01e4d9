"""Issue 27, the third reliability pass: what fuzzing and a line-by-line review found."""

from __future__ import annotations

import decimal
import gc
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import threading
import tracemalloc
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from asc_aprof import Profiler, Toolkit, read_columns, read_timeline, write_trace
from asc_aprof._cann import _export, _runguard
from asc_aprof._cann._discovery import discover_toolkit
from asc_aprof._cann._layout import list_runs
from asc_aprof._model import _toolkit as _model_toolkit
from asc_aprof._model._errors import ParseError, ToolkitNotFoundError
from asc_aprof._model._toolkit import LIBRARY_NAME
from asc_aprof._outputs._replace import replacing
from asc_aprof._plans._parser import ACCELERATED as PARSER_ACCELERATED
from asc_aprof._plans._parser import TaskParser
from asc_aprof._plans._raw import _sqlite
from asc_aprof._plans._raw._types import Declined, DeclineReason
from asc_aprof._profilers._tune import read_info as tune_read_info
from asc_aprof._runs import _raw_files
from asc_aprof._runs._csv import cell_ns
from asc_aprof._runs._info import read_info as read_run_info
from asc_aprof._runs._raw_files import read_export_rows, read_run
from asc_aprof.report import write_report
from asc_aprof.sim import _build
from asc_aprof.sim._build import SimulatorBuildError
from asc_aprof.stats import kernel_stats

from ..fuzz import fuzz
from ..reference import needs_real_runs
from ._runs import ODD_METADATA, copy_real_run, edit_file, sub

pytestmark = pytest.mark.anyio

SRC = Path(__file__).resolve().parents[2] / "src"


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(SRC))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


# -- 1: a forked child and the parent's temporary root ----------------------------------------------


def test_a_forked_child_that_exits_normally_keeps_the_parents_runs() -> None:
    done = run_python(
        """
        import os, sys
        from asc_aprof._cann._paths import default_result_root
        root = default_result_root()
        (root / "PROF_parent").mkdir()
        pid = os.fork()
        if pid == 0:
            child_root = default_result_root()
            print("child-root", child_root, flush=True)
            sys.exit(0)  # a normal exit: atexit handlers run in the child
        os.waitpid(pid, 0)
        print("parent-run", (root / "PROF_parent").is_dir(), flush=True)
        print("parent-root", root, flush=True)
        """
    )
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert lines["parent-run"] == "True"
    # the child had a root of its own, which its exit removed; the parent's is removed at its exit
    assert lines["child-root"] != lines["parent-root"]
    assert not Path(lines["child-root"]).exists()
    assert not Path(lines["parent-root"]).exists()


# -- 10: a cancelled read_run_async whose read never ends ----------------------------------------


async def test_a_cancelled_read_run_async_blocked_on_its_files_leaves_the_collector_on(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    entered = threading.Event()
    release = threading.Event()
    listing = _raw_files._listing

    def never_ends(run_dir: Path) -> dict[str, list[str]]:  # a read that blocks (a hung mount)
        entered.set()
        release.wait(30)
        return listing(run_dir)

    monkeypatch.setattr(_raw_files, "_listing", never_ends)
    assert gc.isenabled()
    interval = sys.getswitchinterval()
    try:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_raw_files.read_run_async, tmp_path / "PROF_1")
                await anyio.to_thread.run_sync(entered.wait, 10)
                scope.cancel()
        assert scope.cancelled_caught
        # the worker is still blocked in its read: nothing process-wide may be changed meanwhile
        assert not release.is_set()
        assert gc.isenabled()
        assert sys.getswitchinterval() == interval
    finally:
        release.set()


# -- 2: start cells in exponent form: bounded, in the reader's own decimal context ---------------

OP_HEADER = (
    "Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,Task Start Time(us),"
    "Task Duration(us),Task Wait Time(us),Block Num,Input Shapes\n"
)


def exported_run(base: Path, rows: list[str], header: str = OP_HEADER) -> Path:
    """A run holding only an exported op_summary CSV (new layout) with *rows*."""
    out = base / "PROF_000001_20260101000000000_00012345ABCDEFGH" / "mindstudio_profiler_output"
    out.mkdir(parents=True)
    (out / "op_summary_20260101000000.csv").write_text(header + "".join(r + "\n" for r in rows))
    return out.parent


def op_row(start: str, task_id: int = 0) -> str:
    return f'0,4294967295,{task_id},1,Add,Add,dynamic,AI_VECTOR_CORE,{start}\t,18.5,0,1,"""8"""'


@pytest.mark.parametrize("start", ["1e999999999", "1e999990", "1e5000", "9" * 5000, "-1e40"])
def test_start_cells_out_of_any_clock_are_no_start_time(tmp_path: Path, start: str) -> None:
    run = exported_run(tmp_path, [op_row("1784171285754947.983"), op_row(start, 1)])
    assert cell_ns(start, 1000) is None
    timeline = read_timeline(run)
    assert [t.start_ns for t in timeline.tasks] == [1784171285754947983, None]


def test_start_cells_ignore_the_callers_decimal_context(tmp_path: Path) -> None:
    run = exported_run(tmp_path, [op_row("1.784171285754947983e15"), op_row("17841712857549479835e-4", 1)])
    hostile = decimal.Context(prec=5, Emax=10, traps=[decimal.Inexact, decimal.Overflow, decimal.Rounded])
    with decimal.localcontext(hostile):
        assert cell_ns("1.784171285754947983e15", 1000) == 1784171285754947983
        starts = [t.start_ns for t in read_timeline(run).tasks]
    assert starts == [1784171285754947983, 1784171285754947984]  # 0.5 ns: half even


# -- 8: metadata that is no number a clock can come from ----------------------------------------


@needs_real_runs
@pytest.mark.parametrize("case", sorted(ODD_METADATA))
def test_odd_metadata_is_declined_as_malformed(tmp_path: Path, case: str) -> None:
    rel, edit = ODD_METADATA[case]
    run = copy_real_run("310b_addcmul", tmp_path)
    edit_file(run / rel, edit)
    for outcome in (read_run(run, counters=True), read_export_rows(run, pmu=True)):
        assert isinstance(outcome, Declined), case
        assert outcome.reason is DeclineReason.MALFORMED, outcome


# -- 9: run metadata nested deeper than the interpreter's recursion limit ------------------------

DEEP_JSON = "[" * 100_000 + "]" * 100_000


def test_deeply_nested_metadata_is_just_not_json(tmp_path: Path, toolkit: Toolkit) -> None:
    run = exported_run(tmp_path, [op_row("1784171285754947.983")])
    (run / "host").mkdir()
    for name in ("start_info", "info.json", "sample.json"):
        (run / "host" / name).write_text(DEEP_JSON)
    assert list_runs(tmp_path) == [run]
    assert tune_read_info(run) == {}  # tune's platform probe
    assert read_run_info(run).run_id == run.name
    result = Profiler(tmp_path, toolkit=toolkit).store_last_result()
    assert [t.name for t in result.tasks] == ["Add"]


@needs_real_runs
def test_deeply_nested_raw_metadata_is_declined_as_malformed(tmp_path: Path) -> None:
    run = copy_real_run("310b_addcmul", tmp_path)
    (run / "device_0" / "info.json.0").write_text(DEEP_JSON)
    for outcome in (read_run(run), read_export_rows(run)):
        assert isinstance(outcome, Declined) and outcome.reason is DeclineReason.MALFORMED, outcome


# -- 11: report and trace files: no predictable name to plant a link at --------------------------


@pytest.mark.parametrize("name", ["trace.json", "trace.json.gz", "report.html"])
def test_a_link_planted_at_the_old_partial_name_is_not_followed(tmp_path: Path, name: str) -> None:
    run = exported_run(tmp_path / "runs", [op_row("1784171285754947.983"), op_row("1784171285754948.983", 1)])
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("the user's file\n")
    (out / f".{name}.partial").symlink_to(victim)
    target = out / name
    old = os.umask(0o022)
    try:
        if name.endswith(".html"):
            pytest.importorskip("plotly")
            written = write_report([read_timeline(run)], target)
        else:
            written = write_trace([read_timeline(run)], target)
    finally:
        os.umask(old)
    assert written == target and target.is_file() and not target.is_symlink()
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert victim.read_text() == "the user's file\n"
    assert sorted(p.name for p in out.iterdir()) == sorted([name, f".{name}.partial"])  # nothing left


def test_a_failed_write_leaves_no_temporary_file(tmp_path: Path) -> None:
    with pytest.raises(OSError), replacing(tmp_path / "x.json") as stream:
        stream.write(b"half")
        raise OSError("disk full")
    assert list(tmp_path.iterdir()) == []


# -- 12: the in-process export lock and the signalled process group -----------------------------


def test_every_spelling_of_a_run_is_one_export_slot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "runs" / "PROF_000001_20260101000000000_00000001AAAAAAAA"
    run.mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "runs")
    monkeypatch.chdir(tmp_path)
    spellings = [
        Path("runs") / run.name,
        tmp_path / "link" / run.name,
        tmp_path / "runs" / ".." / "runs" / run.name,
    ]
    with _runguard.exporting(run):
        for other in spellings:
            assert _runguard._in_progress(other) is not None, other
    assert all(_runguard._in_progress(other) is None for other in [run, *spellings])


FAKE_MSPROF = """\
import sys
from pathlib import Path

out = Path(sys.argv[sys.argv.index("-dir") + 1]) / "mindstudio_profiler_output"
out.mkdir(exist_ok=True)
text = "Device_id,Op Name,Task Type,Task Duration(us)\\n0,k,AI_CORE,1.5\\n"
(out / "op_summary_20260101000000.csv").write_text(text)
"""


def guard_state_when_signalled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Toolkit, Path, list[str]]:
    """A fake export, and the list where each SIGKILL of its group notes the guard's state then."""
    script = tmp_path / "fake_msprof" / "msprof.py"
    script.parent.mkdir()
    script.write_text(FAKE_MSPROF)
    toolkit = Toolkit(library=tmp_path / "none.so", msprof_script=script, python=sys.executable)
    run = tmp_path / "PROF_000001_20260101000000000_00000001AAAAAAAA"
    run.mkdir()
    seen: list[str] = []
    kill_group = _export.kill_group

    def noting(pid: int) -> None:
        try:  # field 3 of /proc/<pid>/stat: Z while the guard is an unreaped zombie
            seen.append((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0])
        except FileNotFoundError:
            seen.append("reaped: its pid, the group's id, may name another process by now")
        kill_group(pid)

    monkeypatch.setattr(_export, "kill_group", noting)
    return toolkit, run, seen


def test_sync_export_signals_its_group_before_reaping_the_guard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    toolkit, run, seen = guard_state_when_signalled(tmp_path, monkeypatch)
    assert len(_export.run_export(toolkit, run, timeout=60)) == 1
    assert seen and all(state == "Z" for state in seen), seen


async def test_async_export_signals_its_group_before_reaping_the_guard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    toolkit, run, seen = guard_state_when_signalled(tmp_path, monkeypatch)
    assert len(await _export.run_export_async(toolkit, run, timeout=60)) == 1
    assert seen and all(state == "Z" for state in seen), seen


# -- 13: trust: the simulator's build cache, a relative ASCEND_HOME_PATH --------------------------


def test_a_planted_simulator_tree_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_build.CACHE_VARIABLE, str(tmp_path / "cache"))
    root = _build.ensure_built()
    library = root / "lib64" / LIBRARY_NAME
    assert _build._untrusted(root) is None
    # Someone who can write the tree (here: group-writable) swaps the library ctypes loads.
    library.write_bytes(b"planted")
    library.chmod(0o775)
    assert _build.ensure_built() == root
    assert library.read_bytes() != b"planted"  # built again
    assert _build._untrusted(root) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file to another user")
def test_another_users_simulator_tree_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_build.CACHE_VARIABLE, str(tmp_path / "cache"))
    root = _build.ensure_built()
    os.chown(root, 65534, 65534)  # a tree another user made (or planted) in a shared cache
    with pytest.raises(SimulatorBuildError, match=r"belongs to user 65534.*ASC_APROF_SIM_CACHE"):
        _build.ensure_built()
    assert root.is_dir()  # left alone: not this user's to remove


@pytest.mark.parametrize("variable", ["ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"])
def test_a_relative_cann_root_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    # A toolkit in the working directory, which a relative root would pick.
    (tmp_path / "cann" / "lib64").mkdir(parents=True)
    (tmp_path / "cann" / "lib64" / LIBRARY_NAME).write_bytes(b"")
    script = tmp_path / "cann" / _model_toolkit.MSPROF_SCRIPT
    script.parent.mkdir(parents=True)
    script.write_text("")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ToolkitNotFoundError, match=f"\\${variable} is 'cann', a relative path"):
        discover_toolkit({variable: "cann"})


# -- the fuzzing that found these, repeatable ----------------------------------------------------


def test_fixed_seed_fuzzing_raises_only_aprof_errors() -> None:
    """120 cases of seed 0 (``python -m tests.fuzz``; docs/reliability.md gives the longer run):
    no public reading API raises anything but an AprofError on a mutated real run or hostile CSV."""
    done, failures = fuzz(seed=0, cases=120)
    assert done == 120
    assert failures == [], "\n\n".join(failures)


# -- 3: statistics of many distinct devices and names: no dense device x name table -------------


def distinct_rows(count: int) -> list[str]:
    return [
        f'{i},4294967295,{i},1,k{i},Add,dynamic,AI_VECTOR_CORE,{1784171285754947 + i}.000\t,1.5,0,1,"""8"""'
        for i in range(count)
    ]


@pytest.mark.skipif(not PARSER_ACCELERATED, reason="the optional C parser is not built")
@pytest.mark.parametrize("rows", [16_384, 20_000])
def test_statistics_of_distinct_devices_and_names_stay_small(tmp_path: Path, rows: int) -> None:
    run = exported_run(tmp_path, distinct_rows(rows))
    columns = read_columns(run)
    tracemalloc.start()
    try:
        stats = kernel_stats(columns)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(stats) == rows
    assert peak < 64 << 20, f"{peak >> 20} MiB"  # (the dense table was 1 GiB at 16,384 rows)
    assert [(s.device, s.name) for s in stats][:2] == [(0, "k0"), (1, "k1")]


# -- 4: the C number reader has no exponent cap -------------------------------------------------

HIDDEN_HUGE = "0." + "0" * 10_000 + "1e100005"  # 1e90004: not finite (C read it as 0.1)
COUNTER_HEADER = "Op Name,Task Type,Task Duration(us),aic_mac_ratio"


@pytest.mark.parametrize("accelerated", [True, False])
@pytest.mark.parametrize("columnar", [False, True])
@pytest.mark.parametrize("row", [f"k,AI_CORE,{HIDDEN_HUGE},0.5", f"k,AI_CORE,1.5,{HIDDEN_HUGE}"])
def test_an_exponent_past_ten_thousand_is_read_in_full(accelerated: bool, columnar: bool, row: str) -> None:
    if accelerated and not PARSER_ACCELERATED:
        pytest.skip("the optional C parser is not built")
    parser = TaskParser("x.csv", accelerated=accelerated, counters=True, columnar=columnar)
    with pytest.raises(ParseError, match="not a finite number") as info:
        parser.feed(f"{COUNTER_HEADER}\nk,AI_CORE,1.0,0.25\n{row}\n".encode())
        parser.close()
    assert info.value.line == 3


# -- 5: words the exporter cannot store in SQLite (2**63 or more) -------------------------------


def set_top_bit(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] |= 0x80
    path.write_bytes(bytes(data))


@needs_real_runs
def test_a_task_track_timestamp_past_2_63_is_declined(tmp_path: Path) -> None:
    run = copy_real_run("310b_addcmul", tmp_path)
    set_top_bit(run / "host" / "data" / "aging.compact.task_track.slice_0", 64 + 16 + 7)  # record 1
    for outcome in (read_run(run), read_export_rows(run)):
        assert isinstance(outcome, Declined) and outcome.reason is DeclineReason.UNSUPPORTED, outcome
        assert "task_track timestamp of 2**63 or more" in outcome.message


@needs_real_runs
def test_an_ffts_profile_word_past_2_63_is_declined_where_counters_are_read(tmp_path: Path) -> None:
    run = copy_real_run("910b_l1_div", tmp_path)
    set_top_bit(run / "device_0" / "data" / "ffts_profile.data.0.slice_0", 128 * 3 + 32 + 7)  # total cycles
    for outcome in (read_run(run, counters=True), read_export_rows(run, pmu=True)):
        assert isinstance(outcome, Declined) and outcome.reason is DeclineReason.UNSUPPORTED, outcome
        assert "ffts_profile word" in outcome.message


def test_a_word_split_across_slice_files_is_found() -> None:
    record = bytearray(64)
    record[16 + 7] = 0x80
    data = bytes(64) * 3 + bytes(record) + bytes(64)
    for cut in (0, 1, 100, 64 * 3 + 20, 64 * 3 + 23, 64 * 3 + 24, len(data)):
        assert _sqlite._top_bit_at([data[:cut], data[cut:]], 64, (16,)), cut
    assert not _sqlite._top_bit_at([bytes(64) * 5], 64, (16,))


def test_the_check_looks_at_every_record_of_every_window(monkeypatch: pytest.MonkeyPatch) -> None:
    # Windows of 4 records: a set word is found in the first, the last and a boundary record,
    # also where a split slice file moves the phase.
    monkeypatch.setattr(_sqlite, "WINDOW", 4)
    for at in (0, 3, 4, 5, 15, 16, 22):
        data = bytearray(64 * 23)
        data[64 * at + 16 + 7] = 0x80
        for cut in (0, 64 * 4 + 10, 64 * 9):
            assert _sqlite._top_bit_at([bytes(data[:cut]), bytes(data[cut:])], 64, (16,)), (at, cut)
    assert not _sqlite._top_bit_at([bytes(64 * 23)], 64, (16,))


# -- 6: device_N/sample.json "devices" decides what the exporter writes --------------------------


@needs_real_runs
@pytest.mark.parametrize("devices", ['"0,1"', '""', "0", '"1"', None])
def test_a_device_sample_naming_other_devices_is_declined(tmp_path: Path, devices: str | None) -> None:
    run = copy_real_run("310b_addcmul", tmp_path)
    sample = run / "device_0" / "sample.json"
    replacement = "" if devices is None else f'"devices":{devices},'
    edit_file(sample, sub(r'"devices":\s*"0",\s*', replacement))
    for outcome in (read_run(run), read_export_rows(run)):
        assert isinstance(outcome, Declined) and outcome.reason is DeclineReason.UNSUPPORTED, outcome
        assert "device_0/sample.json devices=" in outcome.message


# -- 7: hash_dic / type_info_dic slices that name one key differently ---------------------------


@needs_real_runs
@pytest.mark.parametrize(
    ("kind", "extra"),
    [
        ("hash_dic", "aging.additional.hash_dic.slice_1"),  # a later slice: the exporter takes its name
        ("hash_dic", "aging.additional.hash_dic.slice_0"),  # two slice_0: the listing order decides
        ("type_info_dic", "aging.additional.type_info_dic.slice_1"),
    ],
)
def test_a_name_redefined_by_another_slice_is_declined_as_ambiguous(
    tmp_path: Path, kind: str, extra: str
) -> None:
    run = copy_real_run("310b_addcmul", tmp_path)
    data = run / "host" / "data"
    first = (data / f"unaging.additional.{kind}.slice_0").read_text().splitlines()[0]
    key = first.split(":", 1)[0]
    (data / extra).write_text(f"{key}:OTHER_NAME\n")
    for outcome in (read_run(run), read_export_rows(run)):
        assert isinstance(outcome, Declined) and outcome.reason is DeclineReason.AMBIGUOUS, outcome
        assert "is named both" in outcome.message and "'OTHER_NAME'" in outcome.message


@needs_real_runs
def test_slices_that_agree_are_read(tmp_path: Path) -> None:
    run = copy_real_run("310b_addcmul", tmp_path)
    data = run / "host" / "data"
    expected = read_run(run)
    shutil.copyfile(data / "unaging.additional.hash_dic.slice_0", data / "aging.additional.hash_dic.slice_0")
    assert not isinstance(expected, Declined)
    assert read_run(run) == expected
