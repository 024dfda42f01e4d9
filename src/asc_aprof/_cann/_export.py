"""Running ``msprof.py export`` on one run directory, blocking or async.

Theory of operation
-------------------
Both runners share the command line, the path checks, the process they start, the output tail
and the check of what was written; they differ only in how they wait. The script always gets one
``PROF_*`` directory (never the result path: that re-exports every older run), as an argv list
(never a shell). A zero exit with no CSV is an error: msprof.py exits 0 when it exported nothing.

No export outlives the process that started it. msprof.py forks workers (``multiprocessing``),
so killing msprof.py alone is not enough: the export runs under a *guard*, a few lines of
Python using only built-in modules, run by the toolkit's interpreter, which leads a new session
and process group (it refuses to run otherwise), starts msprof.py in it and relays its exit
status (a death by signal too); it costs one bare interpreter start per export. The guard's
stdin is the read end of a pipe, the *lifeline*, whose write end only this process holds: it is
not inheritable, and an at-fork hook closes it in forked children. However this process ends --
SIGTERM (``kill``, ``timeout``, systemd, Kubernetes, Slurm), SIGKILL, a crash, an ``exec`` --
the kernel closes the write end, the guard reads end-of-file and SIGKILLs its process group:
msprof.py and every worker. That needs no signal handler in the host program, and unlike
``PR_SET_PDEATHSIG`` (which fires when the *thread* that forked exits) it does not matter which
thread started the export: trio starts every process from a worker thread, worker threads exit
when idle, and a program may call ``Profiler.profile()`` from a short-lived thread of its own.

msprof.py's stdout and stderr are one pipe (the guard's stdout, with its stderr redirected into
it, both inherited by msprof.py and its workers): the real msprof.py prints its ``[ERROR]``,
``[WARNING]`` and ``[INFO]`` lines to stdout (``print`` in analysis/common_func/common.py) and only
Python tracebacks reach stderr, so discarding stdout would hide why an export failed; one pipe
also keeps the two streams in the order they were written.

An export ends when the guard (so msprof.py) exits, not when its output pipe reaches end-of-file:
a process that left the group (``setsid``) may hold the pipe open for ever. After the exit, what is
already in the pipe is read without blocking, and whatever is left in the group is killed. A
timeout, an interrupt (``KeyboardInterrupt``) or a cancellation kills the group and reaps the
guard before the exception propagates.

Only a bounded tail of that output is kept (:class:`OutputTail`, shared by both runners): the
last lines, each cut to a few KiB, and apart from them the last few ``[ERROR]`` and ``[WARNING]``
lines, however many lines came after them (the reason an export failed is often followed by
``[INFO]`` lines of other steps, or of other devices). It is fed in time linear in what was
written, so megabytes of ``\r`` progress output or INFO lines cost neither memory nor quadratic
copies. An :class:`ExportError` shows those diagnostics first, then the tail.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import selectors
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import anyio

from .._model._enums import MAX_PATH_BYTES
from .._model._errors import ExportError, UsageError
from .._model._toolkit import Toolkit
from ._files import check_tree
from ._layout import CsvFile, find_summary_csvs

#: Characters msprof.py refuses in a path (it exits 1 on them).
REJECTED_PATH_CHARS: Final = frozenset("\n\f\r\b\t\v\x7f\"'%><|&$;`\\")
DEFAULT_EXPORT_TIMEOUT: Final = 1800.0
OUTPUT_TAIL_LINES: Final = 20
#: Longest output line kept, in bytes (its start is kept, the rest marked cut).
OUTPUT_LINE_BYTES: Final = 4096
#: ``[ERROR]`` and ``[WARNING]`` lines kept apart from the tail (the newest of each kind).
ERROR_LINES: Final = 8
WARNING_LINES: Final = 4
#: What marks a diagnostic line, as msprof.py's error() and warn() write it ("... [ERROR] [MSVP] ...").
_DIAGNOSTIC: Final = re.compile(rb"\[(ERROR|WARNING)\]")
#: The process id after the marker: msprof.py's workers print the same message each.
_PID: Final = re.compile(rb"^(\[\w+\] \[MSVP\] )\[\d+\] ")
_CUT_MARK: Final = b" [...]"
#: Bytes read from the pipe per read, per wake-up of a runner, and after the guard exited.
_READ_CHUNK: Final = 64 << 10
_READ_BUDGET: Final = 256 << 10
_FINAL_READ: Final = 1 << 20
#: Seconds between exit checks where no pidfd is available (kernels before 5.3).
_POLL_INTERVAL: Final = 0.05
#: Room kept below the 4096-byte limits (msprof.py's -dir, Linux PATH_MAX with its NUL) for what
#: CANN and msprof.py write inside a result path: ``PROF_<47 bytes>/mindstudio_profiler_output/
#: op_summary_slice_<k>_<ts>.csv``, ``device_N/sqlite/*.db`` and the like.
RUN_PATH_RESERVE: Final = 256


def check_msprof_path(path: str | os.PathLike[str]) -> None:
    """Refuse a path msprof.py would reject, before any collection is wasted on it.

    :raises UsageError: naming the offending character
    """
    text = os.path.abspath(os.fspath(path))
    bad = sorted({c for c in text if c in REJECTED_PATH_CHARS})
    if bad:
        raise UsageError(
            f"msprof.py rejects paths containing {''.join(repr(c) for c in bad)}: {text!r}; "
            "choose a result path without them"
        )
    if len(os.fsencode(text)) > MAX_PATH_BYTES:
        raise UsageError(f"path longer than {MAX_PATH_BYTES} bytes: {text[:80]}...")


def check_result_path(path: str | os.PathLike[str]) -> None:
    """Refuse a result path msprof.py would reject or whose runs would not fit in 4096 bytes.

    :raises UsageError: before any collection is wasted on it
    """
    check_msprof_path(path)
    size = len(os.fsencode(os.path.abspath(os.fspath(path))))
    limit = MAX_PATH_BYTES - RUN_PATH_RESERVE
    if size > limit:
        raise UsageError(
            f"result path is {size} bytes; runs and exports inside it need it to be at most {limit} "
            f"bytes (CANN and msprof.py stop at {MAX_PATH_BYTES}): choose a shorter path"
        )


def export_command(toolkit: Toolkit, run_dir: Path, what: str = "summary") -> list[str]:
    """The argv that exports *what* (``summary`` or ``timeline``) for one run."""
    return [toolkit.python, str(toolkit.msprof_script), "export", what, "-dir", str(run_dir)]


#: The guard (see the module docstring). Standard library only, Python 3.6 syntax (it runs on the
#: toolkit's interpreter, which may be older than this one), and only built-in modules, so it
#: starts in about the time of a bare interpreter: it is on every export's path.
_GUARD: Final = """\
import _signal, _thread, os, sys


