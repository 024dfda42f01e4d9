"""Per-kernel statistics, run-to-run comparison and the median's interval (pure functions, no numpy).

:func:`kernel_stats` groups tasks by (device, kernel name): count and duration statistics, and,
when the tasks' PMU counters are given (``ProfilingResult.counters``), the median of every
counter and the bound verdict of :mod:`asc_aprof._plans._verdict`. :func:`compare_tasks` compares two
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

Columns: every function also takes :class:`~asc_aprof.TaskColumns` (``read_columns()``) wherever
it takes a result, and then builds no task: rows are grouped by their (device, name) codes, each
group's durations gathered into one array, and the quantiles picked by selection
(:mod:`asc_aprof._plans._columns`), with the same skip, the same order of groups and the same
arithmetic on the same values, so the statistics are identical to the task path's to the last
digit (the tests hold both to it on real and generated runs). Runs of both kinds given together
are all read as columns.
"""

from __future__ import annotations

import dataclasses
import math
import operator
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, TypeAlias

from .._model._counters import TaskCounters
from .._model._errors import InvalidArgumentError
from .._model._records import ProfilingResult, ProfilingTask
from ._columns import TaskColumns, counter_bytes, exact_sum, group_rows, quantiles_of, take
from ._sol import ChipFacts, speed_of_light
from ._verdict import Verdict, bound_verdict

#: ``KernelChange.metric`` of a duration comparison.
DURATION: Final = "duration_us"

Key = tuple[int | None, str]
TaskSource = ProfilingResult | TaskColumns | Iterable[ProfilingTask]
#: One source per run (e.g. ``results`` or ``[r.tasks for r in results]``).
Runs: TypeAlias = Iterable[TaskSource]
#: One run's tasks and (when read) their counters, aligned.
_Run = tuple[Sequence[ProfilingTask], TaskCounters | None] | TaskColumns


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
    :ivar aic_mhz: the median AI Core clock (MHz) at the starts of the kernel's tasks whose clock
        is known (:meth:`TaskColumns.aic_mhz`: runs read from their raw data); None when none is
    :ivar speed_of_light: resource -> fraction of the chip's peak from those medians and the
        median duration, when the chip was given (docs/speed_of_light.md); else empty
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
    #: not compared: statistics of a run read natively equal those of its CSVs, which have no clock
    aic_mhz: float | None = dataclasses.field(default=None, compare=False)
    speed_of_light: Mapping[str, float] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KernelStats:
        """Rebuild what :meth:`to_dict` wrote (a report's ``kernels`` entry, any version)."""
        counters = data.get("counters")
        verdict = data.get("verdict")
        return cls(
            device=None if data.get("device") is None else int(data["device"]),
            name=str(data["name"]),
            type=str(data["type"]),
            count=int(data["count"]),
            median_us=float(data["median_us"]),
            p10_us=float(data["p10_us"]),
            p90_us=float(data["p90_us"]),
            min_us=float(data["min_us"]),
            max_us=float(data["max_us"]),
            mean_us=float(data["mean_us"]),
            total_us=float(data["total_us"]),
            counters={str(k): None if v is None else float(v) for k, v in (counters or {}).items()},
            verdict=None if verdict is None else Verdict.from_dict(verdict),
            aic_mhz=None if data.get("aic_mhz") is None else float(data["aic_mhz"]),
            speed_of_light={str(k): float(v) for k, v in (data.get("speed_of_light") or {}).items()},
        )

    def to_dict(self) -> dict[str, Any]:
        """The report's ``kernels`` entry: every field; ``counters`` and ``verdict`` are null when
        no counters were given; ``aic_mhz`` only when the clock is known (reports of runs read
        from CSVs keep their format)."""
        out: dict[str, Any] = {
            field.name: getattr(self, field.name)
            for field in dataclasses.fields(self)
            if field.name not in ("counters", "verdict", "aic_mhz", "speed_of_light")
        }
        if self.aic_mhz is not None:
            out["aic_mhz"] = self.aic_mhz
        if self.speed_of_light:  # only with the chip: reports without it keep their format
            out["speed_of_light"] = dict(self.speed_of_light)
        out["counters"] = dict(self.counters) if self.verdict is not None else None
        out["verdict"] = self.verdict.to_dict() if self.verdict is not None else None
        return out


