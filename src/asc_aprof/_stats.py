"""Per-kernel statistics, run-to-run comparison and the median's interval (pure functions, no numpy).

:func:`kernel_stats` groups tasks by (device, kernel name): count and duration statistics, and,
when the tasks' PMU counters are given (``ProfilingResult.counters``), the median of every
counter and the bound verdict of :mod:`asc_aprof._verdict`. :func:`compare_tasks` compares two
sets of tasks kernel by kernel: the change of the median duration, or of one counter's median
(``metric=``), with a percentile bootstrap interval. Both accept a :class:`ProfilingResult`
(its tasks and counters) or plain tasks.

Statistics respect runs: ``skip`` drops the leading samples of each run's (device, kernel) group
before groups of several runs are merged, since every run starts cold (a warm-up launch per run,
not one for all runs merged). :func:`run_kernel_stats` and :func:`compare_runs` take one source
per run (a result, or its tasks), e.g. ``results`` or ``[r.tasks for r in results]``; a kernel's
counter medians are taken over the runs that carry counters.

The median's confidence interval (:func:`median_interval`) is the distribution-free one from
order statistics: for n samples, the number below the true median is Binomial(n, 1/2), so
``[x_(j), x_(n+1-j)]`` covers the median with probability ``1 - 2 P(B <= j - 1)`` whatever the
distribution (continuous, independent samples). The largest *j* whose coverage is still at least
the requested confidence is taken, so the exact coverage is reported along with the interval; it
is at least the requested level once n >= 6 (at 95%), and a little above it (discreteness).
Outliers are flagged with Tukey's fences (1.5 interquartile ranges beyond the quartiles).
"""

from __future__ import annotations

import dataclasses
import math
import operator
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, TypeAlias

from ._counters import TaskCounters
from ._errors import InvalidArgumentError
from ._records import ProfilingResult, ProfilingTask
from ._verdict import Verdict, bound_verdict

#: ``KernelChange.metric`` of a duration comparison.
DURATION: Final = "duration_us"

