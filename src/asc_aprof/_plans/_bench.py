"""``bench()``: a measuring loop that cannot lie, written once as a sans-IO plan.

Theory of operation
-------------------
A benchmark is a sequence of steps that :func:`plan` *yields* and a driver performs (blocking in
:meth:`Profiler.bench <asc_aprof.Profiler.bench>`, awaiting in
:meth:`AsyncProfiler.bench <asc_aprof.AsyncProfiler.bench>`), as the per-call protocol does:

* :class:`WarmUp`: run the callable (after the flush, if any) outside any collection, for at
  least a count of calls and at least a wall-clock time; nothing is recorded;
* :class:`Measure`: one collection window (one ``profile()``) holding a batch of repetitions,
  each ``flush(); fn()``; the outcome is the device's tasks in start order.

Every decision lives here: how many repetitions go in the next window, whether the result is
good enough to stop, and which kernel belongs to which call.

**Attribution.** A call's time is the sum of the kernels it launched on the device. Kernels are
tasks whose type is counted (default: the AI Core types and ``AI_CPU``; level-0 tasks of type
``N/A`` only when asked). The first window holds **one call alone** and, with a flush, the
second **one flush alone** (the *calibration*): their kernels, in start order, are the call's
and the flush's *signatures* (names and types; the flush's may be empty). Every later window of
*n* repetitions must then be exactly *n* copies of ``flush signature + call signature``.
Anything else (a call that launched no kernel, a count that does not divide, a kernel out of
place) raises :class:`AttributionError` saying what was seen: never a partial sum, never
``inf``. So a flush's kernels never count, even when they share a name with the call's. With
``kernels=`` per call the calibration is skipped and the check is weaker: each window's count
must be a whole number of ``kernels`` (plus the flush's) per repetition, and every repetition
must repeat the first one's names, the flush's part being what precedes the call's. The rule
needs no marker API: CANN's ``MSPROFTX`` ranges would need another
data type, another export and host-to-device time alignment that the simulator does not model;
positions in the device's start order are what a single-stream call gives exactly. Calls that
run kernels on several streams must synchronise before returning, so that consecutive calls do
not interleave.

**Stopping.** With ``reps=N`` the repetitions go in windows of ``batch`` (default: all in one).
Otherwise repetitions are adaptive: after each window the median's interval (distribution-free,
from order statistics: see :func:`asc_aprof._plans._stats.median_interval`) over every sample so far
decides: stop when its width relative to the median is at most ``rel_width``, else plan the next
window from how the width shrinks (as 1/sqrt(n)), bounded by ``max_reps`` and by ``max_time``
(wall-clock seconds of the measuring windows, projected from the windows so far).

**Clock.** Ascend has no public way to lock the AI Core clock, so each sample's clock is recorded
and checked (DECISIONS 25): a call's clock is the lowest AI Core clock at the starts of its
kernels (from the run's raw clock data, as the exporter's ``freq.db`` gives it); a call is
*throttled* when that is below the run's rated clock, ``info.json`` ``aic_frequency`` of the
device (``device_N/info.json.N``). Throttled calls are flagged (:class:`ClockCheck`); with
``drop_throttled`` they are left out of every statistic, and adaptive measuring judges the
interval on the calls kept. Where no clock is known (runs read from CSVs, chips whose runs
carry no clock data such as the 310B) nothing is flagged.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Callable, Collection, Generator, Iterable, Mapping, Sequence
from typing import Any, Final

from .._model._clock import TaskClocks
from .._model._counters import TaskCounters
from .._model._defaults import CONFIDENCE, MAX_REPS, MAX_TIME_S, MIN_REPS, REL_WIDTH, WARMUP_CALLS
from .._model._enums import AicoreMetrics
from .._model._errors import AprofError, InvalidArgumentError, NoSamplesError
from .._model._records import AICORE_TASK_TYPES, ProfilingTask, numpy_round3
from ._raw._pmu import CHIP_910B, CHIP_METRICS, GROUP_OF_METRIC
from ._sol import ChipFacts, speed_of_light
from ._stats import median_interval, quantile, tukey_fences

#: Task types whose time counts by default: AI Core / vector types and AI CPU kernels.
DEFAULT_BENCH_TYPES: Final = frozenset(AICORE_TASK_TYPES | {"AI_CPU"})
#: Repetitions per window when none is given (a window of a million tasks parses in seconds).
DEFAULT_MAX_BATCH: Final = 10_000


class AttributionError(AprofError):
    """The kernels of a window cannot be attributed to the calls that launched them."""


class ThrottledError(NoSamplesError):
    """``drop_throttled=True`` left no sample: every call ran below the rated AI Core clock."""


class StopReason(enum.Enum):
    """Why :func:`plan` stopped measuring."""

    REPS = "reps"  #: the fixed number of repetitions was measured
    CONVERGED = "converged"  #: the interval's relative width reached the target
    MAX_REPS = "max_reps"  #: adaptive, but the maximum count was reached first
    MAX_TIME = "max_time"  #: adaptive, but the time budget would be exceeded by another window


@dataclasses.dataclass(frozen=True, slots=True)
class BenchConfig:
    """How to measure (see :meth:`Profiler.bench <asc_aprof.Profiler.bench>` for each field)."""

    warmup: int = WARMUP_CALLS
    warmup_time: float | None = None
    reps: int | None = None
    rel_width: float = REL_WIDTH
    min_reps: int = MIN_REPS
    max_reps: int = MAX_REPS
    max_time: float = MAX_TIME_S
    batch: int | None = None
    confidence: float = CONFIDENCE
    kernels: int | None = None
    task_types: frozenset[str] = DEFAULT_BENCH_TYPES
    #: do_bench: repetitions = this many seconds of device time / one call's (from calibration)
    rep_device_time: float | None = None
    #: leave calls that ran below the rated AI Core clock out of the statistics (else: flag them)
    drop_throttled: bool = False

    def __post_init__(self) -> None:
        def need(ok: bool, what: str) -> None:
            if not ok:
                raise InvalidArgumentError(what)

        need(self.warmup >= 0, f"warmup must be >= 0 calls, got warmup={self.warmup}")
        need(
            self.warmup_time is None or self.warmup_time >= 0,
            f"warmup_time must be None or >= 0 seconds, got warmup_time={self.warmup_time}",
        )
        need(self.reps is None or self.reps >= 1, f"reps must be None or >= 1, got reps={self.reps}")
        need(self.rel_width > 0, f"rel_width must be > 0 (e.g. 0.02 for 2%), got rel_width={self.rel_width}")
        need(self.min_reps >= 1, f"min_reps must be >= 1, got min_reps={self.min_reps}")
        need(
            self.max_reps >= self.min_reps,
            f"max_reps must be >= min_reps, got max_reps={self.max_reps}, min_reps={self.min_reps}",
        )
        need(self.max_time > 0, f"max_time must be > 0 seconds, got max_time={self.max_time}")
        need(self.batch is None or self.batch >= 1, f"batch must be None or >= 1, got batch={self.batch}")
        need(0 < self.confidence < 1, f"confidence must be in (0, 1), got confidence={self.confidence}")
        need(
            self.kernels is None or self.kernels >= 1,
            f"kernels must be None or >= 1 per call, got kernels={self.kernels}",
        )
        need(bool(self.task_types), "task_types must name at least one task type")
        need(
            self.rep_device_time is None or self.rep_device_time > 0,
            f"the repetition time must be > 0, got {self.rep_device_time}",
        )


def bench_config(
    *,
    warmup: int = WARMUP_CALLS,
    warmup_time: float | None = None,
    reps: int | None = None,
    rel_width: float = REL_WIDTH,
    min_reps: int = MIN_REPS,
    max_reps: int = MAX_REPS,
    max_time: float = MAX_TIME_S,
    batch: int | None = None,
    confidence: float = CONFIDENCE,
    kernels: int | None = None,
    task_types: Iterable[str] | None = None,
    drop_throttled: bool = False,
) -> BenchConfig:
    """A :class:`BenchConfig` from ``bench()``'s keywords (*task_types* None: the default set)."""
    return BenchConfig(
        warmup=warmup,
        warmup_time=warmup_time,
        reps=reps,
        rel_width=rel_width,
        min_reps=min_reps,
        max_reps=max_reps,
        max_time=max_time,
        batch=batch,
        confidence=confidence,
        kernels=kernels,
        task_types=DEFAULT_BENCH_TYPES if task_types is None else frozenset(task_types),
        drop_throttled=drop_throttled,
    )


