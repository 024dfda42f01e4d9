"""What the sync and async profilers share: configuration, window keys, results, run bookkeeping.

The twins are *thin drivers over one protocol*: the collector (one thread, all aclprof calls),
the per-call protocol (:mod:`asc_aprof._profilers._protocol`: every rule of joining, leaving, stopping,
sharing the export and deleting runs), the export command, the sans-IO parser and the run layout
are written once. :class:`~asc_aprof.Profiler` performs the protocol's steps by blocking;
:class:`AsyncProfiler` by awaiting (collector latches woken through the event loop, the export
through ``anyio.open_process``, parsing from chunked ``anyio`` file reads). Only the waiting
differs, so there is no generated code and no hidden event loop behind the sync API.
"""

from __future__ import annotations

import contextvars
import os
import sys
from pathlib import Path
from typing import Any

from .._cann._binding import MsprofInterface, ProfilerConfig, ProfileTypes, combine_profile_types
from .._cann._collector import (
    DEFAULT_CALL_TIMEOUT,
    REMOVED_BY_CLEANUP_CALL,
    Participant,
    Window,
    WindowKey,
    check_path_text,
    check_result_dir,
    get_collector,
    removal_reason,
    remove_run_dir,
    removed_runs_in,
)
from .._cann._discovery import discover_toolkit
from .._cann._export import DEFAULT_EXPORT_TIMEOUT, check_result_path
from .._cann._layout import list_runs, no_runs_message, resolve_run
from .._cann._paths import default_result_root
from .._model._enums import DEFAULT_PROFILE_TYPES, AicoreMetrics, ProfileType
from .._model._errors import UsageError
from .._model._metric_group import MetricSelection, metric_group
from .._model._progress import EventKind, ProgressCallback, ProgressEvent, emit
from .._model._records import ProfilingResult
from .._model._toolkit import Toolkit
from .._plans._bench import BenchConfig, Plan, multi_plan, plan
from .._plans._bench import Window as BenchWindow
from .._plans._raw import Reader
from ._protocol import Call, ProfileRun

#: Set while a profile() body runs in this task or thread (nesting cannot work on CANN).
_inside_profile: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "asc_aprof_inside_profile", default=False
)
#: The manual start() of this task or thread whose stop() has not come yet.
_manual_start: contextvars.ContextVar[Call | None] = contextvars.ContextVar(
    "asc_aprof_manual_start", default=None
)

_KEEPING_RUNS = (
    "Runs in the library's temporary root last at most until the process exits (the root is removed "
    "then): to read a run again, pass cleanup=False; to keep it, give the profiler a result_path "
    "(runs in a path you give are never deleted)"
)

_NESTING = (
    "CANN cannot overlap collections, so the new one would wait for the running one forever. "
    "Profile several devices from separate tasks or threads instead (they share one collection window)"
)


def _check_not_collecting(what: str) -> None:
    if _inside_profile.get():
        raise UsageError(f"{what} nested inside a profile() block of the same task or thread: {_NESTING}")
    pending = _manual_start.get()
    if pending is not None and pending.profiler._manual is pending:
        raise UsageError(
            f"{what} while this task or thread's start() is still collecting (call stop() first): {_NESTING}"
        )


def enter_profile_body() -> contextvars.Token[bool]:
    _check_not_collecting("profile()")
    return _inside_profile.set(True)


def exit_profile_body(token: contextvars.Token[bool]) -> None:
    _inside_profile.reset(token)


def before_manual_start() -> None:
    _check_not_collecting("start()")


def mark_manual_start(call: Call) -> None:
    """Remember this context's pending start() (cleared when its profiler's stop() runs)."""
    _manual_start.set(call)


def current_pyasc_device() -> int:
    """pyasc's current device when ``asc.lib.runtime`` is already imported and has one, else 0.

    Never imports or initialises pyasc: importing asc_aprof must have no side effect on it.
    """
    runtime = sys.modules.get("asc.lib.runtime")
    if runtime is None:
        return 0
    for name in ("get_current_device", "current_device", "get_device"):
        getter = getattr(runtime, name, None)
        if callable(getter):
            try:
                value = getter()
            except Exception:
                return 0
            if isinstance(value, int) and value >= 0:
                return value
    return 0


