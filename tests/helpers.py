"""Test helpers: finding leftover export processes of *this* test process.

Other checkouts may run exports on the same machine at the same time, so a probe only counts this
process's own descendants: processes whose parent chain leads here, and orphans of that tree (an
export's worker whose parent was killed is re-parented to init, and a leak is exactly such an
orphan). Orphans are recognised by :data:`OWNER_VARIABLE`, set to this process's pid at import
and inherited by every process it starts (the export inherits the environment).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Final

HANG_MARKER = "while True: time.sleep(3600)"

OWNER_VARIABLE: Final = "ASC_APROF_TEST_OWNER"
os.environ[OWNER_VARIABLE] = str(os.getpid())


def _stat_fields(pid: str) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state first, then ppid)."""
    try:
        return (Path("/proc") / pid / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def descendants(root: int | None = None) -> set[int]:
    """PIDs whose parent chain leads to *root* (default: this process), *root* excluded."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(entry.name)
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _started_by_us(pid: int) -> bool:
    """The process inherited this process's owner mark (an orphan of our tree keeps it)."""
    try:
        environ = (Path("/proc") / str(pid) / "environ").read_bytes()
    except OSError:
        return False  # another user's process, or gone
    return f"{OWNER_VARIABLE}={os.getpid()}".encode() in environ.split(b"\0")


def live_processes_with(marker: str) -> list[int]:
    """Live (not zombie) descendants of this process whose command line contains *marker*."""
    me = os.getpid()
    matching = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        fields = _stat_fields(entry.name)
        if marker in cmdline and fields is not None and fields[0] != "Z":
            matching.append(int(entry.name))
    if not matching:
        return []
    ours = descendants(me)
    return [pid for pid in matching if pid in ours or _started_by_us(pid)]


def wait_gone(marker: str, timeout: float = 5.0) -> list[int]:
    """Wait until no live process of ours matches; return what is left."""
    deadline = time.monotonic() + timeout
    left = live_processes_with(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = live_processes_with(marker)
    return left
