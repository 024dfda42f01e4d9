"""The level-0 type join's tolerant step, shared by the CSV reader and the raw reader.

At task time level 0, op_summary's ``Task Type`` is ``N/A`` and the run's task_time CSV has the
type (DECISIONS 21). Both readers join a row to task_time on (device, stream id, task id, start
time) first. When that exact match fails, the row takes the task_time row of the same device,
stream id and task id whose start is nearest its own, within :data:`NEAREST_START_BOUND_NS`,
that no other row took (exact or nearest); its name is never looked at.

Why: CANN's pure-Python exporter (``msprof.py`` without ``msprof_analysis.so``) prints a MIX
kernel's op_summary start as the whole task's and its task_time start as context 0's. On the real
PyPTO runs ``910b_l0_{add,mul,relu}_pypto_b16`` (910B, CANN 9.0) op_summary starts 0.84 to 1.78 µs
(median 1.18 µs) before task_time for every ``KERNEL_MIX_AIC`` task; the collecting hosts' own
(C++) export prints equal starts there.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Sequence
from typing import Final

#: The widest start difference the tolerant step accepts, in ns (inclusive). About 3x the largest
#: offset measured (1.78 µs, 910b_l0_relu_pypto_b16), and far below the time before a (device,
#: stream, task id) recurs: task ids are 16-bit, so 65,536 tasks of the stream lie in between (no
#: real run repeats one; at the shortest gap between two tasks of a stream seen, 2.4 µs, 157 ms).
NEAREST_START_BOUND_NS: Final = 5_000


@dataclasses.dataclass(frozen=True, slots=True)
class Level0Join:
    """How a read gave op_summary's ``N/A`` task types (task time level 0) their type from task_time.

    On a result (``ProfilingResult.level0_join``) and on columns (``TaskColumns.level0_join``);
    None there when the read joined nothing (op_summary had the types, or there was no task_time
    CSV to join). Rows are op_summary rows, every device of the run counted.

    :ivar exact: rows typed by the task_time row of the same device, stream id, task id and start
    :ivar nearest: rows typed by the tolerant step: no exact match, so the task_time row of the
        same device, stream id and task id with the nearest start within :attr:`bound_ns`, each
        task_time row taken once (CANN's pure-Python export of multi-stream MIX kernels, e.g.
        PyPTO, needs it: its op_summary and task_time starts differ by about 1 µs there)
    :ivar unmatched: rows left ``N/A`` (``task_time_median`` counts them only when their kernel
        is named)
    :ivar bound_ns: the tolerant step's bound (:data:`NEAREST_START_BOUND_NS`)
    """

    exact: int
    nearest: int
    unmatched: int
    bound_ns: int = NEAREST_START_BOUND_NS

    @property
    def tolerant(self) -> bool:
        """Whether the tolerant step typed any row."""
        return self.nearest > 0

    def __str__(self) -> str:
        bound = f"{self.bound_ns / 1000:g} µs"
        return (
            f"level-0 types from task_time: {self.exact} rows by exact start, {self.nearest} by the "
            f"nearest start within {bound}, {self.unmatched} left N/A"
        )


def nearest_start(starts: Sequence[int], start: int, free: Callable[[int], bool] | None = None) -> int | None:
    """The value of the sorted *starts* nearest *start* within the bound for which *free* holds
    (every value without *free*; the earlier one on a tie), or None."""
    low, high = start - NEAREST_START_BOUND_NS, start + NEAREST_START_BOUND_NS
    best: int | None = None
    for at in range(bisect.bisect_left(starts, low), bisect.bisect_right(starts, high)):
        value = starts[at]
        # ascending, so a tie keeps the earlier value
        if (free is None or free(value)) and (best is None or abs(value - start) < abs(best - start)):
            best = value
    return best
