"""Section 11: reading a run natively (the raw reader) from async code: loop stalls, memory, latency.

Three measurements, each in fresh interpreters (``python -m benchmarks.rawread MODE ...`` prints
one JSON line):

1. **Event-loop stalls** (``stall BACKEND WORKLOAD ...``): a ticker task sleeps 1 ms in a loop and
   records how late it wakes (as in section 3). Workloads: ``profile`` (``AsyncProfiler.profile()``
   collecting N simulated tasks, the stall counted from the end of its body until it returns: the
   stop and the native read), and, over an N-task raw run made once beforehand, ``store_result``
   (``await AsyncProfiler(...).store_result(run_id)``), ``iter_tasks`` (``async for`` over
   ``AsyncProfiler(...).iter_tasks(run_id)``, every task consumed) and ``aopen_run``
   (``async for`` over ``(await aopen_run(run_dir)).tasks()``).
2. **Peak memory** (``memory ...``): the peak RSS growth of consuming ``iter_tasks()`` over a
   1,000,000-task raw run without keeping the tasks (and, for attribution, of ``read_run`` alone).
3. **Throughput guard** (``guard ...``): stop-to-result of the sync ``Profiler.profile()`` for a
   10,000-task simulated run read natively, median of 3, recorded with the commit.

Every reader is made with ``reader="raw"``: it is what ``reader="auto"`` does with a run the raw
reader accepts, and a declined run fails the measurement instead of silently timing an export.
The raw runs are made once per section run by a child (``make``: ``MsprofInterface`` start, the
simulated launches, stop; nothing is read), in the data directory, outside every timed part.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import gc
import json
import os
import pstats
import resource
import shutil
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from asc_aprof import AicoreMetrics, AsyncProfiler, MsprofInterface, Profiler, aopen_run, sim
from asc_aprof._model._enums import DEFAULT_PROFILE_TYPES
from asc_aprof._model._progress import ProgressEvent
from asc_aprof._plans._raw import RawResult, RunPlan
from asc_aprof._runs._raw_files import SWITCH_INTERVAL, _listing, decoding, read_run

from ._common import (
    Config,
    Section,
    Table,
    Target,
    _git_state,
    fmt_mb,
    fmt_ms,
    fmt_s,
    median,
    percentile,
    run_child,
)

TICK = 0.001
IDLE_BEFORE = 0.3
IDLE_AFTER = 0.2
BACKENDS = ("asyncio", "trio")
WORKLOADS = {
    "profile": "`async with AsyncProfiler(...).profile()`: stop + native read (body end to return)",
    "store_result": "`await AsyncProfiler(...).store_result(run_id)`",
    "iter_tasks": "`async for t in AsyncProfiler(...).iter_tasks(run_id)`",
    "aopen_run": "`async for t in (await aopen_run(run_dir)).tasks()`",
    "floor": "floor: a worker thread running pure Python for 1 s, the switch interval pinned as in a read",
}
#: Workloads that read the run (the floor reads nothing: the interpreter's own hand-over)
READS = ("profile", "store_result", "iter_tasks", "aopen_run")
FLOOR_SECONDS = 1.0
#: phases of the ``profile`` workload, from the progress events (a tick counts where it woke)
PROFILE_PHASES = ("stop", "read", "hand-off")
STALL_GOAL = 0.002
STALL_CAP = 500_000
QUICK_TASKS = 20_000
MEMORY_TASKS = 1_000_000
MEMORY_GOAL = 100 * 2**20
#: the memory run is spread over two devices: the raw reader declines a device with 1,000,000 or
#: more op_summary rows (``_raw._run.CSV_LIMIT``), and a declined run is not what is measured here
MEMORY_DEVICES = 2
GUARD_TASKS = 10_000
GUARD_REPS = 3
KERNEL = "bench_kernel"
DURATION_US = 5.0


# -- child: making a raw run ---------------------------------------------------------------------
def make_run(result_path: Path, tasks: int, devices: int) -> dict[str, Any]:
    """A simulated raw run of *tasks* kernels spread over *devices* devices; nothing reads it."""
    began = time.perf_counter()
    control = sim.control()
    control.reset()
    result_path.mkdir(parents=True, exist_ok=True)
    acl = MsprofInterface(sim.toolkit())
    acl.init(result_path)
    # what profile() collects by default: task time with the PMU (ffts_profile) and L2 cache data
    config = acl.create_config(range(devices), AicoreMetrics.PIPE_UTILIZATION, DEFAULT_PROFILE_TYPES)
    acl.start(config)
    per_device = [tasks // devices + (1 if d < tasks % devices else 0) for d in range(devices)]
    for device, count in enumerate(per_device):
        sim.launch(KERNEL, device=device, count=count, duration_us=DURATION_US)
    acl.stop(config)
    acl.destroy_config(config)
    acl.finalize()
    control.reset()
    (run_dir,) = result_path.glob("PROF_*")
    return {"run_id": run_dir.name, "seconds": time.perf_counter() - began}


# -- child: event-loop stalls --------------------------------------------------------------------
def _stats(lateness: list[float]) -> dict[str, float]:
    if not lateness:
        return {"n": 0, "max": float("nan"), "p99": float("nan"), "p50": float("nan")}
    return {
        "n": len(lateness),
        "max": max(lateness),
        "p99": percentile(lateness, 99),
        "p50": percentile(lateness, 50),
    }


def _python_for_a_while() -> None:
    """Pure Python for FLOOR_SECONDS: the GIL handed over by the interpreter alone."""
    until = time.perf_counter() + FLOOR_SECONDS
    total = 0
    while time.perf_counter() < until:
        for i in range(1000):
            total += i


async def _read_workload(workload: str, root: Path, run_id: str, keep: list[object]) -> int:
    """One read of the ready-made run; the number of tasks it gave. What the caller would hold
    afterwards (a result) goes into *keep*, freed after the measurement: freeing 500,000 task
    records costs about 0.1 s on whichever thread drops them, the caller's doing, not the read's."""
    if workload == "store_result":
        result = await AsyncProfiler(root, reader="raw").store_result(run_id)
        keep.append(result)
        return len(result.tasks)
    count = 0
    if workload == "iter_tasks":
        async for _ in AsyncProfiler(root, reader="raw").iter_tasks(run_id):
            count += 1
        return count
    if workload == "aopen_run":
        run = await aopen_run(root / run_id, reader="raw")
        async for _ in run.tasks():
            count += 1
        return count
    if workload == "floor":
        await anyio.to_thread.run_sync(decoding, _python_for_a_while)
        return 0
    raise SystemExit(f"unknown workload {workload!r}")


async def measure_stalls(workload: str, root: Path, run_id: str, tasks: int) -> dict[str, Any]:
    lateness: list[float] = []
    begins: list[float] = []
    ends: list[float] = []
    marks: dict[str, float] = {}
    gc_pauses: list[tuple[float, float]] = []
    gc_started = [0.0]
    running = True

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            gc_started[0] = time.perf_counter()
        else:
            gc_pauses.append((gc_started[0], time.perf_counter()))

    def on_event(event: ProgressEvent) -> None:
        marks.setdefault(event.kind, time.perf_counter())

    async def ticker() -> None:
        while running:
            began = time.perf_counter()
            await anyio.sleep(TICK)
            woke = time.perf_counter()
            lateness.append(woke - began - TICK)
            begins.append(began)
            ends.append(woke)

    got = 0
    kept: list[object] = []  # the caller's result, freed once the ticker stopped
    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await anyio.sleep(IDLE_BEFORE)
        gc.callbacks.append(on_gc)
        marks["enter"] = time.perf_counter()
        try:
            if workload == "profile":
                profiler = AsyncProfiler(root, toolkit=sim.toolkit(), reader="raw", progress=on_event)
                launch = functools.partial(sim.launch, KERNEL, count=tasks, duration_us=DURATION_US)
                async with profiler.profile(cleanup=False) as run:
                    await anyio.to_thread.run_sync(launch)
                    marks["start"] = time.perf_counter()  # the body's end: the read phase begins
                marks["done"] = time.perf_counter()
                assert run.result is not None
                got = len(run.result.tasks)
            else:
                marks["start"] = time.perf_counter()
                got = await _read_workload(workload, root, run_id, kept)
                marks["done"] = time.perf_counter()
        finally:
            gc.callbacks.remove(on_gc)
        await anyio.sleep(IDLE_AFTER)
        running = False

    start, done = marks["start"], marks["done"]
    # A tick counts when it overlaps the read: it began before the read returned and woke after
    # the read began (so the tick that a last blocking step before the return delays counts too).
    during = [
        (late, began, end)
        for late, began, end in zip(lateness, begins, ends, strict=True)
        if began < done and end > start
    ]
    idle = [late for late, end in zip(lateness, ends, strict=True) if end < marks["enter"]]
    worst = max(during, default=None)
    phases: dict[str, list[float]] = {name: [] for name in PROFILE_PHASES}
    if workload == "profile":
        bounds = [marks.get("collection_stopped", start), marks.get("parse_finished", start)]
        for late, _, end in during:
            phases[PROFILE_PHASES[sum(end >= b for b in bounds)]].append(late)
    overlapping = [stop - began for began, stop in gc_pauses if began < done and stop > start]
    # the ticks no collector pass of over a millisecond overlapped: what the read itself costs the loop
    long_gcs = [(began, stop) for began, stop in gc_pauses if stop - began > 0.001]
    no_gc = [late for late, began, end in during if not any(g0 < end and g1 > began for g0, g1 in long_gcs)]
    return {
        "tasks": got,
        "expected": tasks,
        "wall": done - start,
        "during": _stats([late for late, _, _ in during]),
        "during_no_gc": _stats(no_gc),
        "idle": _stats(idle),
        # where the longest stall woke, in seconds after the read began (past "wall": after it returned)
        "worst_at": (worst[2] - start) if worst is not None else float("nan"),
        "phases": {name: _stats(values) for name, values in phases.items()},
        "gc_longest": max(overlapping, default=0.0),
        "gc_count": len(overlapping),
    }


# -- child: peak memory --------------------------------------------------------------------------
def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as stream:
            for line in stream:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    """Reset the kernel's peak RSS (``VmHWM``) where allowed (Linux ``clear_refs``)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as stream:
            stream.write("5")
    except OSError:
        return False
    return True


