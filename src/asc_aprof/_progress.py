"""Progress events: what the library reports instead of printing."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from typing import Literal

EventKind = Literal[
    "collection_started",
    "collection_stopped",
    "export_started",
    "export_finished",
    "parse_finished",
]


@dataclasses.dataclass(frozen=True, slots=True)
class ProgressEvent:
    """One step of a profiling cycle, passed to the ``progress=`` callback.

    :ivar kind: ``collection_started``, ``collection_stopped``, ``export_started``,
        ``export_finished`` or ``parse_finished``
    :ivar run_id: the ``PROF_*`` run concerned (None before it exists)
    :ivar devices: the devices in the collection
    :ivar seconds: how long the step took (``*_finished`` / ``collection_stopped``), else 0
    :ivar rows: tasks parsed (``parse_finished``), else 0
    """

    kind: EventKind
    run_id: str | None
    devices: tuple[int, ...] = ()
    seconds: float = 0.0
    rows: int = 0
    at: float = dataclasses.field(default_factory=time.monotonic)


ProgressCallback = Callable[[ProgressEvent], None]


def emit(callback: ProgressCallback | None, event: ProgressEvent) -> None:
    """Call the callback; its own errors never break a profiling cycle."""
    if callback is None:
        return
    # A broken progress display must not lose a run.
    with contextlib.suppress(Exception):
        callback(event)
