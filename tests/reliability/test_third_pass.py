"""Issue 27, the third reliability pass: what fuzzing and a line-by-line review found."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

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