# -- results --------------------------------------------------------------------------------------------
#: Groups each chip's collections give PMU columns for (``metrics="all"``): what the chip
#: collects (:data:`~asc_aprof._plans._raw._pmu.CHIP_METRICS`) less the 910B's MemoryAccess,
#: whose table never lines up with its columns in the exporter (it prints none).
SUPPORTED_GROUPS: Final = {
    chip: tuple(g for g in groups if not (chip == CHIP_910B and g == AicoreMetrics.MEMORY_ACCESS))
    for chip, groups in CHIP_METRICS.items()
}


@dataclasses.dataclass(frozen=True, slots=True)
class KernelTime:
    """One kernel's part of a call: its launches per call and their summed time per call (µs).

    :ivar counters: with several metric groups (``metrics="all"`` or a list), the median of
        every PMU column of every group over the kernel's launches in that group's replay
        (a column several groups print, such as the cycle counts: pooled over them); else empty
    :ivar speed_of_light: resource -> fraction of the chip's peak (one launch: ``median_us /
        per_call``), from those counters and the chip (docs/speed_of_light.md); empty without
        counters or without the chip
    """

    name: str
    type: str
    per_call: int
    median_us: float
    mean_us: float
    min_us: float
    max_us: float
    counters: Mapping[str, float | None] = dataclasses.field(default_factory=dict)
    speed_of_light: Mapping[str, float] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        data: dict[str, object] = {
            f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in _MAPPINGS
        }
        data.update(counters=dict(self.counters), speed_of_light=dict(self.speed_of_light))
        return data


