"""Probes shared by the reliability tests: processes, file descriptors, threads, the sim's state."""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from asc_aprof._cann._collector import get_collector
from asc_aprof.sim import SimControl

from ..helpers import live_processes_with

#: Every aclprof function the library calls (it never calls aclprofSetConfig).
CALLED_FUNCTIONS = (
    "aclprofInit",
    "aclprofCreateConfig",
    "aclprofStart",
    "aclprofStop",
    "aclprofDestroyConfig",
    "aclprofFinalize",
)

#: The codes the profiling API returns (acl_base_rt.h), with their symbols,
#: written out here rather than taken from the library so a wrong table in the library is caught.
ACL_CODES: dict[int, str] = {
    100000: "ACL_ERROR_INVALID_PARAM",
    100002: "ACL_ERROR_REPEAT_INITIALIZE",
    100003: "ACL_ERROR_INVALID_FILE",
    100010: "ACL_ERROR_INVALID_PROFILING_CONFIG",
    100042: "ACL_ERROR_PROF_ALREADY_RUN",
    100043: "ACL_ERROR_PROF_NOT_RUN",
    200006: "ACL_ERROR_FEATURE_UNSUPPORTED",
    200007: "ACL_ERROR_PROF_MODULES_UNSUPPORTED",
    500005: "ACL_ERROR_PROFILING_FAILURE",
}


def child_pids() -> list[int]:
    """Every process whose parent is this one, zombies included (an unreaped export is a leak)."""
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == me:
            found.append(int(entry.name))
    return found


def export_processes(toolkit_script: Path | str) -> list[int]:
    """Live processes running an ``msprof.py`` (the export) of the given script path."""
    return live_processes_with(str(toolkit_script))


def open_fds() -> int:
    gc.collect()
    return len(os.listdir("/proc/self/fd"))


def fd_targets() -> dict[int, str]:
    """This process's open file descriptors and what they point to (no GC first)."""
    out = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            out[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
    return out


def wait_until(predicate: Callable[[], bool], timeout: float, step: float = 0.02) -> bool:
    """Poll *predicate* until true or *timeout* seconds passed; return its last value."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return predicate()
        time.sleep(step)


def assert_nothing_left(simctl: SimControl) -> None:
    """The toolkit is idle: no device running, no live config, not initialised; the collector idle."""
    assert wait_until(get_collector().idle, 2.0), "the collector is still busy"
    assert simctl.running_devices() == [], f"devices still running: {simctl.running_devices()}"
    assert simctl.live_configs() == 0, f"{simctl.live_configs()} aclprofConfig(s) still alive"
    assert not simctl.initialized(), "aclprofInit without aclprofFinalize: the library left CANN initialised"


def thread_names() -> list[str]:
    return sorted(t.name for t in threading.enumerate())


def _stat_fields(pid: int) -> list[str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()  # fields from the state on (the name may hold spaces)


def process_tree(root: int) -> list[tuple[int, int, str]]:
    """(pid, start time, command line) of every live descendant of *root*, zombies excluded.

    The start time (clock ticks after boot) tells a process from a later one reusing its pid.
    """
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields is not None:
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    found = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        fields = _stat_fields(pid)
        if fields is None or fields[0] == "Z":
            continue
        try:
            cmdline = (
                Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            )
        except OSError:
            continue
        found.append((pid, int(fields[19]), cmdline))
    return found


def still_alive(process: tuple[int, int, str]) -> bool:
    """Whether that very process (same pid and start time) is still alive (not a zombie)."""
    fields = _stat_fields(process[0])
    return fields is not None and fields[0] != "Z" and int(fields[19]) == process[1]
