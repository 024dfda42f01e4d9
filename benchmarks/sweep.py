"""Section 4: sweep throughput with modelled latencies (start 20 ms, stop 100 ms, export 800 ms)."""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import dataclasses
import faulthandler
import functools
import json
import math
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator

import anyio

from asc_aprof import AsyncProfiler, MsprofInterface, Profiler, sim
from asc_aprof._model._progress import ProgressEvent
from asc_aprof._model._toolkit import Toolkit

from ._common import Config, Section, Table, Target, fmt_s, fmt_x, median, run_child, top_functions

START_S = 0.020
STOP_S = 0.100
EXPORT_S = 0.800
#: a sweep child that has not finished after this long is killed and reported as hung
CHILD_TIMEOUT_S = 60.0


@dataclasses.dataclass
class SweepRun:
    wall: float
    windows: int
    exports: int
    export_mean: float
    max_concurrent_exports: int
    #: mean time between the starts of consecutive collection windows
    window_period: float = 0.0
    #: mean duration of the aclprofStart / aclprofStop calls themselves (the simulator's C code)
    start_call: float = 0.0
    stop_call: float = 0.0
    profile: str = ""


def _setup() -> Toolkit:
    control = sim.control()
    control.reset()
    control.set_latency(start=START_S, stop=STOP_S)
    return sim.toolkit(export_latency=EXPORT_S)


def _body(kernels: int, case: int, device: int) -> None:
    sim.launch("sweep_kernel", device=device, count=kernels, duration_us=5.0)


async def _sweep(
    toolkit: Toolkit, cases: int, devices: int, kernels: int, limit: int | None, profile: bool
) -> tuple[SweepRun, str]:
    events: list[ProgressEvent] = []
    # reader="msprof": every window exported, as on CANN for runs the raw reader declines (a
    # simulated run is otherwise read natively, and the modelled export never happens)
    profiler = AsyncProfiler(toolkit=toolkit, progress=events.append, reader="msprof")
    run = _Runner(kernels)
    prof = cProfile.Profile() if profile else None
    if prof is not None:
        prof.enable()
    calls: dict[str, list[float]] = {"start": [], "stop": []}
    began = time.perf_counter()
    done = 0
    with _timed_calls(calls):
        async with profiler.sweep(range(cases), run, devices=range(devices), export_limit=limit) as items:
            async for item in items:
                if item.error is not None:
                    raise item.error
                assert item.result is not None and len(item.result.tasks) == kernels
                done += 1
    wall = time.perf_counter() - began
    if prof is not None:
        prof.disable()
    assert done == cases
    starts = [e for e in events if e.kind == "export_started"]
    finishes = [e for e in events if e.kind == "export_finished"]
    live = peak = 0
    for event in sorted(starts + finishes, key=lambda e: (e.at, e.kind == "export_started")):
        live += 1 if event.kind == "export_started" else -1
        peak = max(peak, live)
    first_start: dict[str | None, float] = {}
    for event in events:
        if event.kind == "collection_started":
            first_start.setdefault(event.run_id, event.at)
    starts_at = sorted(first_start.values())
    period = (starts_at[-1] - starts_at[0]) / (len(starts_at) - 1) if len(starts_at) > 1 else 0.0
    result = SweepRun(
        start_call=median(calls["start"]) if calls["start"] else 0.0,
        stop_call=median(calls["stop"]) if calls["stop"] else 0.0,
        window_period=period,
        wall=wall,
        windows=len({e.run_id for e in events if e.kind == "collection_started"}),
        exports=len(finishes),
        export_mean=sum(e.seconds for e in finishes) / max(len(finishes), 1),
        max_concurrent_exports=peak,
    )
    return result, top_functions(prof) if prof is not None else ""


@contextlib.contextmanager
def _timed_calls(calls: dict[str, list[float]]) -> Iterator[None]:
    """Record how long each ``MsprofInterface.start`` / ``.stop`` call takes (collector thread)."""
    saved = {name: getattr(MsprofInterface, name) for name in calls}

    def wrap(name: str, original: Callable[..., object]) -> Callable[..., object]:
        @functools.wraps(original)
        def timed(*args: object, **kwargs: object) -> object:
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                calls[name].append(time.perf_counter() - t0)

        return timed

    for name, original in saved.items():
        setattr(MsprofInterface, name, wrap(name, original))
    try:
        yield
    finally:
        for name, original in saved.items():
            setattr(MsprofInterface, name, original)


