"""The JSON report, and results loaded from what users point at (a report, a result file, runs).

One module for the command line and the pytest plugin: both write the same report, and the CLI
reads back whatever it, the plugin or :meth:`ProfilingResult.to_dict` wrote.

Report format ``asc-aprof.report``, version 2::

    {"format": "asc-aprof.report", "version": 2,
     "runs": [<ProfilingResult.to_dict()>, ...],
     "kernels": [<KernelStats.to_dict()>, ...]}

Each run is a result (format ``asc-aprof.result``, version 2): its tasks, and ``"counters"``:
``{column: [value or null per task], ...}`` (the PMU counters, aligned with the tasks) or null
when they were not read. Each kernel entry has ``device``, ``name``, ``type``, ``count``,
``median_us``, ``p10_us``, ``p90_us``, ``min_us``, ``max_us``, ``mean_us``, ``total_us``, and
(new in version 2) ``"counters"``: ``{column: median or null}`` and ``"verdict"``:
``{"kind", "label", "pipe", "core", "column", "ratio", "reason", "ratios", "figures"}``, both
null without counters.

Version 1 is the same without the runs' and the kernels' ``counters`` and the ``verdict``;
:func:`load_json` reads versions 1 and 2 (of reports and of single results).

The pytest plugin adds ``"tests"``: one record per test that used its fixtures.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from ._errors import UsageError
from ._export import run_export
from ._layout import RUN_PATTERN, find_summary_csvs, list_runs
from ._reader import RunTasks, iter_file_batches
from ._records import ProfilingResult, make_result
from ._stats import KernelStats
from ._toolkit import Toolkit

REPORT_FORMAT: Final = "asc-aprof.report"
REPORT_VERSION: Final = 2
#: Report versions :func:`load_json` reads.
REPORT_VERSIONS: Final = (1, 2)


def report(results: Sequence[ProfilingResult], stats: Sequence[KernelStats]) -> dict[str, Any]:
    """The report of *results* with their per-kernel statistics."""
    return {
        "format": REPORT_FORMAT,
        "version": REPORT_VERSION,
        "runs": [r.to_dict() for r in results],
        "kernels": [s.to_dict() for s in stats],
    }


def runs_of(path: Path) -> list[Path]:
    """A ``PROF_*`` run itself, or every run in a result directory (oldest first).

    :raises UsageError: naming the path when it is neither
    """
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    if RUN_PATTERN.match(path.name) and path.is_dir():
        return [path]
    if path.is_dir():
        runs = list_runs(path)
        if not runs:
            raise UsageError(
                f"{path}: no PROF_* run in this directory (give a result directory or a PROF_* run)"
            )
        return runs
    raise UsageError(f"{path}: not a result directory, a PROF_* run or an asc-aprof JSON report")


def load_json(path: Path) -> list[ProfilingResult]:
    """The results in a report or in one result file.

    :raises UsageError: naming the file when it is not one
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: cannot read JSON: {exc}") from exc
    try:
        if isinstance(data, dict) and data.get("format") == REPORT_FORMAT:
            if data.get("version") not in REPORT_VERSIONS:
                raise ValueError(
                    f"unsupported report version {data.get('version')!r} (this reads "
                    f"{' and '.join(map(str, REPORT_VERSIONS))})"
                )
            return [ProfilingResult.from_dict(r) for r in data["runs"]]
        return [ProfilingResult.from_dict(data)]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UsageError(f"{path}: {exc}") from exc


def load_results(
    path: Path,
    *,
    toolkit: Toolkit | None = None,
    export_timeout: float | None = None,
    counters: bool = False,
) -> list[ProfilingResult]:
    """Results from a JSON report or result file, a result directory or a ``PROF_*`` run.

    Runs not exported yet are exported with *toolkit* (none given: refused, saying how to).
    *counters*: read the runs' PMU counters too (a JSON file has them when it was written with
    them).
    """
    if path.is_file() and path.suffix == ".json":
        return load_json(path)
    results = []
    for run in runs_of(path):
        files = find_summary_csvs(run)
        if not files:
            if toolkit is None:
                raise UsageError(f"{run}: not exported yet (run `asc-aprof export {run}`)")
            files = run_export(toolkit, run, timeout=export_timeout)
        gathered = RunTasks(counters)
        for batch in iter_file_batches(files, counters=counters):
            gathered.add(batch)
        results.append(make_result(gathered.tasks, run.name, gathered.counters()))
    return results
