"""Results across commits: a history store of per-kernel figures, trends, and a regression gate.

``record_runs(paths)`` stores, per (chip, task type, kernel), the sample count, the median with its
95% interval, p10 / p90, the counter medians and the AI Core clock (where known), with where and
when it was recorded (CANN and asc-aprof versions, host, git commit / branch / dirty flag).
``record_bench(results, name=...)`` does the same for :meth:`~asc_aprof.Profiler.bench` results, and
``record_results(results)`` for results in memory (a sweep's items, ``profile()`` handles).
:func:`gate` decides, per kernel, whether its newest record is slower than its recent past beyond
noise (see :mod:`asc_aprof._plans._gate` for the rule); :func:`write_trend` draws the history.

The store is SQLite by default (``db=None``: ``ASC_APROF_HISTORY``, else
``~/.local/share/asc-aprof/history.sqlite3``), or PostgreSQL for a ``postgresql://`` URL (the
``history-postgres`` extra). The command line has the same: ``asc-aprof history record|show|gate``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from ._model._records import ProfilingResult
from ._model._toolkit import Toolkit
from ._outputs._history_entries import entries_from_bench, entries_from_columns, environment, git_state
from ._outputs._history_store import (
    HISTORY_ENV,
    SCHEMA_VERSION,
    Environment,
    GitState,
    HistoryError,
    HistoryRecord,
    HistoryStore,
    KernelEntry,
    StoredKernel,
    default_location,
)
from ._outputs._history_trend import by_kernel, point, write_trend
from ._outputs._json_report import load_json_columns, read_runs
from ._plans._bench import BenchResult
from ._plans._columns import TaskColumns
from ._plans._gate import DEFAULT_MIN_CHANGE, DEFAULT_WINDOW, GateOutcome, GatePoint, GateVerdict, judge
from ._plans._raw import Reader

__all__ = [
    "DEFAULT_MIN_CHANGE",
    "DEFAULT_WINDOW",
    "HISTORY_ENV",
    "SCHEMA_VERSION",
    "Environment",
    "GateOutcome",
    "GatePoint",
    "GateVerdict",
    "GitState",
    "HistoryError",
    "HistoryRecord",
    "HistoryStore",
    "KernelEntry",
    "StoredKernel",
    "default_location",
    "environment",
    "gate",
    "git_state",
    "record_bench",
    "record_results",
    "record_runs",
    "runs_record",
    "write_trend",
]

Location = str | os.PathLike[str] | None


def runs_record(
    paths: Iterable[str | os.PathLike[str]],
    *,
    label: str | None = None,
    toolkit: Callable[[], Toolkit] | None = None,
    reader: Reader | str = Reader.AUTO,
) -> HistoryRecord:
    """The record *paths* make (runs, result folders, or JSON reports written with samples), not stored.

    Each run is read by the one reading policy (:func:`~asc_aprof.open_run`), with its counters
    where it has them; *toolkit* is called only where a run needs an export.
    """
    runs = []
    cann: set[str] = set()
    sources = []
    for given in paths:
        path = Path(given)
        sources.append(str(path))
        if path.is_file() and path.suffix == ".json":
            loaded = load_json_columns(path)
            if loaded.runs is None:
                raise HistoryError(
                    f"{path}: this report holds statistics only; write it with samples "
                    "(asc-aprof summary --json --samples) to record it"
                )
            for columns, entry in zip(loaded.runs, loaded.entries or [{}] * len(loaded.runs), strict=True):
                collection = entry.get("collection") or {}
                runs.append((columns, collection.get("chip")))
                if collection.get("cann_version"):
                    cann.add(str(collection["cann_version"]))
            continue
        for columns, info in read_runs(path, toolkit=toolkit, counters=True, reader=reader):
            runs.append((columns, info.chip))
            if info.cann_version:
                cann.add(info.cann_version)
    entries = entries_from_columns(runs)
    return HistoryRecord(
        source=", ".join(sources),
        environment=environment(", ".join(sorted(cann)) or None),
        kernels=entries,
        label=label,
    )


def record_runs(
    paths: Iterable[str | os.PathLike[str]],
    *,
    db: Location = None,
    label: str | None = None,
    toolkit: Callable[[], Toolkit] | None = None,
    reader: Reader | str = Reader.AUTO,
) -> int:
    """Store the record of *paths* (see :func:`runs_record`) in *db*; the record's id."""
    record = runs_record(paths, label=label, toolkit=toolkit, reader=reader)
    with HistoryStore(db) as store:
        return store.add(record)


def record_bench(
    results: BenchResult | Sequence[BenchResult],
    *,
    name: str,
    db: Location = None,
    label: str | None = None,
    chip: str | None = None,
    cann_version: str | None = None,
) -> int:
    """Store bench results as the call *name* (task type ``CALL``; several devices' samples
    pooled); the record's id."""
    many = [results] if isinstance(results, BenchResult) else list(results)
    entries = entries_from_bench(many, name=name, chip=chip)
    record = HistoryRecord(
        source=f"bench {name}", environment=environment(cann_version), kernels=entries, label=label
    )
    with HistoryStore(db) as store:
        return store.add(record)


def record_results(
    results: Iterable[ProfilingResult],
    *,
    db: Location = None,
    label: str | None = None,
    chip: str | None = None,
    cann_version: str | None = None,
) -> int:
    """Store results held in memory (a sweep's ``item.result`` s, ``run.result`` of ``profile()``)
    as one record; *chip* names the chip they ran on (a result does not carry it). The record's id."""
    given = list(results)
    runs = [(TaskColumns.from_result(r), chip) for r in given]
    record = HistoryRecord(
        source=", ".join(r.run_id or "-" for r in given) or "results",
        environment=environment(cann_version),
        kernels=entries_from_columns(runs),
        label=label,
    )
    with HistoryStore(db) as store:
        return store.add(record)


def gate(
    db: Location = None,
    *,
    kernel: str | None = None,
    window: int = DEFAULT_WINDOW,
    min_change: float = DEFAULT_MIN_CHANGE,
) -> list[GateOutcome]:
    """The gate's decision on the newest record of every kernel (or of *kernel*: its name or its
    ``chip / type / name`` key) against up to *window* records before it.

    :raises HistoryError: *kernel* has no record in the store
    """
    with HistoryStore(db) as store:
        stored = store.kernels(kernel)
    if kernel is not None and not stored:
        raise HistoryError(f"no record of kernel {kernel!r} in the history store")
    return [
        judge(key, [point(i) for i in items], window=window, min_change=min_change)
        for key, items in by_kernel(stored).items()
    ]