class _Runner:
    """The case body: a blocking launch of *kernels* kernels (run in a worker thread by sweep)."""

    def __init__(self, kernels: int) -> None:
        self.kernels = kernels

    def __call__(self, case: int, device: int) -> None:
        _body(self.kernels, case, device)


def sweep_once(
    toolkit: Toolkit, cases: int, devices: int, kernels: int, limit: int | None, profile: bool = False
) -> tuple[SweepRun, str]:
    return anyio.run(_sweep, toolkit, cases, devices, kernels, limit, profile)


def sequential(toolkit: Toolkit, cases: int, devices: int, kernels: int) -> tuple[float, list[float]]:
    """The sync loop: one Profiler().profile() per case, one after another; (wall, body times)."""
    bodies: list[float] = []
    began = time.perf_counter()
    for case in range(cases):
        with Profiler(toolkit=toolkit, reader="msprof").profile(device_id=case % devices) as run:
            t0 = time.perf_counter()
            _body(kernels, case, case % devices)
            bodies.append(time.perf_counter() - t0)
        assert run.result is not None and len(run.result.tasks) == kernels
    return time.perf_counter() - began, bodies


#: issue 28 item 2: a sweep takes at most 1.1x its lower bound
BOUND_GOAL = 1.1


def bound(cases: int, devices: int, body: float, limit: int | None = None) -> float:
    """The lower bound of a sweep: back-to-back windows ((cases / devices) x (start + body +
    stop)) and then one export, or, when the export limit (default: the CPU count) is the
    tighter, the first window and the exports *limit* at a time (the issue's model: 1.84 s for
    16 cases on 4 devices, exports 2 at a time)."""
    period = START_S + body + STOP_S
    windows = math.ceil(cases / devices)
    width = limit or os.cpu_count() or 1
    return max(windows * period + EXPORT_S, period + math.ceil(windows / width) * EXPORT_S)


def _limits(devices: int, cases: int) -> list[tuple[str, int | None]]:
    return [
        ("sweep, default export limit (CPU count)", None),
        (f"sweep, export_limit=len(devices)={devices}", devices),
        (f"sweep, export_limit={cases} (unbounded, attribution)", cases),
    ]


