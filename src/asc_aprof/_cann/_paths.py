"""The process-wide temporary result root, shared by every profiler without a result path.

The root is removed when its process exits normally (atexit). A process killed outright (SIGKILL,
``os._exit``, an actor a cluster manager stops) leaves its root behind; its name carries the pid
that made it (``asc_aprof_<pid>_<random>``), so the next process that makes a root removes the
roots of this user whose process no longer runs, which the contract ("removed when the process
exits") allows. A root whose pid runs again (pid reuse) is left alone: a stale root may stay, a
live one is never taken.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import tempfile
import threading
from pathlib import Path

_lock = threading.Lock()
#: the root and the pid of the process that made it (guarded by ``_lock``): a child made by
#: ``os.fork()`` inherits both, and must neither use nor remove its parent's runs
_root: Path | None = None
_root_pid = 0


def _remove_root(root: Path, pid: int) -> None:
    # atexit handlers are inherited across fork(): only the process that made the root removes it.
    if os.getpid() == pid:
        shutil.rmtree(root, True)


_ROOT_NAME = re.compile(r"^asc_aprof_(\d+)_\w+$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: running
        return True
    return True


def _sweep_dead_roots(parent: Path) -> None:
    """Remove the roots under *parent* that this user's dead processes left (see the module doc)."""
    uid = os.getuid() if hasattr(os, "getuid") else None
    with contextlib.suppress(OSError), os.scandir(parent) as entries:
        for entry in entries:
            match = _ROOT_NAME.match(entry.name)
            if match is None or not entry.is_dir(follow_symlinks=False):
                continue
            with contextlib.suppress(OSError):
                if uid is not None and entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if not _alive(int(match.group(1))):
                    shutil.rmtree(entry.path, True)


def default_result_root() -> Path:
    """One temporary directory per process (0750), removed at that process's interpreter exit."""
    global _root, _root_pid
    with _lock:
        pid = os.getpid()
        if _root is None or _root_pid != pid or not _root.is_dir():
            _sweep_dead_roots(Path(tempfile.gettempdir()))
            _root = Path(tempfile.mkdtemp(prefix=f"asc_aprof_{pid}_"))
            _root_pid = pid
            os.chmod(_root, 0o750)
            atexit.register(_remove_root, _root, pid)
        return _root


def _reset_in_child() -> None:
    # A thread may have held the lock at fork(); the child has no such thread to release it.
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_in_child)
