"""The synchronous facade, ``asc.lib.profiling.Profiler``: the protocol driven by blocking."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

from ._binding import ProfileTypes
from ._collector import remove_run_dir, timeout_error
from ._core import (
    ProfilerBase,
    ProfileRun,
    before_manual_start,
    enter_profile_body,
    exit_profile_body,
    mark_manual_start,
)
from ._enums import AicoreMetrics
from ._errors import UsageError
from ._export import run_export
from ._protocol import Export, Parse, Step, Steps, Wait
from ._reader import RunTasks, gather, iter_file_batches, summary_csvs_or_error
from ._records import ProfilingResult, make_result
from ._runguard import exporting, wait_for_export

T = TypeVar("T")


def perform(step: Step) -> Any:
    """One protocol step, done by blocking this thread."""
    if isinstance(step, Wait):
        if not step.latch.wait(step.timeout) and step.strict:
            raise timeout_error(step.what, step.timeout)
        return None
    if isinstance(step, Export):
        with exporting(step.run_dir):
            return run_export(step.toolkit, step.run_dir, timeout=step.timeout)
    if isinstance(step, Parse):
        return gather(iter_file_batches(step.files, counters=step.counters), counters=step.counters)
    remove_run_dir(step.run_dir, step.root)
    return None


def drive(steps: Steps[T]) -> T:
    """Run a protocol phase to its end, blocking; exceptions of a step are thrown back into it."""
    outcome: Any = None
    failure: BaseException | None = None
    while True:
        try:
            step = steps.send(outcome) if failure is None else steps.throw(failure)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        outcome, failure = None, None
        try:
            outcome = perform(step)
        except BaseException as exc:
            failure = exc


class Profiler(ProfilerBase):
    """Collect, export and parse on-device timings (``asc.lib.profiling.Profiler``).

    :param result_path: where raw ``PROF_*`` data goes; omitted: a process-wide temporary root
        whose runs are deleted after ``profile(cleanup=True)``. A path you give is never deleted.
    :param toolkit: the CANN toolkit (default: discovered, see :func:`discover_toolkit`)
    :param export_timeout: seconds before a hung ``msprof.py export`` is killed
    :param call_timeout: seconds to wait for an aclprof call (init, start, stop, finalize)

    Every aclprof call runs on the process-wide collector thread; several profilers (and async
    ones) in one process share it and never overlap collections.
    """

    def start(
        self,
        device_id: int | None = None,
        metrics: AicoreMetrics | int = AicoreMetrics.PIPE_UTILIZATION,
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

    def stop(self) -> None:
        """Stop collecting; ``aclprofFinalize`` runs when no other collection is waiting.

        :raises AclError: when stop or destroy failed (finalize still ran: no device is left running)
        """
        call, self._manual = self._manual, None
        if call is None:
            raise UsageError("stop() called without start()")
        drive(call.stop())

    def export(self, run_id: str | None = None, *, timeline: bool = False) -> Path:
        """Run ``msprof.py export summary`` (and ``timeline`` if asked) on one run.

        :param run_id: a ``PROF_*`` name in the result path; default: the newest run
        :return: the run directory
        :raises ExportError: on failure, timeout or when no CSV was written (raw data is kept)
        """
        run_dir = self._run_dir(run_id) if run_id is not None else self._last_run_dir()
        with exporting(run_dir):
            run_export(self.toolkit, run_dir, timeout=self.export_timeout)
            if timeline:
                run_export(self.toolkit, run_dir, what="timeline", timeout=self.export_timeout)
        return run_dir

    def store_result(self, run_id: str, *, counters: bool = False) -> ProfilingResult:
        """Parse the exported CSVs of run *run_id* (every device) into ``last_result``.

        :param counters: also read every task's PMU counters into the result's ``counters``
            (:class:`~asc_aprof.TaskCounters`); off by default, which keeps parsing fastest
        :raises UsageError: for a run id outside the result path or a run not exported yet
        :raises ParseError: for a malformed CSV (file and line)
        """
        return self._store(self._run_dir(run_id), counters)

    def store_last_result(self, *, counters: bool = False) -> ProfilingResult:
        """Parse the newest run this profiler created (else the newest in the result path).

        :param counters: as for :meth:`store_result`
        """
        return self._store(self._last_run_dir(), counters)

    def _store(self, run_dir: Path, counters: bool = False) -> ProfilingResult:
        wait_for_export(run_dir)
        gathered = RunTasks(counters)
        for batch in iter_file_batches(summary_csvs_or_error(run_dir), counters=counters):
            gathered.add(batch)
        self.last_result = make_result(gathered.tasks, run_dir.name, gathered.counters())
        return self.last_result

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
        metrics: AicoreMetrics | int = AicoreMetrics.PIPE_UTILIZATION,
        profile_types: ProfileTypes | None = None,
        *,
        counters: bool = False,
    ) -> Iterator[ProfileRun]:
        """start -> body -> stop -> export -> parse into ``last_result`` (and the handle's ``result``).

        Concurrent ``profile()`` calls from other threads for other devices share one collection.
        If the body raises, the collection is stopped (when it was the last body in it) and the
        exception propagates unchanged; nothing is exported.

        :param cleanup: delete the raw run afterwards when it lives in the temporary root
        :param metrics: the AI Core PMU group CANN collects (what the counters will hold)
        :param counters: put every task's PMU counters (the columns of the *metrics* group) in
            the result's ``counters`` (:class:`~asc_aprof.TaskCounters`)
        """
        token = enter_profile_body()
        try:
            call = self._call(device_id, metrics, profile_types, counters=counters)
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