def _child_sweep(
    cases: int, devices: int, kernels: int, limit: int | None, profile: bool = False
) -> SweepRun | str:
    """One sweep in a fresh interpreter: its measurements, or why it failed (e.g. hung and killed)."""
    args = ["sweep", str(cases), str(devices), str(kernels), str(limit or 0)] + (
        ["--profile"] if profile else []
    )
    try:
        out = run_child("sweep", args, timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"hung: no result after {CHILD_TIMEOUT_S:.0f} s (killed)"
    except RuntimeError as exc:
        return "failed: " + str(exc).strip().splitlines()[-1]
    run = SweepRun(**out["run"])
    run.profile = out.get("profile", "")
    return run


def run(cfg: Config) -> Section:
    section = Section("sweep", "4. Sweep throughput (start 20 ms, stop 100 ms, export 800 ms)")
    k = cfg.kernels_per_case
    seq_devices = cfg.sweep_devices[0]
    seq = run_child("sweep", ["sequential", str(cfg.sequential_cases), str(seq_devices), str(k)], timeout=600)
    seq_wall, body = float(seq["wall"]), float(seq["body"])
    per_case = seq_wall / cfg.sequential_cases
    section.intro = (
        f"Simulated latencies `set_latency(start=0.02, stop=0.1)`, `sim.toolkit(export_latency=0.8)`; "
        f"each case launches {k:,} kernels (a blocking `sim.launch`, median {body * 1e6:,.0f} µs). "
        f"`AsyncProfiler(reader='msprof').sweep(range(cases), run, devices=range(devices))` on asyncio "
        "(every window exported by the simulated `msprof.py`, as on CANN for a run the raw reader "
        "declines; read natively, a simulated window has no export to overlap), each sweep in a "
        f"fresh interpreter, {cfg.sweep_reps} repetitions (median). The sequential sync loop "
        "(`with Profiler(reader='msprof').profile(device_id=...)` per case) ran "
        f"{cfg.sequential_cases} cases once "
        f"({fmt_s(seq_wall)}, {fmt_s(per_case)} per case); its times for other case counts are "
        "extrapolated linearly from that, and it does not depend on the device count. "
        "Bound = the larger of (cases / devices) x (start + body + stop) + one export (back-to-back "
        "windows) and start + body + stop + ceil(windows / export limit) x export (the exports, as "
        "many at once as the limit allows; the default limit is the CPU count). *max parallel "
        "exports* counts `export_started` events, which come once an export holds its limiter token."
    )
    rows: list[list[str]] = []
    measured: dict[tuple[int, int, str], SweepRun] = {}
    failures: list[str] = []
    for devices in cfg.sweep_devices:
        for cases in cfg.sweep_cases:
            seq_time = per_case * cases
            for label, limit in _limits(devices, cases):
                low = bound(cases, devices, body, limit)
                reps: list[SweepRun] = []
                for _ in range(cfg.sweep_reps):
                    got = _child_sweep(cases, devices, k, limit)
                    if isinstance(got, str):
                        failures.append(f"{cases} cases / {devices} devices, {label}: {got}")
                        print(f"   {cases} cases / {devices} devices, {label}: {got}", flush=True)
                        break  # not repeated: a hang costs the whole timeout each time
                    reps.append(got)
                    print(f"   {cases} cases / {devices} devices, {label}: {got.wall:.2f} s", flush=True)
                seq_text = fmt_s(seq_time) + ("" if cases == cfg.sequential_cases else " (extrapolated)")
                if not reps:
                    rows.append([str(cases), str(devices), label, "no run finished", seq_text, fmt_s(low)])
                    rows[-1] += ["-", "-", "-"]
                    continue
                wall = median([r.wall for r in reps])
                mid = sorted(reps, key=lambda r: r.wall)[len(reps) // 2]
                measured[(cases, devices, label)] = mid
                rows.append(
                    [
                        str(cases),
                        str(devices),
                        label,
                        fmt_s(wall)
                        + ("" if len(reps) == cfg.sweep_reps else f" ({len(reps)} of {cfg.sweep_reps})"),
                        seq_text,
                        fmt_s(low),
                        fmt_x(seq_time / wall),
                        fmt_x(wall / low),
                        f"{mid.windows} / {mid.max_concurrent_exports} / {mid.export_mean:.2f} s",
                    ]
                )
                if label.startswith("sweep, default") or "len(devices)" in label:
                    short = label.removeprefix("sweep, ")
                    if devices == 4:
                        section.targets.append(
                            Target(
                                f"{cases} cases / 4 devices, {short}: vs sequential",
                                ">= 3x",
                                fmt_x(seq_time / wall),
                                seq_time / wall >= 3.0,
                            )
                        )
                    section.targets.append(
                        Target(
                            f"{cases} cases / {devices} devices, {short}: vs bound",
                            "<= 1.1x",
                            fmt_x(wall / low),
                            wall / low <= BOUND_GOAL,
                        )
                    )
    section.tables.append(
        Table(
            "",
            [
                "cases",
                "devices",
                "how",
                "wall (median)",
                "sequential",
                "bound",
                "speed-up vs sequential",
                "wall / bound",
                "windows / max parallel exports / mean export",
            ],
            rows,
        )
    )
    configs = len(cfg.sweep_devices) * len(cfg.sweep_cases) * 3
    section.targets.append(
        Target(
            "sweep configurations that finished",
            "all",
            f"{configs - len(failures)} of {configs}",
            not failures,
        )
    )
    section.broken += failures
    if failures:
        section.analysis += [
            "Sweeps that did not finish (each ran in its own interpreter, killed after "
            f"{CHILD_TIMEOUT_S:.0f} s; a configuration is not repeated after a hang): "
            + "; ".join(failures)
            + ". A sweep that never finishes is a hang, not a speed limit: dump its threads and tasks "
            "(`kill -USR1 <pid>` makes a `benchmarks.sweep` child print its threads). The last one "
            "seen here was thread-limiter starvation (waiters for a shared export parked threads of "
            "anyio's default limiter, which the export's file reads needed), fixed in 59995b6."
        ]
    if any(not t.met for t in section.targets if "bound" in t.name):
        section.analysis += _analysis(cfg, measured, body)
        cases, devices = max(cfg.sweep_cases), cfg.sweep_devices[0]
        got = _child_sweep(cases, devices, k, devices, profile=True)
        if not isinstance(got, str):
            section.profiles.append(
                (
                    f"cProfile of the event-loop thread, {cases} cases / {devices} devices, "
                    f"export_limit={devices} (top 10 by own time; waiting in poll/locks left out)",
                    got.profile,
                )
            )
    return section


def _analysis(cfg: Config, measured: dict[tuple[int, int, str], SweepRun], body: float) -> list[str]:
    out: list[str] = []
    period = START_S + body + STOP_S
    export_bound_hit = False
    for (cases, devices, label), r in sorted(measured.items()):
        limit = dict(_limits(devices, cases))[label]
        low = bound(cases, devices, body, limit)
        if r.wall / low <= BOUND_GOAL or "unbounded" in label:
            continue
        rounds = cases / devices
        # The same bound with the export as measured (the modelled 0.8 s plus msprof.py start-up
        # and CSV writing), and the time the exports need when at most `width` run at once.
        realistic = rounds * period + r.export_mean
        width = r.max_concurrent_exports or 1
        exports = r.windows * r.export_mean / width + period
        limited = exports > realistic
        export_bound_hit |= limited
        why = (
            f"export-bound: {r.windows} exports of {r.export_mean:.2f} s, at most {width} at a time, need "
            f"~{exports:.2f} s"
            if limited
            else f"not export-bound ({width} exports ran at once at most)"
        )
        why += (
            f"; windows started every {r.window_period:.3f} s on average, against start + body + stop = "
            f"{period:.3f} s (the simulator's own aclprofStart / aclprofStop calls took "
            f"{r.start_call * 1e3:.0f} / {r.stop_call * 1e3:.0f} ms each, modelled 20 / 100 ms)"
        )
        out.append(
            f"{cases} cases / {devices} devices, {label.removeprefix('sweep, ')}: {fmt_s(r.wall)} = "
            f"{r.wall / low:.2f}x the bound ({fmt_s(low)}). With the export as it really takes "
            f"({r.export_mean:.2f} s, not 0.8 s) the bound is {fmt_s(realistic)} "
            f"({r.wall / realistic:.2f}x); {why}."
        )
    if out:
        means = [r.export_mean for r in measured.values()]
        out.append(
            "What limits it: (1) the bound counts the final export as the modelled 0.8 s, but each "
            "simulated export also starts a Python interpreter and writes the CSVs: measured "
            f"{min(means):.2f}-{max(means):.2f} s, which the smaller sweeps cannot hide; (2) when "
            "export time / window period = "
            f"{EXPORT_S:.1f} / {period:.2f} = {EXPORT_S / period:.0f} exports would have to run at once "
            "to hide them behind the next collections, the export limiter (default: CPU count = "
            f"{os.cpu_count()}, or the device count) lets fewer through and the sweep becomes export-bound"
            + (" (the rows marked export-bound above)" if export_bound_hit else "")
            + ". The `export_limit=cases` rows show the same sweeps with the limiter out of the way. "
            "With real msprof.py each export is CPU-heavy, so a CPU-count default is the right guard "
            "on real hardware; the simulated export mostly sleeps. (3) The collection windows themselves "
            "come slower than start + body + stop: the simulator's start and stop calls also create "
            "and fill the run's directories, so they take longer than their modelled sleeps (the call "
            "times above; more so while other exports write their CSVs to the same disk), and the "
            "library adds the hand-offs between the collector thread and the workers."
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["sweep", "sequential"])
    parser.add_argument("cases", type=int)
    parser.add_argument("devices", type=int)
    parser.add_argument("kernels", type=int)
    parser.add_argument("limit", type=int, nargs="?", default=0)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    if hasattr(signal, "SIGUSR1"):  # kill -USR1 <pid> prints every thread's stack (a hung sweep)
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    toolkit = _setup()
    if args.mode == "sequential":
        wall, bodies = sequential(toolkit, args.cases, args.devices, args.kernels)
        print(json.dumps({"wall": wall, "body": median(bodies)}))
        return
    result, prof = sweep_once(
        toolkit, args.cases, args.devices, args.kernels, args.limit or None, args.profile
    )
    fields = dataclasses.asdict(result)
    fields.pop("profile")
    print(json.dumps({"run": fields, "profile": prof}))


if __name__ == "__main__":
    main()