def _peak_kib() -> tuple[int, str]:
    peak = _status_kib("VmHWM")
    if peak is not None:
        return peak, "VmHWM"
    # ru_maxrss: KiB on Linux, bytes on macOS
    scale = 1024 if sys.platform == "darwin" else 1
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // scale, "ru_maxrss"


async def _metered(fn: Callable[[], Awaitable[int]]) -> dict[str, Any]:
    """Peak RSS growth over ``await fn()``: the peak during it minus the RSS just before it."""
    gc.collect()
    before_peak = _peak_kib()[0]
    reset = _reset_peak()
    base = _status_kib("VmRSS")
    if base is None:  # no /proc: the peak so far (this child only imported) stands for the RSS
        base = before_peak
    began = time.perf_counter()
    tasks = await fn()
    seconds = time.perf_counter() - began
    peak, source = _peak_kib()
    if reset:
        source += " (reset through /proc/self/clear_refs)"
    elif peak <= before_peak:
        source += " (not resettable, and not above the pre-read peak: the growth is an upper bound)"
    else:
        source += " (not resettable; the read raised it)"
    return {
        "tasks": tasks,
        "seconds": seconds,
        "base_bytes": base * 1024,
        "peak_bytes": peak * 1024,
        "growth_bytes": max(0, peak - base) * 1024,
        "source": source,
    }


