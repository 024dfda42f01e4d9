"""The leak probes count this process's own descendants only, orphans included."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

from .helpers import OWNER_VARIABLE, descendants, live_processes_with, wait_gone


def _sleeper(marker: str) -> list[str]:
    return [sys.executable, "-c", f"import time  # {marker}\ntime.sleep(120)"]


def _orphan(marker: str, env: dict[str, str]) -> int:
    """Start a sleeper through an intermediate process that exits at once; return its pid."""
    code = (
        "import subprocess, sys\n"
        f"p = subprocess.Popen({_sleeper(marker)!r}, start_new_session=True,\n"
        "    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "print(p.pid, flush=True)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return int(out.stdout)


def test_a_child_and_its_orphan_are_ours() -> None:
    marker = f"aprof-probe-{uuid.uuid4().hex}"
    child = subprocess.Popen(_sleeper(marker))
    orphan = _orphan(marker, dict(os.environ))
    try:
        assert child.pid in descendants()
        assert orphan not in descendants()  # re-parented away from this process...
        # ...still ours, once it has started (a clean-clone CI run once missed the orphan here;
        # the likely cause, not confirmed: its /proc/<pid>/environ read mid-execve), so it is
        # looked for a while
        expected = sorted([child.pid, orphan])
        deadline = time.monotonic() + 5.0
        while sorted(live_processes_with(marker)) != expected and time.monotonic() < deadline:
            time.sleep(0.02)
        assert sorted(live_processes_with(marker)) == expected
    finally:
        child.kill()
        child.wait()
        os.kill(orphan, 9)
    assert wait_gone(marker) == []


def test_another_process_tree_is_not_ours() -> None:
    """What another checkout's pytest started (another owner mark, not below us) is never counted."""
    marker = f"aprof-probe-{uuid.uuid4().hex}"
    stranger = _orphan(marker, {**os.environ, OWNER_VARIABLE: "1"})
    try:
        assert stranger not in descendants()
        assert live_processes_with(marker) == []
    finally:
        os.kill(stranger, 9)
