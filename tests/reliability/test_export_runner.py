"""The export runners, sync and async, against hand-written fake ``msprof.py`` scripts.

Each fake is a few lines written to a temporary directory and run the way the real script is
(``export summary -dir <run>``). It writes a valid op_summary into the run, or fails, after doing
one hostile thing the simulator does not: leave a process that called ``setsid`` holding its
output open, flood stdout or stderr (``\\r`` progress output, or warnings), bury its error under
INFO lines (the real msprof.py prints its log lines to stdout), or delete the run directory.

After every case: the error (or the CSVs) is what the user must see, and no child of this
process is left, running or unreaped.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asc_aprof import ExportError, Toolkit
from asc_aprof._cann._export import (
    _GUARD,
    ERROR_LINES,
    WARNING_LINES,
    OutputTail,
    _Export,
    _wait,
    export_command,
    guard_command,
    run_export,
    run_export_async,
)
from asc_aprof._cann._layout import CsvFile

from ._support import child_pids, wait_until

FAKE_PRELUDE = """\
import os, shutil, subprocess, sys, time
from pathlib import Path

run = Path(sys.argv[sys.argv.index("-dir") + 1])


def write_csv():
    out = run / "mindstudio_profiler_output"
    out.mkdir(exist_ok=True)
    (out / "op_summary_20260101000000.csv").write_text(
        "Device_id,Op Name,Task Type,Task Duration(us)\\n0,k,AI_CORE,1.5\\n"
    )