async def measure_memory(mode: str, root: Path, run_id: str) -> dict[str, Any]:
    if mode == "iter_tasks":

        async def consume() -> int:
            count = 0
            async for _ in AsyncProfiler(root, reader="raw").iter_tasks(run_id):
                count += 1
            return count

        return await _metered(consume)
    if mode == "read_run":

        async def decode() -> int:
            outcome = read_run(root / run_id, packed=True)  # blocking on purpose: the decode's own peak
            assert isinstance(outcome, RawResult), outcome
            return len(outcome.tasks)

        return await _metered(decode)
    raise SystemExit(f"unknown memory mode {mode!r}")


def raw_sizes(run_dir: Path) -> dict[str, int]:
    """Bytes of the run on disk, of the files the raw reader reads (``RunPlan.wanted``), and of
    its ``ffts_profile`` slices (the PMU records) among them."""
    wanted = RunPlan.from_listing(_listing(run_dir)).wanted
    on_disk = sum(p.stat().st_size for p in run_dir.rglob("*") if p.is_file())
    read = sum((run_dir / rel).stat().st_size for rel in wanted)
    ffts = sum((run_dir / rel).stat().st_size for rel in wanted if "ffts_profile" in rel)
    return {"on_disk": on_disk, "read": read, "ffts": ffts, "files": len(wanted)}