Key = tuple[int | None, str]
TaskSource = ProfilingResult | Iterable[ProfilingTask]
#: One source per run (e.g. ``results`` or ``[r.tasks for r in results]``).
Runs: TypeAlias = Iterable[TaskSource]
#: One run's tasks and (when read) their counters, aligned.
_Run = tuple[Sequence[ProfilingTask], TaskCounters | None]


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default) of an already sorted, non-empty sequence."""
    if not sorted_values:
        raise ValueError("quantile of an empty sequence")
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


@dataclasses.dataclass(frozen=True, slots=True)
class KernelStats:
    """Statistics of one kernel on one device: durations in microseconds, counter medians.

    :ivar counters: the median of every PMU counter over the kernel's tasks (column name as in
        the CSV, None when every value was ``N/A``); empty when no counters were given
    :ivar verdict: the bound verdict from those medians (see :data:`~asc_aprof.VERDICT_RULE`);
        None when no counters were given
    """

    device: int | None
    name: str
    type: str
    count: int
    median_us: float
    p10_us: float
    p90_us: float
    min_us: float
    max_us: float
    mean_us: float
    total_us: float
    counters: Mapping[str, float | None] = dataclasses.field(default_factory=dict)
    verdict: Verdict | None = None

    def to_dict(self) -> dict[str, Any]:
        """The report's ``kernels`` entry: every field; ``counters`` and ``verdict`` are null when
        no counters were given."""
        out: dict[str, Any] = {
            field.name: getattr(self, field.name)
            for field in dataclasses.fields(self)
            if field.name not in ("counters", "verdict")
        }
        out["counters"] = dict(self.counters) if self.verdict is not None else None
        out["verdict"] = self.verdict.to_dict() if self.verdict is not None else None
        return out


def _source(
    tasks: TaskSource, counters: TaskCounters | None
) -> tuple[Sequence[ProfilingTask], TaskCounters | None]:
    if isinstance(tasks, ProfilingResult):
        return tasks.tasks, counters if counters is not None else tasks.counters
    seq = tasks if isinstance(tasks, Sequence) else list(tasks)
    if counters is not None and len(counters) != len(seq):
        raise InvalidArgumentError(
            f"counters has {len(counters)} rows for {len(seq)} tasks (they must be aligned: "
            "pass a ProfilingResult, or its tasks with its counters)"
        )
    return seq, counters


def _groups(
    tasks: Sequence[ProfilingTask], *, device: int | None, name: str | None, skip: int
) -> dict[Key, tuple[str, list[int]]]:
    """Task indexes per (device, kernel name), in file order, dropping *skip* leading ones each
    (a kernel with no more than *skip* tasks is left out)."""
    groups: dict[Key, tuple[str, list[int]]] = {}
    for index, task in enumerate(tasks):
        if device is not None and task.device != device:
            continue
        if name is not None and task.name != name:
            continue
        entry = groups.get((task.device, task.name))
        if entry is None:
            entry = groups[(task.device, task.name)] = (task.type, [])
        entry[1].append(index)
    if skip:
        groups = {k: (t, idx[skip:]) for k, (t, idx) in groups.items() if len(idx) > skip}
    return groups


def _duration_groups(
    tasks: Iterable[ProfilingTask], *, device: int | None, name: str | None, skip: int
) -> dict[Key, tuple[str, list[float]]]:
    """Durations per (device, kernel name), as :func:`_groups` (the faster way without counters)."""
    groups: dict[Key, tuple[str, list[float]]] = {}
    for task in tasks:
        if device is not None and task.device != device:
            continue
        if name is not None and task.name != name:
            continue
        entry = groups.get((task.device, task.name))
        if entry is None:
            entry = groups[(task.device, task.name)] = (task.type, [])
        entry[1].append(task.duration)
    if skip:
        groups = {k: (t, d[skip:]) for k, (t, d) in groups.items() if len(d) > skip}
    return groups


def _pick(values: Sequence[float], indexes: list[int]) -> list[float]:
    """``values[i]`` for every index (at C speed), NaN (no value) left out."""
    picked = [values[indexes[0]]] if len(indexes) == 1 else list(operator.itemgetter(*indexes)(values))
    return [v for v in picked if v == v]


def _median(values: Sequence[float]) -> float:
    return quantile(sorted(values), 0.5)


def counter_medians(counters: TaskCounters, indexes: list[int]) -> dict[str, float | None]:
    """The median of every counter column over the tasks at *indexes* (None: no value at all)."""
    out: dict[str, float | None] = {}
    for column in counters.columns:
        values = _pick(counters.values(column), indexes)
        out[column] = _median(values) if values else None
    return out


@dataclasses.dataclass(slots=True)
class _Merged:
    """One (device, kernel) over runs: type, durations, and counter values by column."""

    type: str
    durations: list[float]
    counters: dict[str, list[float]] | None = None


def _merge_runs(
    runs: Iterable[_Run], *, device: int | None, name: str | None, skip: int
) -> dict[Key, _Merged]:
    merged: dict[Key, _Merged] = {}
    for seq, counted in runs:
        if counted is None:
            for key, (ktype, durations) in _duration_groups(seq, device=device, name=name, skip=skip).items():
                entry = merged.get(key)
                if entry is None:
                    merged[key] = _Merged(ktype, durations)
                else:
                    entry.durations.extend(durations)
            continue
        for key, (ktype, idx) in _groups(seq, device=device, name=name, skip=skip).items():
            entry = merged.get(key)
            if entry is None:
                entry = merged[key] = _Merged(ktype, [])
            entry.durations.extend(seq[i].duration for i in idx)
            values = entry.counters if entry.counters is not None else {}
            entry.counters = values
            for column in counted.columns:
                values.setdefault(column, []).extend(_pick(counted.values(column), idx))
    return merged


def kernel_stats(
    tasks: TaskSource,
    *,
    counters: TaskCounters | None = None,
    device: int | None = None,
    name: str | None = None,
    skip: int = 0,
) -> list[KernelStats]:
    """Statistics per (device, kernel) of one run, sorted by total time, largest first.

    :param tasks: a :class:`ProfilingResult` (its tasks and, when it has them, its counters) or
        any tasks
    :param counters: the tasks' counters (aligned with *tasks*); given or taken from the result,
        each kernel gets the median of every counter and a bound verdict
    :param device: only this device; *name*: only this kernel
    :param skip: drop this many leading tasks of each kernel (warm-up); kernels with no more
        tasks than that are left out
    """
    return _kernel_stats([_source(tasks, counters)], device=device, name=name, skip=skip)


def run_kernel_stats(
    runs: Runs, *, device: int | None = None, name: str | None = None, skip: int = 0
) -> list[KernelStats]:
    """:func:`kernel_stats` over several runs, *skip* leading samples dropped per run."""
    return _kernel_stats([_source(run, None) for run in runs], device=device, name=name, skip=skip)


def _kernel_stats(runs: list[_Run], *, device: int | None, name: str | None, skip: int) -> list[KernelStats]:
    out: list[KernelStats] = []
    for (dev, kname), group in _merge_runs(runs, device=device, name=name, skip=skip).items():
        values = sorted(group.durations)
        total = math.fsum(values)
        median = round(quantile(values, 0.5), 3)
        medians: dict[str, float | None] = {}
        verdict = None
        if group.counters is not None:
            medians = {column: _median(v) if v else None for column, v in group.counters.items()}
            verdict = bound_verdict(medians, median)
        out.append(
            KernelStats(
                device=dev,
                name=kname,
                type=group.type,
                count=len(values),
                median_us=median,
                p10_us=round(quantile(values, 0.1), 3),
                p90_us=round(quantile(values, 0.9), 3),
                min_us=values[0],
                max_us=values[-1],
                mean_us=round(total / len(values), 3),
                total_us=round(total, 3),
                counters=medians,
                verdict=verdict,
            )
        )
    out.sort(key=lambda s: s.total_us, reverse=True)
    return out


@dataclasses.dataclass(frozen=True, slots=True)
class KernelChange:
    """How one kernel's median of *metric* moved from BASE to NEW.

    ``metric`` is ``"duration_us"`` (:data:`DURATION`) or a counter column; ``base_median`` /
    ``new_median`` are in its unit and ``difference`` is new - base. ``change_pct`` is
    (new - base) / base in percent (0 when both are 0, ``inf`` when only the base is);
    ``ci_low_pct`` / ``ci_high_pct`` bound it with a percentile bootstrap (95%);
    ``significant`` when the interval excludes 0.
    """

    device: int | None
    name: str
    base_median: float
    new_median: float
    change_pct: float
    ci_low_pct: float
    ci_high_pct: float
    significant: bool
    base_count: int
    new_count: int
    metric: str = DURATION
    difference: float = 0.0

    @property
    def base_median_us(self) -> float:
        """``base_median`` (the name of the duration-only version)."""
        return self.base_median

    @property
    def new_median_us(self) -> float:
        """``new_median`` (the name of the duration-only version)."""
        return self.new_median

    def to_dict(self) -> dict[str, object]:
        """Every field (non-finite percentages as null); a duration comparison also keeps the
        older keys ``base_median_us`` / ``new_median_us``."""
        out: dict[str, object] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            out[field.name] = _finite_or_none(value) if isinstance(value, float) else value
        if self.metric == DURATION:
            out["base_median_us"] = self.base_median
            out["new_median_us"] = self.new_median
        return out


def bootstrap_change(
    base: Sequence[float],
    new: Sequence[float],
    *,
    resamples: int = 1000,
    confidence: float = 0.95,
    max_samples: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Median change in percent and its bootstrap confidence interval (deterministic for a seed).

    Samples larger than *max_samples* are thinned evenly first, which keeps the cost bounded. A
    base median of 0 gives 0 change when the new one is 0 too, else ``inf``.
    """
    rng = random.Random(seed)

    def thin(values: Sequence[float]) -> list[float]:
        if len(values) <= max_samples:
            return list(values)
        step = len(values) / max_samples
        return [values[int(i * step)] for i in range(max_samples)]

    b, n = thin(base), thin(new)
    base_median = _median(base)
    if base_median == 0:
        same = _median(new) == 0
        return (0.0, 0.0, 0.0) if same else (math.inf, math.inf, math.inf)
    change = (_median(new) - base_median) / base_median * 100.0
    ratios: list[float] = []
    for _ in range(resamples):
        mb = _median(rng.choices(b, k=len(b)))
        mn = _median(rng.choices(n, k=len(n)))
        if mb:
            ratios.append((mn - mb) / mb * 100.0)
    if not ratios:
        return (change, change, change)
    ratios.sort()
    alpha = (1.0 - confidence) / 2.0
    return (change, quantile(ratios, alpha), quantile(ratios, 1.0 - alpha))