_MAPPINGS: Final = ("counters", "speed_of_light")


@dataclasses.dataclass(frozen=True, slots=True)
class GroupRun:
    """Which runs gave which metric group's counters (one replay of the call per group).

    :ivar group: the group's number (``AicoreMetrics``)
    :ivar name: its name as msprof spells it (``PipeUtilization``)
    :ivar run_ids: the ``PROF_*`` runs of its replay
    :ivar columns: the PMU columns it gave
    """

    group: int
    name: str
    run_ids: tuple[str, ...]
    columns: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "group": self.group,
            "name": self.name,
            "run_ids": list(self.run_ids),
            "columns": list(self.columns),
        }


@dataclasses.dataclass(frozen=True, slots=True)
class ClockCheck:
    """The AI Core clock of a benchmark's calls, checked against the rated clock (DECISIONS 25).

    :ivar rated_mhz: the rated AI Core clock: ``info.json`` ``aic_frequency`` of the measured
        runs' device (``device_N/info.json.N``); NaN where unknown
    :ivar sample_mhz: each measured call's clock, the lowest AI Core clock at the starts of its
        kernels, in the order the calls ran (the dropped ones included); NaN where unknown (runs
        read from CSVs, chips without clock data); empty where nothing was measured
    :ivar throttled: indices into ``sample_mhz`` of the calls below ``rated_mhz``
    :ivar dropped_us: the times of the throttled calls left out of the statistics
        (``drop_throttled=True``); empty when they were only flagged
    """

    rated_mhz: float = math.nan
    sample_mhz: tuple[float, ...] = ()
    throttled: tuple[int, ...] = ()
    dropped_us: tuple[float, ...] = ()

    @property
    def known(self) -> bool:
        """Whether the rated clock and some call's clock are known (the check was made)."""
        return not math.isnan(self.rated_mhz) and any(not math.isnan(m) for m in self.sample_mhz)

    @property
    def dropped(self) -> int:
        """How many calls were left out of the statistics."""
        return len(self.dropped_us)

    @property
    def reason(self) -> str:
        """One line: what was checked and what came of it."""
        if not self.known:
            return "AI Core clock unknown (no clock data in the runs read): samples not checked"
        rated = f"the rated AI Core clock, {self.rated_mhz:g} MHz (info.json aic_frequency)"
        if not self.throttled:
            return f"every sample ran at {rated}"
        lowest = min(self.sample_mhz[i] for i in self.throttled)
        what = (
            "dropped from the statistics"
            if self.dropped
            else "flagged, still counted (drop_throttled=True drops them)"
        )
        return (
            f"{len(self.throttled)} of {len(self.sample_mhz)} samples ran below {rated}, "
            f"down to {lowest:g} MHz: {what}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "rated_mhz": None if math.isnan(self.rated_mhz) else self.rated_mhz,
            "sample_mhz": [None if math.isnan(m) else m for m in self.sample_mhz],
            "throttled": list(self.throttled),
            "dropped_us": list(self.dropped_us),
            "dropped": self.dropped,
            "reason": self.reason,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class BenchResult:
    """What :meth:`Profiler.bench <asc_aprof.Profiler.bench>` measured on one device (times in µs).

    :ivar device: the device
    :ivar median_us: median of the calls' times (a call's time: the sum of its kernels)
    :ivar ci_low_us: lower end of the median's confidence interval (distribution-free, order
        statistics)
    :ivar ci_high_us: upper end
    :ivar ci_level: the interval's exact coverage (at least the requested confidence, which is
        ``confidence``, once there are enough samples: 6 at 95%)
    :ivar confidence: the requested confidence
    :ivar samples_us: every call's time, in the order the calls ran (with
        ``drop_throttled=True``, the throttled calls' left out: ``clock.dropped_us``)
    :ivar outliers: indices into ``samples_us`` outside Tukey's fences (flagged, still counted)
    :ivar kernels: the per-kernel breakdown of a call, in the call's launch order
    :ivar flush_kernels: names of the flush's kernels (never counted)
    :ivar warmup_calls: calls made before measuring
    :ivar run_ids: the ``PROF_*`` runs measured (the calibration's first, when it ran); with
        several metric groups, those of the replay without PMU collection, which gave the times
    :ivar stop: why measuring stopped
    :ivar groups: with several metric groups, which runs gave which group (:class:`GroupRun`)
    :ivar chip: the cores and clock the speed-of-light figures used (None: none computed)
    :ivar clock: each call's AI Core clock against the rated clock: which calls were throttled
        (below it), how many were dropped and why, in one line (:class:`ClockCheck`)
    """

    device: int
    median_us: float
    ci_low_us: float
    ci_high_us: float
    ci_level: float
    confidence: float
    samples_us: tuple[float, ...]
    outliers: tuple[int, ...]
    kernels: tuple[KernelTime, ...]
    flush_kernels: tuple[str, ...]
    warmup_calls: int
    run_ids: tuple[str, ...]
    stop: StopReason
    groups: tuple[GroupRun, ...] = ()
    chip: ChipFacts | None = None
    clock: ClockCheck = dataclasses.field(default_factory=ClockCheck)

    @property
    def count(self) -> int:
        """How many calls were measured."""
        return len(self.samples_us)

    @property
    def rel_width(self) -> float:
        """The interval's width relative to the median."""
        return _rel_width(self.ci_low_us, self.ci_high_us, self.median_us)

    @property
    def mean_us(self) -> float:
        return numpy_round3(math.fsum(self.samples_us) / len(self.samples_us))

    @property
    def min_us(self) -> float:
        return min(self.samples_us)

    @property
    def max_us(self) -> float:
        return max(self.samples_us)

    def quantile(self, q: float) -> float:
        """The *q* quantile of the samples (linear interpolation, numpy's and torch's default)."""
        if not 0.0 <= q <= 1.0:
            raise InvalidArgumentError(f"quantile must be in [0, 1], got {q}")
        return quantile(sorted(self.samples_us), q)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``stop`` as its value, plus ``count`` and ``rel_width``)."""
        data = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("kernels", "stop", "groups", "chip", "clock")
        }
        data.update(
            clock=self.clock.to_dict(),
            groups=[g.to_dict() for g in self.groups],
            chip=None if self.chip is None else self.chip.to_dict(),
            samples_us=list(self.samples_us),
            outliers=list(self.outliers),
            flush_kernels=list(self.flush_kernels),
            run_ids=list(self.run_ids),
            kernels=[k.to_dict() for k in self.kernels],
            stop=self.stop.value,
            count=self.count,
            rel_width=self.rel_width,
        )
        return data

    def __repr__(self) -> str:
        return (
            f"BenchResult(device={self.device}, median_us={self.median_us}, "
            f"ci=[{self.ci_low_us}, {self.ci_high_us}] ({self.ci_level:.1%}), count={self.count}, "
            f"outliers={len(self.outliers)}, throttled={len(self.clock.throttled)}, "
            f"dropped={self.clock.dropped}, stop={self.stop.value})"
        )


def _rel_width(low: float, high: float, median: float) -> float:
    width = high - low
    if width <= 0:
        return 0.0
    return width / median if median > 0 else math.inf


# -- steps ----------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, slots=True)
class WarmUp:
    """Run ``flush(); fn()`` at least *calls* times and for at least *seconds*.

    The outcome is ``(calls made, wall seconds they took)``.
    """

    calls: int
    seconds: float | None


@dataclasses.dataclass(frozen=True, slots=True)
class Measure:
    """One window of *reps* repetitions: ``flush()`` (if *flush*) then ``fn()`` (if *call*) each.

    The outcome is a :class:`Window`. *pmu* False: collect without AI Core PMU data (the data
    type bit off); *metrics*: the group to collect (None: the caller's); *counters*: read them.
    """

    reps: int
    flush: bool
    call: bool = True
    pmu: bool = True
    metrics: int | None = None
    counters: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class Window:
    """What a :class:`Measure` gave: the device's tasks in start order, its run, its wall time,
    the tasks' counters (when asked), the run's chip facts (when its metadata gives them) and
    the tasks' AI Core clocks (when the run was read from raw data with clock data)."""

    tasks: Sequence[ProfilingTask]
    run_id: str
    seconds: float
    counters: TaskCounters | None = None
    chip: ChipFacts | None = None
    clocks: TaskClocks | None = None


BenchStep = WarmUp | Measure
Plan = Generator[BenchStep, Any, BenchResult]

Signature = tuple[tuple[str, str], ...]


def _signature(tasks: Sequence[ProfilingTask]) -> Signature:
    return tuple((t.name, t.type) for t in tasks)


def _describe(sig: Sequence[tuple[str, str]], limit: int = 6) -> str:
    names = [name for name, _ in sig[:limit]]
    more = f", ... ({len(sig)} in all)" if len(sig) > limit else ""
    return "[" + ", ".join(names) + more + "]"


def _uncounted(tasks: Sequence[ProfilingTask], types: Collection[str]) -> str:
    other: dict[str, int] = {}
    for t in tasks:
        if t.type not in types:
            other[t.type] = other.get(t.type, 0) + 1
    if not other:
        return ""
    seen = ", ".join(f"{n} of type {ty}" for ty, n in sorted(other.items()))
    return f"; tasks not counted (their type is not in task_types): {seen}"


def one_call(
    tasks: Sequence[ProfilingTask], *, device: int, run_id: str, types: Collection[str]
) -> Sequence[ProfilingTask]:
    """The kernels of a window holding one call of unknown size: every task of *types* (checked
    as :func:`attribute` checks a call)."""
    calls, _ = attribute(
        tasks,
        1,
        device=device,
        run_id=run_id,
        types=types,
        call=None,
        kernels=len([t for t in tasks if t.type in types]),
        flush=False,
        flush_sig=None,
    )
    return calls[0]


def attribute(
    tasks: Sequence[ProfilingTask],
    reps: int,
    *,
    device: int,
    run_id: str,
    types: Collection[str],
    call: Signature | None,
    kernels: int,
    flush: bool,
    flush_sig: Signature | None,
) -> tuple[list[Sequence[ProfilingTask]], Signature]:
    """Split a window's tasks into its *reps* calls (see the module docstring for the rule).

    :param call: the calibrated call signature (None: only *kernels* per call is known, and
        every repetition must repeat the first one's names)
    :param flush_sig: the flush signature learned from an earlier window (None: learn it here)
    :return: each call's kernels, and the flush signature (empty without a flush)
    :raises AttributionError: when the window is not exactly *reps* repetitions of the pattern
    """
    counted = [t for t in tasks if t.type in types]
    where = f"device {device}, run {run_id}"
    if not counted:
        raise AttributionError(
            f"cannot attribute kernels to calls ({where}): {reps} call(s) launched no kernel that "
            f"counts on this device{_uncounted(tasks, types)}. The callable must launch its kernels "
            "on the device being measured"
        )
    total = len(counted)
    if total % reps:
        expected = f"{kernels} per call" + (" plus the flush's" if flush else "")
        raise AttributionError(
            f"cannot attribute kernels to calls ({where}): {total} kernels for {reps} repetitions "
            f"is not a whole number per repetition (expected {expected}); some call launched a "
            "different number of kernels"
        )
    per_rep = total // reps
    n_flush = per_rep - kernels
    expected_flush = 0 if not flush else None if flush_sig is None else len(flush_sig)
    if n_flush < 0 or (expected_flush is not None and n_flush != expected_flush):
        alone = f"each call launched {kernels}" + (f" {_describe(call)}" if call is not None else "")
        if flush and flush_sig is not None:
            alone += f" and the flush {len(flush_sig)} {_describe(flush_sig)}"
        raise AttributionError(
            f"cannot attribute kernels to calls ({where}): {per_rep} kernel(s) per repetition where "
            f"{alone} when measured alone; the number of kernels a call launches must not change"
        )
    first = _signature(counted[:per_rep])
    learned_flush = first[:n_flush]
    if flush_sig is not None and learned_flush != flush_sig:
        raise AttributionError(
            f"cannot attribute kernels to calls ({where}): the flush launched {_describe(learned_flush)} "
            f"where it launched {_describe(flush_sig)} before"
        )
    pattern = learned_flush + (call if call is not None else first[n_flush:])
    calls: list[Sequence[ProfilingTask]] = []
    for rep in range(reps):
        chunk = counted[rep * per_rep : (rep + 1) * per_rep]
        sig = _signature(chunk)
        if sig != pattern:
            position = next(i for i, (a, b) in enumerate(zip(sig, pattern, strict=True)) if a != b)
            part = "flush" if position < n_flush else "call"
            raise AttributionError(
                f"cannot attribute kernels to calls ({where}): repetition {rep} has {sig[position][0]!r} "
                f"({sig[position][1]}) at position {position} where the {part} launched "
                f"{pattern[position][0]!r} ({pattern[position][1]}); expected every repetition to be "
                f"{_describe(pattern)}"
            )
        calls.append(chunk[n_flush:])
    return calls, learned_flush


# -- the plan -------------------------------------------------------------------------------------------
class _Clock:
    """Wall time of the measuring windows and a linear model of a window's cost (a + b * reps).

    With one window only, the cost per repetition is the warm-up's wall time per call (when
    there was a warm-up), the rest of that window's time its fixed cost.
    """

    __slots__ = ("per_call", "points", "spent")

    def __init__(self, per_call: float | None) -> None:
        self.spent = 0.0
        self.per_call = per_call
        self.points: list[tuple[int, float]] = []

    def add(self, reps: int, seconds: float) -> None:
        self.spent += seconds
        self.points.append((reps, seconds))

    def cost(self, reps: int) -> float:
        """Projected seconds of a window of *reps* (least squares; one point: all per repetition)."""
        xs = [float(r) for r, _ in self.points]
        ys = [s for _, s in self.points]
        mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
        sxx = sum((x - mean_x) ** 2 for x in xs)
        if sxx == 0:
            if self.per_call is None:
                return mean_y / mean_x * reps
            return max(0.0, mean_y - self.per_call * mean_x) + self.per_call * reps
        slope = max(0.0, sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sxx)
        intercept = max(0.0, mean_y - slope * mean_x)
        return intercept + slope * reps


def plan(config: BenchConfig, *, device: int, flush: bool) -> Plan:
    """The benchmark of one callable on *device*, as steps (see the module docstring)."""
    measured = yield from _measure(config, device=device, flush=flush, pmu=True)
    return measured.result


@dataclasses.dataclass(frozen=True, slots=True)
class _Measured:
    result: BenchResult
    call: Signature
    flush_sig: Signature | None
    chip: ChipFacts | None


def _measure(
    config: BenchConfig, *, device: int, flush: bool, pmu: bool
) -> Generator[BenchStep, Any, _Measured]:
    warmed, warm_seconds = yield WarmUp(config.warmup, config.warmup_time)
    chip: ChipFacts | None = None
    types = config.task_types
    run_ids: list[str] = []
    clock = _Clock(warm_seconds / warmed if warmed else None)
    call: Signature | None = None
    kernels = config.kernels
    call_time: float | None = None
    if kernels is None:
        window: Window = yield Measure(1, False, pmu=pmu)
        chip = window.chip or chip
        run_ids.append(window.run_id)
        clock.add(1, window.seconds)
        calibration = one_call(window.tasks, device=device, run_id=window.run_id, types=types)
        call = _signature(calibration)
        kernels = len(call)
        call_time = math.fsum(t.duration for t in calibration)
    flush_sig: Signature | None = None
    if flush and config.kernels is None:
        window = yield Measure(1, True, call=False, pmu=pmu)
        chip = window.chip or chip
        run_ids.append(window.run_id)
        clock.add(1, window.seconds)
        flush_sig = _signature([t for t in window.tasks if t.type in types])  # may be empty

    target = config.reps
    if config.rep_device_time is not None and call_time:
        target = min(config.max_reps, max(1, round(config.rep_device_time * 1e6 / call_time)))
    adaptive = target is None
    max_batch = config.batch or DEFAULT_MAX_BATCH
    calls: list[Sequence[ProfilingTask]] = []
    clocks: list[tuple[float, float]] = []  # per call: its clock, its run's rated clock

    def kept() -> list[Sequence[ProfilingTask]]:
        if not config.drop_throttled:
            return calls
        return [c for c, (mhz, rated) in zip(calls, clocks, strict=True) if not mhz < rated]

    stop = StopReason.REPS

    while True:
        done = len(calls)
        if not adaptive:
            assert target is not None
            if done >= target:
                stop = StopReason.REPS
                break
            reps = min(max_batch, target - done)
        else:
            verdict, reps = _next_batch(config, kept(), len(calls), clock, max_batch)
            if verdict is not None:
                stop = verdict
                break
        window = yield Measure(reps, flush, pmu=pmu)
        chip = window.chip or chip
        run_ids.append(window.run_id)
        clock.add(reps, window.seconds)
        got, flush_sig = attribute(
            window.tasks,
            reps,
            device=device,
            run_id=window.run_id,
            types=types,
            call=call,
            kernels=kernels,
            flush=flush,
            flush_sig=flush_sig,
        )
        if call is None:
            call = _signature(got[0])
        calls.extend(got)
        clocks.extend(_call_clocks(window, got))
    assert call is not None
    check = _clock_check(calls, clocks, config.drop_throttled)
    samples = kept()
    if not samples:
        raise ThrottledError(
            f"no sample left on device {device}: {check.reason} (runs {', '.join(run_ids)}); pass "
            "drop_throttled=False to keep and flag them, or measure when the device runs at its rated clock"
        )
    result = _result(config, device, samples, call, flush_sig or (), warmed, run_ids, stop, check)
    return _Measured(result, call, flush_sig, chip)


def _call_clocks(window: Window, calls: Sequence[Sequence[ProfilingTask]]) -> list[tuple[float, float]]:
    """Each call's clock (the lowest at its kernels' starts) and its run's rated clock (NaN:
    unknown)."""
    known = window.clocks
    if known is None or len(known.mhz) != len(window.tasks):
        return [(math.nan, math.nan)] * len(calls)
    index = {id(task): i for i, task in enumerate(window.tasks)}
    out = []
    for tasks in calls:
        mhz = [m for m in (known.mhz[index[id(t)]] for t in tasks) if not math.isnan(m)]
        out.append((min(mhz) if mhz else math.nan, known.rated_mhz))
    return out


def _clock_check(
    calls: Sequence[Sequence[ProfilingTask]], clocks: Sequence[tuple[float, float]], drop: bool
) -> ClockCheck:
    rated = next((r for _, r in clocks if not math.isnan(r)), math.nan)
    throttled = tuple(i for i, (mhz, r) in enumerate(clocks) if mhz < r)
    dropped = tuple(_call_times(calls[i] for i in throttled)) if drop else ()
    return ClockCheck(rated, tuple(mhz for mhz, _ in clocks), throttled, dropped)


def multi_plan(config: BenchConfig, *, device: int, flush: bool, groups: Sequence[int] | None) -> Plan:
    """The benchmark with several metric groups (DECISIONS 26): the call measured without PMU
    collection (the times, undisturbed), then replayed once per group (*groups*; None: every
    group the chip supports) with the counters read; each kernel gets the medians of every
    group's columns and its speed of light.

    :raises AttributionError: a replay's kernels differ from the call's
    :raises InvalidArgumentError: *groups* None and the run does not say which chip it is
    """
    measured = yield from _measure(config, device=device, flush=flush, pmu=False)
    chip = measured.chip
    if groups is None:
        platform = chip.platform if chip is not None else None
        if platform not in SUPPORTED_GROUPS:
            raise InvalidArgumentError(
                f"metrics='all' needs the chip, and run {measured.result.run_ids[-1]} does not say it "
                f"(platform {platform!r}); give the groups as a list, e.g. "
                "metrics=['PipeUtilization', 'Memory']"
            )
        groups = SUPPORTED_GROUPS[platform]
    call, types = measured.call, config.task_types
    reps = max(1, min(config.min_reps, config.reps or config.min_reps, config.max_reps))
    keys = list(dict.fromkeys(call))
    pooled: dict[tuple[str, str], dict[str, list[float]]] = {key: {} for key in keys}
    runs: list[GroupRun] = []
    for group in groups:
        name = GROUP_OF_METRIC.get(group, str(group))
        window: Window = yield Measure(reps, flush, metrics=group, counters=True)
        chip = chip or window.chip
        try:
            got, _ = attribute(
                window.tasks,
                reps,
                device=device,
                run_id=window.run_id,
                types=types,
                call=call,
                kernels=len(call),
                flush=flush,
                flush_sig=measured.flush_sig,
            )
        except AttributionError as error:
            raise AttributionError(
                f"the {name} replay launched other kernels than the replay without counters: {error}"
            ) from None
        counters = window.counters
        columns = counters.columns if counters is not None else ()
        runs.append(GroupRun(group, name, (window.run_id,), columns))
        if counters is None:
            continue
        index = {id(task): i for i, task in enumerate(window.tasks)}
        for tasks in got:
            for task in tasks:
                bucket = pooled[(task.name, task.type)]
                for column, value in counters.row(index[id(task)]).items():
                    values = bucket.setdefault(column, [])
                    if value is not None:
                        values.append(value)
    kernels = []
    for kernel in measured.result.kernels:
        bucket = pooled.get((kernel.name, kernel.type), {})
        medians = {c: (quantile(sorted(v), 0.5) if v else None) for c, v in bucket.items()}
        sol = speed_of_light(medians, kernel.median_us / kernel.per_call, chip)
        kernels.append(dataclasses.replace(kernel, counters=medians, speed_of_light=dict(sol.fractions)))
    return dataclasses.replace(measured.result, kernels=tuple(kernels), groups=tuple(runs), chip=chip)


def _next_batch(
    config: BenchConfig,
    calls: Sequence[Sequence[ProfilingTask]],
    measured: int,
    clock: _Clock,
    max_batch: int,
) -> tuple[StopReason | None, int]:
    """Adaptive: stop (with the reason) or the size of the next window. *calls*: the calls the
    statistics use; *measured*: how many were measured (dropped ones included)."""
    done = len(calls)
    if measured >= config.max_reps:
        return StopReason.MAX_REPS, 0
    if done < config.min_reps:
        wanted = config.min_reps - done
    else:
        values = sorted(_call_times(calls))
        low, high, _ = median_interval(values, config.confidence)
        width = _rel_width(low, high, quantile(values, 0.5))
        if width <= config.rel_width:
            return StopReason.CONVERGED, 0
        # The width shrinks as 1/sqrt(n): aim a little past the projection, at most 4x what we have.
        needed = math.ceil(done * (width / config.rel_width) ** 2 * 1.2) if math.isfinite(width) else 4 * done
        wanted = min(max(needed - done, max(1, done // 2)), 3 * done)
    reps = min(wanted, config.max_reps - measured, max_batch)
    if clock.points:
        left = config.max_time - clock.spent
        while reps > 1 and clock.cost(reps) > left:
            reps //= 2
        if clock.cost(reps) > left:
            return StopReason.MAX_TIME, 0
    return None, reps


def _call_times(calls: Iterable[Sequence[ProfilingTask]]) -> list[float]:
    return [numpy_round3(math.fsum(t.duration for t in call)) for call in calls]


def _result(
    config: BenchConfig,
    device: int,
    calls: Sequence[Sequence[ProfilingTask]],
    call: Signature,
    flush_sig: Signature,
    warmed: int,
    run_ids: Sequence[str],
    stop: StopReason,
    clock: ClockCheck,
) -> BenchResult:
    samples = _call_times(calls)
    ordered = sorted(samples)
    low, high, level = median_interval(ordered, config.confidence)
    fences = tukey_fences(ordered)
    outliers = (
        () if fences is None else tuple(i for i, v in enumerate(samples) if v < fences[0] or v > fences[1])
    )
    return BenchResult(
        device=device,
        median_us=numpy_round3(quantile(ordered, 0.5)),
        ci_low_us=low,
        ci_high_us=high,
        ci_level=level,
        confidence=config.confidence,
        samples_us=tuple(samples),
        outliers=outliers,
        kernels=_breakdown(calls, call),
        flush_kernels=tuple(name for name, _ in flush_sig),
        warmup_calls=warmed,
        run_ids=tuple(run_ids),
        stop=stop,
        clock=clock,
    )


def _breakdown(calls: Sequence[Sequence[ProfilingTask]], call: Signature) -> tuple[KernelTime, ...]:
    keys = list(dict.fromkeys(call))
    per_call = {key: call.count(key) for key in keys}
    times: dict[tuple[str, str], list[float]] = {key: [] for key in keys}
    for tasks in calls:
        sums = dict.fromkeys(keys, 0.0)
        for t in tasks:
            sums[(t.name, t.type)] += t.duration
        for key, value in sums.items():
            times[key].append(numpy_round3(value))
    out = []
    for key in keys:
        values = sorted(times[key])
        out.append(
            KernelTime(
                name=key[0],
                type=key[1],
                per_call=per_call[key],
                median_us=numpy_round3(quantile(values, 0.5)),
                mean_us=numpy_round3(math.fsum(values) / len(values)),
                min_us=values[0],
                max_us=values[-1],
            )
        )
    return tuple(out)


# -- triton's do_bench -----------------------------------------------------------------------------------
RETURN_MODES: Final = ("min", "max", "mean", "median", "all")


def check_do_bench(return_mode: str, quantiles: Sequence[float] | None) -> None:
    if return_mode not in RETURN_MODES:
        raise InvalidArgumentError(f"return_mode must be one of {RETURN_MODES}, got {return_mode!r}")
    if quantiles is not None and not all(0.0 <= q <= 1.0 for q in quantiles):
        raise InvalidArgumentError(f"quantiles must be in [0, 1], got {list(quantiles)}")


def do_bench_config(warmup: float, rep: float, drop_throttled: bool = False) -> BenchConfig:
    """triton's semantics: *warmup* ms of warm-up (wall clock), *rep* ms of device time of calls."""
    if not warmup >= 0 or not rep > 0:
        raise InvalidArgumentError(f"warmup must be >= 0 ms and rep > 0 ms, got warmup={warmup}, rep={rep}")
    return BenchConfig(
        warmup=1,
        warmup_time=warmup / 1000.0,
        max_reps=100_000,
        max_time=math.inf,
        rep_device_time=rep / 1000.0,
        drop_throttled=drop_throttled,
    )


def do_bench_value(
    result: BenchResult, quantiles: Sequence[float] | None, return_mode: str
) -> float | list[float]:
    """What triton's ``do_bench`` returns, in milliseconds."""
    ms = [s / 1000.0 for s in result.samples_us]
    ordered = sorted(ms)
    if quantiles is not None:
        values = [quantile(ordered, q) for q in quantiles]
        return values[0] if len(values) == 1 else values
    if return_mode == "all":
        return ms
    if return_mode == "min":
        return ordered[0]
    if return_mode == "max":
        return ordered[-1]
    if return_mode == "median":
        return quantile(ordered, 0.5)
    return math.fsum(ms) / len(ms)


def with_grads(
    flush: Callable[[], object] | None, grads: Sequence[Any] | None
) -> Callable[[], object] | None:
    """*flush* preceded by setting ``.grad = None`` on each of *grads* (triton's ``grad_to_none``)."""
    if not grads:
        return flush

    def reset() -> None:
        for tensor in grads:
            tensor.grad = None
        if flush is not None:
            flush()

    return reset
