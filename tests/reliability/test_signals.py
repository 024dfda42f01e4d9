"""Ctrl+C during a sync ``profile()``: in the body, and while the export runs; SIGTERM and SIGKILL
of a process while it exports.

A real Ctrl+C is a SIGINT to the process, handled in the main thread; here a helper thread sends
SIGINT to the main thread with ``signal.pthread_kill`` (``_thread.interrupt_main()`` only sets
the flag, so it would not interrupt the main thread's blocking wait on the export). When the
``KeyboardInterrupt`` reaches the test, the collection must already be stopped and finalized, and
the export's whole process group gone (checked at once, not after a grace period, for the
process the library started).

SIGTERM (what ``kill``, ``timeout``, systemd, Kubernetes and Slurm send) and SIGKILL end a process
without running any Python: a child process exports with a hanging ``msprof.py`` (and its helper
in the export's process group) and is killed; every process it had started must end. Only that
child's own descendants are looked at (other exports may run on the machine).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from asc_aprof import Profiler, Toolkit, sim
from asc_aprof.sim import SimControl

from ..helpers import HANG_MARKER, live_processes_with, wait_gone
from ._support import (
    assert_nothing_left,
    child_pids,
    fd_targets,
    process_tree,
    still_alive,
    wait_until,
)


def test_keyboard_interrupt_in_the_body_stops_the_collection(toolkit: Toolkit, simctl: SimControl) -> None:
    profiler = Profiler(toolkit=toolkit)
    seen: dict[str, object] = {}
    interrupt = KeyboardInterrupt()
    try:
        with profiler.profile(device_id=2):
            sim.launch("k", device=2)
            assert simctl.running_devices() == [2]
            raise interrupt
    except KeyboardInterrupt as caught:
        # Checked before anything else runs: the state the exception propagated with.
        seen["same"] = caught is interrupt
        seen["running"] = simctl.running_devices()
        seen["configs"] = simctl.live_configs()
        seen["initialized"] = simctl.initialized()
    assert seen == {"same": True, "running": [], "configs": 0, "initialized": False}
    assert profiler.results == {}
    assert_nothing_left(simctl)
    with profiler.profile(device_id=2) as run:
        sim.launch("after", device=2)
    assert run.result is not None and [t.name for t in run.result.tasks] == ["after"]


def test_keyboard_interrupt_in_the_body_of_a_shared_window(toolkit: Toolkit, simctl: SimControl) -> None:
    """One thread's Ctrl+C-like KeyboardInterrupt leaves the window; the other caller is unharmed."""
    simctl.set_latency(init=0.1)
    profiler = Profiler(toolkit=toolkit)
    barrier = threading.Barrier(2)
    outcome: dict[str, object] = {}

    def other() -> None:
        barrier.wait()
        with profiler.profile(device_id=1) as run:
            sim.launch("fine", device=1, count=2)
            threading.Event().wait(0.2)
        outcome["other"] = None if run.result is None else [t.name for t in run.result.tasks]

    thread = threading.Thread(target=other)
    thread.start()
    barrier.wait()
    with pytest.raises(KeyboardInterrupt), profiler.profile(device_id=0):
        sim.launch("doomed")
        raise KeyboardInterrupt
    thread.join(10)
    assert outcome == {"other": ["fine", "fine"]}
    assert_nothing_left(simctl)


@pytest.fixture
def default_sigint() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt, as in an interactive Python (CI may start us ignoring it)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class SigintWhenExporting:
    """Sends SIGINT to the main thread once an export of *marker* runs (for *delay* seconds)."""

    def __init__(self, marker: str, delay: float = 0.2) -> None:
        self.marker = marker
        self.delay = delay
        self.sent = threading.Event()
        self.stop = threading.Event()
        self.main = threading.main_thread().ident
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        if not wait_until(lambda: bool(live_processes_with(self.marker)) or self.stop.is_set(), 10.0):
            return
        if self.stop.wait(self.delay):
            return
        assert self.main is not None
        self.sent.set()
        signal.pthread_kill(self.main, signal.SIGINT)

    def __enter__(self) -> SigintWhenExporting:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


