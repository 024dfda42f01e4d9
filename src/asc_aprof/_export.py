"""Running ``msprof.py export`` on one run directory, blocking or async.

Both runners share the command line, the path checks and the check of what was written; they
differ only in how they wait. The script always gets one ``PROF_*`` directory (never the result
path: that re-exports every older run), as an argv list (never a shell), in a new session so the
whole process group, including msprof's worker pool, can be killed on timeout, interrupt or
cancellation. A zero exit with no CSV is an error: msprof.py exits 0 when it exported nothing.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import anyio

from ._enums import MAX_PATH_BYTES
from ._errors import ExportError, UsageError
from ._layout import CsvFile, find_summary_csvs
from ._toolkit import Toolkit

#: Characters msprof.py refuses in a path (it exits 1 on them).
REJECTED_PATH_CHARS: Final = frozenset("\n\f\r\b\t\v\x7f\"'%><|&$;`\\")
DEFAULT_EXPORT_TIMEOUT: Final = 1800.0
STDERR_TAIL_LINES: Final = 20
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


def spawn_options(toolkit: Toolkit) -> dict[str, Any]:
    """How the export is started: no stdin, stdout discarded, stderr piped, its own session."""
    env = dict(os.environ)
    env.update(toolkit.env)
    return {
        "stdin": subprocess.DEVNULL,
        "stdout": subprocess.DEVNULL,
        "stderr": subprocess.PIPE,
        "env": env,
        "start_new_session": True,  # a process group of its own, killed as a whole
    }


def _timeout_error(
    what: str, timeout: float | None, run_dir: Path, command: Sequence[str], tail: str
) -> ExportError:
    return ExportError(
        f"msprof.py export {what} did not finish within {timeout:g} s and was killed; "
        f"the raw data is kept in {run_dir}",
        command=command,
        stderr_tail=tail,
    )


def _preflight(toolkit: Toolkit, run_dir: Path, command: Sequence[str]) -> None:
    check_msprof_path(run_dir)
    if not run_dir.is_dir():
        raise ExportError(f"run directory {run_dir} does not exist", command=command)
    if not toolkit.msprof_script.is_file():
        raise ExportError(f"msprof.py not found at {toolkit.msprof_script}", command=command)


def _tail(data: bytes | str, lines: int = STDERR_TAIL_LINES) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return "\n".join(text.strip().splitlines()[-lines:])


def _outcome(
    run_dir: Path, command: Sequence[str], returncode: int, stderr_tail: str, what: str
) -> list[CsvFile]:
    if returncode != 0:
        how = f"killed by signal {-returncode}" if returncode < 0 else f"exited with {returncode}"
        raise ExportError(
            f"msprof.py export {what} {how}; the raw data is kept in {run_dir} for a retry",
            command=command,
            returncode=returncode,
            stderr_tail=stderr_tail,
        )
    if what != "summary":
        return []
    files = find_summary_csvs(run_dir)
    if not files:
        raise ExportError(
            f"msprof.py exited 0 but wrote no op_summary/task_time CSV under {run_dir}. It exits 0 "
            "when it exported nothing: the collection had no TASK_TIME data, no kernel ran on a "
            "profiled device, or the run holds no device data",
            command=command,
            returncode=0,
            stderr_tail=stderr_tail,
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

    On timeout or any interruption (including KeyboardInterrupt) the process group is killed and
    reaped before the exception propagates.

    :raises ExportError: on failure, timeout, or when no CSV was written
    """
    command = export_command(toolkit, run_dir, what)
    _preflight(toolkit, run_dir, command)
    try:
        proc = subprocess.Popen(command, **spawn_options(toolkit))
    except OSError as exc:
        raise ExportError(f"cannot run the export: {exc}", command=command) from exc
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        try:
            _, stderr = proc.communicate(
                timeout=None if deadline is None else max(0.0, deadline - time.monotonic())
            )
        except subprocess.TimeoutExpired:
            kill_group(proc.pid)
            _, stderr = proc.communicate()
            raise _timeout_error(what, timeout, run_dir, command, _tail(stderr or b"")) from None
    except BaseException:
        kill_group(proc.pid)
        proc.wait()
        raise
    finally:
        # Workers that outlive a finished export are killed too; the pipe is never leaked.
        kill_group(proc.pid)
        if proc.stderr is not None:
            proc.stderr.close()
    return _outcome(run_dir, command, proc.returncode, _tail(stderr or b""), what)


async def run_export_async(
    toolkit: Toolkit,
    run_dir: Path,
    *,
    what: str = "summary",
    timeout: float | None = DEFAULT_EXPORT_TIMEOUT,
) -> list[CsvFile]:
    """Export one run without blocking the event loop.

    stdout and stderr are drained continuously (only the stderr tail is kept). When cancelled or
    timed out, the whole process group is killed and reaped (shielded) before the cancellation or
    :class:`ExportError` propagates; the raw data stays for a retry.
    """
    command = export_command(toolkit, run_dir, what)
    _preflight(toolkit, run_dir, command)
    tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
    try:
        process = await anyio.open_process(command, **spawn_options(toolkit))
    except OSError as exc:
        raise ExportError(f"cannot run the export: {exc}", command=command) from exc

    async def drain() -> None:
        assert process.stderr is not None
        pending = b""
        async for chunk in process.stderr:
            pending += chunk
            *lines, pending = pending.split(b"\n")
            tail.extend(line.decode("utf-8", "replace") for line in lines)
        if pending:
            tail.append(pending.decode("utf-8", "replace"))

    timed_out = False
    try:
        with anyio.move_on_after(timeout if timeout is not None else float("inf")) as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(drain)
                await process.wait()
                # Workers that outlive the export would hold stderr open: end them too.
                kill_group(process.pid)
        timed_out = scope.cancelled_caught
    finally:
        kill_group(process.pid)
        with anyio.CancelScope(shield=True):
            await process.wait()
            await process.aclose()
    if timed_out:
        raise _timeout_error(what, timeout, run_dir, command, "\n".join(tail))
    assert process.returncode is not None
    return _outcome(run_dir, command, process.returncode, "\n".join(tail), what)
