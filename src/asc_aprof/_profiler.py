"""The synchronous facade, ``asc.lib.profiling.Profiler``, as a thin shell over the shared core."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

from ._binding import ProfileTypes
from ._collector import Participant, Window, get_collector, remove_run_dir, wait_event
from ._core import (
    ProfilerBase,
    ProfileRun,
    enter_profile_body,
    exit_profile_body,
    make_result,
)
from ._enums import AicoreMetrics
from ._errors import AprofError, UsageError
from ._export import run_export
from ._reader import iter_file_tasks, split_by_device, summary_csvs_or_error
from ._records import ProfilingResult


def wait_started(participant: Participant, timeout: float | None) -> None:
    """Block until the participant's window started; leave it on any failure or interrupt."""
    window = participant.window
    try:
        wait_event(window.started, timeout, "aclprofInit/aclprofStart")
        window.check_started()
    except BaseException:
        if get_collector().leave(participant):
            window.stopped.wait(timeout)
        raise


def wait_stopped(window: Window, timeout: float | None) -> None:
    wait_event(window.stopped, timeout, "aclprofStop/aclprofFinalize")
    if window.stop_error is not None:
        raise window.stop_error


def window_result_sync(profiler: ProfilerBase, window: Window, device: int) -> ProfilingResult:
    """Export and parse the window once (whoever comes first), then take this device's tasks."""
    run_dir = profiler._stopped_run_dir(window)
    while True:
        claim, event = window.claim_result()
        if claim is None:
            break
        if claim is False:
            event.wait()
            continue
        try:
            profiler._emit("export_started", window)
            began = time.monotonic()
            files = run_export(window.key.toolkit, run_dir, timeout=profiler.export_timeout)
            profiler._emit("export_finished", window, time.monotonic() - began)
            began = time.monotonic()
            result = {dev: tuple(tasks) for dev, tasks in split_by_device(iter_file_tasks(files)).items()}
            rows = sum(len(v) for v in result.values())
            profiler._emit("parse_finished", window, time.monotonic() - began, rows)
        except AprofError as exc:
            window.publish_result(None, exc)
        except BaseException:
            window.publish_result(None, None)  # another caller may take over
            raise
        else:
            window.publish_result(result, None)
        break
    return make_result(window.take(device), run_dir.name)


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
        participant = self._join(device_id, metrics, profile_types)
        wait_started(participant, self.call_timeout)
        self._manual = participant
        self._record_started(participant)

    def stop(self) -> None:
        """Stop collecting; ``aclprofFinalize`` runs when no other collection is waiting.

        :raises AclError: when stop or destroy failed (finalize still ran: no device is left running)
        """
        participant, self._manual = self._manual, None
        if participant is None:
            raise UsageError("stop() called without start()")
        get_collector().leave(participant)
        wait_stopped(participant.window, self.call_timeout)
        self._stopped_run_dir(participant.window)

    def export(self, run_id: str | None = None, *, timeline: bool = False) -> Path:
        """Run ``msprof.py export summary`` (and ``timeline`` if asked) on one run.

        :param run_id: a ``PROF_*`` name in the result path; default: the newest run
        :return: the run directory
        :raises ExportError: on failure, timeout or when no CSV was written (raw data is kept)
        """
        run_dir = self._run_dir(run_id) if run_id is not None else self._last_run_dir()
        run_export(self.toolkit, run_dir, timeout=self.export_timeout)
        if timeline:
            run_export(self.toolkit, run_dir, what="timeline", timeout=self.export_timeout)
        return run_dir

    def store_result(self, run_id: str) -> ProfilingResult:
        """Parse the exported CSVs of run *run_id* (every device) into ``last_result``.

        :raises UsageError: for a run id outside the result path or a run not exported yet
        :raises ParseError: for a malformed CSV (file and line)
        """
        return self._store(self._run_dir(run_id))

    def store_last_result(self) -> ProfilingResult:
        """Parse the newest run this profiler created (else the newest in the result path)."""
        return self._store(self._last_run_dir())

    def _store(self, run_dir: Path) -> ProfilingResult:
        tasks = [t for batch in iter_file_tasks(summary_csvs_or_error(run_dir)) for t in batch]
        self.last_result = make_result(tasks, run_dir.name)
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
    ) -> Iterator[ProfileRun]:
        """start -> body -> stop -> export -> parse into ``last_result`` (and the handle's ``result``).

        Concurrent ``profile()`` calls from other threads for other devices share one collection.
        If the body raises, the collection is stopped (when it was the last body in it) and the
        exception propagates unchanged; nothing is exported.

        :param cleanup: delete the raw run afterwards when it lives in the temporary root
        """
        token = enter_profile_body()
        try:
            participant = self._join(device_id, metrics, profile_types)
            run = ProfileRun(participant.device)
            wait_started(participant, self.call_timeout)
            self._record_started(participant, run)
            window = participant.window
            try:
                yield run
            except BaseException:
                if get_collector().leave(participant):
                    window.stopped.wait(self.call_timeout)
                raise
        finally:
            exit_profile_body(token)
        get_collector().leave(participant, consume=True)
        done = False
        try:
            try:
                wait_stopped(window, self.call_timeout)
            except KeyboardInterrupt:
                # Ctrl+C while stopping: the stop is already under way; let it finish first.
                window.stopped.wait(self.call_timeout)
                raise
            self._emit("collection_stopped", window)
            result = window_result_sync(self, window, participant.device)
            done = True
        finally:
            doomed = window.consumed(cleanup and done and window.result_error is None)
            if doomed is not None:
                remove_run_dir(doomed, window.key.result_path)
        run.run_dir, run.run_id = window.run_dir, result.run_id
        run.result = result
        self.last_result = result