def _source(tasks: TaskSource, counters: TaskCounters | None) -> _Run:
    if isinstance(tasks, TaskColumns):
        if counters is None:
            return tasks
        if len(counters) != len(tasks):
            raise InvalidArgumentError(f"counters has {len(counters)} rows for {len(tasks)} tasks")
        return TaskColumns._wrap(
            tasks._cols,
            tasks._tables,
            len(tasks),
            counters,
            tasks.run_id,
            tasks.stored_at,
            tasks._clock,
            tasks.level0_join,
        )
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
    for run in runs:
        assert not isinstance(run, TaskColumns)
        seq, counted = run
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
    chip: ChipFacts | None = None,
) -> list[KernelStats]:
    """Statistics per (device, kernel) of one run, sorted by total time, largest first.

    :param tasks: a :class:`ProfilingResult` (its tasks and, when it has them, its counters) or
        any tasks
    :param counters: the tasks' counters (aligned with *tasks*); given or taken from the result,
        each kernel gets the median of every counter and a bound verdict
    :param device: only this device; *name*: only this kernel
    :param skip: drop this many leading tasks of each kernel (warm-up); kernels with no more
        tasks than that are left out
    :param chip: the run's chip facts (``Run.info.chip_facts()``): with counters, each kernel
        gets its speed of light and a verdict in roofline terms
    """
    return _kernel_stats([_source(tasks, counters)], device=device, name=name, skip=skip, chip=chip)


def run_kernel_stats(
    runs: Runs,
    *,
    device: int | None = None,
    name: str | None = None,
    skip: int = 0,
    chip: ChipFacts | None = None,
) -> list[KernelStats]:
    """:func:`kernel_stats` over several runs, *skip* leading samples dropped per run."""
    return _kernel_stats([_source(run, None) for run in runs], device=device, name=name, skip=skip, chip=chip)


def _as_columns(runs: list[_Run]) -> list[TaskColumns] | None:
    """All runs as columns when any is (None: all are tasks, the task path)."""
    if not any(isinstance(run, TaskColumns) for run in runs):
        return None
    return [run if isinstance(run, TaskColumns) else TaskColumns(run[0], run[1]) for run in runs]


