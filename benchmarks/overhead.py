"""Section 5: what one tiny profiling cycle costs through each API (zero modelled latency)."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path

import anyio

from asc_aprof import AicoreMetrics, AsyncProfiler, MsprofInterface, Profiler, sim
from asc_aprof._cann import _collector
from asc_aprof._model._enums import DEFAULT_PROFILE_TYPES
from asc_aprof._model._progress import ProgressEvent
from asc_aprof._model._toolkit import Toolkit
from asc_aprof._runs import _raw_files

from ._common import Config, Section, Table, Target, fmt_us, median, profile_call

TARGET_S = 0.001
PROTOCOL_TARGET_S = 0.0005
ACL_METHODS = ("init", "create_config", "start", "stop", "destroy_config", "finalize")


class CallClock:
    """Time spent inside the aclprof calls (the simulator's C code), whichever thread makes them.

    Installed by wrapping ``MsprofInterface``'s methods for the duration of the section, so the
    library's own time is cycle wall time minus this, measured per cycle: the simulator's file
    writes in start/stop vary by milliseconds on a busy disk and would drown a subtraction of
    medians.
    """

    def __init__(self) -> None:
        self.seconds = 0.0
        #: time deleting run directories (``profile(cleanup=True)``), measured the same way
        self.cleanup = 0.0
        #: time reading runs natively (``read_run``, what replaces the export of a simulated run)
        self.read = 0.0
        self._saved: dict[str, Callable[..., object]] = {}
        #: (module, attribute, original) of every module function replaced by a timed one
        self._patched: list[tuple[types.ModuleType, str, Callable[..., object]]] = []

    def __enter__(self) -> CallClock:
        for name in ACL_METHODS:
            original = getattr(MsprofInterface, name)
            self._saved[name] = original
            setattr(MsprofInterface, name, self._wrap(original))
        self._time_everywhere("remove_run_dir", _collector.remove_run_dir, "cleanup")
        # read_run_async calls the module's read_run in a worker thread; the drivers call theirs
        self._time_everywhere("read_run", _raw_files.read_run, "read")
        return self

    def _time_everywhere(self, name: str, original: Callable[..., object], total: str) -> None:
        """Every asc_aprof module that imported *original* as *name* gets a timed one, adding to
        the attribute *total* of this clock."""

        def timed(*args: object, **kwargs: object) -> object:
            began = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                setattr(self, total, getattr(self, total) + time.perf_counter() - began)

        for module in list(sys.modules.values()):
            ours = getattr(module, "__name__", "").startswith("asc_aprof")
            if ours and getattr(module, name, None) is original:
                self._patched.append((module, name, original))
                setattr(module, name, timed)

    def __exit__(self, *exc: object) -> None:
        for name, original in self._saved.items():
            setattr(MsprofInterface, name, original)
        for module, name, original in self._patched:
            setattr(module, name, original)
        self._patched.clear()

    def _wrap(self, original: Callable[..., object]) -> Callable[..., object]:
        @functools.wraps(original)
        def timed(*args: object, **kwargs: object) -> object:
            began = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - began

        return timed


@dataclasses.dataclass
class Cycles:
    """Per-cycle samples: wall time, time in aclprof calls, the kernel launch, the export."""

    wall: list[float] = dataclasses.field(default_factory=list)
    acl: list[float] = dataclasses.field(default_factory=list)
    kernel: list[float] = dataclasses.field(default_factory=list)
    export: list[float] = dataclasses.field(default_factory=list)
    cleanup: list[float] = dataclasses.field(default_factory=list)
    read: list[float] = dataclasses.field(default_factory=list)

    def own(self) -> list[float]:
        """What the code around the C calls took: wall - aclprof calls - kernel - export."""
        exports = self.export or [0.0] * len(self.wall)
        return [w - a - k - e for w, a, k, e in zip(self.wall, self.acl, self.kernel, exports, strict=True)]


class _Cycle:
    """Measure one cycle: ``with cycle(cycles, clock) as kernel: ...; kernel()``."""

    def __init__(self, cycles: Cycles, clock: CallClock) -> None:
        self.cycles, self.clock = cycles, clock
        self.kernel_s = 0.0

    def __enter__(self) -> _Cycle:
        self.clock.seconds = self.clock.cleanup = self.clock.read = 0.0
        self.began = time.perf_counter()
        return self

    def kernel(self) -> None:
        began = time.perf_counter()
        sim.launch("tiny_kernel", count=1, duration_us=5.0)
        self.kernel_s += time.perf_counter() - began

    def __exit__(self, *exc: object) -> None:
        self.cycles.wall.append(time.perf_counter() - self.began)
        self.cycles.acl.append(self.clock.seconds)
        self.cycles.kernel.append(self.kernel_s)
        self.cycles.cleanup.append(self.clock.cleanup)
        self.cycles.read.append(self.clock.read)


def raw_cycles(toolkit: Toolkit, path: Path, n: int, clock: CallClock) -> Cycles:
    """init / create_config / start / (1 kernel) / stop / destroy_config / finalize, nothing else."""
    iface = MsprofInterface(toolkit)
    path.mkdir(parents=True, exist_ok=True)
    out = Cycles()
    for _ in range(n):
        with _Cycle(out, clock) as cycle:
            iface.init(path)
            config = iface.create_config([0], AicoreMetrics.PIPE_UTILIZATION, DEFAULT_PROFILE_TYPES)
            iface.start(config)
            cycle.kernel()
            iface.stop(config)
            iface.destroy_config(config)
            iface.finalize()
    return out


def sync_start_stop(toolkit: Toolkit, path: Path, n: int, clock: CallClock) -> Cycles:
    profiler = Profiler(path, toolkit=toolkit)
    out = Cycles()
    for _ in range(n):
        with _Cycle(out, clock) as cycle:
            profiler.start(device_id=0)
            cycle.kernel()
            profiler.stop()
    return out


async def _async_start_stop(toolkit: Toolkit, path: Path, n: int, clock: CallClock) -> Cycles:
    profiler = AsyncProfiler(path, toolkit=toolkit)
    out = Cycles()
    for _ in range(n):
        with _Cycle(out, clock) as cycle:
            await profiler.start(device_id=0)
            cycle.kernel()
            await profiler.stop()
    return out


def async_start_stop(toolkit: Toolkit, path: Path, n: int, clock: CallClock, backend: str) -> Cycles:
    return anyio.run(_async_start_stop, toolkit, path, n, clock, backend=backend)


def sync_profile(toolkit: Toolkit, n: int, clock: CallClock) -> Cycles:
    """Full ``with Profiler().profile()`` cycles (default temporary root, cleanup on)."""
    out = Cycles()

    def on_event(event: ProgressEvent) -> None:
        if event.kind == "export_finished":
            out.export.append(event.seconds)

    profiler = Profiler(toolkit=toolkit, progress=on_event)
    for _ in range(n):
        with _Cycle(out, clock) as cycle, profiler.profile(device_id=0) as run:
            cycle.kernel()
        assert run.result is not None and len(run.result.tasks) == 1
    return out


async def _async_profile(toolkit: Toolkit, n: int, clock: CallClock) -> Cycles:
    out = Cycles()

    def on_event(event: ProgressEvent) -> None:
        if event.kind == "export_finished":
            out.export.append(event.seconds)

    profiler = AsyncProfiler(toolkit=toolkit, progress=on_event)
    for _ in range(n):
        with _Cycle(out, clock) as cycle:
            async with profiler.profile(device_id=0) as run:
                cycle.kernel()
        assert run.result is not None and len(run.result.tasks) == 1
    return out


def async_profile(toolkit: Toolkit, n: int, clock: CallClock, backend: str) -> Cycles:
    return anyio.run(_async_profile, toolkit, n, clock, backend=backend)


def run(cfg: Config, data_dir: Path) -> Section:
    section = Section("overhead", "5. Per-run overhead: one tiny cycle, zero modelled latency")
    control = sim.control()
    control.reset()
    toolkit = sim.toolkit()
    n, m = cfg.overhead_cycles, cfg.overhead_full_cycles
    base = data_dir / "overhead"
    section.intro = (
        "One kernel per cycle on device 0, simulator latencies 0. *Raw*: the six `MsprofInterface` "
        "calls (init, create_config, start, stop, destroy_config, finalize) made directly. "
        f"*start()/stop()*: the library's manual API, {n} cycles into one fresh result path. "
        f"*profile()*: the whole block with the default temporary root ({m} cycles): collection, "
        "the run read natively (a simulated run needs no `msprof.py` export; a run the raw reader "
        "declines would be exported), clean-up. Per cycle the time spent inside the aclprof C calls, "
        "the kernel launch and any export (its `export_finished` progress event) is measured and "
        "subtracted: what is left is the code around them (*own time*; for raw, the "
        "ctypes wrapper). *Added* = own time - raw own time. The simulator's start/stop write files "
        "and vary by milliseconds on a busy disk, which is why they are subtracted per cycle."
    )
    tenth = max(n // 10, 1)
    rows: list[list[str]] = []
    with CallClock() as clock:
        raw = raw_cycles(toolkit, base / "raw", n, clock)
        raw_own = median(raw.own())
        rows.append(_row("raw MsprofInterface calls", raw, raw_own, n))
        manual: list[tuple[str, Callable[[], Cycles]]] = [
            ("Profiler start()/stop()", lambda: sync_start_stop(toolkit, base / "sync", n, clock)),
            (
                "AsyncProfiler start()/stop(), asyncio",
                lambda: async_start_stop(toolkit, base / "asyncio", n, clock, "asyncio"),
            ),
            (
                "AsyncProfiler start()/stop(), trio",
                lambda: async_start_stop(toolkit, base / "trio", n, clock, "trio"),
            ),
        ]
        for label, fn in manual:
            cycles = fn()
            own = cycles.own()
            rows.append(_row(label, cycles, raw_own, n))
            first, last = median(own[:tenth]) - raw_own, median(own[-tenth:]) - raw_own
            section.targets.append(
                Target(
                    f"{label}: added per cycle, fresh result path (first {tenth} cycles)",
                    "< 1 ms",
                    fmt_us(first),
                    first < TARGET_S,
                )
            )
            section.targets.append(
                Target(
                    f"{label}: added per cycle with {n - tenth}+ runs already in the result path "
                    f"(last {tenth} cycles)",
                    "< 1 ms",
                    fmt_us(last),
                    last < TARGET_S,
                )
            )
        full: list[tuple[str, Callable[[], Cycles]]] = [
            ("Profiler.profile()", lambda: sync_profile(toolkit, m, clock)),
            ("AsyncProfiler.profile(), asyncio", lambda: async_profile(toolkit, m, clock, "asyncio")),
            ("AsyncProfiler.profile(), trio", lambda: async_profile(toolkit, m, clock, "trio")),
        ]
        full_stats: dict[str, tuple[float, float, float]] = {}
        for label, fn in full:
            cycles = fn()
            rows.append(_row(label, cycles, raw_own, m))
            added = median(cycles.own()) - raw_own
            full_stats[label] = (added, median(cycles.cleanup), median(cycles.read))
            section.targets.append(
                Target(
                    f"{label}: added per cycle, excluding export", "< 1 ms", fmt_us(added), added < TARGET_S
                )
            )
            # The architecture target: the library's own code, without the export and the deletion.
            bare = median([o - c for o, c in zip(cycles.own(), cycles.cleanup, strict=True)]) - raw_own
            section.targets.append(
                Target(
                    f"{label}: added per cycle, excluding export and run deletion",
                    "< 0.5 ms",
                    fmt_us(bare),
                    bare < PROTOCOL_TARGET_S,
                )
            )
            # The same without the native read: for a simulated run the read is what stands in for
            # the export (a real run without raw-reader support is exported instead), so this is
            # the orchestration alone: the collector's bookkeeping, the hand-offs, the protocol.
            alone = (
                median([o - c - r for o, c, r in zip(cycles.own(), cycles.cleanup, cycles.read, strict=True)])
                - raw_own
            )
            section.targets.append(
                Target(
                    f"{label}: added per cycle, excluding export, native read and run deletion",
                    "< 0.5 ms",
                    fmt_us(alone),
                    alone < PROTOCOL_TARGET_S,
                )
            )
    section.tables.append(
        Table(
            "Medians per cycle",
            [
                "API",
                "cycles",
                "wall",
                "in aclprof calls",
                "export",
                "own time",
                "of which run deletion",
                "of which native read",
                "added vs raw",
                f"own: first {tenth} / last {tenth} cycles",
            ],
            rows,
        )
    )
    if not section.all_met:
        section.analysis += _analysis(section, full_stats)
        with CallClock() as clock:
            prof = profile_call(lambda: sync_start_stop(toolkit, base / "profiled", n, clock))
        section.profiles.append(
            (
                f"cProfile of {n} Profiler start()/stop() cycles into one result path (main thread; the "
                "collector thread's work shows up only as the waits, which are left out)",
                prof,
            )
        )
        if any(not t.met for t in section.targets if "profile()" in t.name):
            with CallClock() as clock:
                prof = profile_call(lambda: sync_profile(toolkit, m, clock))
            section.profiles.append(
                (f"cProfile of {m} Profiler.profile() cycles (main thread, top 10 by own time)", prof)
            )
    control.reset()
    return section


def _row(label: str, cycles: Cycles, raw_own: float, count: int) -> list[str]:
    own = cycles.own()
    tenth = max(len(own) // 10, 1)
    return [
        label,
        str(count),
        fmt_us(median(cycles.wall)),
        fmt_us(median(cycles.acl)),
        fmt_us(median(cycles.export)) if cycles.export else "-",
        fmt_us(median(own)),
        fmt_us(median(cycles.cleanup)) if any(cycles.cleanup) else "-",
        fmt_us(median(cycles.read)) if any(cycles.read) else "-",
        fmt_us(median(own) - raw_own) if "raw" not in label else "-",
        f"{fmt_us(median(own[:tenth]))} / {fmt_us(median(own[-tenth:]))}",
    ]


def _analysis(section: Section, full_stats: dict[str, tuple[float, float, float]]) -> list[str]:
    missed = [t for t in section.targets if not t.met]
    out = ["Measured gap: " + "; ".join(f"{t.name}: {t.measured}" for t in missed) + "."]
    if any("runs already" in t.name for t in missed):
        text = (
            "What limits it: the library's own time per cycle grows with the number of `PROF_*` runs "
            "already in the result path (first vs last cycles in the table)."
        )
        if "list_runs(" in inspect.getsource(_collector.Collector):
            text += (
                " In the code measured, the collector thread lists the whole result path around every "
                "start (`Collector._start_window` -> `list_runs`: scandir, regex matches, a `Path` per "
                "entry and a sort; `Collector._new_run` lists it again and tests each `Path` against "
                "the earlier set): O(runs) per cycle, O(runs^2) for a campaign into one result path."
            )
        out.append(text)
    for label, (added, deletion, read) in full_stats.items():
        if added < TARGET_S:
            continue
        out.append(
            f"{label}: {fmt_us(added)} added per cycle beyond the export, of which {fmt_us(deletion)} is "
            "deleting the run directory (`cleanup=True`: `remove_run_dir`, a `shutil.rmtree`), "
            f"{fmt_us(read)} reading the run natively (`read_run`: listing its folders, opening and "
            "reading some 14 small files, decoding; a simulated run is read so, where a real one "
            f"without raw-reader support is exported), and {fmt_us(added - deletion - read)} the rest: "
            "hand-offs to and from the collector thread (each async wait is a worker-thread round "
            "trip), the window's bookkeeping and the result."
        )
    return out
