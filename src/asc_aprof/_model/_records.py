"""Result records and the median helper of ``asc.lib.profiling``."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import difflib
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from ._errors import InvalidArgumentError, NoSamplesError

if TYPE_CHECKING:
    from ._counters import TaskCounters
    from ._join import Level0Join

#: Task types that run on AI Core / AI Vector units; only these count for medians.
AICORE_TASK_TYPES: Final = frozenset(
    {
        "AI_CORE",
        "AIV_SQE",
        "AI_VECTOR_CORE",
        "MIX_AIC",
        "MIX_AIV",
        "KERNEL_AIVEC",
        "KERNEL_AICORE",
        # level-0 task_time types of mixed cube/vector kernels (real PyPTO runs on 910B)
        "KERNEL_MIX_AIC",
        "KERNEL_MIX_AIV",
    }
)


#: The type op_summary gives every task at task time level 0 (the run's task_time has the real one).
UNKNOWN_TASK_TYPE: Final = "N/A"

#: Tasks CANN schedules around a collection, not kernels (name ``N/A``). Real runs show them in
#: task_time around ``PROFILING_ENABLE`` / ``PROFILING_DISABLE``; older exports of a run in which
#: no kernel ran list them in op_summary too, as ``PLACE_HOLDER_SQE`` rows. They stay in results
#: (they are rows of the export) but never count for medians.
CONTROL_TASK_TYPES: Final = frozenset(
    {
        "PLACE_HOLDER_SQE",
        "DEVICE_RINGBUFFER_CONTROL",
        "EVENT_RECORD",
        "TASK_TIMEOUT_SET",
        "PROFILING_ENABLE",
        "PROFILING_DISABLE",
    }
)


def joinable(task_type: object) -> bool:
    """Whether the level-0 join's tolerant step (:mod:`._join`) may give a row the type of a
    task_time entry: a kernel's type, not ``N/A``, a control task's, or None (an entry of two
    types)."""
    return (
        isinstance(task_type, str) and task_type != UNKNOWN_TASK_TYPE and task_type not in CONTROL_TASK_TYPES
    )


@dataclasses.dataclass(frozen=True, slots=True)
class ProfilingTask:
    """One kernel / AI Core task from an exported CSV.

    A frozen, slotted dataclass, as upstream's is a frozen dataclass: ``dataclasses.asdict``,
    ``astuple``, ``replace`` and ``fields`` work on it. The spec's four positional fields come
    first; ``device`` is an optional trailing field. The C readers build these without calling
    ``__init__`` (each slot set through its descriptor, see ``_plans/_record_new.h``), and the
    pure-Python readers through :func:`new_task`.

    :ivar id: the task id, or None where the CSV says ``N/A``
    :ivar name: kernel / operator name (``Op Name`` or ``kernel_name``)
    :ivar type: task type, e.g. ``AI_CORE``, ``AI_VECTOR_CORE``, ``MIX_AIC``
    :ivar duration: task duration in microseconds
    :ivar device: the device the task ran on (``Device_id`` / ``device_N``), None for host rows
        or when the layout does not say
    """

    id: int | None
    name: str
    type: str
    duration: float
    device: int | None = None


def _task_builder() -> Callable[[tuple[int | None, str, str, float, int | None]], ProfilingTask]:
    # A frozen dataclass's __init__ goes through object.__setattr__ once per field by name; the
    # slots' own descriptors do the same stores without the lookups (about half the time).
    new = object.__new__
    set_id, set_name, set_type, set_duration, set_device = (
        getattr(ProfilingTask, f.name).__set__ for f in dataclasses.fields(ProfilingTask)
    )

    def build(fields: tuple[int | None, str, str, float, int | None]) -> ProfilingTask:
        task: ProfilingTask = new(ProfilingTask)
        set_id(task, fields[0])
        set_name(task, fields[1])
        set_type(task, fields[2])
        set_duration(task, fields[3])
        set_device(task, fields[4])
        return task

    return build


#: ``ProfilingTask(*fields)`` for the pure-Python readers' hot loops: *fields* is
#: ``(id, name, type, duration, device)``.
new_task: Final = _task_builder()


def task_with_type(task: ProfilingTask, type: str) -> ProfilingTask:
    """*task* with another ``type`` (``dataclasses.replace`` without its per-call field walk)."""
    return new_task((task.id, task.name, type, task.duration, task.device))


RESULT_FORMAT: Final = "asc-aprof.result"
#: Version 2 added ``counters``; version 1 files are still read (they have none).
RESULT_VERSION: Final = 2


@dataclasses.dataclass(frozen=True, slots=True)
class ProfilingResult:
    """The tasks parsed from one exported run.

    :ivar tasks: the tasks, in file order (start order per device)
    :ivar run_id: the ``PROF_*`` directory name the tasks came from
    :ivar stored_at: when the result was parsed: a naive ``datetime`` in local time, as upstream's
        ``datetime.now()`` (DECISIONS 8), so ``datetime.now() - result.stored_at`` works. Files
        (``to_dict``, JSON reports) carry the instant in UTC; reading one gives local time again.
    :ivar counters: the tasks' PMU counters (:class:`~asc_aprof.TaskCounters`, aligned with
        ``tasks``) when they were asked for (``counters=True``), else None
    :ivar level0_join: how a level-0 run's ``N/A`` types were joined from task_time
        (:class:`~asc_aprof.Level0Join`: rows typed by exact start, by the nearest start, left
        ``N/A``), for a result read from a run on disk (``store_result``, ``open_run``); None when
        no join was made or the result was not read that way. Not compared, not in :meth:`to_dict`.
    """

    tasks: tuple[ProfilingTask, ...]
    run_id: str
    stored_at: _dt.datetime
    counters: TaskCounters | None = None
    level0_join: Level0Join | None = dataclasses.field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """This result in the versioned JSON format (``RESULT_FORMAT``, ``version`` 2).

        ``{"format": "asc-aprof.result", "version": 2, "run_id": str, "stored_at": ISO-8601 UTC,
        "tasks": [{"id": int|null, "name": str, "type": str, "duration_us": float,
        "device": int|null}, ...], "counters": {column: [float|null, ...], ...} | null}``;
        ``counters`` (new in version 2) holds one list per PMU column, aligned with ``tasks``
        (null for ``N/A``), or is null when the counters were not read. Version 1 is the same
        without ``counters``.
        """
        return {
            "format": RESULT_FORMAT,
            "version": RESULT_VERSION,
            "run_id": self.run_id,
            "stored_at": utc_text(self.stored_at),
            "tasks": [
                {"id": t.id, "name": t.name, "type": t.type, "duration_us": t.duration, "device": t.device}
                for t in self.tasks
            ],
            "counters": None if self.counters is None else self.counters.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProfilingResult:
        """Rebuild a result written by :meth:`to_dict` (version 1 or 2).

        :raises ValueError: for another format or a newer version
        """
        from ._counters import TaskCounters

        if data.get("format") != RESULT_FORMAT:
            raise ValueError(f"not an asc-aprof result (format={data.get('format')!r})")
        if not isinstance(data.get("version"), int) or data["version"] > RESULT_VERSION:
            raise ValueError(
                f"unsupported result version {data.get('version')!r} (this reads <= {RESULT_VERSION})"
            )
        try:
            tasks = tuple(
                ProfilingTask(
                    None if t["id"] is None else int(t["id"]),
                    str(t["name"]),
                    str(t["type"]),
                    float(t["duration_us"]),
                    None if t.get("device") is None else int(t["device"]),
                )
                for t in data["tasks"]
            )
            stored_at = local_time(_dt.datetime.fromisoformat(data["stored_at"]))
            raw = data.get("counters")
            counters = None if raw is None else TaskCounters.from_dict(raw, length=len(tasks))
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ValueError(f"malformed asc-aprof result: {exc}") from exc
        return cls(tasks, str(data["run_id"]), stored_at, counters)


def make_result(
    tasks: Iterable[ProfilingTask],
    run_id: str,
    counters: TaskCounters | None = None,
    level0_join: Level0Join | None = None,
) -> ProfilingResult:
    """A result of *tasks* (and their *counters*) parsed now; *level0_join*: how its types were joined."""
    return ProfilingResult(tuple(tasks), run_id, _dt.datetime.now(), counters, level0_join)


def utc_text(when: _dt.datetime) -> str:
    """*when* as ISO-8601 in UTC; a naive value (``stored_at``) is local time."""
    return when.astimezone(_dt.timezone.utc).isoformat()


def local_time(when: _dt.datetime) -> _dt.datetime:
    """*when* as ``stored_at`` holds it: naive local time (an aware value is converted)."""
    return when if when.tzinfo is None else when.astimezone().replace(tzinfo=None)


def numpy_round3(value: float) -> float:
    """``numpy.round(value, 3)``: scale by 1000, round half to even, scale back.

    Not ``round(value, 3)``, which rounds the exact binary value and differs from numpy on about a
    fifth of the halves an even-count median produces.
    """
    return round(value * 1000) / 1000


def task_time_median(tasks: Iterable[ProfilingTask], name: str | None = None, skip: int = 0) -> float:
    """Median duration in microseconds of one kernel's AI Core tasks, as upstream computes it.

    Only tasks whose type is an AI Core type (AI_CORE, AIV_SQE, AI_VECTOR_CORE, MIX_AIC, MIX_AIV,
    KERNEL_AIVEC, KERNEL_AICORE, KERNEL_MIX_AIC, KERNEL_MIX_AIV) count. A task whose type is unknown
    (``N/A``: a level-0 run whose task_time could not be joined) counts only when *name* names its
    kernel.

    :param tasks: usually ``ProfilingResult.tasks``, in result order (start order per device)
    :param name: the kernel to measure; defaults to the first AI Core task's name
    :param skip: leading samples of that kernel to drop (warm-up), applied only when more than
        *skip* samples exist, as upstream does (its pytest fixture passes ``skip=1`` after a
        single launch)
    :raises NoSamplesError: (a ``RuntimeError`` and a ``ValueError``) when the kernel has no sample
    :raises InvalidArgumentError: for a negative *skip*
    :return: ``numpy.round(numpy.median(samples), 3)``
    """
    if skip < 0:
        raise InvalidArgumentError(f"skip must be >= 0, got skip={skip}")
    samples: list[float] = []
    kernel = name
    others: dict[str, int] = {}  # AI Core kernels not asked for, for the error message
    skipped_types: dict[str, int] = {}  # tasks of other types, for the error message
    for task in tasks:
        if task.type not in AICORE_TASK_TYPES and not (name is not None and task.type == UNKNOWN_TASK_TYPE):
            skipped_types[task.type] = skipped_types.get(task.type, 0) + 1
            continue
        if kernel is None:
            kernel = task.name
        if task.name == kernel:
            samples.append(task.duration)
        else:
            others[task.name] = others.get(task.name, 0) + 1
    if kernel is None:
        raise NoSamplesError(no_kernel_message(skipped_types))
    if not samples and others:
        raise NoSamplesError(unknown_kernel_message(kernel, others))
    if not samples:
        raise NoSamplesError(f"no AI Core sample of kernel {kernel!r}: {no_kernel_message(skipped_types)}")
    kept = sorted(samples[skip:] if len(samples) > skip else samples)
    mid = len(kept) // 2
    median = kept[mid] if len(kept) % 2 else (kept[mid - 1] + kept[mid]) / 2.0
    return numpy_round3(median)


def _counted(counts: Mapping[str, int], limit: int = 8) -> str:
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    text = ", ".join(f"{what} ({count})" for what, count in ranked[:limit])
    return text + (f" and {len(ranked) - limit} more" if len(ranked) > limit else "")


def no_kernel_message(types: Mapping[str, int]) -> str:
    """Why there is no kernel to take a median of, given the tasks there are (type -> count)."""
    total = sum(types.values())
    if not total:
        return (
            "the result has no task at all, so there is no kernel to take a median of: was a kernel "
            "launched on the profiled device inside the collection?"
        )
    if all(t in CONTROL_TASK_TYPES for t in types):
        return (
            f"no AI Core task in the result, as no kernel ran while profiling: its {total} task(s) "
            f"are CANN control tasks ({_counted(types)}; name N/A), which the export lists when no "
            "kernel was recorded. "
            "Launch the kernels inside the profile() block (or between start() and stop()), on the "
            "profiled device"
        )
    return (
        f"no AI Core task in the result, so there is no kernel to take a median of (its {total} "
        f"task(s) are of types {_counted(types)}; only AI Core types count, or N/A when name= is given)"
    )


def unknown_kernel_message(kernel: str, others: Mapping[str, int]) -> str:
    """No sample of *kernel*; *others* are the AI Core kernels there are (name -> samples)."""
    close = difflib.get_close_matches(kernel, list(others), n=1, cutoff=0.5)
    if not close:
        close = [n for n in others if kernel in n or n in kernel][:1]
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return (
        f"no AI Core sample of kernel {kernel!r} in the result{hint}; its AI Core kernels "
        f"(samples): {_counted(others)}"
    )