def _metric_values(
    tasks: Sequence[ProfilingTask], counters: TaskCounters | None, metric: str, which: str
) -> Sequence[float]:
    if metric == DURATION:
        return [t.duration for t in tasks]
    if counters is None:
        raise InvalidArgumentError(
            f"metric={metric!r} needs the PMU counters of {which} (parse it with counters=True, "
            "or give a report written with counters)"
        )
    if metric not in counters:
        shown = ", ".join(counters.columns) or "none: its CSV had no PMU column"
        raise InvalidArgumentError(f"{which} has no counter {metric!r} (its counters: {shown})")
    return counters.values(metric)


def compare_tasks(
    base: TaskSource,
    new: TaskSource,
    *,
    metric: str = DURATION,
    skip: int = 0,
    resamples: int = 1000,
    base_counters: TaskCounters | None = None,
    new_counters: TaskCounters | None = None,
) -> list[KernelChange]:
    """Per (device, kernel) present in both: the median change of *metric*, with a bootstrap interval.

    :param base: a :class:`ProfilingResult` or tasks; *new* likewise
    :param metric: ``"duration_us"`` (task durations) or a counter column (e.g.
        ``"aiv_vec_ratio"``), which needs both sides' counters (a result's, or
        *base_counters* / *new_counters*); tasks whose value is ``N/A`` are left out
    :param skip: drop this many leading tasks of each kernel
    :raises InvalidArgumentError: a counter metric without counters, or not among them
    :return: the changes, largest absolute change first
    """
    return _compare(
        [_source(base, base_counters)],
        [_source(new, new_counters)],
        metric=metric,
        skip=skip,
        resamples=resamples,
    )


