"""The process-wide temporary result root, shared by every profiler without a result path."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
from pathlib import Path

_root: Path | None = None
_lock = threading.Lock()


def default_result_root() -> Path:
    """One temporary directory per process (0750), removed at interpreter exit."""
    global _root
    with _lock:
        if _root is None or not _root.is_dir():
            _root = Path(tempfile.mkdtemp(prefix="asc_aprof_"))
            os.chmod(_root, 0o750)
            atexit.register(shutil.rmtree, _root, True)
        return _root
