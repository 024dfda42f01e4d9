"""Soak: 8 simulated devices x 96 profile cycles with random cancellations and injected faults
(x 200 in the long variant, marked ``soak``: ``python -m pytest -m soak`` runs it).

Eight tasks (one per device) run 12 cycles each (25 in the long variant), concurrently, so
windows are shared and broken up at random. Each task has its own seeded ``random.Random``, so the
sequence of choices is the same on every run (the interleaving is up to the scheduler). A cycle is
one of:

* a plain ``profile()`` whose result must hold exactly the kernels it launched on its device;
* the same, cancelled at a random moment by ``move_on_after`` (waiting for the window, in the
  body, during the stop or the export), or, where the drawn moment is under 20 ms, by cancelling
  its scope in the body (a cancellation that happens whatever the machine's speed: whether a
  timed one lands depends on how fast the cycle is);
* one with an aclprof fault injected first (any function the library calls, any code); the fault
  is process-wide, so it hits whichever window calls that function next: any caller may see it;
* one through a toolkit whose export fails (``exit:3``), with ``reader="msprof"`` so that it
  exports (the plain cycles read their runs natively, the default for simulated runs).

Afterwards, with the whole run bounded by ``fail_after`` (a deadlock fails, it does not hang):
the toolkit has no running device, no live config and is not initialised; no child process or
export is alive; file descriptors are back to the baseline exactly; the threads other than
worker threads are exactly the baseline's (the collector thread is started by the warm-up, so it
is in the baseline); and the worker threads the event loop's thread pool keeps are bounded.

Why worker threads get a tolerance: anyio (asyncio) and trio keep idle worker threads for about
10 s for reuse, and waits abandoned on cancellation finish in their thread when the collector's
event fires. So after the soak the pool can legitimately hold up to one thread per concurrent
wait: each of the 8 tasks waits on at most one collector event at a time, plus at most one
abandoned wait per task still parked in the pool, plus the file reads of the export parse (one
per task). ``3 x 8`` bounds that; a leak (a thread per cycle) would exceed it by far.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest

from asc_aprof import AclError, AsyncProfiler, ExportError, Toolkit, sim
from asc_aprof._cann._paths import default_result_root
from asc_aprof.sim import SimControl

from ._support import (
    ACL_CODES,
    CALLED_FUNCTIONS,
    assert_nothing_left,
    child_pids,
    export_processes,
    open_fds,
    wait_until,
)

pytestmark = pytest.mark.anyio

DEVICES = 8
#: cycles per task -> the least (ok, cancellation attempts, AclError, ExportError) outcomes the
#: seeded choices give: the mix really happened. 12: the default run; 25: the long one (``-m soak``).
#: Each task's choices are the same seeded sequence in both, so the default run is the long one's
#: first half. (Attempts, not cancellations: a timed one cancels only if the cycle is still running
#: at its deadline; the cancellations in the body are counted apart, see ``Tally.sure_cancels``.)
MIX = {12: (38, 12, 2, 2), 25: (80, 30, 5, 5)}
#: A drawn cancellation moment under this cancels in the body instead (seconds)
SURE_CANCEL = 0.02
DEADLINE = 75.0
WORKER_TOLERANCE = 3 * DEVICES
WORKER_PREFIXES = ("AnyIO worker thread", "Trio thread")


@dataclass
class Tally:
    ok: int = 0
    cancelled: int = 0
    cancel_attempts: int = 0  # timed or in the body
    sure_cancels: int = 0  # in the body: each must end cancelled
    acl_errors: int = 0
    export_errors: int = 0
    incomplete: list[str] = field(default_factory=list)


def split_threads() -> tuple[set[int], int]:
    """(idents of threads that are not event-loop worker threads, count of worker threads)."""
    others, workers = set(), 0
    for thread in threading.enumerate():
        if thread.name.startswith(WORKER_PREFIXES):
            workers += 1
        else:
            assert thread.ident is not None
            others.add(thread.ident)
    return others, workers


def prof_dirs(root: Path) -> set[str]:
    return {p.name for p in root.iterdir() if p.name.startswith("PROF_")}


async def warm_up(toolkit: Toolkit) -> None:
    """One shared window over every device, so the collector thread and a pool exist."""
    profiler = AsyncProfiler(toolkit=toolkit)

    async def one(device: int) -> None:
        async with profiler.profile(device_id=device) as run:
            sim.launch("warm", device=device)
        assert run.result is not None and len(run.result.tasks) == 1

    async with anyio.create_task_group() as tg:
        for device in range(DEVICES):
            tg.start_soon(one, device)


async def device_loop(
    device: int,
    profiler: AsyncProfiler,
    failing: AsyncProfiler,
    simctl: SimControl,
    tally: Tally,
    seed: str,
    cycles: int,
) -> None:
    rng = random.Random(f"{seed}-{device}")
    for cycle in range(cycles):
        roll = rng.random()
        count = rng.randint(1, 4)
        body_sleep = rng.uniform(0.0, 0.01)
        which = profiler
        cancel_after = float("inf")
        cancel_in_body = False
        if roll < 0.2:
            cancel_after = rng.uniform(0.0, 0.08)
            tally.cancel_attempts += 1
            if cancel_after < SURE_CANCEL:
                cancel_in_body, cancel_after = True, float("inf")
                tally.sure_cancels += 1
        elif roll < 0.3:
            simctl.inject(rng.choice(CALLED_FUNCTIONS), rng.choice(list(ACL_CODES)))
        elif roll < 0.37:
            which = failing
        name = f"k{device}_{cycle}"
        try:
            with anyio.move_on_after(cancel_after) as scope:
                async with which.profile(device_id=device) as run:
                    sim.launch(name, device=device, count=count)
                    if cancel_in_body:
                        scope.cancel()
                    await anyio.sleep(body_sleep)
        except AclError:
            tally.acl_errors += 1
            continue
        except ExportError:
            assert which is failing
            tally.export_errors += 1
            continue
        if scope.cancelled_caught:
            tally.cancelled += 1
            continue
        assert which is profiler
        got = [] if run.result is None else [(t.name, t.device) for t in run.result.tasks]
        if got != [(name, device)] * count:
            tally.incomplete.append(f"device {device} cycle {cycle}: launched {count}, got {got}")
        tally.ok += 1


@pytest.mark.parametrize(
    "cycles", [pytest.param(12, id="96_cycles"), pytest.param(25, id="200_cycles", marks=pytest.mark.soak)]
)
async def test_soak_8_devices(
    cycles: int, anyio_backend_name: str, toolkit: Toolkit, simctl: SimControl
) -> None:
    simctl.set_latency(init=0.002, start=0.002, stop=0.004, finalize=0.001)
    root = default_result_root()
    await warm_up(toolkit)
    assert_nothing_left(simctl)
    runs_before = prof_dirs(root)
    fds_before = open_fds()
    others_before, workers_before = split_threads()
    assert child_pids() == []

    profiler = AsyncProfiler(toolkit=toolkit)
    # reader="msprof": a simulated run is otherwise read natively, and its export never runs
    failing = AsyncProfiler(toolkit=sim.toolkit(export_fault="exit:3"), reader="msprof")
    tally = Tally()
    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            for device in range(DEVICES):
                tg.start_soon(
                    device_loop, device, profiler, failing, simctl, tally, anyio_backend_name, cycles
                )
    simctl.clear_faults()  # an injected fault no window reached is not a leak of the library

    total = tally.ok + tally.cancelled + tally.acl_errors + tally.export_errors
    assert total == DEVICES * cycles
    assert tally.incomplete == [], "a successful run lost tasks"
    assert tally.ok > 0 and tally.export_errors > 0, tally  # both paths were exercised

    # Every check below is collected, so one run reports all that is wrong.
    problems: list[str] = []
    try:
        assert_nothing_left(simctl)
    except AssertionError as exc:
        problems.append(f"toolkit state: {exc}")

    def settled() -> bool:
        others, workers = split_threads()
        return (
            child_pids() == []
            and export_processes(toolkit.msprof_script) == []
            and open_fds() == fds_before
            and others == others_before
            and workers <= workers_before + WORKER_TOLERANCE
        )

    await anyio.to_thread.run_sync(wait_until, settled, 5.0)
    others, workers = split_threads()
    names = sorted(t.name for t in threading.enumerate())
    if child_pids():
        problems.append(f"child processes left: {child_pids()}")
    if export_processes(toolkit.msprof_script):
        problems.append(f"export processes left: {export_processes(toolkit.msprof_script)}")
    if open_fds() != fds_before:
        problems.append(f"{open_fds()} open file descriptors, {fds_before} before")
    if others != others_before:
        problems.append(f"threads other than pool workers changed: {names}")
    if workers > workers_before + WORKER_TOLERANCE:
        problems.append(f"{workers} pool worker threads ({workers_before} before): {names}")
    # Runs kept after errors and cancellations are removed by cleanup(); none is left behind.
    await profiler.cleanup()
    await failing.cleanup()
    left = prof_dirs(root) - runs_before
    if left:
        problems.append(f"{len(left)} PROF_* run(s) left in the temporary root after cleanup()")
    assert not problems, "\n".join(problems)
    # the mix really happened (seeded choices: this holds on every run once the above holds)
    ok, attempts, acl_errors, export_errors = MIX[cycles]
    assert tally.ok >= ok and tally.cancel_attempts >= attempts, tally
    assert tally.sure_cancels > 0 and tally.cancelled >= tally.sure_cancels, tally
    assert tally.acl_errors >= acl_errors and tally.export_errors >= export_errors, tally
