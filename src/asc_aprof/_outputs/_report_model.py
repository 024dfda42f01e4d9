"""What the HTML report shows, computed without any charting library (pure functions).

Theory of operation
-------------------
Inputs are *groups* (one per ``report`` PATH, or per key of a mapping given to
:func:`asc_aprof.write_report`), each a list of sources: :class:`ProfilingResult` (durations
only), :class:`Timeline` (durations, start times, counters) or a sweep's :class:`SweepItem`.
Every source is cut into *slices*, one per (run, device), each with a case label: the source's
own (a sweep item's case, a timeline's per-device case, a JSON report's test id) or else its
group's label. ``skip`` drops the leading samples of each kernel *per slice* (warm-up happens
per run), and keeps them all when a kernel has no more than ``skip`` samples there, as
:func:`~asc_aprof.task_time_median` does.

Statistics: medians are numpy's (linear interpolation); comparisons read the inputs as columns
(:class:`~asc_aprof.TaskColumns`), grouped once per side. The interval of a median is the
distribution-free one from order statistics: with n samples, the number below the true median is
Binomial(n, 1/2), so ``[x_(k), x_(n+1-k)]`` covers it with probability ``1 - 2 P(B <= k-1)``;
k is the largest rank whose coverage is still at least the confidence (exact binomial sums up to
2,000 samples, the normal approximation above). Below 6 samples no 95 % interval exists: the
report shows min..max with the coverage it has. Comparisons use
:func:`asc_aprof._plans._stats.compare_tasks` (bootstrap interval of the median change, as
``asc-aprof compare``); the verdict is ``REGRESSION`` when the change is significant and above the
threshold, ``faster`` when significant and below minus the threshold, ``significant`` or ``same``
otherwise.

Clock: for (group, device, kernel), the median AI Core clock at its tasks' starts and its range,
where the tasks carry one (:attr:`TimedTask.aic_mhz`: timelines read from raw data).

Counters: for (group, device, kernel), the median of every counter column over the tasks that
have it (timelines read with counters, or results parsed with ``counters=True``). A *verdict*
callable, given those medians and the kernel's median duration (µs), returns the bound verdict to
show; the default, :func:`bound_verdict_text`, is :func:`asc_aprof.bound_verdict`'s label and
reason (the rule is :data:`asc_aprof.VERDICT_RULE`), given the run's chip when the run says which
(in roofline terms, docs/speed_of_light.md). ``verdict=None`` shows none.

Roofline: a kernel's chip facts are its runs' (:meth:`RunInfo.chip_facts`: the run's cores and
clock, the chip table's rates); with counters, :func:`~asc_aprof.speed_of_light` gives its
figures. Kernels are drawn per chip: on the roofline (:attr:`RooflineKind.ROOFLINE`, arithmetic
intensity against achieved operations per second, under the chip's memory slopes and compute
ceilings) when their counters give an intensity (ArithmeticUtilization and Memory both
collected), else as speed-of-light bars (:attr:`RooflineKind.SOL_BARS`, the fraction of each
resource's peak). Without counters, a chip, or any fraction, :attr:`ReportModel.roofline_note`
says why there is none.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from .._model._errors import UsageError
from .._model._records import ProfilingResult, ProfilingTask
from .._plans._columns import TaskColumns
from .._plans._sol import ChipFacts, SolFigures, speed_of_light
from .._plans._stats import DURATION, column_side_values, compare_tasks, quantile
from .._plans._verdict import Verdict as BoundVerdict
from .._plans._verdict import VerdictKind, bound_verdict, fractions_text
from .._runs._info import RunInfo, collection_line
from .._runs._timeline import TimedTask, Timeline

if TYPE_CHECKING:
    from .._profilers._async import SweepItem

Source = ProfilingResult | Timeline
#: (counter medians by column, median duration in µs) -> the verdict text to show, or None.
Verdict = Callable[[Mapping[str, float | None], float], str | None]


def bound_verdict_text(
    counters: Mapping[str, float | None], median_us: float, chip: ChipFacts | None = None
) -> str:
    """The report's default verdict: :func:`asc_aprof.bound_verdict`'s label and reason (in
    roofline terms with *chip*; the report passes the run's)."""
    verdict = bound_verdict(counters, median_us, chip)
    return f"{verdict.label}: {verdict.reason}"


#: Samples drawn per distribution (evenly thinned from the sorted samples; the numbers use all).
PLOT_SAMPLES: Final = 2000
#: Tasks drawn one by one in the timeline overview; above it, busy fractions per time bin.
TIMELINE_TASKS: Final = 4000
TIMELINE_BINS: Final = 300
EXACT_LIMIT: Final = 2000


@dataclasses.dataclass(frozen=True, slots=True)
class MedianInterval:
    """A median with its distribution-free interval.

    :ivar coverage: the interval's exact coverage probability (normal approximation above
        2,000 samples); below the confidence asked only when there are too few samples
    """

    median: float
    low: float
    high: float
    coverage: float
    count: int


def _binomial_rank(n: int, confidence: float) -> tuple[int, float]:
    """The largest rank k with coverage >= *confidence*, and its coverage (k = 0: none reaches it)."""
    alpha = 1.0 - confidence
    if n > EXACT_LIMIT:
        z = statistics.NormalDist().inv_cdf(1.0 - alpha / 2.0)
        k = max(0, math.floor((n - z * math.sqrt(n)) / 2.0))
        tail = statistics.NormalDist(n / 2.0, math.sqrt(n) / 2.0).cdf(k - 0.5)
        return k, 1.0 - 2.0 * tail
    total = 1 << n
    cumulative = 0  # sum of C(n, i) for i < k
    term = 1  # C(n, k)
    k = 0
    while k < n // 2 + 1:
        if (cumulative + term) / total > alpha / 2.0:
            break
        cumulative += term
        term = term * (n - k) // (k + 1)
        k += 1
    return k, 1.0 - 2.0 * (cumulative / total)


def median_interval(values: Iterable[float], confidence: float = 0.95) -> MedianInterval:
    """The median of *values* and its order-statistic interval (see the module doc).

    :raises ValueError: when there is no value
    """
    ordered = sorted(values)
    n = len(ordered)
    if not n:
        raise ValueError("median_interval() of no values")
    median = quantile(ordered, 0.5)
    k, coverage = _binomial_rank(n, confidence)
    if k < 1:
        return MedianInterval(median, ordered[0], ordered[-1], 1.0 - 2.0 * 0.5**n, n)
    return MedianInterval(median, ordered[k - 1], ordered[n - k], coverage, n)


def thin(ordered: Sequence[float], limit: int = PLOT_SAMPLES) -> list[float]:
    """At most *limit* values spread evenly over sorted *ordered* (its quantiles, roughly)."""
    if len(ordered) <= limit:
        return list(ordered)
    step = (len(ordered) - 1) / (limit - 1)
    return [ordered[round(i * step)] for i in range(limit)]


@dataclasses.dataclass(frozen=True, slots=True)
class Slice:
    """The tasks of one run on one device, with the case they belong to."""

    group: str | None
    case: str | None
    run_id: str
    device: int | None
    tasks: tuple[ProfilingTask, ...]
    timed: tuple[TimedTask, ...] | None
    info: RunInfo | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class KernelView:
    """One (group, device, kernel): its durations and counters."""

    group: str | None
    device: int | None
    name: str
    type: str
    median: MedianInterval
    p10: float
    p90: float
    min: float
    max: float
    samples: tuple[float, ...]  # thinned, sorted, for the distribution chart
    counters: Mapping[str, float | None]
    verdict: str | None
    #: the sweep case the samples come from (None outside a sweep): cases are never pooled
    case: str | None = None
    #: the median AI Core clock (MHz) at the starts of its tasks whose clock is known (timelines
    #: read from raw data), None when none is; :attr:`aic_mhz_range` their lowest and highest
    aic_mhz: float | None = None
    aic_mhz_range: tuple[float, float] | None = None
    #: the chip facts of its runs (None: no run says which chip) and its figures against them
    #: (None without counters or chip)
    chip: ChipFacts | None = None
    sol: SolFigures | None = None
    #: the verdict in roofline terms (:func:`asc_aprof.bound_verdict` with the chip), when its
    #: counters give fractions of the chip's peaks and a verdict is shown
    bound: BoundVerdict | None = None

    @property
    def label(self) -> str:
        """``name · where`` (input, case, device), as the charts name a point."""
        where = (
            (f"{self.group} · " if self.group else "")
            + (f"case {self.case} · " if self.case is not None else "")
            + ("host" if self.device is None else f"device {self.device}")
        )
        return f"{self.name} · {where}"


class RooflineKind(enum.Enum):
    """How a chip's kernels are drawn."""

    #: arithmetic intensity (operations per GM byte) vs achieved operations per second, under the
    #: chip's roofs: needs ArithmeticUtilization (fops) and Memory (GM bytes) counters
    ROOFLINE = "roofline"
    #: the fraction of each resource's peak, one bar each (counters without an intensity)
    SOL_BARS = "speed of light"


@dataclasses.dataclass(frozen=True, slots=True)
class RooflineView:
    """One chip's roofline or speed-of-light chart: its roofs and one point per kernel.

    :ivar roofs: the chip's peaks (:meth:`ChipFacts.peaks`): ``cube``, ``vector`` operations per
        second (ceilings), ``gm``, ``l2`` bytes per second (slopes), where the facts allow
    """

    chip: ChipFacts
    kind: RooflineKind
    roofs: Mapping[str, float]
    kernels: tuple[KernelView, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class CaseView:
    """One (case, device, kernel) median, for the sweep chart."""

    case: str
    group: str | None
    device: int | None
    name: str
    median: MedianInterval


@dataclasses.dataclass(frozen=True, slots=True)
class ChangeView:
    """One kernel of a comparison: both medians with intervals, the change and the verdict."""

    device: int | None
    name: str
    base: MedianInterval
    new: MedianInterval
    change_pct: float
    ci_low_pct: float
    ci_high_pct: float
    verdict: str


@dataclasses.dataclass(frozen=True, slots=True)
class TimelineRow:
    """One row of the overview: a device of one group, times in ms since the group's first task."""

    label: str
    starts_ms: tuple[float, ...]
    durations_ms: tuple[float, ...]
    kernels: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class ReportModel:
    title: str
    inputs: tuple[tuple[str, str, int], ...]  # (group or "-", run id, tasks)
    kernels: tuple[KernelView, ...]
    cases: tuple[CaseView, ...]
    comparison: tuple[ChangeView, ...] | None
    compared: tuple[str, str] | None
    threshold_pct: float
    timeline: tuple[TimelineRow, ...]
    skip: int
    confidence: float = 0.95
    notes: tuple[str, ...] = ()
    #: what each run read from disk says about its collection (chip, CANN, level, metric group, start)
    runs: tuple[RunInfo, ...] = ()
    #: per chip, its kernels on a roofline or as speed-of-light bars (module doc)
    rooflines: tuple[RooflineView, ...] = ()
    #: why there is no roofline (no counters, no chip, no fraction), None when there is one
    roofline_note: str | None = None
    #: the verdicts in roofline terms of the kernels with the most time (:func:`headline`)
    headline: str = ""

    def collection(self) -> str:
        """What every run shares of chip, CANN, level, metric group and start, as one line."""
        return collection_line(self.runs)


def _apply_skip(tasks: Sequence[ProfilingTask], skip: int) -> list[int]:
    """Indices of *tasks* kept after dropping *skip* leading samples of each kernel."""
    if not skip:
        return list(range(len(tasks)))
    counts: dict[str, int] = {}
    for task in tasks:
        counts[task.name] = counts.get(task.name, 0) + 1
    seen: dict[str, int] = {}
    kept = []
    for index, task in enumerate(tasks):
        seen[task.name] = seen.get(task.name, 0) + 1
        if counts[task.name] <= skip or seen[task.name] > skip:
            kept.append(index)
    return kept


def slices_of(
    group: str | None,
    sources: Iterable[Source | SweepItem[Any]],
    *,
    skip: int = 0,
    cases: Mapping[tuple[str, int | None], str] | None = None,
) -> list[Slice]:
    """Cut *sources* into (run, device) slices with their case labels (see the module doc)."""
    cases = cases or {}
    out: list[Slice] = []
    for source in sources:
        own_case: str | None = None
        result: Source | None
        if isinstance(source, Timeline | ProfilingResult):
            result = source
        else:  # a SweepItem (duck-typed: the core does not import the async layer)
            result = getattr(source, "result", None)
            if result is None:
                continue
            own_case = str(source.case)
        by_device: dict[int | None, list[Any]] = {}
        if isinstance(result, Timeline):
            for timed in result.tasks:
                by_device.setdefault(timed.task.device, []).append(timed)
        elif result.counters is not None:  # counters without start times
            for task, row in zip(result.tasks, result.counters.rows(), strict=True):
                by_device.setdefault(task.device, []).append(TimedTask(task, None, None, row))
        else:
            for task in result.tasks:
                by_device.setdefault(task.device, []).append(task)
        for device, items in by_device.items():
            timed_items: list[TimedTask] | None = None
            if isinstance(result, ProfilingResult) and result.counters is not None:
                timed_items = items
                tasks = [t.task for t in items]
                case = None
            elif isinstance(result, Timeline):
                timed_items = items
                tasks = [t.task for t in items]
                case = result.case(device)
            else:
                tasks = items
                case = None
            case = own_case or case or cases.get((result.run_id, device)) or cases.get((result.run_id, None))
            keep = _apply_skip(tasks, skip)
            out.append(
                Slice(
                    group,
                    case if case is not None else group,
                    result.run_id,
                    device,
                    tuple(tasks[i] for i in keep),
                    None if timed_items is None else tuple(timed_items[i] for i in keep),
                    result.info if isinstance(result, Timeline) else None,
                )
            )
    return out


def _counter_medians(timed: Iterable[TimedTask]) -> dict[str, float | None]:
    values: dict[str, list[float]] = {}
    for task in timed:
        for name, value in (task.counters or {}).items():
            bucket = values.setdefault(name, [])
            if value is not None:
                bucket.append(value)
    return {name: (quantile(sorted(v), 0.5) if v else None) for name, v in values.items()}


def _kernel_views(slices: Sequence[Slice], verdict: Verdict | None) -> list[KernelView]:
    groups: dict[
        tuple[str | None, str | None, int | None, str], tuple[str, list[float], list[TimedTask]]
    ] = {}
    chips: dict[tuple[str | None, str | None, int | None, str], ChipFacts] = {}
    for piece in slices:
        timed = piece.timed or ()
        # Different cases of a sweep are different workloads: pooling them gives a median of none.
        case = piece.case if piece.case is not None and piece.case != piece.group else None
        chip = piece.info.chip_facts() if piece.info is not None else None
        for index, task in enumerate(piece.tasks):
            key = (piece.group, case, piece.device, task.name)
            entry = groups.setdefault(key, (task.type, [], []))
            entry[1].append(task.duration)
            if timed:
                entry[2].append(timed[index])
            if chip is not None:
                chips.setdefault(key, chip)  # the first run's that says (one chip per input)
    views = []
    for key, (ktype, durations, timed_tasks) in groups.items():
        group, case, device, name = key
        ordered = sorted(durations)
        counters = _counter_medians(timed_tasks)
        median = median_interval(ordered)
        clocks = sorted(t.aic_mhz for t in timed_tasks if t.aic_mhz == t.aic_mhz)
        chip = chips.get(key)
        sol = speed_of_light(counters, median.median, chip) if counters and chip is not None else None
        bound = bound_verdict(counters, median.median, chip) if sol and sol.fractions and verdict else None
        if verdict is None or not counters:
            text = None
        elif verdict is bound_verdict_text:  # the default: in roofline terms where the chip is known
            text = bound_verdict_text(counters, median.median, chip)
        else:
            text = verdict(counters, median.median)
        views.append(
            KernelView(
                group,
                device,
                name,
                ktype,
                median,
                quantile(ordered, 0.1),
                quantile(ordered, 0.9),
                ordered[0],
                ordered[-1],
                tuple(thin(ordered)),
                counters,
                text,
                case,
                quantile(clocks, 0.5) if clocks else None,
                (clocks[0], clocks[-1]) if clocks else None,
                chip,
                sol,
                bound,
            )
        )
    rank = {
        c: i
        for i, c in enumerate(case_order(list(dict.fromkeys(v.case for v in views if v.case is not None))))
    }
    views.sort(
        key=lambda v: (
            v.name,
            v.device if v.device is not None else -1,
            v.group or "",
            rank.get(v.case or "", -1),
        )
    )
    return views


def _rooflines(kernels: Sequence[KernelView]) -> tuple[list[RooflineView], str | None]:
    """Per chip, its kernels on the roofline and as speed-of-light bars; or why there is none."""
    with_counters = [k for k in kernels if k.counters]
    if not with_counters:
        return [], (
            "No roofline: these inputs carry no hardware counters (collect a metric group, e.g. "
            'bench(..., metrics="all"), and give the PROF_* runs).'
        )
    if all(k.chip is None for k in with_counters):
        return [], (
            "No roofline: no run here says which chip it ran on (its info.json is absent: give the "
            "PROF_* runs rather than a JSON result), so there is no peak to compare with."
        )
    measured = [k for k in with_counters if k.sol is not None and k.sol.fractions]
    if not measured:
        return [], (
            "No roofline: the counters present give no fraction of the chip's peaks (they need the "
            "cycle counts and pipe ratios, fops or GM/L2 bandwidths of a metric group: "
            "docs/speed_of_light.md)."
        )
    by_chip: dict[tuple[ChipFacts, RooflineKind], list[KernelView]] = {}
    for kernel in measured:
        assert kernel.chip is not None and kernel.sol is not None
        kind = (
            RooflineKind.ROOFLINE
            if kernel.sol.intensity is not None and kernel.sol.flops is not None
            else RooflineKind.SOL_BARS
        )
        by_chip.setdefault((kernel.chip, kind), []).append(kernel)
    views = [
        RooflineView(chip, kind, chip.peaks(), tuple(members)) for (chip, kind), members in by_chip.items()
    ]
    return views, None


def headline(kernels: Sequence[KernelView], limit: int = 3) -> str:
    """The verdicts in roofline terms of the *limit* kernels with the most time, as one line
    (``vk: memory-bound: gm at 71% of peak; ...``); empty where no kernel has one."""
    totals: dict[str, float] = {}
    for k in kernels:
        totals[k.name] = totals.get(k.name, 0.0) + k.median.median * k.median.count
    said: list[str] = []
    for name in sorted(totals, key=lambda n: -totals[n]):
        bound = next((k.bound for k in kernels if k.name == name and k.bound is not None), None)
        if bound is None:
            continue
        fractions = fractions_text(bound.fractions)
        if bound.kind in (VerdictKind.MEMORY_BOUND, VerdictKind.COMPUTE_BOUND):
            said.append(f"{name}: {bound.label}: {fractions}")
        else:  # no roof at SOL_BOUND: the pipe rule's label, and how far from the roofs
            said.append(f"{name}: {bound.label}, no roof reached ({fractions})")
    more = len(said) - limit
    return " · ".join(said[:limit]) + (f" · {more} more in the roofline section" if more > 0 else "")


def _case_views(slices: Sequence[Slice]) -> list[CaseView]:
    order: dict[str, int] = {}
    samples: dict[tuple[str, str | None, int | None, str], list[float]] = {}
    for piece in slices:
        if piece.case is None:
            continue
        order.setdefault(piece.case, len(order))
        for task in piece.tasks:
            samples.setdefault((piece.case, piece.group, piece.device, task.name), []).append(task.duration)
    rank = {case: i for i, case in enumerate(case_order(list(order)))}
    views = [
        CaseView(case, group, device, name, median_interval(values))
        for (case, group, device, name), values in samples.items()
    ]
    views.sort(key=lambda v: (v.name, v.device if v.device is not None else -1, rank[v.case]))
    return views


def case_order(cases: Sequence[str]) -> list[str]:
    """Cases in numeric order when every label is a number (sweep values), else as first seen."""
    try:
        return sorted(cases, key=float)
    except ValueError:
        return list(cases)


def _verdict_of(significant: bool, change: float, threshold: float) -> str:
    if significant and change > threshold:
        return "REGRESSION"
    if significant and change < -threshold:
        return "faster"
    return "significant" if significant else "same"


def _comparison(base: Sequence[Slice], new: Sequence[Slice], threshold: float) -> list[ChangeView]:
    # as columns: the comparison and each kernel's durations come from one grouping per side
    base_columns = TaskColumns([t for s in base for t in s.tasks])
    new_columns = TaskColumns([t for s in new for t in s.tasks])
    base_values = column_side_values([base_columns], DURATION, "BASE", 0)
    new_values = column_side_values([new_columns], DURATION, "NEW", 0)
    out = []
    for change in compare_tasks(base_columns, new_columns):
        key = (change.device, change.name)
        b, n = base_values[key], new_values[key]
        out.append(
            ChangeView(
                change.device,
                change.name,
                median_interval(b),
                median_interval(n),
                change.change_pct,
                change.ci_low_pct,
                change.ci_high_pct,
                _verdict_of(change.significant, change.change_pct, threshold),
            )
        )
    return out


def _timeline_rows(slices: Sequence[Slice]) -> list[TimelineRow]:
    by_group: dict[str | None, list[Slice]] = {}
    for piece in slices:
        if piece.timed and any(t.start_ns is not None for t in piece.timed):
            by_group.setdefault(piece.group, []).append(piece)
    rows: list[TimelineRow] = []
    for group, pieces in by_group.items():
        origin = min(t.start_ns for p in pieces for t in p.timed or () if t.start_ns is not None)
        per_device: dict[int | None, list[TimedTask]] = {}
        for piece in pieces:
            per_device.setdefault(piece.device, []).extend(
                t for t in piece.timed or () if t.start_ns is not None
            )
        for device in sorted(per_device, key=lambda d: -1 if d is None else d):
            tasks = sorted(per_device[device], key=lambda t: t.start_ns or 0)
            label = ("host" if device is None else f"device {device}") + (f" · {group}" if group else "")
            rows.append(
                TimelineRow(
                    label,
                    tuple(((t.start_ns or 0) - origin) / 1e6 for t in tasks),
                    tuple(t.duration_ns / 1e6 for t in tasks),
                    tuple(t.task.name for t in tasks),
                )
            )
    return rows


def build_model(
    groups: Sequence[tuple[str | None, Sequence[Slice]]],
    *,
    compare: bool = False,
    title: str | None = None,
    threshold: float = 5.0,
    skip: int = 0,
    verdict: Verdict | None = bound_verdict_text,
) -> ReportModel:
    """The report of *groups* of slices (see the module doc).

    :raises UsageError: when there is no task, or *compare* without exactly two groups
    """
    slices = [s for _, pieces in groups for s in pieces]
    if not any(s.tasks for s in slices):
        raise UsageError("nothing to report: the inputs hold no task")
    comparison = None
    compared = None
    if compare:
        if len(groups) != 2:
            raise UsageError(f"a comparison needs exactly two inputs (base and new), got {len(groups)}")
        (base_label, base), (new_label, new) = groups
        compared = (base_label or "base", new_label or "new")
        comparison = tuple(_comparison(base, new, threshold))
    case_views = _case_views(slices)
    # a kernel in one case only has no sweep to draw; two compared inputs are not a sweep either
    spread: dict[str, set[str]] = {}
    for view in case_views:
        spread.setdefault(view.name, set()).add(view.case)
    case_views = [v for v in case_views if len(spread[v.name]) > 1]
    distinct = {v.case for v in case_views}
    if len(distinct) < 2 or (compare and distinct <= {g for g, _ in groups}):
        case_views = []
    counts: dict[tuple[str, str], int] = {}  # (group, run) -> tasks, in input order
    for group, pieces in groups:
        for s in pieces:
            counts[(group or "-", s.run_id)] = counts.get((group or "-", s.run_id), 0) + len(s.tasks)
    notes = []
    if not any(t.start_ns is not None for s in slices for t in s.timed or ()):
        notes.append(
            "No start times in these inputs (JSON results carry none): give the PROF_* runs or their "
            "result directory for the timeline and the counters."
        )
    runs: dict[str, RunInfo] = {}
    for _, pieces in groups:
        for piece in pieces:
            if piece.info is not None:
                runs.setdefault(piece.run_id, piece.info)
    kernel_views = _kernel_views(slices, verdict)
    rooflines, roofline_note = _rooflines(kernel_views)
    return ReportModel(
        headline=headline(kernel_views),
        rooflines=tuple(rooflines),
        roofline_note=roofline_note,
        runs=tuple(runs.values()),
        title=title or "asc-aprof report",
        inputs=tuple((g, r, n) for (g, r), n in counts.items()),
        kernels=tuple(kernel_views),
        cases=tuple(case_views),
        comparison=comparison,
        compared=compared,
        threshold_pct=threshold,
        timeline=tuple(_timeline_rows(slices)),
        skip=skip,
        notes=tuple(notes),
    )