def lifeline():
    try:
        while os.read(0, 512):
            pass
    finally:  # end-of-file: the process that started the export is gone
        os.killpg(0, _signal.SIGKILL)


if os.getpgid(0) != os.getpid():  # never SIGKILL a process group it does not lead
    sys.exit("the export guard must be started in a session of its own")
_thread.start_new_thread(lifeline, ())
argv = sys.argv[1:]
try:
    if hasattr(os, "posix_spawnp"):  # Python >= 3.8
        pid = os.posix_spawnp(
            argv[0], argv, os.environ,
            file_actions=[  # stdout and stderr stay the output pipe
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            ],
            setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ),
        )
    else:
        pid = os.fork()
        if pid == 0:
            try:
                null = os.open(os.devnull, os.O_RDONLY)
                os.dup2(null, 0)
                os.execvp(argv[0], argv)
            finally:
                os.write(2, b"cannot run the export: exec failed\\n")
                os._exit(127)
except OSError as exc:
    sys.stderr.write("cannot run the export: %s\\n" % (exc,))
    sys.exit(127)
status = os.waitpid(pid, 0)[1]
if os.WIFSIGNALED(status):  # die the same death (SIGKILL and SIGSTOP keep SIG_DFL anyway)
    number = os.WTERMSIG(status)
    try:
        _signal.signal(number, _signal.SIG_DFL)
    except (OSError, ValueError):
        pass
    os.kill(os.getpid(), number)
    sys.exit(128 + number)
