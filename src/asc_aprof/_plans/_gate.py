"""The regression gate of the history store: is a kernel's newest record slower than its recent past,
beyond noise? (IO-free: records in, a decision out.)

Each record of a kernel holds the median of its durations and the median's distribution-free
confidence interval (:func:`~asc_aprof._plans._stats.median_interval`, 95%). The *baseline* is the
up to *window* records before the newest. The newest is a regression when both hold:

* its interval lies wholly above every baseline interval (its low end above the highest high end):
  a change the samples themselves cannot explain, whatever record of the window one compares with;
* its median exceeds the baseline median (the median of the window's medians) by more than
  *min_change* (default 5%): a practical threshold, so a long series with very tight intervals does
  not flag a change nobody would act on.

With the AI Core clock known for the newest record and every baseline record, the same test is
made in cycles (duration times clock, as the clock's MHz): a change that is a regression in time
but not in cycles is put down to the clock (``AMBIGUOUS_CLOCK``), never to the kernel, and does
not fail the gate. With no baseline record the outcome is ``NO_BASELINE`` (passes).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import statistics
from collections.abc import Sequence
from typing import Final

#: Baseline records looked at, by default (the most recent before the newest).
DEFAULT_WINDOW: Final = 5
#: The smallest relative slow-down of the median reported as a regression, by default.
DEFAULT_MIN_CHANGE: Final = 0.05


class GateVerdict(enum.Enum):
    """What the gate decided about one kernel."""

    PASS = "pass"
    REGRESSION = "regression"
    #: slower in time, not in cycles: the AI Core clock changed between the records
    AMBIGUOUS_CLOCK = "ambiguous: the clock changed"
    #: the kernel has a single record: nothing to compare with
    NO_BASELINE = "no baseline"

    @property
    def fails(self) -> bool:
        return self is GateVerdict.REGRESSION


@dataclasses.dataclass(frozen=True, slots=True)
class GatePoint:
    """One record of one kernel, as the gate sees it (times in µs, clock in MHz or None)."""

    record_id: int
    median_us: float
    ci_low_us: float
    ci_high_us: float
    aic_mhz: float | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class GateOutcome:
    """The gate's decision for one kernel.

    :ivar kernel: ``chip / task type / name``, as the store keys it
    :ivar newest: the record judged
    :ivar baseline: the records it was compared with (oldest first)
    :ivar baseline_median_us: the median of the baseline medians (NaN without a baseline)
    :ivar change: newest median / baseline median - 1 (NaN without a baseline)
    :ivar cycles_change: the same in cycles, where every clock is known, else None
    """

    kernel: str
    verdict: GateVerdict
    newest: GatePoint
    baseline: tuple[GatePoint, ...]
    baseline_median_us: float
    change: float
    cycles_change: float | None

    def message(self) -> str:
        """One line: the kernel, the verdict and the figures it rests on."""
        new = self.newest
        if self.verdict is GateVerdict.NO_BASELINE:
            return f"{self.kernel}: no baseline yet (1 record, median {new.median_us:.3f} us)"
        high = max(p.ci_high_us for p in self.baseline)
        text = (
            f"{self.kernel}: {self.verdict.value}: median {new.median_us:.3f} us "
            f"[{new.ci_low_us:.3f}, {new.ci_high_us:.3f}] against {self.baseline_median_us:.3f} us "
            f"over the last {len(self.baseline)} record(s) (highest interval end {high:.3f} us), "
            f"{self.change:+.1%}"
        )
        if self.cycles_change is not None:
            text += f"; in cycles {self.cycles_change:+.1%}"
        return text


def _slower(
    new_low: float, new_median: float, lows_highs: Sequence[tuple[float, float]], min_change: float
) -> tuple[bool, float, float]:
    """(beyond noise?, baseline median, relative change) on one scale."""
    medians = [m for m, _ in lows_highs]
    base = statistics.median(medians)
    highest = max(h for _, h in lows_highs)
    change = new_median / base - 1.0 if base > 0 else math.inf
    return (new_low > highest and change > min_change), base, change


def judge(
    kernel: str,
    points: Sequence[GatePoint],
    *,
    window: int = DEFAULT_WINDOW,
    min_change: float = DEFAULT_MIN_CHANGE,
) -> GateOutcome:
    """The gate's decision on *points*, one kernel's records oldest first (the last is judged)."""
    if not points:
        raise ValueError("judge() needs at least one record")
    if window < 1:
        raise ValueError(f"window must be at least 1, got {window}")
    newest = points[-1]
    baseline = tuple(points[-1 - window : -1])
    if not baseline:
        return GateOutcome(kernel, GateVerdict.NO_BASELINE, newest, (), math.nan, math.nan, None)
    slower, base, change = _slower(
        newest.ci_low_us,
        newest.median_us,
        [(p.median_us, p.ci_high_us) for p in baseline],
        min_change,
    )
    clocks = [p.aic_mhz for p in (*baseline, newest)]
    cycles_change: float | None = None
    verdict = GateVerdict.REGRESSION if slower else GateVerdict.PASS
    if all(c is not None and c > 0 for c in clocks):
        mhz = newest.aic_mhz or 0.0
        in_cycles, _, cycles_change = _slower(
            newest.ci_low_us * mhz,
            newest.median_us * mhz,
            [(p.median_us * (p.aic_mhz or 0.0), p.ci_high_us * (p.aic_mhz or 0.0)) for p in baseline],
            min_change,
        )
        if slower and not in_cycles:
            verdict = GateVerdict.AMBIGUOUS_CLOCK
    return GateOutcome(kernel, verdict, newest, baseline, base, change, cycles_change)
