"""The process-wide temporary result root, shared by every profiler without a result path."""

from __future__ import annotations

import atexit
import os
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


def default_result_root() -> Path:
    """One temporary directory per process (0750), removed at that process's interpreter exit."""
    global _root, _root_pid
    with _lock:
        pid = os.getpid()
        if _root is None or _root_pid != pid or not _root.is_dir():
            _root = Path(tempfile.mkdtemp(prefix="asc_aprof_"))
            _root_pid = pid
            os.chmod(_root, 0o750)
            atexit.register(_remove_root, _root, pid)
        return _root


def _reset_in_child() -> None:
    # A thread may have held the lock at fork(); the child has no such thread to release it.
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_in_child)