sys.exit(os.WEXITSTATUS(status))
"""


def guard_command(toolkit: Toolkit, command: Sequence[str]) -> list[str]:
    """The argv that runs *command* under the guard (isolated mode, no ``site``: it starts fast)."""
    return [toolkit.python, "-I", "-S", "-c", _GUARD, *command]


def spawn_options(toolkit: Toolkit, lifeline: int) -> dict[str, Any]:
    """How the guard is started: stdin the lifeline, stdout and stderr one pipe, own session."""
    env = dict(os.environ)
    env.update(toolkit.env)
    return {
        "stdin": lifeline,
        "stdout": subprocess.PIPE,  # msprof.py inherits both: its log lines go to stdout
        "stderr": subprocess.STDOUT,
        "env": env,
        "start_new_session": True,  # a process group of its own, killed as a whole
    }


#: Write ends of the lifelines of exports in flight. Guarded by the GIL: only atomic set
#: operations touch it (the at-fork hook runs in a child where no other thread exists).
_lifelines: set[int] = set()


def _close_lifelines_in_child() -> None:
    # A forked child must not keep this process's exports alive after this process dies.
    for fd in list(_lifelines):
        with contextlib.suppress(OSError):
            os.close(fd)
    _lifelines.clear()


os.register_at_fork(after_in_child=_close_lifelines_in_child)


def _open_pidfd(pid: int) -> int | None:
    """A descriptor readable once *pid* exits, or None where the kernel has none."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