class ProfilerBase:
    """State and decisions common to :class:`Profiler` and :class:`AsyncProfiler`."""

    def __init__(
        self,
        result_path: str | os.PathLike[str] | None = None,
        *,
        toolkit: Toolkit | None = None,
        export_timeout: float | None = DEFAULT_EXPORT_TIMEOUT,
        call_timeout: float | None = DEFAULT_CALL_TIMEOUT,
        progress: ProgressCallback | None = None,
        reader: Reader | str = Reader.AUTO,
    ) -> None:
        if result_path is None:
            self._result_path: Path | None = None
        else:
            path = Path(os.path.abspath(os.fspath(result_path)))
            check_path_text(path)
            check_result_path(path)
            check_result_dir(path)
            self._result_path = path
        self._toolkit = toolkit
        self.export_timeout = export_timeout
        self.call_timeout = call_timeout
        self.progress = progress
        #: how runs without exported CSVs are read: ``auto`` (raw, else msprof.py), ``raw``, ``msprof``
        self.reader = Reader.of(reader)
        #: run id -> result of every completed profile() / store_result() of this profiler, in the
        #: order they completed (upstream's ``results``). Only item stores and pops (atomic under
        #: the GIL), by the thread or task that completed the call; no lock.
        self.results: dict[str, ProfilingResult] = {}
        # Every window this profiler joined, recorded at join time: a caller that gives up before
        # the start returns still owns the run the collector then makes (cleanup() must find it).
        self._windows: list[Window] = []
        self._manual: Call | None = None  # the call of a manual start(), until stop()
        self._msprof: MsprofInterface | None = None  # made on first use of .msprof

    # -- results -----------------------------------------------------------------------------------
    @property
    def last_result(self) -> ProfilingResult:
        """The result of the last completed ``profile()`` / ``store_result()`` of this profiler.

        :raises UsageError: (a ``RuntimeError``, as upstream raises) when none was stored yet
        """
        for run_id in reversed(self.results):
            return self.results[run_id]
        raise UsageError(
            "no result stored yet: last_result is set when a profile() block completes or "
            "store_result() / store_last_result() runs (a block that raised stores none)"
        )

    def _keep_result(self, result: ProfilingResult) -> None:
        # A run stored again moves to the end, so last_result is the last one stored.
        self.results.pop(result.run_id, None)
        self.results[result.run_id] = result

    @property
    def auto_remove(self) -> bool:
        """Upstream's name for :attr:`owns_result_path`: True when no result path was given."""
        return self.owns_result_path

    @property
    def started(self) -> bool:
        """True between this profiler's ``start()`` and ``stop()``."""
        return self._manual is not None

    @property
    def config(self) -> ProfilerConfig | None:
        """The ``aclprofConfig`` handle of the collection this profiler's ``start()`` began, else None.

        For reading only: the collector thread owns it (stop it with :meth:`stop`, never through
        :attr:`msprof`).
        """
        call = self._manual
        return None if call is None else call.window.config

    @property
    def msprof(self) -> MsprofInterface:
        """A :class:`~asc_aprof.MsprofInterface` on this profiler's toolkit (upstream's attribute).

        Its calls bypass the collector: use it only while no profiler in the process collects.
        """
        if self._msprof is None:
            self._msprof = MsprofInterface(self.toolkit)
        return self._msprof

    # -- configuration -----------------------------------------------------------------------------
    @property
    def result_path(self) -> Path:
        """Where raw ``PROF_*`` runs go (the shared temporary root when none was given)."""
        return self._result_path if self._result_path is not None else default_result_root()

    @property
    def owns_result_path(self) -> bool:
        """True when runs go to the library's temporary root (and may be deleted by it)."""
        return self._result_path is None

    @property
    def toolkit(self) -> Toolkit:
        if self._toolkit is None:
            self._toolkit = discover_toolkit()
        return self._toolkit

    def _key(self, metrics: AicoreMetrics | int | str, profile_types: ProfileTypes | None) -> WindowKey:
        types = DEFAULT_PROFILE_TYPES if profile_types is None else combine_profile_types(profile_types)
        return WindowKey(self.toolkit, self.result_path, metric_group(metrics), types)

    @staticmethod
    def _device(device_id: int | None) -> int:
        device = current_pyasc_device() if device_id is None else int(device_id)
        if device < 0:
            raise UsageError(f"device id must be >= 0, got {device}")
        return device

    def _join(
        self, device_id: int | None, metrics: AicoreMetrics | int | str, profile_types: ProfileTypes | None
    ) -> Participant:
        key = self._key(metrics, profile_types)
        participant = get_collector().join(key, self._device(device_id), library_owned=self.owns_result_path)
        self._remember(participant.window)
        return participant

    def _call(
        self,
        device_id: int | None,
        metrics: AicoreMetrics | int | str,
        profile_types: ProfileTypes | None,
        *,
        counters: bool = False,
        keep: bool = True,
        info: bool = False,
    ) -> Call:
        """Join the next window for this call; the protocol's phases drive the rest.

        :param keep: put the result into ``results`` (False for bench and tune windows, which
            would otherwise pile up there)
        """
        participant = self._join(device_id, metrics, profile_types)
        return Call(
            self, participant, ProfileRun(participant.device), counters=counters, keep=keep, info=info
        )

    def _call_of(self, participant: Participant, *, counters: bool = False) -> Call:
        return Call(self, participant, ProfileRun(participant.device), counters=counters)

    def _remember(self, window: Window) -> None:
        if any(w is window for w in self._windows):
            return
        self._windows.append(window)
        if len(self._windows) > 64:
            self._prune_windows()

    def _prune_windows(self) -> None:
        """Forget finished windows that neither cleanup() nor store_last_result() can need."""
        stopped = [w for w in self._windows if w.is_stopped() and w.run_dir is not None]
        newest = max(stopped, key=lambda w: w.start_seq) if stopped else None
        self._windows = [
            w
            for w in self._windows
            if w is newest
            or not w.is_stopped()
            or (self.owns_result_path and w.run_dir is not None and w.run_dir.exists())
        ]

    def _reading(self) -> dict[str, Any]:
        """How this profiler reads a run: its ``reader``, toolkit (looked for only when an
        export is needed) and export timeout, as :class:`~asc_aprof.Run` takes them."""
        return {
            "reader": self.reader,
            "toolkit": lambda: self.toolkit,
            "export_timeout": self.export_timeout,
        }

    def _emit(self, kind: EventKind, window: Window, seconds: float = 0.0, rows: int = 0) -> None:
        if self.progress is not None:
            run_id = window.run_dir.name if window.run_dir is not None else None
            emit(self.progress, ProgressEvent(kind, run_id, tuple(window.devices), seconds, rows))

    def _stopped_run_dir(self, window: Window) -> Path:
        if window.run_dir is None and window.run_error is not None:
            raise window.run_error
        if window.run_dir is None:
            raise UsageError(
                f"the collection made no PROF_* directory under {window.key.result_path} "
                "(no device was started)"
            )
        return window.run_dir

    # -- runs ----------------------------------------------------------------------------------------
    def _run_dir(self, run_id: str | os.PathLike[str]) -> Path:
        try:
            return resolve_run(self.result_path, run_id)
        except UsageError:
            name = os.fspath(run_id)
            why = removal_reason(self.result_path / name) if name and Path(name).name == name else None
            if why is None:
                raise
            raise UsageError(
                f"run {name!r} is gone from {self.result_path}: it was deleted by {why}. {_KEEPING_RUNS}"
            ) from None

    def _last_run_dir(self) -> Path:
        # This profiler's own runs in the order the collector started them (names and clocks can
        # step back; the start order cannot).
        mine = [w for w in self._windows if w.run_dir is not None and w.run_dir.is_dir()]
        if mine:
            newest = max(mine, key=lambda w: w.start_seq).run_dir
            assert newest is not None
            return newest
        runs = list_runs(self.result_path)
        if not runs:
            removed = removed_runs_in(self.result_path)
            if removed:
                path, why = removed[-1]
                raise UsageError(
                    f"no PROF_* run in {self.result_path}: the last one, {path.name}, was deleted by "
                    f"{why}. {_KEEPING_RUNS}"
                )
            raise UsageError(no_runs_message(self.result_path))
        return runs[-1]

    def _cleanup(self) -> list[Path]:
        """Remove the runs this profiler created in the temporary root, unless still needed.

        A run still collecting, or still needed by another caller, is removed as soon as it is
        not (by the collector or by the last caller), so a caller that gave up (a timeout) does
        not leave its run behind.
        """
        if not self.owns_result_path:
            return []
        removed: list[Path] = []
        kept: list[Window] = []
        for window in self._windows:
            window.shared.request_cleanup()
            if window.claim_removal():
                assert window.run_dir is not None
                if remove_run_dir(window.run_dir, self.result_path, REMOVED_BY_CLEANUP_CALL):
                    removed.append(window.run_dir)
            elif not window.is_stopped() or not window.shared.settled():
                kept.append(window)  # removed when done; kept here for store_last_result()
        self._windows = kept
        return removed


# -- what both faces' bench share --------------------------------------------------------------------
def bench_plan(config: BenchConfig, *, device: int, flush: bool, selection: MetricSelection | None) -> Plan:
    """The plan of one bench call: one metric group (as ever) or several (DECISIONS 26)."""
    if selection is None:
        return plan(config, device=device, flush=flush)
    groups = None if selection.every_supported else selection.groups
    return multi_plan(config, device=device, flush=flush, groups=groups)


def without_pmu(profile_types: ProfileTypes | None) -> int:
    """*profile_types* (default: the library's) without the AI Core PMU bit: the replay whose
    durations no PMU collection disturbs."""
    types = DEFAULT_PROFILE_TYPES if profile_types is None else combine_profile_types(profile_types)
    return int(types) & ~int(ProfileType.AICORE_METRICS)


def window_of(run: ProfileRun, seconds: float) -> BenchWindow:
    """What a bench window gave: its result's tasks and counters, its run's chip facts, its
    tasks' AI Core clocks."""
    assert run.result is not None
    chip = run.info.chip_facts() if run.info is not None else None
    return BenchWindow(run.result.tasks, run.result.run_id, seconds, run.result.counters, chip, run.clocks)
