"""Progress events: what the library reports instead of printing."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import Literal

logger = logging.getLogger("asc_aprof")

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


# Callbacks whose failure was logged already: a broken display logs once, not once per event.
_reported: weakref.WeakSet[ProgressCallback] = weakref.WeakSet()  # guarded by _reported_lock
_reported_ids: set[int] = set()  # guarded by _reported_lock: callbacks that take no weak reference
_reported_lock = threading.Lock()


def _first_failure(callback: ProgressCallback) -> bool:
    with _reported_lock:
        try:
            if callback in _reported:
                return False
            _reported.add(callback)
        except TypeError:
            if id(callback) in _reported_ids:
                return False
            _reported_ids.add(id(callback))
        return True


def emit(callback: ProgressCallback | None, event: ProgressEvent) -> None:
    """Call the callback; its own errors never break a profiling cycle.

    A callback that raises is logged once (logger ``asc_aprof``, with the traceback), then its
    later errors are ignored silently, so a broken progress display neither loses a run nor
    floods the log.
    """
    if callback is None:
        return
    try:
        callback(event)
    except Exception:
        # A broken progress display must not lose a run.
        if _first_failure(callback):
            logger.warning(
                "the progress callback %r raised on a %s event; the run goes on, and later errors "
                "of this callback are not logged",
                callback,
                event.kind,
                exc_info=True,
            )