class OutputTail:
    """The last lines of a byte stream and its last diagnostics, in bounded memory, in linear time.

    ``\n``, ``\r`` and ``\r\n`` end a line (progress bars redraw with ``\r``); blank lines are
    dropped; a line longer than *line_bytes* keeps its start and ends with ``[...]``. A line whose
    kept start holds ``[ERROR]`` (``[WARNING]``) is a diagnostic: the newest *errors* (*warnings*)
    of them are kept too, however many lines follow; a message repeated (the line from its marker
    on, less msprof.py's process id) is kept once, as its newest line.
    Each :meth:`feed` looks only at the newest lines of its chunk, at most *line_bytes* of the
    unfinished one, and searches the rest of the chunk once for the markers, so nothing written
    earlier is copied or split again.
    """

    def __init__(
        self,
        lines: int = OUTPUT_TAIL_LINES,
        line_bytes: int = OUTPUT_LINE_BYTES,
        errors: int = ERROR_LINES,
        warnings: int = WARNING_LINES,
    ) -> None:
        self._max_lines = lines
        self._lines: collections.deque[bytes] = collections.deque(maxlen=lines)
        self._line_bytes = line_bytes
        self._partial = bytearray()  # the unfinished last line, at most line_bytes
        self._cut = False  # the unfinished line was longer than that
        # Diagnostics as (order of appearance, message, line), the newest of each kind.
        self._kept: dict[bytes, collections.deque[tuple[int, bytes, bytes]]] = {
            b"ERROR": collections.deque(maxlen=errors),
            b"WARNING": collections.deque(maxlen=warnings),
        }
        self._seen = 0  # diagnostics seen so far

    def feed(self, data: bytes) -> None:
        data = data.replace(b"\r", b"\n")
        end = data.rfind(b"\n")
        if end < 0:
            self._grow(data)
            return
        self._scan(data, end)
        newest: list[bytes] = []  # complete lines of data, newest first
        stop = end
        while len(newest) < self._max_lines:
            begin = data.rfind(b"\n", 0, stop) + 1
            if begin == 0:  # the chunk's first line finishes the unfinished one
                self._grow(data[:stop])
                self._finish_partial()
                break
            self._keep(newest, data[begin:stop])
            stop = begin - 1
        else:  # enough newer lines: the unfinished one is out of the tail
            self._partial.clear()
            self._cut = False
        self._lines.extend(reversed(newest))
        self._grow(data[end + 1 :])

    def text(self) -> str:
        """The tail as text, one line per line (undecodable bytes replaced)."""
        lines = list(self._lines)
        if self._partial.strip():
            lines.append(self._partial_line())
        return _decode(lines[-self._max_lines :])

    def diagnostics(self) -> str:
        """The kept ``[ERROR]`` and ``[WARNING]`` lines, oldest first (the unfinished line too)."""
        kept = sorted(item for kind in self._kept.values() for item in kind)
        lines = [line for _, _, line in kept]
        if self._partial.strip() and _DIAGNOSTIC.search(self._partial) is not None:
            lines.append(self._partial_line())
        return _decode(lines)

    def _scan(self, data: bytes, end: int) -> None:
        """Note the diagnostics among the lines *data* finishes (its last newline at *end*)."""
        first = data.find(b"\n")
        room = max(self._line_bytes - len(self._partial), 0)
        head = bytes(self._partial) + data[: min(first, room)]
        self._note(head, self._cut or first > room)
        pos = first + 1
        while pos < end:
            match = _DIAGNOSTIC.search(data, pos, end)
            if match is None:
                return
            begin = data.rfind(b"\n", 0, match.start()) + 1
            stop = data.find(b"\n", match.end())
            line = data[begin : min(stop, begin + self._line_bytes)]
            self._note(line, stop - begin > self._line_bytes)
            pos = stop + 1

    def _note(self, line: bytes, cut: bool) -> None:
        """Keep *line* (the kept start of a finished line) if it is a diagnostic."""
        match = _DIAGNOSTIC.search(line)
        if match is None:
            return
        message = _PID.sub(rb"\1", line[match.start() :])
        if cut:
            line += _CUT_MARK
        kept = self._kept[match.group(1)]
        for item in kept:
            if item[1] == message:
                kept.remove(item)
                break
        kept.append((self._seen, message, line))
        self._seen += 1

    def _partial_line(self) -> bytes:
        return bytes(self._partial) + (_CUT_MARK if self._cut else b"")

    def _keep(self, out: list[bytes], line: bytes) -> None:
        if line.strip():
            out.append(line if len(line) <= self._line_bytes else line[: self._line_bytes] + _CUT_MARK)

    def _grow(self, data: bytes) -> None:
        room = self._line_bytes - len(self._partial)
        if len(data) > room:
            self._cut = True
            data = data[: max(room, 0)]
        self._partial += data

    def _finish_partial(self) -> None:
        if self._partial.strip():
            self._lines.append(self._partial_line())
        self._partial.clear()
        self._cut = False


def _decode(lines: list[bytes]) -> str:
    return "\n".join(line.decode("utf-8", "replace") for line in lines)


