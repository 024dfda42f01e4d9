"""Reading a run's raw ``PROF_*`` data natively, without ``msprof.py``.

Theory of operation
-------------------
The real exporter (``msprof.py export summary``, pure-Python path) parses the raw files into
SQLite tables, matches host and device tasks, joins them with the GE (node) information and
prints op_summary / task_time CSVs, which the library then parses. This package does the same
steps in memory for the subset of CANN data that was verified against that exporter on real
runs, and produces the tasks the CSV path would give, exactly: the same ids, names, types (at
task time level 0 joined from task_time as :mod:`asc_aprof._runs._csv` does), devices, and
durations rounded as the exporter rounds them (``round(ns / 1000, 3)`` of its own float
arithmetic). It also keeps what the CSV loses: start times as integer ns, raw counters and
block dims (:class:`RawTask`). Asked for (``counters=True``), it computes op_summary's PMU
counters from ``ffts_profile`` too, as the exporter computes and rounds them (:mod:`._pmu`).

It accepts only what it knows: chip and driver versions, record types, API levels and files that
were verified. Anything else makes it *decline* with a :class:`DeclineReason` and a message
(:class:`Declined`), and the library falls back to ``msprof.py``. It never guesses.

Layers: :mod:`._decode` (record layouts, bytes in, records out), :mod:`._host` (host call tree:
which kernel a runtime task belongs to), :mod:`._pmu` (``ffts_profile`` PMU records to
op_summary's counter cells), :mod:`._run` (files to read, device tasks, the joins, the CSV
order), all sans-IO; :mod:`asc_aprof._runs._raw_files` lists and reads the files.
"""

from ._pmu import PmuLayout, PmuRecord, pmu_cells, pmu_records
from ._run import DeviceRows, ExportRows, RunPlan, decode_devices, decode_run, dirs_to_list, export_rows
from ._types import Declined, DeclinedError, DeclineReason, RawReadDeclined, RawResult, RawTask, Reader

__all__ = [
    "DeclineReason",
    "Declined",
    "DeclinedError",
    "DeviceRows",
    "ExportRows",
    "PmuLayout",
    "PmuRecord",
    "RawReadDeclined",
    "RawResult",
    "RawTask",
    "Reader",
    "RunPlan",
    "decode_devices",
    "decode_run",
    "dirs_to_list",
    "export_rows",
    "pmu_cells",
    "pmu_records",
]
