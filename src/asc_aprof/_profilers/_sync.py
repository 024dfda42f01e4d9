"""The synchronous facade, ``asc.lib.profiling.Profiler``: the protocol driven by blocking."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

from .._cann._binding import ProfileTypes
from .._cann._export import run_export
from .._cann._runguard import exporting
from .._model._defaults import (
    CONFIDENCE,
    DO_BENCH_REP_MS,
    DO_BENCH_WARMUP_MS,
    FIRST_REPS,
    MAX_REPS,
    MAX_TIME_S,
    MIN_REPS,
    REL_WIDTH,
    SEED,
    WARMUP_CALLS,
)
from .._model._enums import AicoreMetrics
from .._model._errors import UsageError
from .._model._metric_group import MetricsArg, metric_selection
from .._model._records import ProfilingResult, ProfilingTask
from .._model._warmup import warming_up
from .._plans._bench import (
    BenchConfig,
    BenchResult,
    Measure,
    Plan,
    bench_config,
    check_do_bench,
    do_bench_config,
    do_bench_value,
    with_grads,
)
from .._runs._csv import read_csv_tasks
from .._runs._drive import drive
from .._runs._run import Run
from ._base import (
    ProfilerBase,
    before_manual_start,
    bench_plan,
    enter_profile_body,
    exit_profile_body,
    mark_manual_start,
    window_of,
    without_pmu,
)
from ._protocol import ProfileRun
from ._tune import TuneOptions, TuneResult
from ._tune import tune as tune_sync

T = TypeVar("T")

ConfigT = TypeVar("ConfigT")


class Profiler(ProfilerBase):
    """Collect, export and parse on-device timings (``asc.lib.profiling.Profiler``).

    :param result_path: where raw ``PROF_*`` data goes; omitted: a process-wide temporary root
        whose runs are deleted after ``profile(cleanup=True)``. A path you give is never deleted.
    :param toolkit: the CANN toolkit (default: discovered, see :func:`discover_toolkit`)
    :param export_timeout: seconds before a hung ``msprof.py export`` is killed
    :param call_timeout: seconds to wait for an aclprof call (init, start, stop, finalize)
    :param reader: how a run without exported CSVs is read: ``"auto"`` (default: natively from
        its raw data, else with ``msprof.py``), ``"raw"`` (natively only) or ``"msprof"``

    Every aclprof call runs on the process-wide collector thread; several profilers (and async
    ones) in one process share it and never overlap collections.
    """

    def start(
        self,
        device_id: int | None = None,
        metrics: AicoreMetrics | int | str = AicoreMetrics.PIPE_UTILIZATION,
        profile_types: ProfileTypes | None = None,
    ) -> None:
        """Start collecting on *device_id* (default: pyasc's current device, else 0).

        :param profile_types: default ``TASK_TIME | AICORE_METRICS | L2CACHE``
        :raises AclError: when init, create-config or start fails (nothing is left running)
        """
        if self._manual is not None:
            raise UsageError("start() called twice without stop()")
        before_manual_start()
        call = self._call(device_id, metrics, profile_types)
        drive(call.enter())
        self._manual = call
        mark_manual_start(call)

    def stop(self) -> ProfileRun | None:
        """Stop collecting; ``aclprofFinalize`` runs when no other collection is waiting.

        With nothing started it returns None and does nothing, as upstream's does.

        :return: the run's :class:`ProfileRun` (``run_id``, ``run_dir``, ``device``; ``result`` is
            None: export and parse it with :meth:`export` and :meth:`store_result`). Upstream
            returns None, so code written for it is unaffected.
        :raises AclError: when stop or destroy failed (finalize still ran: no device is left running)
        """
        call, self._manual = self._manual, None
        if call is None:
            return None
        return drive(call.stop())

    def export(self, run_id: str | None = None, *, timeline: bool = True) -> Path:
        """Run ``msprof.py export summary`` and ``export timeline`` on one run, as upstream does.

        :param run_id: a ``PROF_*`` name in the result path; default: the newest run
        :param timeline: False: the summary only (the CSVs; the timeline export takes as long again)
        :return: the run directory
        :raises ExportError: on failure, timeout or when no CSV was written (raw data is kept); it
            is also a :class:`subprocess.CalledProcessError`, as upstream's error is
        """
        run_dir = self._run_dir(run_id) if run_id is not None else self._last_run_dir()
        with exporting(run_dir):
            run_export(self.toolkit, run_dir, timeout=self.export_timeout)
            if timeline:
                run_export(self.toolkit, run_dir, what="timeline", timeout=self.export_timeout)
        return run_dir

    def store_result(self, run_id: str, *, counters: bool = False) -> ProfilingResult:
        """Parse the exported CSVs of run *run_id* (every device) into ``last_result``.

        A run not exported yet is read per ``reader``: natively from its raw data, else (``auto``)
        exported with ``msprof.py`` first. With *counters* the raw reader reads the PMU counters
        too, where it verified them (else ``auto`` exports the run).

        :param counters: also read every task's PMU counters into the result's ``counters``
            (:class:`~asc_aprof.TaskCounters`); off by default, which keeps parsing fastest
        :raises UsageError: for a run id outside the result path, or (``reader="msprof"``) a
            run not exported yet
        :raises RawReadDeclined: ``reader="raw"`` and the raw reader declined the run (or
            *counters* were asked for)
        :raises ParseError: for a malformed CSV (file and line)
        """
        return self._store(self._run_dir(run_id), counters)

    def store_last_result(self, *, counters: bool = False) -> ProfilingResult:
        """Parse the newest run this profiler created (else the newest in the result path).

        :param counters: as for :meth:`store_result`
        """
        return self._store(self._last_run_dir(), counters)

    def _store(self, run_dir: Path, counters: bool = False) -> ProfilingResult:
        result = Run(run_dir, **self._reading()).result(counters=counters)
        self._keep_result(result)
        return result

    @classmethod
    def populate_tasks(
        cls,
        filename: str | os.PathLike[str],
        col_id: str,
        col_name: str,
        col_type: str,
        col_duration: str,
        tasks: list[ProfilingTask],
    ) -> None:
        """Append a task to *tasks* for every row of the CSV *filename* (upstream's helper).

        The four column names say where the id, name, type and duration are (e.g. ``"Task ID"``,
        ``"Op Name"``, ``"Task Type"``, ``"Task Duration(us)"`` in an op_summary). Every row is
        one task, control rows included; ``device`` is None. The file is opened as every run file
        is (regular files only, no link, size bound).

        :raises ParseError: (a ``RuntimeError`` and a ``ValueError``) for a missing column or a
            value that is not a number, naming the file and line
        """
        tasks.extend(read_csv_tasks(Path(os.fspath(filename)), (col_id, col_name, col_type, col_duration)))

    def open_run(self, run: str | os.PathLike[str] | None = None) -> Run:
        """A run of this profiler's result path (a run id; default the newest, as
        :meth:`store_last_result` picks it) as a :class:`~asc_aprof.Run`, read with this
        profiler's ``reader``, toolkit and export timeout."""
        run_dir = self._last_run_dir() if run is None else self._run_dir(run)
        return Run(run_dir, **self._reading())

    def cleanup(self) -> list[Path]:
        """Delete raw runs this profiler created in the temporary root (none in a path you gave).

        :return: the run directories removed
        """
        return self._cleanup()

    @contextlib.contextmanager
    def profile(
        self,
        device_id: int | None = None,
        cleanup: bool = True,
        metrics: AicoreMetrics | int | str = AicoreMetrics.PIPE_UTILIZATION,
        profile_types: ProfileTypes | None = None,
        *,
        counters: bool = False,
    ) -> Iterator[ProfileRun]:
        """start -> body -> stop -> read into ``last_result`` (and the handle's ``result``).

        The run is read natively from its raw data, else exported with ``msprof.py`` and parsed
        (see ``reader``).

        Concurrent ``profile()`` calls from other threads for other devices share one collection.
        If the body raises, the collection is stopped (when it was the last body in it) and the
        exception propagates unchanged; nothing is exported.

        :param cleanup: delete the raw run afterwards when it lives in the temporary root
        :param metrics: the AI Core PMU group CANN collects (what the counters will hold)
        :param counters: put every task's PMU counters (the columns of the *metrics* group) in
            the result's ``counters`` (:class:`~asc_aprof.TaskCounters`)
        """
        with self._collect(device_id, cleanup, metrics, profile_types, counters) as run:
            yield run

    def bench(
        self,
        fn: Callable[[], object],
        device_id: int | None = None,
        *,
        flush: Callable[[], object] | None = None,
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
        cleanup: bool = True,
        metrics: MetricsArg = AicoreMetrics.PIPE_UTILIZATION,
        profile_types: ProfileTypes | None = None,
        drop_throttled: bool = False,
    ) -> BenchResult:
        """Measure ``fn()`` on *device_id*: median, its 95% interval, samples, outliers, kernels.

        A call's time is the sum of the kernels it launched on the device, attributed by
        position: one call alone (and one flush alone) is profiled first, its kernels are the
        call's (the flush's) signature; then every window of repetitions must be exactly that
        many copies of the flush's kernels followed by the call's, else
        :class:`~asc_aprof.AttributionError` (never a partial sum).

        :param fn: the call to measure (launches its kernels on the device and returns)
        :param flush: run before every repetition (e.g. a kernel that overwrites L2); its kernels
            never count
        :param warmup: calls before measuring, outside any collection
        :param warmup_time: also warm up for at least this many seconds (wall clock)
        :param reps: measure exactly this many calls; None: adaptive (below)
        :param rel_width: adaptive: stop when the interval's width is at most this fraction of
            the median
        :param min_reps: adaptive: calls in the first window
        :param max_reps: adaptive: at most this many calls
        :param max_time: adaptive: at most this many seconds of measuring (projected per window)
        :param batch: repetitions per collection window (default: all at once for *reps*,
            planned from the interval when adaptive)
        :param confidence: of the median's interval (distribution-free, order statistics)
        :param kernels: kernels each call launches; given, the calibration windows are skipped
            and each repetition must repeat the first one's kernels
        :param task_types: task types that count (default: AI Core types and ``AI_CPU``; add
            ``"N/A"`` for level-0 runs whose types could not be joined)
        :param cleanup: delete each window's raw run when it lives in the temporary root
        :param drop_throttled: leave the calls that ran below the rated AI Core clock (info.json
            ``aic_frequency``) out of the statistics; default False: they are flagged
            (``BenchResult.clock``: each call's clock, the rated clock, the throttled calls, how
            many were dropped and why)
        :raises AttributionError: when kernels cannot be attributed to calls
        :raises ThrottledError: *drop_throttled* and every call ran below the rated clock
        """
        config = bench_config(
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
            task_types=task_types,
            drop_throttled=drop_throttled,
        )
        return self._bench(fn, device_id, flush, config, cleanup, metrics, profile_types)

    def tune(
        self,
        configs: Iterable[ConfigT],
        run: Callable[[ConfigT, int], object],
        devices: Iterable[int] | None = None,
        *,
        key: Any = None,
        flush: Callable[[int], object] | None = None,
        rel_width: float = REL_WIDTH,
        confidence: float = CONFIDENCE,
        first_reps: int = FIRST_REPS,
        max_reps: int = MAX_REPS,
        warmup: int = WARMUP_CALLS,
        seed: int = SEED,
        racing: bool = True,
        cache: bool = True,
        retune: bool = False,
        cache_dir: str | os.PathLike[str] | None = None,
        chip: str | None = None,
        cann: str | None = None,
    ) -> TuneResult[ConfigT]:
        """The fastest of *configs*: ``run(config, device)`` raced on *devices* (default ``[0]``).

        Every candidate is measured a little (``first_reps`` calls), then candidates whose
        median interval lies entirely above the leader's are dropped and the others measured
        again, doubling their samples each round, until every remaining interval is at most
        *rel_width* of its median (or *max_reps* calls); rounds run the candidates in an order
        shuffled by *seed*. *flush(device)* runs before every repetition and never counts.
        A failing candidate is reported (status ``failed``), never raised; only when all fail
        :class:`~asc_aprof.TuneError` is raised. With a *key* (e.g. the kernel's name and
        shapes) the result is cached on disk per key, candidates, chip, CANN version and
        asc-aprof version, and a later process gets it back without measuring (``retune=True``
        measures again). *chip* / *cann* override what the toolkit reports. *racing=False*
        measures every candidate to the same width (the brute-force baseline). Several devices
        measure different candidates of a round at once (one thread per device). See
        :mod:`asc_aprof._profilers._tune` for the rule and the cache.
        """
        options = TuneOptions(rel_width, confidence, first_reps, max_reps, warmup, seed, racing)
        return tune_sync(
            self,
            configs,
            run,
            devices,
            key=key,
            flush=flush,
            options=options,
            cache=cache,
            retune=retune,
            cache_dir=cache_dir,
            chip=chip,
            cann=cann,
        )

    def do_bench(
        self,
        fn: Callable[[], object],
        warmup: float = DO_BENCH_WARMUP_MS,
        rep: float = DO_BENCH_REP_MS,
        grad_to_none: Sequence[Any] | None = None,
        quantiles: Sequence[float] | None = None,
        return_mode: str = "mean",
        *,
        device_id: int | None = None,
        flush: Callable[[], object] | None = None,
        drop_throttled: bool = False,
    ) -> float | list[float]:
        """triton's ``do_bench`` on device time: milliseconds, as triton returns them.

        *warmup*: milliseconds of warm-up (wall clock); *rep*: milliseconds of device time to
        measure (repetitions = rep / one call's time, measured alone first); *grad_to_none*:
        objects whose ``.grad`` is set to None before every repetition; *quantiles*: return
        these quantiles (one float for one) instead; *return_mode*: ``"min"``, ``"max"``,
        ``"mean"``, ``"median"`` or ``"all"`` (every sample). Calls are attributed to kernels as
        :meth:`bench` does; *drop_throttled*: as :meth:`bench`'s (the samples below the rated
        AI Core clock are left out).
        """
        check_do_bench(return_mode, quantiles)
        config = do_bench_config(warmup, rep, drop_throttled)
        result = self._bench(fn, device_id, with_grads(flush, grad_to_none), config, True, None, None)
        return do_bench_value(result, quantiles, return_mode)

    def _bench(
        self,
        fn: Callable[[], object],
        device_id: int | None,
        flush: Callable[[], object] | None,
        config: BenchConfig,
        cleanup: bool,
        metrics: MetricsArg | None,
        profile_types: ProfileTypes | None,
    ) -> BenchResult:
        device = self._device(device_id)
        selection = None if metrics is None else metric_selection(metrics)
        metric: AicoreMetrics | int | str = AicoreMetrics.PIPE_UTILIZATION
        if selection is None and metrics is not None:
            metric = cast(AicoreMetrics | int | str, metrics)
        steps: Plan = bench_plan(config, device=device, flush=flush is not None, selection=selection)

        def repeat(n: int, with_flush: bool, with_call: bool = True) -> None:
            for _ in range(n):
                if with_flush and flush is not None:
                    flush()
                if with_call:
                    fn()

        def perform(step: Measure | Any) -> Any:
            began = time.monotonic()
            if isinstance(step, Measure):
                group = metric if step.metrics is None else step.metrics
                types = profile_types if step.pmu else without_pmu(profile_types)
                want = selection is not None
                with self._collect(
                    device, cleanup, group, types, counters=step.counters, keep=False, info=want
                ) as run:
                    repeat(step.reps, step.flush, step.call)
                return window_of(run, time.monotonic() - began)
            calls = 0
            seconds = step.seconds
            with warming_up():
                while calls < step.calls or (seconds is not None and time.monotonic() - began < seconds):
                    repeat(1, True)
                    calls += 1
            return (calls, time.monotonic() - began)

        return drive(steps, perform)

    @contextlib.contextmanager
    def _collect(
        self,
        device_id: int | None,
        cleanup: bool,
        metrics: AicoreMetrics | int | str,
        profile_types: ProfileTypes | None,
        counters: bool = False,
        keep: bool = True,
        info: bool = False,
    ) -> Iterator[ProfileRun]:
        token = enter_profile_body()
        try:
            call = self._call(device_id, metrics, profile_types, counters=counters, keep=keep, info=info)
            drive(call.enter())
            try:
                yield call.run
            except BaseException:
                drive(call.abort())
                raise
        finally:
            exit_profile_body(token)
        call.leave()
        drive(call.finish(cleanup))
