"""Module-level ``bench()``, ``do_bench()`` and ``tune()``: one :class:`~asc_aprof.Profiler` per call.

For scripts and notebooks; code that measures many callables should keep one profiler (its
options, result path and progress callback) and call its methods.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from .._model._defaults import DO_BENCH_REP_MS, DO_BENCH_WARMUP_MS
from .._model._toolkit import Toolkit
from .._plans._bench import BenchResult
from ._sync import Profiler
from ._tune import TuneResult

ConfigT = TypeVar("ConfigT")


def bench(
    fn: Callable[[], object],
    device_id: int | None = None,
    *,
    toolkit: Toolkit | None = None,
    result_path: str | os.PathLike[str] | None = None,
    **options: Any,
) -> BenchResult:
    """``Profiler(result_path, toolkit=toolkit).bench(fn, device_id, **options)``.

    The options are :meth:`Profiler.bench`'s (``flush``, ``warmup``, ``reps``, ``rel_width``...).
    Without *toolkit*, CANN is discovered (``ASC_APROF_SIMULATE=1`` selects the simulator).
    """
    return Profiler(result_path, toolkit=toolkit).bench(fn, device_id, **options)


def do_bench(
    fn: Callable[[], object],
    warmup: float = DO_BENCH_WARMUP_MS,
    rep: float = DO_BENCH_REP_MS,
    grad_to_none: Sequence[Any] | None = None,
    quantiles: Sequence[float] | None = None,
    return_mode: str = "mean",
    *,
    device_id: int | None = None,
    flush: Callable[[], object] | None = None,
    toolkit: Toolkit | None = None,
    drop_throttled: bool = False,
) -> float | list[float]:
    """triton's ``do_bench`` measured on device time, in milliseconds (see :meth:`Profiler.do_bench`).

    ``triton.testing.do_bench(fn, warmup=25, rep=100, quantiles=[0.5, 0.2, 0.8])`` becomes
    ``asc_aprof.do_bench(fn, warmup=25, rep=100, quantiles=[0.5, 0.2, 0.8])``.
    """
    return Profiler(toolkit=toolkit).do_bench(
        fn,
        warmup,
        rep,
        grad_to_none,
        quantiles,
        return_mode,
        device_id=device_id,
        flush=flush,
        drop_throttled=drop_throttled,
    )


def tune(
    configs: Iterable[ConfigT],
    run: Callable[[ConfigT, int], object],
    devices: Iterable[int] | None = None,
    *,
    toolkit: Toolkit | None = None,
    result_path: str | os.PathLike[str] | None = None,
    **options: Any,
) -> TuneResult[ConfigT]:
    """``Profiler(result_path, toolkit=toolkit).tune(configs, run, devices, **options)``.

    The options are :meth:`Profiler.tune`'s (``key``, ``flush``, ``rel_width``, ``seed``,
    ``retune``...). Without *toolkit*, CANN is discovered (``ASC_APROF_SIMULATE=1``: the simulator).
    """
    return Profiler(result_path, toolkit=toolkit).tune(configs, run, devices, **options)