# -- child: the longest calls into C during a read -------------------------------------------------
def measure_calls(run_dir: Path, limit: int = 8) -> dict[str, Any]:
    """``read_run(run_dir)`` under cProfile: the built-in (C) calls with the longest time per call.

    A worker thread keeps the event loop running only while it lets go of the GIL: Python code
    does every ``sys.getswitchinterval()``, a C call only if it releases the GIL itself. So the
    longest single C calls of the read are stalls its worker thread imposes on the event loop.
    """
    read_run(run_dir)  # warm: imports, page cache
    profile = cProfile.Profile()
    began = time.perf_counter()
    profile.enable()
    try:
        outcome = read_run(run_dir)
    finally:
        profile.disable()
    wall = time.perf_counter() - began
    assert isinstance(outcome, RawResult), outcome
    stats = pstats.Stats(profile)
    # pstats keeps its table in an untyped attribute: (file, line, name) -> (cc, nc, tt, ct, callers)
    entries: dict[tuple[str, int, str], tuple[int, int, float, float, object]] = stats.stats  # type: ignore[attr-defined]
    calls = sorted(
        (
            (tt / max(nc, 1), nc, tt, name)
            for (filename, _, name), (_, nc, tt, _, _) in entries.items()
            if filename == "~"
        ),
        reverse=True,
    )[:limit]
    return {
        "tasks": len(outcome.tasks),
        "wall": wall,
        "switch_interval": sys.getswitchinterval(),
        "calls": [{"name": name, "per_call": per, "ncalls": nc, "total": tt} for per, nc, tt, name in calls],
    }


# -- child: the throughput guard -----------------------------------------------------------------
def measure_guard(root: Path, tasks: int, reps: int) -> dict[str, Any]:
    """Stop-to-result of the sync ``Profiler.profile()``: from the body's end until it returns."""
    profiler = Profiler(root, toolkit=sim.toolkit(), reader="raw")
    times: list[float] = []
    got: list[int] = []
    try:
        for _ in range(reps):
            with profiler.profile(cleanup=False) as run:
                sim.launch(KERNEL, count=tasks, duration_us=DURATION_US)
                began = time.perf_counter()
            times.append(time.perf_counter() - began)
            assert run.result is not None
            got.append(len(run.result.tasks))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {"times": times, "tasks": got}


# -- the section ---------------------------------------------------------------------------------
def _sizes(cfg: Config) -> tuple[int, int]:
    """(tasks of the stall runs, tasks of the memory run)."""
    if cfg.quick:
        n = min(cfg.stall_tasks, QUICK_TASKS)
        return n, 2 * n
    return min(cfg.stall_tasks, STALL_CAP), MEMORY_TASKS