class _Export:
    """One started export: the guard's process, its lifeline, its output pipe and tail."""

    def __init__(self, toolkit: Toolkit, command: Sequence[str]) -> None:
        self.tail = OutputTail()
        self.eof = False
        read_end, self._lifeline = os.pipe()  # both ends non-inheritable
        _lifelines.add(self._lifeline)
        try:
            self.proc = subprocess.Popen(guard_command(toolkit, command), **spawn_options(toolkit, read_end))
        except OSError as exc:
            self._close_lifeline()
            raise ExportError(f"cannot run the export: {exc}", command=command) from exc
        finally:
            os.close(read_end)
        assert self.proc.stdout is not None
        self._output = self.proc.stdout
        self.output_fd = self._output.fileno()
        os.set_blocking(self.output_fd, False)
        self.pidfd = _open_pidfd(self.proc.pid)

    def exited(self) -> bool:
        """Whether the guard exited, *without* reaping it: while it is an unreaped zombie its pid,
        which is also its group's id, cannot be given to another process, so :meth:`close` can
        still signal the group (reaped first, the id could name a stranger's group by then)."""
        if self.proc.returncode is not None:
            return True
        try:
            found = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # reaped elsewhere (a SIGCHLD handler of the program's)
            return self.proc.poll() is not None
        return found is not None

    def read_available(self, budget: int = _READ_BUDGET) -> None:
        """Feed the tail what the pipe holds now, up to *budget* bytes, without blocking."""
        while not self.eof and budget > 0:
            try:
                chunk = os.read(self.output_fd, _READ_CHUNK)
            except BlockingIOError:
                return
            if not chunk:
                self.eof = True
                return
            self.tail.feed(chunk)
            budget -= len(chunk)

    def kill(self) -> None:
        """SIGKILL the group: a timed-out or interrupted export, or workers left after its exit."""
        kill_group(self.proc.pid)

    def close(self) -> None:
        """Kill the group, then reap the guard (in this order: see :meth:`exited`), take the last
        of its output, close every descriptor.

        Blocking, but only for the reap of a SIGKILLed process (the async runner waits for the
        exit first).
        """
        self.kill()
        self.proc.wait()
        if not self._output.closed:
            self.read_available(_FINAL_READ)
            self._output.close()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
        self._close_lifeline()

    def _close_lifeline(self) -> None:
        if self._lifeline in _lifelines:
            _lifelines.discard(self._lifeline)
            os.close(self._lifeline)


def _raw_data(run_dir: Path) -> str:
    """What became of the raw data, for an error message: kept, or gone with its directory."""
    if run_dir.is_dir():
        return f"the raw data is kept in {run_dir}"
    return f"{run_dir} no longer exists (deleted during the export), so its raw data is lost"


def _error(
    message: str, command: Sequence[str], tail: OutputTail, returncode: int | None = None
) -> ExportError:
    """An ExportError carrying what msprof.py said: its diagnostics and the tail."""
    return ExportError(
        message,
        command=command,
        returncode=returncode,
        output_tail=tail.text(),
        diagnostics=tail.diagnostics(),
    )


def _timeout_error(
    what: str, timeout: float | None, run_dir: Path, command: Sequence[str], tail: OutputTail
) -> ExportError:
    return _error(
        f"msprof.py export {what} did not finish within {timeout:g} s and was killed; {_raw_data(run_dir)}",
        command,
        tail,
    )


def _preflight(toolkit: Toolkit, run_dir: Path, command: Sequence[str]) -> None:
    check_msprof_path(run_dir)
    if not run_dir.is_dir():
        raise ExportError(f"run directory {run_dir} does not exist", command=command)
    check_tree(run_dir)  # msprof.py writes into the run: never through a link planted in it
    if not toolkit.msprof_script.is_file():
        raise ExportError(f"msprof.py not found at {toolkit.msprof_script}", command=command)


