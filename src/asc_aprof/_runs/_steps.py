"""What an IO-free plan asks its driver to do: the steps, as frozen records.

Plans (the per-call protocol of :mod:`asc_aprof._profilers._protocol`, the reading policy of
:mod:`asc_aprof._runs._run`) are generators that *yield a step* and are sent its outcome, or have its
exception thrown in; they compose with ``yield from``. A driver (:mod:`asc_aprof._runs._drive`) does
the step by blocking or by awaiting. The steps say what is needed, never how to wait for it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from .._cann._layout import CsvFile
from .._model._latch import Latch
from .._model._toolkit import Toolkit

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, slots=True)
class Wait:
    """Wait until *latch* is set; past *timeout*, raise CollectionTimeout (or return, if not *strict*)."""

    latch: Latch
    timeout: float | None
    what: str
    shield: bool = False
    strict: bool = True


@dataclasses.dataclass(frozen=True, slots=True)
class Export:
    """Run ``msprof.py export summary`` on *run_dir*; the outcome is the CSV files to parse.

    *started*, if given, is called once the export holds its places (the run's export slot and a
    limiter token), just before ``msprof.py`` starts: waiting for them is not exporting."""

    toolkit: Toolkit
    run_dir: Path
    timeout: float | None
    started: Callable[[], None] | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Parse:
    """Parse *files* (with their PMU *counters*); the outcome: per device, tasks as a shared tuple
    and their counters (None without *counters*)."""

    files: Sequence[CsvFile]
    counters: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class ReadRaw:
    """Read *run_dir*'s raw ``PROF_*`` data natively (with the PMU *counters*); the outcome is a
    RawResult or a Declined. With *checked*, the run's tree is checked first, in the same worker
    thread (:func:`~asc_aprof._cann._files.check_tree`: a link or special file raises), which saves
    the loop a thread round trip per read. With *packed*, the tasks may come packed
    (:class:`~asc_aprof._plans._raw.PackedRows`), for a plan that takes them a slice at a time.
    With *by_device* (and no *counters*), the outcome is the first device's tasks and the
    :class:`~asc_aprof._runs._raw_files.DeviceReads` that gives the rest, or a Declined."""

    run_dir: Path
    counters: bool = False
    checked: bool = False
    packed: bool = False
    by_device: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class Offload:
    """Compute ``fn()`` away from the event loop (a worker thread when awaited; inline when
    blocking): for CPU work over a whole run that has no natural checkpoints."""

    fn: Callable[[], Any]


@dataclasses.dataclass(frozen=True, slots=True)
class Release:
    """Drop the plan's last references to big results, which the driver holds in *box* (a run's
    decoded raw tasks): the awaiting driver frees them in bounded slices between checkpoints (one
    ``del`` of 500,000 records holds the loop's thread for tens of milliseconds)."""

    box: list[Any]


@dataclasses.dataclass(frozen=True, slots=True)
class Remove:
    """Delete *run_dir*, a run of the library's temporary root *root* (never followed out of it).

    *reason* is remembered, so a later look-up of the run can say who deleted it.
    """

    run_dir: Path
    root: Path
    reason: str


Step = Wait | ReadRaw | Export | Parse | Offload | Release | Remove
#: A plan: yields steps, is sent their outcomes, returns *T*.
Steps = Generator[Step, Any, T]
