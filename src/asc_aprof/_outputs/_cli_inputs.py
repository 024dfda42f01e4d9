"""What ``asc-aprof trace`` and ``asc-aprof report`` read: labelled paths to runs or JSON reports.

A PATH argument is a ``PROF_*`` run, a result directory (every run in it) or, for ``report``, a
JSON report or result file. ``LABEL=PATH`` labels everything under PATH with a case (a sweep's
case, or "base" / "new"); a PATH that exists as written is never split at ``=``.

Cases in a JSON report: the pytest plugin's ``tests`` records name the test that made each run,
which labels the run by test id (a parametrised test is a sweep); a top-level ``cases`` list of
``{"run_id": ..., "device": ... or null, "case": ...}`` records (for tools writing sweeps as
JSON) labels runs or run-device pairs.

Every run is read by the one reading policy (:func:`~asc_aprof.open_run`): its raw data
natively (with the PMU counters, where the raw reader verified them), else its exported CSVs,
else an export with ``msprof.py``, under ``--reader``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .._model._errors import UsageError
from .._model._json import loads as json_loads
from .._model._records import ProfilingResult
from .._model._toolkit import Toolkit
from .._plans._raw import Reader
from .._runs._run import Run
from .._runs._timeline import Timeline
from ._json_report import REPORT_FORMAT, load_json, runs_of


@dataclasses.dataclass(frozen=True, slots=True)
class Labelled:
    """One PATH argument: its label (None when not given) and the path."""

    label: str | None
    path: Path


def parse_labelled(spec: str) -> Labelled:
    """``LABEL=PATH`` or ``PATH`` (a path that exists as written wins over the split)."""
    path = Path(spec)
    if "=" in spec and not path.exists():
        label, _, rest = spec.partition("=")
        if label and rest and "/" not in label:
            return Labelled(label, Path(rest))
    return Labelled(None, path)


def load_timelines(
    spec: Labelled,
    *,
    toolkit: Callable[[], Toolkit],
    timeout: float | None = None,
    counters: bool = True,
    reader: Reader | str = Reader.AUTO,
) -> list[Timeline]:
    """The timelines of every run under *spec*, each read by the one reading policy
    (:func:`~asc_aprof.open_run`: raw data natively with its counters, the exported CSVs, else an
    export with *toolkit*, called only then). *reader*: as ``Profiler(reader=...)``.

    :raises UsageError: for a JSON file (results carry no start times) or a path with no run
    :raises RunUnreadable: no source gives a run's tasks (each reason named)
    """
    if spec.path.is_file() and spec.path.suffix == ".json":
        raise UsageError(
            f"{spec.path}: a JSON report or result has no start times; give the result directory or "
            "the PROF_* runs it came from"
        )
    return [
        Run(run, reader=reader, toolkit=toolkit, export_timeout=timeout).timeline(
            counters=counters, case=spec.label
        )
        for run in runs_of(spec.path)
    ]


def json_cases(path: Path) -> dict[tuple[str, int | None], str]:
    """Case labels a JSON report carries: (run id, device or None for every device) -> case."""
    try:
        data: Any = json_loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # load_json reports the problem
    if not isinstance(data, Mapping) or data.get("format") != REPORT_FORMAT:
        return {}
    out: dict[tuple[str, int | None], str] = {}
    for record in data.get("tests") or ():
        if isinstance(record, Mapping) and record.get("run_id") and record.get("test"):
            out.setdefault((str(record["run_id"]), None), str(record["test"]))
    for record in data.get("cases") or ():
        if isinstance(record, Mapping) and record.get("run_id") and record.get("case") is not None:
            device = record.get("device")
            out[(str(record["run_id"]), None if device is None else int(device))] = str(record["case"])
    return out


@dataclasses.dataclass(frozen=True, slots=True)
class LoadedInput:
    """What one PATH argument of ``report`` gave: results, timelines where runs were read, cases."""

    label: str | None
    results: list[ProfilingResult]
    timelines: list[Timeline]
    cases: dict[tuple[str, int | None], str]


def load_report_input(
    spec: Labelled,
    *,
    toolkit: Callable[[], Toolkit],
    timeout: float | None = None,
    reader: Reader | str = Reader.AUTO,
) -> LoadedInput:
    """Results of a JSON file, or timelines (with counters) of the runs under a directory.

    The report shows counters: each run is read with them (see :func:`load_timelines`).
    """
    if spec.path.is_file() and spec.path.suffix == ".json":
        return LoadedInput(spec.label, load_json(spec.path), [], json_cases(spec.path))
    timelines = load_timelines(spec, toolkit=toolkit, timeout=timeout, counters=True, reader=reader)
    return LoadedInput(spec.label, [], timelines, {})