def _outcome(
    run_dir: Path, command: Sequence[str], returncode: int, tail: OutputTail, what: str
) -> list[CsvFile]:
    if returncode != 0:
        how = f"killed by signal {-returncode}" if returncode < 0 else f"exited with {returncode}"
        kept = _raw_data(run_dir)
        raise _error(
            f"msprof.py export {what} {how}; {kept}{' for a retry' if run_dir.is_dir() else ''}",
            command,
            tail,
            returncode,
        )
    if what != "summary":
        return []
    files = find_summary_csvs(run_dir)
    if not files and not run_dir.is_dir():
        raise _error(
            f"msprof.py exited 0 but wrote no op_summary/task_time CSV: {_raw_data(run_dir)}",
            command,
            tail,
            0,
        )
    if not files:
        raise _error(
            f"msprof.py exited 0 but wrote no op_summary/task_time CSV under {run_dir}. It exits 0 "
            "when it exported nothing: the collection had no TASK_TIME data, no kernel ran on a "
            "profiled device, or the run holds no device data",
            command,
            tail,
            0,
        )
    return files


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by *pid* (the export and every worker it forked)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def run_export(
    toolkit: Toolkit,
    run_dir: Path,
    *,
    what: str = "summary",
    timeout: float | None = DEFAULT_EXPORT_TIMEOUT,
) -> list[CsvFile]:
    """Export one run, blocking; return the CSVs to parse (empty for ``timeline``).

    The export ends when msprof.py exits. On timeout or any interruption (including
    KeyboardInterrupt) the process group is killed and reaped before the exception propagates.

    :raises ExportError: on failure, timeout, or when no CSV was written
    """
    command = export_command(toolkit, run_dir, what)
    _preflight(toolkit, run_dir, command)
    export = _Export(toolkit, command)
    try:
        finished = _wait(export, None if timeout is None else time.monotonic() + timeout)
    finally:
        export.close()
    if not finished:
        raise _timeout_error(what, timeout, run_dir, command, export.tail)
    return _outcome(run_dir, command, export.proc.returncode, export.tail, what)


def _wait(export: _Export, deadline: float | None) -> bool:
    """Drain the output until the guard exits (True) or *deadline* passes (False)."""
    with selectors.DefaultSelector() as selector:
        selector.register(export.output_fd, selectors.EVENT_READ)
        if export.pidfd is not None:
            selector.register(export.pidfd, selectors.EVENT_READ)
        while not export.exited():
            timeout = None if export.pidfd is not None else _POLL_INTERVAL
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                timeout = remaining if timeout is None else min(timeout, remaining)
            for key, _ in selector.select(timeout):
                if key.fd == export.output_fd:
                    export.read_available()
                    if export.eof:
                        selector.unregister(export.output_fd)
    return True


async def run_export_async(
    toolkit: Toolkit,
    run_dir: Path,
    *,
    what: str = "summary",
    timeout: float | None = DEFAULT_EXPORT_TIMEOUT,
) -> list[CsvFile]:
    """Export one run without blocking the event loop.

    Its output is drained continuously (only a bounded tail is kept); the export ends when msprof.py
    exits. When cancelled or timed out, the whole process group is killed and reaped (shielded)
    before the cancellation or :class:`ExportError` propagates; the raw data stays for a retry.
    """
    command = export_command(toolkit, run_dir, what)
    _preflight(toolkit, run_dir, command)
    export = _Export(toolkit, command)  # on the loop: vfork + exec take well under a millisecond
    timed_out = False
    try:
        with anyio.move_on_after(timeout if timeout is not None else float("inf")) as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_drain_async, export)
                await _exit_async(export)
                tg.cancel_scope.cancel()
        timed_out = scope.cancelled_caught
    finally:
        export.kill()
        with anyio.CancelScope(shield=True):
            await _exit_async(export)
        export.close()
    if timed_out:
        raise _timeout_error(what, timeout, run_dir, command, export.tail)
    assert export.proc.returncode is not None
    return _outcome(run_dir, command, export.proc.returncode, export.tail, what)


async def _drain_async(export: _Export) -> None:
    while not export.eof:
        await anyio.wait_readable(export.output_fd)
        export.read_available()  # a bounded amount per wake-up: the loop is never held long


async def _exit_async(export: _Export) -> None:
    while not export.exited():
        if export.pidfd is not None:
            await anyio.wait_readable(export.pidfd)
        else:
            await anyio.sleep(_POLL_INTERVAL)