@pytest.mark.parametrize(
    "toolkit_kwargs",
    [{"export_latency": 30.0}, {"export_fault": "hang"}],
    ids=["slow-export", "hung-export-with-helper"],
)
def test_keyboard_interrupt_during_the_export_kills_its_process_group(
    simctl: SimControl, tmp_path: Path, toolkit_kwargs: dict[str, object], default_sigint: None
) -> None:
    assert threading.current_thread() is threading.main_thread()
    result_path = tmp_path / "runs"
    toolkit = sim.toolkit(**toolkit_kwargs)  # type: ignore[arg-type]
    profiler = Profiler(result_path, toolkit=toolkit, reader="msprof", export_timeout=60)  # export path
    seen: dict[str, object] = {}
    run_dir: Path | None = None
    fds_before = fd_targets()
    with SigintWhenExporting(str(result_path)) as sender:
        try:
            with profiler.profile(device_id=0) as run:
                run_dir = run.run_dir
                sim.launch("k", count=3)
        except KeyboardInterrupt:
            seen["exports"] = live_processes_with(str(result_path))
            seen["children"] = child_pids()
            seen["running"] = simctl.running_devices()
            seen["initialized"] = simctl.initialized()
            # while the exception (and the frames it holds) is alive: the export's pipe is closed
            seen["new fds"] = {fd: t for fd, t in fd_targets().items() if fds_before.get(fd) != t}
    assert sender.sent.is_set(), "the export never ran"
    assert seen == {"exports": [], "children": [], "running": [], "initialized": False, "new fds": {}}
    # the hang fault's helper (a grandchild in the killed group) is reaped by init shortly after
    assert wait_gone(HANG_MARKER, timeout=2.0) == []
    assert_nothing_left(simctl)
    # the raw data is kept, and the export can be retried
    assert run_dir is not None and run_dir.is_dir()
    retry = Profiler(result_path, toolkit=sim.toolkit())
    retry.export(run_dir.name)
    assert [t.name for t in retry.store_result(run_dir.name).tasks] == ["k"] * 3
    # and the next profile() works
    with retry.profile(device_id=0) as again:
        pass
    assert again.run_id is not None and again.run_id != run_dir.name


VICTIM = textwrap.dedent(
    """\
    import sys

    import anyio

    from asc_aprof import AsyncProfiler, Profiler, sim

    toolkit = sim.toolkit(export_fault="hang")  # msprof.py hangs, with a helper in its group
    if sys.argv[1] == "sync":
        with Profiler(toolkit=toolkit, reader="msprof", export_timeout=600).profile():
            sim.launch("k")
    else:

        async def main():
            async with AsyncProfiler(toolkit=toolkit, reader="msprof", export_timeout=600).profile():
                sim.launch("k")

        anyio.run(main, backend=sys.argv[1])
    """
)


@pytest.mark.parametrize("how", ["sync", "asyncio", "trio"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_no_export_outlives_a_process_killed_while_exporting(
    tmp_path: Path, how: str, sig: signal.Signals
) -> None:
    script = tmp_path / "victim.py"
    script.write_text(VICTIM, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASC_APROF", "PROFILING_MODE"))}
    env["TMPDIR"] = str(tmp_path)  # the library's temporary root lands here
    victim = subprocess.Popen(
        [sys.executable, str(script), how], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    tree: list[tuple[int, int, str]] = []
    try:

        def exporting() -> bool:
            nonlocal tree
            tree = process_tree(victim.pid)
            return any(HANG_MARKER in cmdline for _, _, cmdline in tree)

        if not wait_until(exporting, 60.0, step=0.05):
            victim.kill()
            raise AssertionError(f"the export never started: {victim.communicate()[1].decode()[-2000:]}")
        assert any("msprof" in cmdline for _, _, cmdline in tree)
        victim.send_signal(sig)
        assert victim.wait(30) == -sig
        # The export's processes are gone: msprof.py, the helper in its group, everything.
        wait_until(lambda: not any(still_alive(p) for p in tree), 10.0)
        assert [p[2] for p in tree if still_alive(p)] == []
    finally:
        for process in tree:  # the victim's own descendants only, identified by their start time
            if still_alive(process):
                os.kill(process[0], signal.SIGKILL)
        if victim.poll() is None:
            victim.kill()
        victim.wait()
        assert victim.stderr is not None
        victim.stderr.close()
    # On disk: the temporary root, with the raw run (nothing ran to remove it; nothing is lost).
    [root] = tmp_path.glob("asc_aprof_*")
    [run] = root.glob("PROF_*")
    assert (run / "device_0").is_dir() and (run / "host").is_dir()
