"""Section 6: threads while many async callers wait, and sweep memory with a consumer that stops reading.

Waiting callers: 800 concurrent ``AsyncProfiler.profile()`` calls on 8 devices (100 windows),
the first start held 1.5 s by the simulator, so every caller is waiting on a window while the
thread count is sampled every millisecond. Baseline: the process's threads just before (the
collector thread already exists).

Sweep memory: 100 cases of 20,000 simulated tasks each, a consumer that reads the first item and
then sleeps until every worker is blocked; peak RSS growth and the cases started, at the default
``max_pending`` and at 4.
"""

from __future__ import annotations

import os
import resource
import threading
from typing import Any

import anyio

from asc_aprof import AsyncProfiler, sim
from asc_aprof._cann._collector import get_collector
from asc_aprof._profilers._async import default_max_pending

from ._common import Config, Section, Table, Target, fmt_mb, run_child

CALLERS = 800
DEVICES = 8
THREAD_MARGIN = 8
SWEEP_CASES = 100
SWEEP_TASKS = 20_000


async def _waiting_threads(backend: str) -> dict[str, Any]:
    toolkit = sim.toolkit()
    control = sim.control()
    control.reset()
    control.set_latency(start=1.5)
    get_collector()
    baseline = threading.active_count()
    samples: list[int] = []
    profiler = AsyncProfiler(toolkit=toolkit)
    finished = 0

    async def caller(index: int) -> None:
        nonlocal finished
        async with profiler.profile(device_id=index % DEVICES):
            pass
        finished += 1

    async def sample(until: float) -> None:
        while anyio.current_time() < until:
            samples.append(threading.active_count())
            await anyio.sleep(0.001)

    async with anyio.create_task_group() as tg:
        for index in range(CALLERS):
            tg.start_soon(caller, index)
        await anyio.sleep(0.1)  # all joined; the first start is still held
        await sample(anyio.current_time() + 1.0)
        control.set_latency()
    return {
        "backend": backend,
        "baseline": baseline,
        "peak_waiting": max(samples),
        "finished": finished,
        "peak_after": threading.active_count(),
    }


def waiting_child(backend: str) -> dict[str, Any]:
    return anyio.run(_waiting_threads, backend, backend=backend)


async def _sweep_memory(max_pending: int | None) -> dict[str, Any]:
    toolkit = sim.toolkit()
    sim.control().reset()
    profiler = AsyncProfiler(toolkit=toolkit)
    started = 0

    def run(case: int, device: int) -> None:
        nonlocal started
        started += 1
        sim.launch("k", device=device, duration_us=5.0, count=SWEEP_TASKS)

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    async with profiler.sweep(range(SWEEP_CASES), run, devices=range(4), max_pending=max_pending) as items:
        first = await items.receive()
        assert first.error is None, first.error
        # Give the workers time to run as far as backpressure lets them.
        await anyio.sleep(3.0)
        ran = started
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"started": ran, "peak_growth": peak - base, "max_pending": max_pending}


def sweep_child(max_pending: str) -> dict[str, Any]:
    value = None if max_pending == "default" else int(max_pending)
    return anyio.run(_sweep_memory, value)


def main() -> None:
    import json
    import sys

    kind, arg = sys.argv[1], sys.argv[2]
    result = waiting_child(arg) if kind == "waiting" else sweep_child(arg)
    print(json.dumps(result))


def run(cfg: Config) -> Section:
    section = Section(
        "waiters",
        "6. Waiting callers and sweep backpressure",
        intro=(
            f"{CALLERS} concurrent `AsyncProfiler.profile()` callers on {DEVICES} devices wait while the "
            "first start is held; threads are sampled every ms. Then a sweep of "
            f"{SWEEP_CASES} cases x {SWEEP_TASKS:,} tasks on 4 devices whose consumer reads one item. "
            "Each in a fresh process."
        ),
    )
    rows = []
    for backend in ("asyncio", "trio"):
        r = run_child("waiters", ["waiting", backend])
        rows.append(
            [backend, str(r["baseline"]), str(r["peak_waiting"]), f"+{r['peak_waiting'] - r['baseline']}"]
        )
        section.targets.append(
            Target(
                f"threads while {CALLERS} callers wait ({backend})",
                f"<= baseline + {THREAD_MARGIN}",
                f"{r['peak_waiting']} (baseline {r['baseline']})",
                r["peak_waiting"] <= r["baseline"] + THREAD_MARGIN,
            )
        )
    section.tables.append(Table("Threads", ["backend", "baseline", "peak while waiting", "growth"], rows))
    rows = []
    for max_pending in ("default", "4"):
        r = run_child("waiters", ["sweep", max_pending])
        rows.append([max_pending, str(r["started"]), fmt_mb(r["peak_growth"])])
        default = default_max_pending(4, anyio.CapacityLimiter(os.cpu_count() or 1))
        bound = (default if max_pending == "default" else 4) + 1  # + the item the consumer read
        section.targets.append(
            Target(
                f"sweep cases started with an idle consumer (max_pending={max_pending})",
                f"<= {bound} of {SWEEP_CASES}",
                str(r["started"]),
                r["started"] <= bound,
            )
        )
    section.tables.append(
        Table("Sweep, consumer reads one item", ["max_pending", "cases started", "peak RSS growth"], rows)
    )
    section.notes.append(
        "`max_pending` defaults to devices x (export limit + 2) "
        f"({default_max_pending(4, anyio.CapacityLimiter(os.cpu_count() or 1))} here: 4 devices, the export "
        "limit is the CPU count): cases started and not yet received; each holds at most one result."
    )
    return section


if __name__ == "__main__":
    main()
