"""Issue 27, the third reliability pass: what fuzzing and a line-by-line review found."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from asc_aprof._runs import _raw_files

pytestmark = pytest.mark.anyio

SRC = Path(__file__).resolve().parents[2] / "src"


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(SRC))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


# -- 1: a forked child and the parent's temporary root ----------------------------------------------


def test_a_forked_child_that_exits_normally_keeps_the_parents_runs() -> None:
    done = run_python(
        """
        import os, sys
        from asc_aprof._cann._paths import default_result_root
        root = default_result_root()
        (root / "PROF_parent").mkdir()
        pid = os.fork()
        if pid == 0:
            child_root = default_result_root()
            print("child-root", child_root, flush=True)
            sys.exit(0)  # a normal exit: atexit handlers run in the child
        os.waitpid(pid, 0)
        print("parent-run", (root / "PROF_parent").is_dir(), flush=True)
        print("parent-root", root, flush=True)
        """
    )
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert lines["parent-run"] == "True"
    # the child had a root of its own, which its exit removed; the parent's is removed at its exit
    assert lines["child-root"] != lines["parent-root"]
    assert not Path(lines["child-root"]).exists()
    assert not Path(lines["parent-root"]).exists()


# -- 10: a cancelled read_run_async whose read never ends ----------------------------------------


async def test_a_cancelled_read_run_async_blocked_on_its_files_leaves_the_collector_on(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    entered = threading.Event()
    release = threading.Event()
    listing = _raw_files._listing

    def never_ends(run_dir: Path) -> dict[str, list[str]]:  # a read that blocks (a hung mount)
        entered.set()
        release.wait(30)
        return listing(run_dir)

    monkeypatch.setattr(_raw_files, "_listing", never_ends)
    assert gc.isenabled()
    interval = sys.getswitchinterval()
    try:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_raw_files.read_run_async, tmp_path / "PROF_1")
                await anyio.to_thread.run_sync(entered.wait, 10)
                scope.cancel()
        assert scope.cancelled_caught
        # the worker is still blocked in its read: nothing process-wide may be changed meanwhile
        assert not release.is_set()
        assert gc.isenabled()
        assert sys.getswitchinterval() == interval
    finally:
        release.set()
