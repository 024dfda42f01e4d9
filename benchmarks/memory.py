"""Section 2: peak RSS growth, each way of reading the file in a fresh interpreter.

Run as a child: ``python -m benchmarks.memory MODE RESULT_ROOT RUN_ID``; it prints one JSON line.
The baseline is taken after every import (and, for the async modes, inside the running event
loop); the peak is the kernel's ``VmHWM``, reset first through ``/proc/self/clear_refs`` where the
kernel allows it, with ``ru_maxrss`` as the fallback on systems without ``/proc``.
"""

from __future__ import annotations

import csv
import gc
import json
import resource
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from asc_aprof import AsyncProfiler

from ._common import Config, Section, Table, Target, fmt_mb, run_child
from .parse import NEW, RUN_ID, dict_reader, run_file

MODES = {
    "iter_tasks": "stream: `async for t in AsyncProfiler(root).iter_tasks(run_id)` (keeps nothing)",
    "store_result": "materialise: `await AsyncProfiler(root).store_result(run_id)` (ProfilingResult kept)",
    "dictreader": "csv.DictReader -> list of ProfilingTask (kept)",
    "dictreader_rows": "`list(csv.DictReader(f))` (the dicts kept, before any conversion)",
    "polars": "`polars.read_csv(columns=[5]).rows()` (reference, tuples kept)",
}
STREAM_TARGET_BYTES = 30 * 2**20


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
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as stream:
            stream.write("5")
    except OSError:
        return False
    return True


def _meminfo_bytes(field: str) -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as stream:
            for line in stream:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class Meter:
    """Peak resident-set growth from :meth:`start` to :meth:`stop`."""

    def __init__(self) -> None:
        self.base_kib = 0
        self.reset = False

    def start(self) -> None:
        gc.collect()
        self.reset = _reset_peak()
        rss = _status_kib("VmRSS" if self.reset else "VmHWM")
        self.base_kib = rss if rss is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    def stop(self) -> dict[str, Any]:
        peak = _status_kib("VmHWM")
        source = "VmHWM"
        if peak is None:
            peak, source = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "ru_maxrss"
        return {
            "growth_bytes": max(0, peak - self.base_kib) * 1024,
            "base_bytes": self.base_kib * 1024,
            "peak_bytes": peak * 1024,
            "source": source + (" (reset via clear_refs)" if self.reset else " (not resettable)"),
        }


async def _stream(root: Path, meter: Meter) -> dict[str, Any]:
    meter.start()
    count, total = 0, 0.0
    async for task in AsyncProfiler(root).iter_tasks(RUN_ID):
        count += 1
        total += task.duration
    out = meter.stop()
    out["tasks"] = count
    return out


async def _store(root: Path, meter: Meter) -> dict[str, Any]:
    meter.start()
    result = await AsyncProfiler(root).store_result(RUN_ID)
    out = meter.stop()
    out["tasks"] = len(result.tasks)
    return out


def _kept(meter: Meter, fn: Callable[[], list[Any]]) -> dict[str, Any]:
    meter.start()
    kept = fn()
    out = meter.stop()
    out["tasks"] = len(kept)
    return out


def child(mode: str, root: Path) -> dict[str, Any]:
    meter = Meter()
    path = run_file(root)
    if mode == "iter_tasks":
        return anyio.run(_stream, root, meter)
    if mode == "store_result":
        return anyio.run(_store, root, meter)
    if mode == "dictreader":
        return _kept(meter, lambda: dict_reader(path, NEW))
    if mode == "dictreader_rows":

        def rows() -> list[dict[str, str]]:
            with open(path, newline="", encoding="utf-8") as stream:
                return list(csv.DictReader(stream))

        return _kept(meter, rows)
    if mode == "polars":
        import polars as pl

        return _kept(meter, lambda: pl.read_csv(path, columns=NEW.polars_columns).rows())
    raise SystemExit(f"unknown mode {mode!r}")


def run(cfg: Config, inputs: dict[str, Path]) -> Section:
    section = Section("memory", f"2. Memory: peak RSS growth reading the {cfg.rows:,}-row file")
    root = inputs["root"]
    size = run_file(root).stat().st_size
    section.intro = (
        f"Each line is a fresh interpreter (`python -m benchmarks.memory MODE ...`) reading the "
        f"{fmt_mb(size)} new-layout file of section 1. Growth = peak RSS during the read minus RSS just "
        "before it (after imports)."
    )
    modes = list(MODES)
    need = 6_000 * cfg.rows  # list(DictReader) holds a 46-entry dict per row: about 5 KB
    available = _meminfo_bytes("MemAvailable")
    if available is not None and available < 3 * need:
        modes.remove("dictreader_rows")
        section.notes.append(
            f"`list(csv.DictReader(f))` skipped: it needs about {fmt_mb(need)} and only "
            f"{fmt_mb(available)} is available."
        )
    results = {mode: run_child("memory", [mode, str(root)]) for mode in modes}
    rows = []
    for mode in modes:
        res = results[mode]
        per_task = res["growth_bytes"] / max(res["tasks"], 1)
        rows.append([MODES[mode], f"{res['tasks']:,}", fmt_mb(res["growth_bytes"]), f"{per_task:.0f} B"])
    section.tables.append(Table("", ["how", "tasks", "peak RSS growth", "per task"], rows))
    stream = results["iter_tasks"]["growth_bytes"]
    section.targets.append(
        Target(
            "streaming iter_tasks, peak RSS growth", "<= 30 MB", fmt_mb(stream), stream <= STREAM_TARGET_BYTES
        )
    )
    section.notes.append(f"Peak measured with {results['iter_tasks']['source']}.")
    if stream > STREAM_TARGET_BYTES:
        section.analysis.append(f"Measured gap: {fmt_mb(stream - STREAM_TARGET_BYTES)} above the target.")
    return section


if __name__ == "__main__":
    print(json.dumps(child(sys.argv[1], Path(sys.argv[2]))))
