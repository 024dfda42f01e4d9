"""Per-kernel statistics and run-to-run comparison (pure functions, no numpy)."""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Iterable, Sequence

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


def group_durations(
    tasks: Iterable[ProfilingTask], *, device: int | None = None, name: str | None = None, skip: int = 0
) -> dict[tuple[int | None, str], tuple[str, list[float]]]:
    """Durations per (device, kernel name), in file order, dropping *skip* leading samples each."""
    groups: dict[tuple[int | None, str], tuple[str, list[float]]] = {}
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


def kernel_stats(
    tasks: Iterable[ProfilingTask], *, device: int | None = None, name: str | None = None, skip: int = 0
) -> list[KernelStats]:
    """Statistics per (device, kernel), sorted by total time, largest first."""
    out: list[KernelStats] = []
    for (dev, kname), (ktype, durations) in group_durations(
        tasks, device=device, name=name, skip=skip
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
    """Per (device, kernel) present in both: median change with a bootstrap interval."""
    gb = group_durations(base, skip=skip)
    gn = group_durations(new, skip=skip)
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
