"""What a run says about its collection, and which source its tasks came from (:class:`RunInfo`).

Read from the run's small metadata files (``host/info.json``, ``host/sample.json``,
``host/start_info``, else the first device's), each by the one reading rule of
:mod:`asc_aprof._cann._files`. Real runs record the chip (``platform_version``) and the driver
(``drvVersion``), not the CANN version; the simulated toolkit records both.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from .._cann._files import Bound, RunFileMissing, list_in_run, read_in_run
from .._cann._layout import DEVICE_DIR_PATTERN
from .._model._chips import rated_aic_mhz
from .._model._json import loads as json_loads
from .._plans._sol import ChipFacts, chip_facts

#: Chips by ``platform_version`` in ``info.json`` (the two the raw reader verified on hardware).
CHIPS: Final = {"5": "Ascend 910B", "7": "Ascend 310B"}


class RunSource(enum.Enum):
    """Where a run's tasks came from."""

    RAW = "raw data"
    CSV = "exported CSVs"
    EXPORT = "msprof.py export"


@dataclasses.dataclass(frozen=True, slots=True)
class Skipped:
    """A source that was not used, and why (one line)."""

    source: RunSource
    reason: str

    def __str__(self) -> str:
        return f"{self.source.value}: {self.reason}"


@dataclasses.dataclass(frozen=True, slots=True)
class RunInfo:
    """What a run says about its collection, and which source its tasks were read from.

    :ivar run_id: the run folder's name
    :ivar path: the run folder
    :ivar chip: e.g. ``Ascend 910B`` (``platform N`` for a platform not verified), None where the
        run has no ``info.json``
    :ivar cann_version: the CANN version where the run records it (the simulated toolkit does; a
        real run records only its driver version, :attr:`driver_version`), else None
    :ivar driver_version: ``drvVersion`` of ``info.json`` (an integer CANN encodes), else None
    :ivar level: the task time level as ``sample.json`` says it (``level0``, ``level1``, ``l0``)
    :ivar metrics: the AI Core metric group collected (``sample.json`` ``ai_core_metrics``, e.g.
        ``PipeUtilizationExct``), None where none was collected
    :ivar devices: the ``device_N`` folders' devices
    :ivar collected_at: when the collection began (``host/start_info``, UTC), else None
    :ivar simulated: the run was made by the simulated toolkit (``asc_aprof.sim``)
    :ivar source: the source the latest read used (None before the first read)
    :ivar skipped: the sources tried before it, each with why it was not used
    :ivar ai_cores: the device's AI Cores (``info.json`` ``DeviceInfo`` ``ai_core_num``), else None
    :ivar vector_cores: its vector cores (``aiv_num``), else None
    :ivar core_mhz: its AI Core clock as the run records it (``aic_frequency``, MHz; the rated
        clock the raw reader's ``ClockTable.rated_mhz`` holds, read by the same function), else None
    :ivar platform: ``info.json``'s ``platform_version`` (``5``: 910B, ``7``: 310B), else None
    """

    run_id: str
    path: Path
    chip: str | None = None
    cann_version: str | None = None
    driver_version: int | None = None
    level: str | None = None
    metrics: str | None = None
    devices: tuple[int, ...] = ()
    collected_at: _dt.datetime | None = None
    simulated: bool = False
    source: RunSource | None = None
    skipped: tuple[Skipped, ...] = ()
    ai_cores: int | None = None
    vector_cores: int | None = None
    core_mhz: float | None = None
    platform: str | None = None

    def chip_facts(self) -> ChipFacts | None:
        """The cores, clock and chip-table entry the speed-of-light figures of this run use."""
        return chip_facts(
            platform=self.platform, ai_cores=self.ai_cores, vector_cores=self.vector_cores, mhz=self.core_mhz
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: the fields, times in ISO 8601, the source and reasons as text."""
        return {
            "run_id": self.run_id,
            "chip": self.chip,
            "cann_version": self.cann_version,
            "driver_version": self.driver_version,
            "level": self.level,
            "metrics": self.metrics,
            "devices": list(self.devices),
            "collected_at": self.collected_at.isoformat() if self.collected_at else None,
            "simulated": self.simulated,
            "source": self.source.value if self.source else None,
            "skipped": [str(s) for s in self.skipped],
            "ai_cores": self.ai_cores,
            "vector_cores": self.vector_cores,
            "core_mhz": self.core_mhz,
            "platform": self.platform,
        }


def _json(run: Path, rel: str) -> Mapping[str, Any]:
    """The JSON object in *rel*, {} where it is missing or not JSON (a link or a special file is
    refused: :class:`~asc_aprof.RunFileError`)."""
    try:
        data = json_loads(read_in_run(run, run / rel, Bound.METADATA))
    except (RunFileMissing, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


_NUMBERED: Final = re.compile(r"^(info\.json|sample\.json|start_info)(\.\d+)?$")


def _device_file(run: Path, folder: str, name: str) -> Mapping[str, Any]:
    found = sorted(n for n in list_in_run(run, folder) or () if _NUMBERED.match(n) and n.startswith(name))
    return _json(run, f"{folder}/{found[0]}") if found else {}


def read_info(run: Path) -> RunInfo:
    """:class:`RunInfo` of *run* from its metadata files (no source chosen yet).

    :raises RunFileError: a link or special file among them
    """
    names = list_in_run(run) or []
    devices = tuple(sorted(int(m.group(1)) for n in names if (m := DEVICE_DIR_PATTERN.match(n))))
    host = "host" in names
    info = _json(run, "host/info.json") if host else {}
    sample = _json(run, "host/sample.json") if host else {}
    start = _json(run, "host/start_info") if host else {}
    if devices and not info:
        info = _device_file(run, f"device_{devices[0]}", "info.json")
    if devices and not sample:
        sample = _device_file(run, f"device_{devices[0]}", "sample.json")
    if devices and not start:
        start = _device_file(run, f"device_{devices[0]}", "start_info")
    platform = str(info.get("platform_version", ""))
    chip = CHIPS.get(platform) or info.get("aprofsim_chip") or (f"platform {platform}" if platform else None)
    driver = info.get("drvVersion")
    level = sample.get("profLevel") or sample.get("prof_level")
    metrics = sample.get("ai_core_metrics") or sample.get("aicMetrics")
    if not metrics and devices and host:
        # Real host/sample.json files carry it; the simulated toolkit's say it per device only.
        device_sample = _device_file(run, f"device_{devices[0]}", "sample.json")
        metrics = device_sample.get("ai_core_metrics") or device_sample.get("aicMetrics")
    cores = _device_info(info)
    if not cores and devices:
        cores = _device_info(_device_file(run, f"device_{devices[0]}", "info.json"))
    return RunInfo(
        run_id=run.name,
        path=run,
        chip=str(chip) if chip else None,
        cann_version=str(info["aprofsim_cann_version"]) if info.get("aprofsim_cann_version") else None,
        driver_version=driver if isinstance(driver, int) else None,
        level=str(level) if level else None,
        metrics=str(metrics) if metrics else None,
        devices=devices,
        collected_at=_begin(start),
        simulated=bool(info.get("simulator")),
        ai_cores=_positive(cores.get("ai_core_num"), int),
        vector_cores=_positive(cores.get("aiv_num"), int),
        core_mhz=rated_aic_mhz(cores),
        platform=platform or None,
    )


def _device_info(info: Mapping[str, Any]) -> Mapping[str, Any]:
    """The first ``DeviceInfo`` entry of an ``info.json`` ({} where there is none: real host
    files list no device)."""
    entries = info.get("DeviceInfo")
    if isinstance(entries, list) and entries and isinstance(entries[0], dict):
        return entries[0]
    return {}


def _positive(value: object, kind: type[int] | type[float]) -> Any:
    """*value* (a number or its text, as info.json writes both) as *kind* when positive, else None."""
    try:
        number = kind(float(str(value)))
    except (TypeError, ValueError, OverflowError):
        return None
    return number if number > 0 else None


def _begin(start: Mapping[str, Any]) -> _dt.datetime | None:
    try:
        micros = int(str(start.get("collectionTimeBegin", "")))
    except ValueError:
        return None
    return _dt.datetime.fromtimestamp(micros / 1e6, _dt.timezone.utc)


def collection_line(runs: Sequence[RunInfo]) -> str:
    """Chip, CANN, task time level, metric group and collection start shared by every run in
    *runs* (a field they disagree on is left out; several starts give the span), as one line."""
    if not runs:
        return ""
    parts: list[str] = []
    for label, values in (
        ("", {f"{r.chip} (simulated)" if r.simulated else r.chip for r in runs}),
        ("CANN ", {r.cann_version for r in runs}),
        ("task time ", {r.level for r in runs}),
        ("metrics ", {r.metrics for r in runs}),
    ):
        if len(values) == 1 and (value := next(iter(values))):
            parts.append(f"{label}{value}")
    starts = sorted(r.collected_at for r in runs if r.collected_at is not None)
    if starts:
        first, last = starts[0].strftime("%Y-%m-%d %H:%M UTC"), starts[-1].strftime("%Y-%m-%d %H:%M UTC")
        parts.append(f"collected {first}" if first == last else f"collected {first} to {last}")
    return " · ".join(parts)