"""

#: Leaves a process in a session of its own holding stderr, then succeeds.
STRAY_HOLDS_STDERR = """\
stray = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(60)"],
    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True,
)
(run / "stray.pid").write_text(str(stray.pid))
print("[INFO] a helper outside the process group keeps stderr open", file=sys.stderr, flush=True)
write_csv()
"""

#: MB of output on stdout or stderr, then the real error line, then exit 1.
FLOOD = """\
mb = int(os.environ["FAKE_MB"])
sep = os.environ["FAKE_SEP"].encode()
out = getattr(sys, os.environ["FAKE_STREAM"])
piece = b"".join(b"%s progress %7d/%d" % (sep, i, 1 << 16) for i in range(1 << 16))
for _ in range(max(1, (mb << 20) // len(piece))):
    out.buffer.write(piece)
out.buffer.write(b"\\n[ERROR] the real failure\\n")
out.flush()
sys.exit(1)
"""

#: As the real msprof.py fails: its [WARNING] and [ERROR] lines on stdout, a traceback on
#: stderr, then MB of [INFO] lines of the steps that went on (each line flushed, as it does).
ERROR_THEN_INFO = """\
def log(level, text):
    print("Mon 01 Jan 2026 00:00:00 [%s] [MSVP] [%d] msprof_export.py: %s" % (level, os.getpid(), text),
          flush=True)


log("WARNING", "Can not find any host or device path")
log("ERROR", "the real failure")
sys.stderr.write("Traceback (most recent call last):\\nValueError: in a worker\\n")
sys.stderr.flush()
for i in range((int(os.environ["FAKE_MB"]) << 20) // 100):
    log("INFO", "Start analyzing data %08d ..." % i)
sys.exit(3)
"""

#: Deletes the run directory, then fails, succeeds without CSV, or hangs.
DELETES_THE_RUN = """\
shutil.rmtree(run)
print("[ERROR] removed " + str(run), file=sys.stderr, flush=True)
how = os.environ["FAKE_HOW"]
if how == "hang":
    time.sleep(3600)
sys.exit(1 if how == "fail" else 0)
"""


def fake_toolkit(tmp_path: Path, body: str, **env: str) -> Toolkit:
    script = tmp_path / "fake_msprof" / "msprof.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text(FAKE_PRELUDE + textwrap.dedent(body), encoding="utf-8")
    return Toolkit(library=tmp_path / "no_library.so", msprof_script=script, python=sys.executable, env=env)


@pytest.fixture
def run_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "runs" / "PROF_000001_20260101000000000_00000001AAAAAAAA"
    path.mkdir(parents=True)
    yield path
    assert child_pids() == [], "a child process was left running or unreaped"


@pytest.fixture
def stray_killer(run_dir: Path) -> Iterator[Callable[[], int]]:
    """The stray's pid (once written); the stray is killed after the test whatever happens."""
    pid_file = run_dir / "stray.pid"

    def pid() -> int:
        assert wait_until(pid_file.is_file, 10.0), "the fake never started its stray"
        return int(pid_file.read_text())

    yield pid
    if pid_file.is_file():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def _single_csv(files: list[CsvFile], run_dir: Path) -> None:
    assert [f.path for f in files] == [
        run_dir / "mindstudio_profiler_output" / "op_summary_20260101000000.csv"
    ]


# -- the export ends when msprof.py exits, whoever else holds its stderr ---------------------


def test_sync_export_ends_when_msprof_exits_though_a_stray_holds_stderr(
    tmp_path: Path, run_dir: Path, stray_killer: Callable[[], int]
) -> None:
    toolkit = fake_toolkit(tmp_path, STRAY_HOLDS_STDERR)
    # Before the fix: communicate() waited for EOF, the timeout fired, then it waited forever.
    _single_csv(run_export(toolkit, run_dir, timeout=20), run_dir)
    os.kill(stray_killer(), 0)  # the stray is there (killed by the fixture)


@pytest.mark.anyio
async def test_async_export_ends_when_msprof_exits_though_a_stray_holds_stderr(
    tmp_path: Path, run_dir: Path, stray_killer: Callable[[], int]
) -> None:
    toolkit = fake_toolkit(tmp_path, STRAY_HOLDS_STDERR)
    # Before the fix: the drain waited for EOF and the successful export was reported timed out.
    _single_csv(await run_export_async(toolkit, run_dir, timeout=20), run_dir)
    os.kill(stray_killer(), 0)


# -- stderr: a bounded tail, whatever is written ---------------------------------------------

FLOOD_MB = 24
#: Peak of Python allocations while exporting, far below the flood (tracemalloc, not RSS).
PEAK_LIMIT = 4 << 20
TAIL_LIMIT = 20 * 4200


STREAMS = pytest.mark.parametrize("stream", ["stderr", "stdout"])


@STREAMS
@pytest.mark.parametrize("separator", ["\r", "\n"], ids=["cr-progress", "lf-warnings"])
def test_sync_export_keeps_a_bounded_output_tail(
    tmp_path: Path, run_dir: Path, separator: str, stream: str
) -> None:
    toolkit = fake_toolkit(tmp_path, FLOOD, FAKE_MB=str(FLOOD_MB), FAKE_SEP=separator, FAKE_STREAM=stream)
    tracemalloc.start()
    try:
        with pytest.raises(ExportError) as info:
            run_export(toolkit, run_dir, timeout=120)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    check_flood_error(info.value, peak)


@pytest.mark.anyio
@STREAMS
@pytest.mark.parametrize("separator", ["\r", "\n"], ids=["cr-progress", "lf-warnings"])
async def test_async_export_keeps_a_bounded_output_tail(
    tmp_path: Path, run_dir: Path, separator: str, stream: str
) -> None:
    toolkit = fake_toolkit(tmp_path, FLOOD, FAKE_MB=str(FLOOD_MB), FAKE_SEP=separator, FAKE_STREAM=stream)
    tracemalloc.start()
    try:
        with pytest.raises(ExportError) as info:
            await run_export_async(toolkit, run_dir, timeout=120)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    check_flood_error(info.value, peak)


def check_flood_error(error: ExportError, peak: int) -> None:
    assert error.returncode == 1 and "exited with 1" in str(error)
    lines = error.output_tail.split("\n")
    assert error.stderr_tail == error.output_tail  # the former name
    assert lines[-1] == "[ERROR] the real failure"
    assert "65535/65536" in lines[-2]
    assert len(lines) <= 20 and len(error.output_tail) <= TAIL_LIMIT
    assert error.diagnostics == "[ERROR] the real failure"
    assert peak < PEAK_LIMIT, f"{peak / 2**20:.1f} MiB allocated at the peak for {FLOOD_MB} MiB of output"


# -- the error line comes first, however many INFO lines follow it -----------------------------

INFO_MB = 8


def test_sync_export_error_shows_the_error_buried_under_info_lines(tmp_path: Path, run_dir: Path) -> None:
    toolkit = fake_toolkit(tmp_path, ERROR_THEN_INFO, FAKE_MB=str(INFO_MB))
    tracemalloc.start()
    try:
        with pytest.raises(ExportError) as info:
            run_export(toolkit, run_dir, timeout=120)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    check_buried_error(info.value, peak)


@pytest.mark.anyio
async def test_async_export_error_shows_the_error_buried_under_info_lines(
    tmp_path: Path, run_dir: Path
) -> None:
    toolkit = fake_toolkit(tmp_path, ERROR_THEN_INFO, FAKE_MB=str(INFO_MB))
    tracemalloc.start()
    try:
        with pytest.raises(ExportError) as info:
            await run_export_async(toolkit, run_dir, timeout=120)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    check_buried_error(info.value, peak)


def check_buried_error(error: ExportError, peak: int) -> None:
    assert error.returncode == 3
    warning, failure = error.diagnostics.split("\n")
    stamp = r"Mon 01 Jan 2026 00:00:00 \[{}\] \[MSVP\] \[\d+\] msprof_export.py: "
    assert re.fullmatch(stamp.format("WARNING") + "Can not find any host or device path", warning)
    assert re.fullmatch(stamp.format("ERROR") + "the real failure", failure)
    tail = error.output_tail.split("\n")
    assert len(tail) == 20 and all("[INFO]" in line for line in tail)
    assert tail[-1].endswith(f"Start analyzing data {(INFO_MB << 20) // 100 - 1:08d} ...")
    assert "ValueError" not in error.output_tail  # long scrolled out of the tail
    text = str(error)
    # The reason first, then the tail.
    assert text.index(failure) < text.index("other output (last lines") < text.index(tail[-1])
    assert peak < PEAK_LIMIT, f"{peak / 2**20:.1f} MiB allocated at the peak for {INFO_MB} MiB of output"


# -- what the error says when msprof.py deleted the run ---------------------------------------

DELETE_CASES = [("fail", "exited with 1"), ("nocsv", "wrote no"), ("hang", "did not finish within")]


def check_deleted_run_error(error: ExportError, run_dir: Path, expected: str) -> None:
    text = str(error)
    assert expected in text
    assert not run_dir.exists()
    assert "kept" not in text, "the message claims the deleted raw data is kept"
    assert f"{run_dir} no longer exists" in text and "lost" in text


@pytest.mark.parametrize(("how", "expected"), DELETE_CASES, ids=[c[0] for c in DELETE_CASES])
def test_sync_error_says_the_run_was_deleted(tmp_path: Path, run_dir: Path, how: str, expected: str) -> None:
    toolkit = fake_toolkit(tmp_path, DELETES_THE_RUN, FAKE_HOW=how)
    with pytest.raises(ExportError) as info:
        run_export(toolkit, run_dir, timeout=3 if how == "hang" else 60)
    check_deleted_run_error(info.value, run_dir, expected)


@pytest.mark.anyio
@pytest.mark.parametrize(("how", "expected"), DELETE_CASES, ids=[c[0] for c in DELETE_CASES])
async def test_async_error_says_the_run_was_deleted(
    tmp_path: Path, run_dir: Path, how: str, expected: str
) -> None:
    toolkit = fake_toolkit(tmp_path, DELETES_THE_RUN, FAKE_HOW=how)
    with pytest.raises(ExportError) as info:
        await run_export_async(toolkit, run_dir, timeout=3 if how == "hang" else 60)
    check_deleted_run_error(info.value, run_dir, expected)


# -- cancellation of the async runner ----------------------------------------------------------


@pytest.mark.anyio
async def test_async_export_cancelled_while_a_stray_holds_stderr(
    tmp_path: Path, run_dir: Path, stray_killer: Callable[[], int]
) -> None:
    """Cancelled mid-export: the guard's group is killed and reaped; nothing waits on the stray."""
    toolkit = fake_toolkit(tmp_path, STRAY_HOLDS_STDERR.replace("write_csv()", "time.sleep(3600)"))
    with anyio.move_on_after(30) as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_export_async, toolkit, run_dir)
            await anyio.to_thread.run_sync(stray_killer)
            tg.cancel_scope.cancel()
    assert not scope.cancelled_caught, "the cancelled export did not return"


# -- the thread that started an export may end before it ---------------------------------------


def test_an_export_started_by_a_thread_that_exits_runs_to_its_end(tmp_path: Path, run_dir: Path) -> None:
    """Nothing ties an export to the thread that started it (``PR_SET_PDEATHSIG`` would have
    killed it when the thread ended): a worker thread, or a short-lived thread of the program."""
    toolkit = fake_toolkit(tmp_path, "time.sleep(1)\nwrite_csv()\n")
    started: list[_Export] = []
    thread = threading.Thread(
        target=lambda: started.append(_Export(toolkit, export_command(toolkit, run_dir)))
    )
    thread.start()
    thread.join()
    [export] = started
    try:
        assert _wait(export, time.monotonic() + 60)
    finally:
        export.close()
    assert export.proc.returncode == 0
    assert (run_dir / "mindstudio_profiler_output").is_dir()


# -- the tail itself ----------------------------------------------------------------------------

TAIL_PIECES = [b"a", b"warning: x", b"\r", b"\n", b"\r\n", b" ", b"\t", b"\xe6\xa0\xb8", b"\xff", b"y" * 3000]
#: With msprof.py's markers: a line may hold several, or one beyond the kept start of a long line;
#: the same message from two of its processes is one diagnostic.
LOG_PIECES = [
    *TAIL_PIECES,
    *(b"[ERROR] e", b"[ERROR] f", b"[WARNING] w", b"[INFO] i", b"[ERR", b"OR]"),
    *(b"t1 [ERROR] [MSVP] [12] m", b"t2 [ERROR] [MSVP] [345] m", b"[WARNING] [MSVP] [12] m"),
]


def reference_tail(data: bytes, lines: int = 20, line_bytes: int = 4096) -> str:
    """What the tail must be: every line ending at \\n, \\r or \\r\\n, blank ones dropped, each cut."""
    kept = [
        line if len(line) <= line_bytes else line[:line_bytes] + b" [...]"
        for line in re.split(rb"\r\n|\r|\n", data)
        if line.strip()
    ]
    return "\n".join(line.decode("utf-8", "replace") for line in kept[-lines:])


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(
    pieces=st.lists(st.sampled_from(TAIL_PIECES), max_size=80),
    cuts=st.lists(st.integers(0, 250_000), max_size=12),
    lines=st.sampled_from([1, 3, 20]),
)
def test_output_tail_is_the_last_lines_however_the_bytes_arrive(
    pieces: list[bytes], cuts: list[int], lines: int
) -> None:
    data = b"".join(pieces)
    tail = OutputTail(lines=lines)
    previous = 0
    for cut in [*sorted(c for c in cuts if c <= len(data)), len(data)]:
        tail.feed(data[previous:cut])
        previous = cut
    assert tail.text() == reference_tail(data, lines)


def reference_diagnostics(data: bytes, errors: int, warnings: int, line_bytes: int = 4096) -> str:
    """The newest [ERROR] and [WARNING] lines (the marker in the kept start) of distinct messages
    (from the marker on, less the process id), in order."""
    *finished, unfinished = re.split(rb"\r\n|\r|\n", data)
    newest: dict[bytes, tuple[int, bytes, bytes]] = {}  # message -> (position, kind, line)
    for index, line in enumerate(finished):
        marker = re.search(rb"\[(ERROR|WARNING)\]", line[:line_bytes])
        if marker is not None:
            message = re.sub(rb"^(\[\w+\] \[MSVP\] )\[\d+\] ", rb"\1", line[marker.start() : line_bytes])
            kept = line if len(line) <= line_bytes else line[:line_bytes] + b" [...]"
            newest.pop(message, None)
            newest[message] = (index, marker.group(1), kept)
    by_age = sorted(newest.values())
    out: list[bytes] = []
    for index, kind, line in by_age:
        later = sum(1 for other in by_age if other[1] == kind and other[0] > index)
        if later < (errors if kind == b"ERROR" else warnings):
            out.append(line)
    if re.search(rb"\[(ERROR|WARNING)\]", unfinished[:line_bytes]) and unfinished.strip():
        out.append(unfinished if len(unfinished) <= line_bytes else unfinished[:line_bytes] + b" [...]")
    return "\n".join(line.decode("utf-8", "replace") for line in out)


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(
    pieces=st.lists(st.sampled_from(LOG_PIECES), max_size=80),
    cuts=st.lists(st.integers(0, 250_000), max_size=12),
    lines=st.sampled_from([1, 3, 20]),
    errors=st.sampled_from([1, 2, ERROR_LINES]),
    warnings=st.sampled_from([0, 1, WARNING_LINES]),
)
def test_output_tail_keeps_the_last_diagnostics_however_the_bytes_arrive(
    pieces: list[bytes], cuts: list[int], lines: int, errors: int, warnings: int
) -> None:
    data = b"".join(pieces)
    tail = OutputTail(lines=lines, errors=errors, warnings=warnings)
    previous = 0
    for cut in [*sorted(c for c in cuts if c <= len(data)), len(data)]:
        tail.feed(data[previous:cut])
        previous = cut
    assert tail.diagnostics() == reference_diagnostics(data, errors, warnings)
    assert tail.text() == reference_tail(data, lines)


def test_errors_outlast_the_info_and_warning_lines_after_them() -> None:
    tail = OutputTail(lines=5)
    tail.feed(b"[INFO] start\n[ERROR] first\n[ERROR] the reason\n")
    for i in range(1000):  # one chunk, or line by line: the same
        tail.feed(b"[WARNING] device %d has no data\n[INFO] step %d\n" % (i, i) if i % 2 else b"[INFO] x\n")
    tail.feed(b"[INFO] step 999\n" * 3000)
    lines = tail.diagnostics().split("\n")
    assert lines[:2] == ["[ERROR] first", "[ERROR] the reason"]
    assert lines[2:] == [f"[WARNING] device {i} has no data" for i in (993, 995, 997, 999)]
    assert tail.text() == "\n".join(["[INFO] step 999"] * 5)


def test_diagnostics_are_bounded_and_repeats_kept_once() -> None:
    tail = OutputTail()
    tail.feed(b"".join(b"[ERROR] e%d\n" % i for i in range(50)) + b"[ERROR] e3\n" * 100)
    assert tail.diagnostics().split("\n") == [f"[ERROR] e{i}" for i in (43, 44, 45, 46, 47, 48, 49, 3)]
    workers = OutputTail()  # each of msprof.py's processes prints the same warning
    workers.feed(b"".join(b"10:00 [WARNING] [MSVP] [%d] x.py: no data\n" % pid for pid in range(100, 110)))
    workers.feed(b"10:01 [WARNING] [MSVP] [7] y.py: other\n10:02 [WARNING] [MSVP] [100] x.py: no data\n")
    assert workers.diagnostics().split("\n") == [
        "10:01 [WARNING] [MSVP] [7] y.py: other",
        "10:02 [WARNING] [MSVP] [100] x.py: no data",
    ]
    long = OutputTail(line_bytes=16)  # markers split across chunks, lines cut
    long.feed(b"[WARN")
    long.feed(b"ING] split, and longer\n0123456789 [ERROR] too far\nab [WARNING] near the start\n[ERR")
    long.feed(b"OR] unfinished")
    assert long.diagnostics().split("\n") == [
        "[WARNING] split, [...]",
        "ab [WARNING] nea [...]",
        "[ERROR] unfinish [...]",
    ]


def test_export_error_shows_diagnostics_first_and_pickles() -> None:
    error = ExportError(
        "msprof.py export summary exited with 2",
        command=["python3", "msprof.py"],
        returncode=2,
        output_tail="[INFO] a\n[ERROR] why\n[INFO] b",
        diagnostics="[ERROR] why",
    )
    assert str(error).split("\n") == [
        "msprof.py export summary exited with 2",
        "  command: python3 msprof.py",
        "  msprof.py errors and warnings (last):",
        "    [ERROR] why",
        "  other output (last lines, stdout and stderr):",
        "    [INFO] a",
        "    [INFO] b",
    ]
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.returncode, copy.command) == (str(error), 2, ("python3", "msprof.py"))
    assert (copy.output_tail, copy.stderr_tail, copy.diagnostics) == (
        error.output_tail,
        error.output_tail,
        "[ERROR] why",
    )
    old = ExportError("failed", command=["x"], stderr_tail="only\nstderr")  # the former keyword
    assert old.output_tail == old.stderr_tail == "only\nstderr" and old.diagnostics == ""
    assert str(old).endswith("  output (last lines, stdout and stderr):\n    only\n    stderr")


# -- the guard on its own ------------------------------------------------------------------------


#: Writes to both streams, and exits 3 only if its stdin is /dev/null (not the lifeline).
CHILD_SAYS = (
    "import os, sys\n"
    "print('on stdout', flush=True)\n"
    "sys.stderr.write('on stderr')\n"
    "sys.exit(3 if os.path.samestat(os.fstat(0), os.stat(os.devnull)) else 4)\n"
)


@pytest.mark.parametrize("spawn", ["posix_spawnp", "fork"], ids=["posix_spawn", "fork-before-3.8"])
@pytest.mark.parametrize(
    ("child", "status", "said"),
    [
        (CHILD_SAYS, 3, "on stdout\non stderr"),
        ("import os; os.kill(os.getpid(), 9)", -9, ""),
        (None, 127, "cannot run the export"),
    ],
    ids=["exit-3", "signal-9", "no-such-program"],
)
def test_the_guard_relays_exit_status_and_output(
    spawn: str, child: str | None, status: int, said: str
) -> None:
    prefix = "import os\ndel os.posix_spawnp\n" if spawn == "fork" else ""
    argv = [sys.executable, "-c", child] if child is not None else ["/nonexistent/program"]
    guard = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", prefix + _GUARD, *argv],
        stdin=subprocess.PIPE,  # the lifeline: kept open while the guard runs
        stdout=subprocess.PIPE,  # one pipe for both, as the runners start it
        stderr=subprocess.STDOUT,
        start_new_session=True,  # it SIGKILLs the group it leads when the lifeline closes
    )
    assert guard.stdin is not None and guard.stdout is not None
    try:
        output = guard.stdout.read().decode()
        assert guard.wait(60) == status
    finally:
        guard.stdin.close()
        guard.stdout.close()
        if guard.poll() is None:
            guard.kill()
        guard.wait()
    assert said in output


def test_the_guard_refuses_to_run_in_a_group_it_does_not_lead() -> None:
    # Run inside a wrapper in a session of its own: were the check missing, the guard would
    # SIGKILL the wrapper's group, not the test's.
    wrapper = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"
    guard = guard_command(Toolkit(Path(), Path()), [sys.executable, "-c", "pass"])
    done = subprocess.run(
        [sys.executable, "-c", wrapper, *guard],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
        check=False,
        start_new_session=True,
    )
    assert done.returncode == 1 and b"session of its own" in done.stderr
