"""The JSON report, and results loaded from what users point at (a report, a result file, runs).

One module for the command line and the pytest plugin: both write the same report, and the CLI
reads back whatever it, the plugin or :meth:`ProfilingResult.to_dict` wrote.

Report format ``asc-aprof.report``, version 3 (written)::

    {"format": "asc-aprof.report", "version": 3, "skip": int,
     "runs": [{"run_id": str, "stored_at": ISO-8601 UTC, "tasks": int,
               "counters": [column, ...] | null,
               "samples": null | [{"device": int|null, "name": str, "type": str,
                                   "duration_us": [float, ...],
                                   "counters": {column: [float|null, ...]} | null,
                                   "aic_mhz": [float|null, ...]}, ...],
               "aic_mhz": {"median": float, "min": float, "max": float, "tasks": int}}, ...],
     "kernels": [<KernelStats.to_dict()>, ...]}

The AI Core clock (``aic_mhz``, MHz, at each task's start; runs read from their raw data on a
910B): a run entry's ``"aic_mhz"`` gives the median, lowest and highest clock over its tasks whose
clock is known and how many those are; a kernel entry's ``"aic_mhz"`` the median over the
kernel's tasks; a samples group's ``"aic_mhz"`` one clock per duration (null: unknown). Each is
written only where some clock is known, so a report of runs read from CSVs keeps its format.

Version 3 scales with the tasks: a summary report keeps no sample (``"samples": null``, a few
hundred bytes per kernel however many tasks ran), and a report that keeps them (``asc-aprof
summary --json --samples``, the pytest plugin, :func:`report` by default: what ``compare``
bootstraps from) has one array
of durations per (device, kernel) of each run, in file order, with the kernel's first type and,
when counters were read, one array per PMU column (null for ``N/A``) aligned with the
durations, instead of one JSON object per task. Groups come in the order of their first task,
so a report read back gives the same statistics and comparisons as the runs it came from (skip
counts per run; ids and the order between kernels are not kept). ``"skip"`` is the skip the
``kernels`` were computed with; ``"counters"`` names the run's PMU columns (null: not read).

Version 2: ``{"format", "version": 2, "runs": [<ProfilingResult.to_dict()>, ...], "kernels"}``,
each run a result (format ``asc-aprof.result``, version 2): its tasks as objects and
``"counters"``: ``{column: [value or null per task], ...}`` or null. Each kernel entry has
``device``, ``name``, ``type``, ``count``, ``median_us``, ``p10_us``, ``p90_us``, ``min_us``,
``max_us``, ``mean_us``, ``total_us``, and (new in version 2) ``"counters"``: ``{column: median or
null}`` and ``"verdict"``: ``{"kind", "label", "pipe", "core", "column", "ratio", "reason",
"ratios", "figures"}``, both null without counters; version 3 keeps these kernel entries as they
are. Version 1 is version 2 without the runs' and the kernels' ``counters`` and the ``verdict``.
:func:`load_json` and :func:`load_json_columns` read versions 1, 2 and 3 (of reports; and single
results).

The pytest plugin adds ``"tests"``: one record per test that used its fixtures.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
from array import array
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from .._cann._layout import is_run_dir, list_runs, runs_one_level_down
from .._model._counters import TaskCounters
from .._model._errors import UsageError
from .._model._json import loads as json_loads
from .._model._records import ProfilingResult, local_time, utc_text
from .._model._toolkit import Toolkit
from .._plans._columns import NO_ID, ColumnBatch, ColumnBuilder, TaskColumns, counter_bytes, group_rows, take
from .._plans._raw import Reader
from .._plans._stats import KernelStats, quantile
from .._runs._info import RunInfo
from .._runs._run import Run

REPORT_FORMAT: Final = "asc-aprof.report"
REPORT_VERSION: Final = 3
#: Report versions :func:`load_json` reads.
REPORT_VERSIONS: Final = (1, 2, 3)

RunData = ProfilingResult | TaskColumns


def report(
    results: Sequence[RunData],
    stats: Sequence[KernelStats],
    *,
    samples: bool = True,
    skip: int = 0,
    infos: Sequence[RunInfo] = (),
) -> dict[str, Any]:
    """The version-3 report of *results* (results or columns) with their per-kernel statistics.

    :param samples: keep every run's durations (and counters) per (device, kernel), for
        ``compare`` (what callers that merge runs for a later comparison want, so the default);
        ``asc-aprof summary --json`` passes False unless ``--samples``: the statistics only
    :param skip: the skip *stats* were computed with (recorded)
    :param infos: what runs read from disk say about their collection (each run's entry gets its
        ``collection``: chip, CANN, level, metric group, start, source)
    """
    by_id = {info.run_id: info for info in infos}
    runs = []
    for r in results:
        entry = run_entry(r if isinstance(r, TaskColumns) else TaskColumns.from_result(r), samples)
        info = by_id.get(str(entry.get("run_id")))
        if info is not None:
            entry["collection"] = info.as_dict()
        runs.append(entry)
    return {
        "format": REPORT_FORMAT,
        "version": REPORT_VERSION,
        "skip": skip,
        "runs": runs,
        "kernels": [s.to_dict() for s in stats],
    }


def _floats(data: bytes) -> list[float | None]:
    return [None if v != v else v for v in memoryview(data).cast("d")]


def run_entry(columns: TaskColumns, samples: bool) -> dict[str, Any]:
    """One run of a version-3 report (see the module doc)."""
    counters = columns.counters
    stored = columns.stored_at or _dt.datetime.now()
    entry: dict[str, Any] = {
        "run_id": columns.run_id or "",
        "stored_at": utc_text(stored),
        "tasks": len(columns),
        "counters": None if counters is None else list(counters.columns),
        "samples": None,
    }
    clock = columns._clock
    if clock is not None:
        known = sorted(v for v in memoryview(clock).cast("d") if v == v)
        if known:
            entry["aic_mhz"] = {
                "median": quantile(known, 0.5),
                "min": known[0],
                "max": known[-1],
                "tasks": len(known),
            }
    if not samples:
        return entry
    grouping = group_rows(columns, 0)
    durations = columns._cols[0]
    raw = counter_bytes(counters) if counters is not None else None
    type_codes = columns.type_codes()
    groups = []
    for g, (dev_code, name_code, first) in enumerate(grouping.keys):
        start, stop = grouping.starts[g], grouping.starts[g + 1]
        values = take(durations, grouping.order, start, stop)
        group: dict[str, Any] = {
            "device": columns.devices[dev_code],
            "name": columns.names[name_code],
            "type": columns.types[type_codes[first]],
            "duration_us": memoryview(values).cast("d").tolist(),
            "counters": None
            if raw is None
            else {col: _floats(take(data, grouping.order, start, stop)) for col, data in raw.items()},
        }
        if clock is not None:
            group["aic_mhz"] = _floats(take(clock, grouping.order, start, stop))
        groups.append(group)
    entry["samples"] = groups
    return entry


def columns_of_entry(entry: Mapping[str, Any]) -> TaskColumns | None:
    """The columns of a version-3 run entry (None: it kept no samples)."""
    groups = entry.get("samples")
    if groups is None:
        return None
    names = entry.get("counters")
    builder = ColumnBuilder(names is not None)
    tables = builder.tables
    clocks: list[float] = []
    for group in groups:
        durations = array("d", [float(v) for v in group["duration_us"]])
        n = len(durations)
        if any(not math.isfinite(v) for v in durations):
            raise ValueError(f"non-finite duration in the samples of {group['name']!r}")
        device = None if group.get("device") is None else int(group["device"])
        codes = (
            tables.devices.code(device),
            tables.names.code(str(group["name"])),
            tables.types.code(str(group["type"])),
        )
        counters = None
        if names is not None:
            raw = group.get("counters") or {}
            counters = TaskCounters({str(c): raw.get(c, [None] * n) for c in names}, length=n)
        dev_bytes, name_bytes, type_bytes = (array("i", [code]).tobytes() * n for code in codes)
        no_ids = array("q", [NO_ID]).tobytes() * n
        builder.add(ColumnBatch(durations.tobytes(), no_ids, dev_bytes, name_bytes, type_bytes, n, counters))
        mhz = group.get("aic_mhz")
        if mhz is not None and len(mhz) != n:
            raise ValueError(f"aic_mhz has {len(mhz)} values for {n} durations of {group['name']!r}")
        clocks += [math.nan if v is None else float(v) for v in mhz or [None] * n]
    built = builder.build(str(entry["run_id"]), local_time(_dt.datetime.fromisoformat(entry["stored_at"])))
    return built.with_aic_mhz(clocks) if clocks else built


@dataclasses.dataclass(frozen=True, slots=True)
class JsonRuns:
    """What a JSON file holds: its runs as columns (None: a version-3 report without samples) and
    the per-kernel statistics it was written with (empty for a single result)."""

    runs: tuple[TaskColumns, ...] | None
    kernels: tuple[KernelStats, ...]
    skip: int
    run_ids: tuple[str, ...]
    #: a version-3 report's run entries as written (what a summary report without samples keeps)
    entries: tuple[Mapping[str, Any], ...] = ()


def _read(path: Path) -> Any:
    try:
        return json_loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: cannot read JSON: {exc}") from exc


def load_json_columns(path: Path) -> JsonRuns:
    """The runs (as columns) and statistics of a report (versions 1-3) or of one result file.

    :raises UsageError: naming the file when it is not one
    """
    data = _read(path)
    try:
        if isinstance(data, dict) and data.get("format") == REPORT_FORMAT:
            version = data.get("version")
            if version not in REPORT_VERSIONS:
                raise ValueError(
                    f"unsupported report version {version!r} (this reads "
                    f"{', '.join(map(str, REPORT_VERSIONS))})"
                )
            kernels = tuple(KernelStats.from_dict(k) for k in data.get("kernels") or ())
            if version == 3:
                entries = data["runs"]
                columns = [columns_of_entry(e) for e in entries]
                run_ids = tuple(str(e["run_id"]) for e in entries)
                kept = None if any(c is None for c in columns) else tuple(c for c in columns if c is not None)
                return JsonRuns(kept, kernels, int(data.get("skip") or 0), run_ids, tuple(entries))
            results = [ProfilingResult.from_dict(r) for r in data["runs"]]
            runs = tuple(TaskColumns.from_result(r) for r in results)
            return JsonRuns(runs, kernels, 0, tuple(r.run_id for r in results))
        result = ProfilingResult.from_dict(data)
        return JsonRuns((TaskColumns.from_result(result),), (), 0, (result.run_id,))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UsageError(f"{path}: {exc}") from exc


def stored_report(loaded: JsonRuns, kernels: Sequence[KernelStats]) -> dict[str, Any]:
    """A version-3 report without samples again, with *kernels* (a selection of its own)."""
    return {
        "format": REPORT_FORMAT,
        "version": REPORT_VERSION,
        "skip": loaded.skip,
        "runs": [dict(e) for e in loaded.entries],
        "kernels": [k.to_dict() for k in kernels],
    }


def no_samples_error(path: Path) -> UsageError:
    return UsageError(
        f"{path}: this report keeps no samples, only statistics (a version-3 summary report); "
        "write it with `asc-aprof summary --json --samples` (or the pytest plugin's --aprof-json) "
        "to compare it or to recompute its statistics"
    )


def runs_of(path: Path) -> list[Path]:
    """A ``PROF_*`` run itself, or every run in a result directory (oldest first).

    :raises UsageError: naming the path when it is neither
    """
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    if is_run_dir(path):
        return [path]
    if path.is_dir():
        runs = list_runs(path)
        if not runs:
            why = runs_one_level_down(path) or "give a result directory or a PROF_* run"
            raise UsageError(f"{path}: no PROF_* run in this directory ({why})")
        return runs
    raise UsageError(f"{path}: not a result directory, a PROF_* run or an asc-aprof JSON report")


def load_json(path: Path) -> list[ProfilingResult]:
    """The results in a report or in one result file (tasks are built from a version-3 report's
    samples).

    :raises UsageError: naming the file when it is not one, or is a report without samples
    """
    loaded = load_json_columns(path)
    if loaded.runs is None:
        raise no_samples_error(path)
    return [c.result() for c in loaded.runs]


def load_results(
    path: Path,
    *,
    toolkit: Callable[[], Toolkit] | None = None,
    export_timeout: float | None = None,
    counters: bool = False,
    reader: Reader | str = Reader.AUTO,
) -> list[ProfilingResult]:
    """Results from a JSON report or result file, a result directory or a ``PROF_*`` run.

    Each run is read by the one reading policy (:func:`~asc_aprof.open_run`: raw data natively,
    its exported CSVs, else an export with *toolkit*, called only then; None: no export).
    *counters*: read the runs' PMU counters too (a JSON file has them when it was written with
    them).
    """
    if path.is_file() and path.suffix == ".json":
        return load_json(path)
    return [_run(run, toolkit, export_timeout, reader).result(counters=counters) for run in runs_of(path)]


def load_run_columns(
    path: Path,
    *,
    toolkit: Callable[[], Toolkit] | None = None,
    export_timeout: float | None = None,
    counters: bool = False,
    reader: Reader | str = Reader.AUTO,
) -> list[TaskColumns]:
    """The runs of a result directory or ``PROF_*`` run as columns (see :func:`load_results`)."""
    loaded = read_runs(path, toolkit=toolkit, export_timeout=export_timeout, counters=counters, reader=reader)
    return [columns for columns, _ in loaded]


def read_runs(
    path: Path,
    *,
    toolkit: Callable[[], Toolkit] | None = None,
    export_timeout: float | None = None,
    counters: bool = False,
    reader: Reader | str = Reader.AUTO,
) -> list[tuple[TaskColumns, RunInfo]]:
    """:func:`load_run_columns`, each run with what it says about its collection and its source."""
    out = []
    for run in runs_of(path):
        handle = _run(run, toolkit, export_timeout, reader)
        out.append((handle.columns(counters=counters), handle.info))
    return out


def _run(
    run: Path, toolkit: Callable[[], Toolkit] | None, export_timeout: float | None, reader: Reader | str
) -> Run:
    return Run(
        run, reader=reader, toolkit=toolkit, export_timeout=export_timeout, allow_export=toolkit is not None
    )
