"""Test helpers: finding leftover export processes."""

from __future__ import annotations

import os
import time
from pathlib import Path

HANG_MARKER = "while True: time.sleep(3600)"


def live_processes_with(marker: str) -> list[int]:
    """PIDs (not zombies) whose command line contains *marker*."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def wait_gone(marker: str, timeout: float = 5.0) -> list[int]:
    """Wait until no live process matches; return what is left."""
    deadline = time.monotonic() + timeout
    left = live_processes_with(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = live_processes_with(marker)
    return left