def _make(into: Path, tasks: int, devices: int) -> tuple[Path, str, float]:
    if into.exists():
        shutil.rmtree(into)
    made = run_child("rawread", ["make", str(into), str(tasks), str(devices)], timeout=3600)
    return into, str(made["run_id"]), float(made["seconds"])


def run(cfg: Config, data_dir: Path) -> Section:
    n, mem_n = _sizes(cfg)
    work = data_dir / "rawread"
    section = Section(
        "rawread",
        f"11. Reading natively from async code: loop stalls ({n:,} tasks), memory ({mem_n:,} tasks)",
    )
    section.intro = (
        "The raw reader reads a `PROF_*` run's raw data itself (no `msprof.py` export): what every "
        "profiler does by default (`reader='auto'`) when it accepts the run. Each line below is a "
        "fresh interpreter; every reader is made with `reader='raw'` (so a declined run fails the "
        "measurement instead of timing an export). The raw runs (simulated toolkit: "
        f"`sim.launch({KERNEL!r}, count=..., duration_us={DURATION_US})`) are made once, before "
        "anything is timed, and every reading child reads the same run."
    )
    try:
        stall_root, stall_id, stall_made = _make(work / "stall-run", n, 1)
        _stalls(section, n, stall_root, stall_id, work)
        section.notes.append(
            "The result `store_result()` returns is kept until the measurement ended, as a caller keeps "
            "it: freeing 500,000 task records at once costs about 0.1 s on whichever thread drops them "
            "(measured 115 ms, sync, git f8cdda0), which is the caller's doing, not the read's (before "
            "f8cdda0 this section freed it inside the measured window, and counted it as the read's stall)."
        )
        mem_root, mem_id, mem_made = _make(work / "memory-run", mem_n, MEMORY_DEVICES)
        _memory(section, mem_n, mem_root, mem_id)
        _guard(section, work)
        section.notes.append(
            f"Making the raw runs (not timed above): {n:,} tasks in {fmt_s(stall_made)}, "
            f"{mem_n:,} tasks in {fmt_s(mem_made)}."
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return section


def _stalls(section: Section, n: int, root: Path, run_id: str, work: Path) -> None:
    results: dict[tuple[str, str], dict[str, Any]] = {}
    for workload in WORKLOADS:
        for backend in BACKENDS:
            where = root
            if workload == "profile":  # a run of its own, collected by the child
                where = work / f"profile-{backend}"
                if where.exists():
                    shutil.rmtree(where)
            try:
                res = run_child(
                    "rawread", ["stall", backend, workload, str(where), run_id, str(n)], timeout=1800
                )
            finally:
                if workload == "profile":
                    shutil.rmtree(where, ignore_errors=True)
            if workload in READS and res["tasks"] != n:
                raise RuntimeError(f"rawread {workload} on {backend}: {res['tasks']:,} tasks, not {n:,}")
            results[workload, backend] = res
    rows = []
    for (workload, backend), res in results.items():
        d = res["during"]
        rows.append(
            [
                f"{WORKLOADS[workload]}, {backend}",
                fmt_ms(d["max"]),
                fmt_ms(d["p99"]),
                fmt_ms(d["p50"]),
                f"{d['n']:,}",
                fmt_ms(res["idle"]["max"]),
                fmt_s(res["wall"]),
                fmt_ms(res["worst_at"]),
                f"{res['gc_count']} / {fmt_ms(res['gc_longest'])}",
                fmt_ms(res["during_no_gc"]["max"]),
            ]
        )
    section.tables.append(
        Table(
            f"Event-loop stalls while reading {n:,} tasks natively (a tick counts when it overlaps the "
            "read: from the call, or for `profile()` from its body's end, until it returns)",
            [
                "workload, backend",
                "max stall",
                "p99",
                "p50",
                "ticks",
                "idle max (before the call)",
                "read wall",
                "max stall woke at (after read start)",
                "GC passes / longest",
                "max, ticks without a GC pause",
            ],
            rows,
        )
    )
    floor = {b: results["floor", b]["during"] for b in BACKENDS if ("floor", b) in results}
    if floor:
        section.notes.append(
            "The *floor* rows read nothing: a worker thread runs pure Python for "
            f"{FLOOR_SECONDS:g} s with the switch interval pinned as during a read, so the loop waits "
            "only on the interpreter's own hand-over of the GIL (and on this machine): "
            + "; ".join(f"{b} max {fmt_ms(st['max'])}, p99 {fmt_ms(st['p99'])}" for b, st in floor.items())
            + ". A read's stalls above these are the read's own."
        )
    phase_rows = []
    for backend in BACKENDS:
        res = results["profile", backend]
        cells = [f"profile(), {backend}"]
        for phase in PROFILE_PHASES:
            st = res["phases"][phase]
            cells.append(f"{fmt_ms(st['max'])} / {fmt_ms(st['p99'])} ({st['n']:,})")
        phase_rows.append(cells)
    section.tables.append(
        Table(
            "`profile()` by phase, max / p99 (ticks): *stop* from the body's end to "
            "`collection_stopped`, *read* to `parse_finished` (raw read and split by device in worker "
            "threads), *hand-off* until `profile()` returned (a tick counts where it woke)",
            ["workload", *PROFILE_PHASES],
            phase_rows,
        )
    )
    for (workload, backend), res in results.items():
        if workload not in READS:
            continue
        worst = res["during"]["max"]
        section.targets.append(
            Target(f"{workload}, {backend}: max stall", "<= 2 ms", fmt_ms(worst), worst <= STALL_GOAL)
        )
    missed = [res for (w, _), res in results.items() if w in READS and res["during"]["max"] > STALL_GOAL]
    if missed:
        _attribute(section, root, run_id)
    for (workload, backend), res in results.items():
        worst = res["during"]["max"]
        if workload in READS and worst > STALL_GOAL:
            at_end = res["worst_at"] >= res["wall"]
            section.analysis.append(
                f"{workload} on {backend}: max {fmt_ms(worst)} ({fmt_ms(worst - STALL_GOAL)} over 2 ms), "
                f"its tick woke {fmt_ms(res['worst_at'])} after the read began"
                + (" (after the read returned: the last step before the return)" if at_end else "")
                + f"; read wall {fmt_s(res['wall'])}; longest GC pause overlapping the read "
                f"{fmt_ms(res['gc_longest'])}; max over the ticks no GC pause overlapped "
                f"{fmt_ms(res['during_no_gc']['max'])}; idle baseline max {fmt_ms(res['idle']['max'])}."
            )
    if any(res["gc_longest"] > STALL_GOAL for res in results.values()):
        section.analysis.append(
            "The collector's full passes: CPython's cyclic GC walks every tracked object of the process "
            "in one step on whichever thread triggers it. Awaited reads hold full passes back while "
            "they run (`gc.set_threshold()`'s third value, put back when the last read ends: see "
            "docs/performance.md), so a pass longer than the goal above is a young generation's (the "
            "read or the consumer made that many tracked objects at once) or one that came as the "
            "read ended."
        )


def _attribute(section: Section, root: Path, run_id: str) -> None:
    """The longest single C calls of the native read (each holds the GIL throughout)."""
    res = run_child("rawread", ["calls", str(root / run_id)], timeout=1800)
    lines = [f"{'per call':>10} {'calls':>6} {'total':>10}  function"]
    lines += [
        f"{fmt_ms(c['per_call']):>10} {c['ncalls']:6d} {fmt_ms(c['total']):>10}  {c['name']}"
        for c in res["calls"]
    ]
    lines.append(f"(read_run of {res['tasks']:,} tasks under cProfile: {fmt_s(res['wall'])})")
    section.profiles.append(
        (
            "The longest single calls into C while `read_run` decodes the stall run (cProfile, blocking, "
            "warm page cache)",
            "\n".join(lines),
        )
    )
    if res["calls"]:
        top = res["calls"][0]
        section.analysis.append(
            "The native read runs in a worker thread, which keeps the event loop running only while "
            "that thread lets go of the GIL: while a decode runs the switch interval is pinned to "
            f"{fmt_ms(SWITCH_INTERVAL)} (Python code hands over within it; it is "
            f"{fmt_ms(res['switch_interval'])} otherwise), and the C loops pass release points (at "
            "most every two intervals, `_release.h`), so a long C call no longer holds the GIL "
            f"throughout. The longest single C call of the read, `{top['name']}`, takes "
            f"{fmt_ms(top['per_call'])} for {res['tasks']:,} tasks (see the calls below); the stalls "
            "that remain are the hand-overs' waits and single outliers, not one long step."
        )


def _memory(section: Section, n: int, root: Path, run_id: str) -> None:
    sizes = raw_sizes(root / run_id)
    stream = run_child("rawread", ["memory", "iter_tasks", str(root), run_id], timeout=1800)
    decode = run_child("rawread", ["memory", "read_run", str(root), run_id], timeout=1800)
    for res in (stream, decode):
        if res["tasks"] != n:
            raise RuntimeError(f"rawread memory: {res['tasks']:,} tasks, not {n:,}")
    rows = [
        [
            "`async for t in AsyncProfiler(root, reader='raw').iter_tasks(run_id)` (nothing kept)",
            fmt_mb(stream["growth_bytes"]),
            f"{stream['growth_bytes'] / n:.0f} B",
            fmt_mb(stream["base_bytes"]),
            fmt_s(stream["seconds"]),
        ],
        [
            "attribution: `_raw.read_run(run_dir, packed=True)` alone (blocking; the RawResult kept)",
            fmt_mb(decode["growth_bytes"]),
            f"{decode['growth_bytes'] / n:.0f} B",
            fmt_mb(decode["base_bytes"]),
            fmt_s(decode["seconds"]),
        ],
    ]
    section.tables.append(
        Table(
            f"Peak RSS growth reading a {n:,}-task raw run ({MEMORY_DEVICES} devices, "
            f"{n // MEMORY_DEVICES:,} tasks each); the raw reader's files: {fmt_mb(sizes['read'])} in "
            f"{sizes['files']} files, of which `ffts_profile` {fmt_mb(sizes['ffts'])}, read only with "
            f"counters, so {fmt_mb(sizes['read'] - sizes['ffts'])} read here (the whole run on disk: "
            f"{fmt_mb(sizes['on_disk'])})",
            ["how", "peak RSS growth", "per task", "RSS before (after imports)", "wall"],
            rows,
        )
    )
    growth = stream["growth_bytes"]
    section.targets.append(
        Target(
            f"iter_tasks() over a {n:,}-task raw run: peak RSS growth",
            "< 100 MB",
            fmt_mb(growth),
            growth < MEMORY_GOAL,
        )
    )
    section.notes.append(
        f"Peak measured with {stream['source']}, minus the RSS just before the read (after imports, "
        "inside the running event loop), each in a fresh interpreter."
    )
    section.notes.append(
        "What the raw path holds (from the code): `_runs._raw_files._run_files` reads the run's "
        "metadata and small host files before the decode, the host's record files and each "
        "device's task logs (`stars_soc`, `ts_track`; `ffts_profile` only with counters) when the "
        "decode asks, big record files into anonymous memory maps, each let go of once decoded. "
        "`iter_tasks()` reads a device at a time (`_raw_files.DeviceReads` over "
        "`_run.decode_devices`): a device's rows are made only once the device before was given "
        "and let go of. At level 1 the lean host walk (`_host.LeanWalk`) reads the host record "
        "files a 4 MiB piece at a time, keeps only the API calls as sorted intervals (24 bytes "
        "each) and their nodes (24 bytes each), makes no host task (their ids only checked) and "
        "packs the GE tasks (12 bytes each); a level-1 device is packed straight from its task "
        "log by `_cdevice.packed_device` (`PackedRows`, 64 bytes a row; no Python object per "
        "task; its task log read a 4 MiB piece at a time; the pairing's scratch at 4 bytes a "
        "record, no time-order copy of a log already in time order), from which "
        "`AsyncRun.batches` makes the public records 2,048 at a time. The C loops' big scratch "
        "arrays are anonymous maps, returned when freed. So the peak is the larger of the host "
        "side (the calls, their nodes, the walk's arrays, the ids checked, the packed GE tasks of "
        "every device) and one device's decode (its records, then its packed rows), with the GE "
        "tasks of the devices not yet read."
    )
    if growth >= MEMORY_GOAL:
        section.analysis.append(
            f"iter_tasks(): {fmt_mb(growth)} peak growth, {fmt_mb(growth - MEMORY_GOAL)} over the 100 MB "
            f"target; `read_run` alone peaks at {fmt_mb(decode['growth_bytes'])}, and the raw files it "
            f"reads are {fmt_mb(sizes['read'] - sizes['ffts'])}. The bound is the host side or one "
            "device's decode (see the note above)."
        )


def _guard(section: Section, work: Path) -> None:
    res = run_child("rawread", ["guard", str(work / "guard"), str(GUARD_TASKS), str(GUARD_REPS)])
    times: list[float] = res["times"]
    if any(t != GUARD_TASKS for t in res["tasks"]):
        raise RuntimeError(f"rawread guard: {res['tasks']} tasks, not {GUARD_TASKS:,} each")
    source = os.environ.get("ASC_APROF_BENCH_SOURCE") or _git_state()
    section.tables.append(
        Table(
            f"Throughput guard: stop to result of the sync `Profiler(..., reader='raw').profile()` for a "
            f"{GUARD_TASKS:,}-task simulated run (from the body's end until `profile()` returns: stop, "
            "native read, hand-off); compare across runs of the benchmark",
            ["commit", "median", "min", "max", "reps"],
            [[source, fmt_ms(median(times)), fmt_ms(min(times)), fmt_ms(max(times)), str(len(times))]],
        )
    )


# -- child entry point ---------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rawread")
    sub = parser.add_subparsers(dest="mode", required=True)
    make = sub.add_parser("make")
    make.add_argument("result_path", type=Path)
    make.add_argument("tasks", type=int)
    make.add_argument("devices", type=int)
    stall = sub.add_parser("stall")
    stall.add_argument("backend", choices=BACKENDS)
    stall.add_argument("workload", choices=list(WORKLOADS))
    stall.add_argument("result_path", type=Path)
    stall.add_argument("run_id")
    stall.add_argument("tasks", type=int)
    memory = sub.add_parser("memory")
    memory.add_argument("what", choices=["iter_tasks", "read_run"])
    memory.add_argument("result_path", type=Path)
    memory.add_argument("run_id")
    calls = sub.add_parser("calls")
    calls.add_argument("run_dir", type=Path)
    guard = sub.add_parser("guard")
    guard.add_argument("result_path", type=Path)
    guard.add_argument("tasks", type=int)
    guard.add_argument("reps", type=int)
    args = parser.parse_args()
    result: dict[str, Any]
    if args.mode == "make":
        result = make_run(args.result_path, args.tasks, args.devices)
    elif args.mode == "stall":
        if args.workload == "profile":
            args.result_path.mkdir(parents=True, exist_ok=True)
        try:
            result = anyio.run(
                measure_stalls, args.workload, args.result_path, args.run_id, args.tasks, backend=args.backend
            )
        finally:
            if args.workload == "profile":
                shutil.rmtree(args.result_path, ignore_errors=True)
    elif args.mode == "calls":
        result = measure_calls(args.run_dir)
    elif args.mode == "memory":
        result = anyio.run(measure_memory, args.what, args.result_path, args.run_id)
    else:
        args.result_path.mkdir(parents=True, exist_ok=True)
        result = measure_guard(args.result_path, args.tasks, args.reps)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
