"""Per-kernel statistics, run-to-run comparison and the median's interval (pure functions, no numpy).

Statistics respect runs: ``skip`` drops the leading samples of each run's (device, kernel) group
before groups of several runs are merged, since every run starts cold (a warm-up launch per run,
not one for all runs merged). Functions taking *runs* accept one task iterable per run, e.g.
``[r.tasks for r in results]``.

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
import random
from collections.abc import Iterable, Sequence
from typing import TypeAlias

from ._records import ProfilingTask


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default) of an already sorted, non-empty sequence."""
    if not sorted_values:
        raise ValueError("quantile of an empty sequence")
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


@dataclasses.dataclass(frozen=True, slots=True)
class KernelStats:
    """Duration statistics of one kernel on one device, in microseconds."""

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

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


#: One task iterable per run (e.g. ``[r.tasks for r in results]``).
Runs: TypeAlias = Iterable[Iterable[ProfilingTask]]
Groups: TypeAlias = dict[tuple[int | None, str], tuple[str, list[float]]]


def group_durations(
    tasks: Iterable[ProfilingTask], *, device: int | None = None, name: str | None = None, skip: int = 0
) -> Groups:
    """Durations per (device, kernel name) of one run, in file order, dropping *skip* leading samples each.

    A group with no more than *skip* samples is left out.
    """
    groups: Groups = {}
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


def group_run_durations(
    runs: Runs, *, device: int | None = None, name: str | None = None, skip: int = 0
) -> Groups:
    """:func:`group_durations` of each run (so *skip* applies per run), merged in run order."""
    merged: Groups = {}
    for tasks in runs:
        for key, (ktype, durations) in group_durations(tasks, device=device, name=name, skip=skip).items():
            entry = merged.get(key)
            if entry is None:
                merged[key] = (ktype, durations)
            else:
                entry[1].extend(durations)
    return merged


def kernel_stats(
    tasks: Iterable[ProfilingTask], *, device: int | None = None, name: str | None = None, skip: int = 0
) -> list[KernelStats]:
    """Statistics per (device, kernel) of one run, sorted by total time, largest first."""
    return run_kernel_stats([tasks], device=device, name=name, skip=skip)


def run_kernel_stats(
    runs: Runs, *, device: int | None = None, name: str | None = None, skip: int = 0
) -> list[KernelStats]:
    """Statistics per (device, kernel) over several runs, *skip* leading samples dropped per run."""
    out: list[KernelStats] = []
    for (dev, kname), (ktype, durations) in group_run_durations(
        runs, device=device, name=name, skip=skip
    ).items():
        values = sorted(durations)
        total = math.fsum(values)
        out.append(
            KernelStats(
                device=dev,
                name=kname,
                type=ktype,
                count=len(values),
                median_us=round(quantile(values, 0.5), 3),
                p10_us=round(quantile(values, 0.1), 3),
                p90_us=round(quantile(values, 0.9), 3),
                min_us=values[0],
                max_us=values[-1],
                mean_us=round(total / len(values), 3),
                total_us=round(total, 3),
            )
        )
    out.sort(key=lambda s: s.total_us, reverse=True)
    return out


@dataclasses.dataclass(frozen=True, slots=True)
class KernelChange:
    """How one kernel's median moved from BASE to NEW.

    ``change_pct`` is (new - base) / base in percent; ``ci_low_pct`` / ``ci_high_pct`` bound it
    with a percentile bootstrap (95%); ``significant`` when the interval excludes 0.
    """

    device: int | None
    name: str
    base_median_us: float
    new_median_us: float
    change_pct: float
    ci_low_pct: float
    ci_high_pct: float
    significant: bool
    base_count: int
    new_count: int

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return quantile(ordered, 0.5)


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

    Samples larger than *max_samples* are thinned evenly first, which keeps the cost bounded.
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
        return (math.inf, math.inf, math.inf)
    change = (_median(new) - base_median) / base_median * 100.0
    ratios: list[float] = []
    for _ in range(resamples):
        mb = _median(rng.choices(b, k=len(b)))
        mn = _median(rng.choices(n, k=len(n)))
        if mb:
            ratios.append((mn - mb) / mb * 100.0)
    ratios.sort()
    alpha = (1.0 - confidence) / 2.0
    return (change, quantile(ratios, alpha), quantile(ratios, 1.0 - alpha))


def compare_tasks(
    base: Iterable[ProfilingTask], new: Iterable[ProfilingTask], *, skip: int = 0, resamples: int = 1000
) -> list[KernelChange]:
    """Per (device, kernel) present in both runs: median change with a bootstrap interval."""
    return compare_runs([base], [new], skip=skip, resamples=resamples)


def compare_runs(base: Runs, new: Runs, *, skip: int = 0, resamples: int = 1000) -> list[KernelChange]:
    """:func:`compare_tasks` over several runs per side, *skip* leading samples dropped per run."""
    gb = group_run_durations(base, skip=skip)
    gn = group_run_durations(new, skip=skip)
    out: list[KernelChange] = []
    for key in gb:
        if key not in gn:
            continue
        bd, nd = gb[key][1], gn[key][1]
        change, low, high = bootstrap_change(bd, nd, resamples=resamples)
        out.append(
            KernelChange(
                device=key[0],
                name=key[1],
                base_median_us=round(_median(bd), 3),
                new_median_us=round(_median(nd), 3),
                change_pct=round(change, 2),
                ci_low_pct=round(low, 2),
                ci_high_pct=round(high, 2),
                significant=low > 0 or high < 0,
                base_count=len(bd),
                new_count=len(nd),
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