def _kernel_stats(
    runs: list[_Run], *, device: int | None, name: str | None, skip: int, chip: ChipFacts | None = None
) -> list[KernelStats]:
    columns = _as_columns(runs)
    if columns is not None:
        return _column_kernel_stats(columns, device=device, name=name, skip=skip, chip=chip)
    out: list[KernelStats] = []
    for (dev, kname), group in _merge_runs(runs, device=device, name=name, skip=skip).items():
        values = sorted(group.durations)
        total = math.fsum(values)
        median = round(quantile(values, 0.5), 3)
        medians: dict[str, float | None] = {}
        verdict = None
        if group.counters is not None:
            medians = {column: _median(v) if v else None for column, v in group.counters.items()}
            verdict = bound_verdict(medians, median, chip)
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
                speed_of_light=dict(speed_of_light(medians, median, chip).fractions),
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

    In cycle space (a duration comparison where every task of the kernel on both sides has its
    AI Core clock, :meth:`TaskColumns.aic_mhz`): ``cycles_change_pct`` with its interval
    ``cycles_ci_low_pct`` / ``cycles_ci_high_pct`` is the same comparison of duration x clock
    (the cycles each task took), ``base_aic_mhz`` / ``new_aic_mhz`` the sides' median clocks;
    all None otherwise. See :meth:`clock_explains`.
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
    # Not compared (as KernelStats.aic_mhz): a comparison of runs read natively equals that of
    # their CSVs, which carry no clock.
    cycles_change_pct: float | None = dataclasses.field(default=None, compare=False)
    cycles_ci_low_pct: float | None = dataclasses.field(default=None, compare=False)
    cycles_ci_high_pct: float | None = dataclasses.field(default=None, compare=False)
    base_aic_mhz: float | None = dataclasses.field(default=None, compare=False)
    new_aic_mhz: float | None = dataclasses.field(default=None, compare=False)

    def clock_explains(self, threshold_pct: float) -> bool:
        """Whether a change beyond *threshold_pct* in time is none in cycles: significantly more
        than *threshold_pct* slower in time, but not so in cycles (its cycle interval reaches
        0, or its cycle change is within the threshold). Such a change is the clock's, not the
        kernel's: ``compare`` reports it ``AMBIGUOUS: the clock changed`` and its gate passes."""
        if self.cycles_change_pct is None or self.cycles_ci_low_pct is None:
            return False
        slower = self.significant and self.change_pct > threshold_pct
        in_cycles = self.cycles_ci_low_pct > 0 and self.cycles_change_pct > threshold_pct
        return slower and not in_cycles

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
    base_median = _fast_median(base)
    if base_median == 0:
        same = _fast_median(new) == 0
        return (0.0, 0.0, 0.0) if same else (math.inf, math.inf, math.inf)
    change = (_fast_median(new) - base_median) / base_median * 100.0
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
    for run in runs:
        assert not isinstance(run, TaskColumns)
        seq, counted = run
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
    gb: Mapping[Key, Sequence[float]]
    gn: Mapping[Key, Sequence[float]]
    base_columns, new_columns = _as_columns(base), _as_columns(new)
    if base_columns is not None or new_columns is not None:
        gb = column_side_values(base_columns or _as_columns_all(base), metric, "BASE", skip)
        gn = column_side_values(new_columns or _as_columns_all(new), metric, "NEW", skip)
    else:
        gb = _side_values(base, metric, "BASE", skip)
        gn = _side_values(new, metric, "NEW", skip)
    cb: Mapping[Key, Sequence[float] | None] = {}
    cn: Mapping[Key, Sequence[float] | None] = {}
    if metric == DURATION and (base_columns is not None or new_columns is not None):
        cb = column_side_clocks(base_columns or _as_columns_all(base), skip)
        cn = column_side_clocks(new_columns or _as_columns_all(new), skip)
    out: list[KernelChange] = []
    for key, bd in gb.items():
        nd = gn.get(key)
        if nd is None:
            continue
        if not bd or not nd:
            continue  # every value N/A on one side
        change, low, high = bootstrap_change(bd, nd, resamples=resamples)
        cycles: tuple[float | None, ...] = (None,) * 5
        base_clock, new_clock = cb.get(key), cn.get(key)
        if base_clock is not None and new_clock is not None:
            c_change, c_low, c_high = bootstrap_change(
                [d * c for d, c in zip(bd, base_clock, strict=True)],
                [d * c for d, c in zip(nd, new_clock, strict=True)],
                resamples=resamples,
            )
            cycles = (
                _rounded(c_change),
                _rounded(c_low),
                _rounded(c_high),
                _fast_median(base_clock),
                _fast_median(new_clock),
            )
        base_median, new_median = _fast_median(bd), _fast_median(nd)
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
                cycles_change_pct=cycles[0],
                cycles_ci_low_pct=cycles[1],
                cycles_ci_high_pct=cycles[2],
                base_aic_mhz=cycles[3],
                new_aic_mhz=cycles[4],
            )
        )
    out.sort(key=lambda c: abs(c.change_pct), reverse=True)
    return out


def _rounded(value: float) -> float:
    return round(value, 2) if math.isfinite(value) else value


# -- the columnar path ---------------------------------------------------------------------------
def _fast_median(values: Sequence[float]) -> float:
    """:func:`_median`, by selection when *values* are a column's doubles (a ``memoryview``)."""
    if isinstance(values, memoryview) and len(values) > 64:
        return quantiles_of(values.tobytes(), (0.5,))[0.5]
    return _median(values)


def _as_columns_all(runs: list[_Run]) -> list[TaskColumns]:
    return [run if isinstance(run, TaskColumns) else TaskColumns(run[0], run[1]) for run in runs]


@dataclasses.dataclass(slots=True)
class _Pieces:
    """One (device, kernel) over runs: type, and where its rows are (run, start, stop of its order)."""

    type: str
    spans: list[tuple[int, int, int]]


def _column_groups(
    runs: Sequence[TaskColumns], *, device: int | None, name: str | None, skip: int
) -> tuple[dict[Key, _Pieces], list[bytes]]:
    """Every run's rows per (device, kernel), merged over runs, and each run's row order."""
    merged: dict[Key, _Pieces] = {}
    orders: list[bytes] = []
    for index, cols in enumerate(runs):
        grouping = group_rows(cols, skip)
        orders.append(grouping.order)
        devices, names, types = cols.devices, cols.names, cols.types
        type_codes = cols.type_codes()
        starts = grouping.starts
        for g, (dev_code, name_code, first) in enumerate(grouping.keys):
            key = (devices[dev_code], names[name_code])
            if (device is not None and key[0] != device) or (name is not None and key[1] != name):
                continue
            entry = merged.get(key)
            if entry is None:
                entry = merged[key] = _Pieces(types[type_codes[first]], [])
            entry.spans.append((index, starts[g], starts[g + 1]))
    return merged, orders