def compare_runs(
    base: Runs, new: Runs, *, metric: str = DURATION, skip: int = 0, resamples: int = 1000
) -> list[KernelChange]:
    """:func:`compare_tasks` over several runs per side, *skip* leading samples dropped per run."""
    return _compare(
        [_source(run, None) for run in base],
        [_source(run, None) for run in new],
        metric=metric,
        skip=skip,
        resamples=resamples,
    )


def _side_values(runs: list[_Run], metric: str, which: str, skip: int) -> dict[Key, list[float]]:
    """*metric*'s values per (device, kernel) over one side's runs (``N/A`` left out)."""
    out: dict[Key, list[float]] = {}
    for seq, counted in runs:
        if metric == DURATION:  # the faster way: no index lists
            for key, (_, durations) in _duration_groups(seq, device=None, name=None, skip=skip).items():
                out.setdefault(key, []).extend(durations)
            continue
        values = _metric_values(seq, counted, metric, which)
        for key, (_, idx) in _groups(seq, device=None, name=None, skip=skip).items():
            out.setdefault(key, []).extend(_pick(values, idx))
    return out


def _compare(
    base: list[_Run], new: list[_Run], *, metric: str, skip: int, resamples: int
) -> list[KernelChange]:
    gb = _side_values(base, metric, "BASE", skip)
    gn = _side_values(new, metric, "NEW", skip)
    out: list[KernelChange] = []
    for key, bd in gb.items():
        nd = gn.get(key)
        if nd is None:
            continue
        if not bd or not nd:
            continue  # every value N/A on one side
        change, low, high = bootstrap_change(bd, nd, resamples=resamples)
        base_median, new_median = _median(bd), _median(nd)
        if metric == DURATION:
            base_median, new_median = round(base_median, 3), round(new_median, 3)
        out.append(
            KernelChange(
                device=key[0],
                name=key[1],
                base_median=base_median,
                new_median=new_median,
                change_pct=round(change, 2) if math.isfinite(change) else change,
                ci_low_pct=round(low, 2) if math.isfinite(low) else low,
                ci_high_pct=round(high, 2) if math.isfinite(high) else high,
                significant=low > 0 or high < 0,
                base_count=len(bd),
                new_count=len(nd),
                metric=metric,
                difference=new_median - base_median,
            )
        )
    out.sort(key=lambda c: abs(c.change_pct), reverse=True)
    return out


# -- the median's interval and outliers -------------------------------------------------------------------
def median_interval(sorted_values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """Distribution-free confidence interval of the median: ``(low, high, coverage)``.

    *sorted_values* must be sorted and non-empty. ``[x_(j), x_(n+1-j)]`` (1-based order
    statistics) with the largest *j* whose exact coverage ``1 - 2 P(B <= j - 1)``, B ~
    Binomial(n, 1/2), is at least *confidence*; with too few samples for that (n < 6 at 95%) the
    interval is ``[min, max]`` and *coverage* says how much less it is.
    """
    n = len(sorted_values)
    if n == 0:
        raise ValueError("median_interval of an empty sequence")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    tail = (1.0 - confidence) / 2.0
    # Walk the binomial CDF up from 0 in log space (2**-n underflows past n = 1074).
    log_pmf = -n * math.log(2.0)
    cdf = 0.0
    j = 0  # P(B <= j - 1) == cdf
    while j < n // 2:
        next_cdf = cdf + math.exp(log_pmf)
        if next_cdf > tail:
            break
        cdf = next_cdf
        log_pmf += math.log((n - j) / (j + 1))
        j += 1
    if j == 0:
        return (sorted_values[0], sorted_values[-1], 1.0 - 2.0 * math.exp(-n * math.log(2.0)))
    return (sorted_values[j - 1], sorted_values[n - j], 1.0 - 2.0 * cdf)


def tukey_fences(sorted_values: Sequence[float], k: float = 1.5) -> tuple[float, float] | None:
    """``(Q1 - k IQR, Q3 + k IQR)`` of sorted values (None below 4 samples: no quartiles to speak of)."""
    if len(sorted_values) < 4:
        return None
    q1 = quantile(sorted_values, 0.25)
    q3 = quantile(sorted_values, 0.75)
    iqr = q3 - q1
    return (q1 - k * iqr, q3 + k * iqr)
