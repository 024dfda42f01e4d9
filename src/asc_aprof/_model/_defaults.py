"""Every default of bench(), do_bench() and tune(), written once.

The sync and async faces (``Profiler`` / ``AsyncProfiler`` / the module functions), the option
records (:class:`~asc_aprof.BenchConfig`, :class:`~asc_aprof._profilers._tune.TuneOptions`) and the race
all take their defaults from here, so a default cannot drift between them.
"""

from __future__ import annotations

from typing import Final

#: calls before measuring, outside any collection
WARMUP_CALLS: Final = 2
#: adaptive bench / tune: stop when the median's interval is at most this fraction of the median
REL_WIDTH: Final = 0.02
#: adaptive bench: calls in the first window
MIN_REPS: Final = 10
#: at most this many calls per candidate (bench: in all)
MAX_REPS: Final = 1000
#: adaptive bench: at most this many seconds of measuring
MAX_TIME_S: Final = 10.0
#: of the median's distribution-free interval
CONFIDENCE: Final = 0.95
#: tune: calls per candidate in the first round
FIRST_REPS: Final = 10
#: tune: the seed of the order candidates run in each round
SEED: Final = 0
#: do_bench (triton's units): milliseconds of warm-up, milliseconds of device time measured
DO_BENCH_WARMUP_MS: Final = 25
DO_BENCH_REP_MS: Final = 100