def _gather(
    sources: Sequence[bytes | bytearray | None],
    orders: Sequence[bytes],
    spans: list[tuple[int, int, int]],
    drop_nan: bool,
) -> bytes:
    """The values at one group's rows over runs (a None source: a run without that column)."""
    parts = [
        take(source, orders[run], start, stop, drop_nan=drop_nan)
        for run, start, stop in spans
        if (source := sources[run]) is not None
    ]
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _column_kernel_stats(
    runs: Sequence[TaskColumns], *, device: int | None, name: str | None, skip: int, chip: ChipFacts | None
) -> list[KernelStats]:
    merged, orders = _column_groups(runs, device=device, name=name, skip=skip)
    durations = [cols._cols[0] for cols in runs]
    counted = [counter_bytes(c.counters) if c.counters is not None else None for c in runs]
    clocks = [cols._clock for cols in runs]
    out: list[KernelStats] = []
    for (dev, kname), entry in merged.items():
        values = _gather(durations, orders, entry.spans, False)
        known = _gather(clocks, orders, entry.spans, True) if any(clocks) else b""
        n = len(values) // 8
        total = exact_sum(values)
        q = quantiles_of(values, (0.1, 0.5, 0.9), extremes=True)
        median = round(q[0.5], 3)
        medians: dict[str, float | None] = {}
        verdict = None
        if any(counted[run] is not None for run, _, _ in entry.spans):
            # the columns of the counted runs holding the kernel, in order of first appearance
            columns = dict.fromkeys(c for run, _, _ in entry.spans for c in counted[run] or ())
            for column in columns:
                picked = _gather(
                    [None if c is None else c.get(column) for c in counted], orders, entry.spans, True
                )
                medians[column] = quantiles_of(picked, (0.5,))[0.5] if picked else None
            verdict = bound_verdict(medians, median, chip)
        out.append(
            KernelStats(
                device=dev,
                name=kname,
                type=entry.type,
                count=n,
                median_us=median,
                p10_us=round(q[0.1], 3),
                p90_us=round(q[0.9], 3),
                min_us=q[-math.inf],
                max_us=q[math.inf],
                mean_us=round(total / n, 3),
                total_us=round(total, 3),
                counters=medians,
                verdict=verdict,
                aic_mhz=quantiles_of(known, (0.5,))[0.5] if known else None,
                speed_of_light=dict(speed_of_light(medians, median, chip).fractions),
            )
        )
    out.sort(key=lambda s: s.total_us, reverse=True)
    return out


def column_side_values(
    runs: Sequence[TaskColumns], metric: str, which: str, skip: int
) -> dict[Key, memoryview[float]]:
    """*metric*'s values per (device, kernel) over one side's runs (``N/A`` left out), as doubles."""
    merged, orders = _column_groups(runs, device=None, name=None, skip=skip)
    sources: list[bytes | bytearray | None]
    if metric == DURATION:
        sources = [cols._cols[0] for cols in runs]
    else:
        sources = []
        for cols in runs:
            counters = cols.counters
            if counters is None:
                raise InvalidArgumentError(
                    f"metric={metric!r} needs the PMU counters of {which} (parse it with counters=True, "
                    "or give a report written with counters)"
                )
            if metric not in counters:
                shown = ", ".join(counters.columns) or "none: its CSV had no PMU column"
                raise InvalidArgumentError(f"{which} has no counter {metric!r} (its counters: {shown})")
            sources.append(counters._values[metric].tobytes())
    return {
        key: memoryview(_gather(sources, orders, entry.spans, metric != DURATION)).cast("d")
        for key, entry in merged.items()
    }


def column_side_clocks(runs: Sequence[TaskColumns], skip: int) -> dict[Key, memoryview[float] | None]:
    """Each task's AI Core clock per (device, kernel) over one side's runs, aligned with
    :func:`column_side_values` of the durations; None for a kernel where any task's clock is
    unknown (NaN, or a run without clock data)."""
    merged, orders = _column_groups(runs, device=None, name=None, skip=skip)
    sources = [cols._clock for cols in runs]
    out: dict[Key, memoryview[float] | None] = {}
    for key, entry in merged.items():
        if any(sources[run] is None for run, _, _ in entry.spans):
            out[key] = None
            continue
        values = memoryview(_gather(sources, orders, entry.spans, False)).cast("d")
        out[key] = values if all(v == v and v > 0 for v in values) else None
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
