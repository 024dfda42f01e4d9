"""The process-wide collector: the only owner of aclprof state.

Theory of operation
-------------------
CANN keeps profiling state per process (one ``aclprofInit`` at a time) and overlapping
collections are broken: on 8.5 the second ``PROF_*`` directory gets no host data (no kernel
names), on 9.x the second start silently does nothing and the first stop ends both. So every
``aclprof*`` call in this process runs on one dedicated thread, in the order it was submitted,
and collections never overlap.

Concurrency comes from *collection windows* (group commit). A caller :meth:`Collector.join`\\ s
the first queued window with its key (toolkit, result path, metrics, data types) that does not
already hold its device, or opens a new one. A window gathers devices until the collector thread
issues its ``aclprofStart`` (after a re-init if the result path changed); callers arriving later
wait for the next window. A plain caller meets no artificial delay: callers that arrive while
the previous window runs, stops or exports batch naturally (a driver's cohort, below, is the
one exception, and only for windows holding its own devices). The window's config lists all
its devices, so one start, one ``PROF_*`` directory and one export serve every caller; rows are
split by device.

**Gathering across a driver's devices.** Without more knowledge, a window starts as soon as the
collector is free, so devices whose next case is a moment away miss it: a 4-device sweep of 64
short cases made 42-55 windows where 16 would do, each with its own stop and read. A driver that
runs cases on devices of its own (a sweep's workers, a tune's per-device plans) says so with a
:class:`Cohort` (:meth:`Collector.gather`): the devices that will join windows of one key next.
A queued window holding at least one of a cohort's devices is *held* while some other device of
that cohort has not joined it, until all have or the cohort's *linger* (default
:data:`DEFAULT_LINGER`, counted from the moment the window could have started) runs out. A
device leaves the expected set when its driver has nothing more for it, fails or is cancelled
(:meth:`Cohort.withdraw`, or leaving :meth:`Cohort.member`'s block), which re-evaluates the hold
at once, so a failing or cancelled device never keeps the others waiting beyond that. Nothing
waits on a thread of its own: a hold is a deadline the collector thread sleeps towards (its job
queue's timeout) and every join or withdrawal re-checks it. A window with no cohort device (a
plain ``profile()``) is never held: a lone caller is never delayed.

Each caller :meth:`Window.leave`\\ s when its body ends. The last one out submits the stop: stop,
destroy (always, even when stop failed) and, when no window is waiting or the stop failed,
finalize, so no failure leaves a device running or a config alive. A C call in flight cannot be
interrupted; callers wait for it with a timeout, and the collector accepts the next window only
after the call returns.

After the stop, the first caller to ask runs the export and the parse once for the whole window
(sync or async, whichever asked first); the others wait for it. If that caller is cancelled, the
next waiter takes over, so one caller's cancellation never disturbs the others. The parse reads
the PMU counters when any consumer asked for them (:meth:`SharedResult.want_counters`, called
when it leaves, before the stop, so before anyone parses).
"""

from __future__ import annotations

import contextlib
import enum
import heapq
import itertools
import os
import queue
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from .._model._clock import TaskClocks
from .._model._counters import TaskCounters
from .._model._errors import AclError, AprofError, CollectionTimeout, UsageError, create_config_null_error
from .._model._latch import Latch
from .._model._records import ProfilingTask
from .._model._toolkit import Toolkit
from ._binding import MsprofInterface, ProfilerConfig
from ._layout import AmbiguousRunError, new_run_since, run_names

#: One device's share of a window's result: its tasks, and their counters when they were read.
DeviceTasks = tuple[tuple[ProfilingTask, ...], TaskCounters | None]

DEFAULT_CALL_TIMEOUT: Final = 120.0
#: Seconds a window held for a cohort's missing devices waits at most. Far below a real
#: collection's cost (seconds with CANN), far above the gap between a device leaving one window
#: and joining the next (microseconds to a read's few milliseconds).
DEFAULT_LINGER: Final = 0.05
NOT_INITIALISED: Final = 100043


@dataclass(frozen=True, slots=True)
class WindowKey:
    """What must be equal for callers to share one collection."""

    toolkit: Toolkit
    result_path: Path
    metrics: int
    types: int


class WindowState(enum.Enum):
    GATHERING = "gathering"
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"


class Claim(enum.Enum):
    """What :meth:`SharedResult.claim` tells a caller to do."""

    PRODUCE = "produce"  # export and parse, then publish() or abandon()
    WAIT = "wait"  # another caller produces it: wait for ``changed``, then claim again
    READY = "ready"  # the result (or its error) is there: take()


class SharedResult:
    """A window's export-and-parse result, produced once and shared by the window's callers.

    Every attribute is guarded by ``_lock``, except the latch, which is replaced under it.
    """

    __slots__ = (
        "_changed",
        "_cleanup_requested",
        "_clocks",
        "_consumers",
        "_counters",
        "_error",
        "_lock",
        "_phase",
        "_removal_claimed",
        "_tasks",
        "_votes",
    )

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._phase = Claim.PRODUCE  # guarded by _lock: PRODUCE (nobody yet), WAIT (running), READY
        self._tasks: dict[int | None, DeviceTasks] = {}  # guarded by _lock
        self._clocks: dict[int | None, TaskClocks] = {}  # guarded by _lock: devices with clock data
        self._counters = False  # guarded by _lock: some consumer wants the PMU counters
        self._error: BaseException | None = None  # guarded by _lock
        self._changed = Latch()  # guarded by _lock (replaced after each change)
        self._consumers = 0  # guarded by _lock: callers that will take a share
        self._votes: list[bool] = []  # guarded by _lock: their cleanup wishes, once each has it
        self._cleanup_requested = False  # guarded by _lock: cleanup() asked for the run's removal
        self._removal_claimed = False  # guarded by _lock: someone removes (or removed) the run

    def add_consumer(self) -> None:
        with self._lock:
            self._consumers += 1

    def want_counters(self) -> None:
        """A consumer wants the PMU counters: the parse reads them (call before the stop)."""
        with self._lock:
            self._counters = True

    @property
    def counters_wanted(self) -> bool:
        with self._lock:
            return self._counters

    def claim(self) -> tuple[Claim, Latch]:
        """PRODUCE: this caller produces it; WAIT: wait for the latch and claim again; READY: take()."""
        with self._lock:
            phase = self._phase
            if phase is Claim.PRODUCE:
                self._phase = Claim.WAIT
            return phase, self._changed

    def publish(
        self,
        tasks: dict[int | None, DeviceTasks] | None,
        error: BaseException | None,
        clocks: dict[int | None, TaskClocks] | None = None,
    ) -> None:
        """The producer's outcome: the tasks per device (and the AI Core clock of each task, per
        device whose run has clock data: a run read natively), or the error every caller gets."""
        with self._lock:
            self._phase = Claim.READY
            self._tasks = tasks or {}
            self._clocks = clocks or {}
            self._error = error
            latch, self._changed = self._changed, Latch()
        latch.set()

    def abandon(self) -> None:
        """The producer gave up (cancelled): the next caller to claim produces it instead."""
        with self._lock:
            self._phase = Claim.PRODUCE
            latch, self._changed = self._changed, Latch()
        latch.set()

    @property
    def error(self) -> BaseException | None:
        with self._lock:
            return self._error

    def take(self, device: int) -> DeviceTasks:
        """The tasks of *device*, with their counters (raises the shared export/parse error)."""
        with self._lock:
            if self._error is not None:
                raise self._error
            return self._tasks.get(device, ((), None))  # shared, immutable: no copy per caller

    def clocks(self, device: int) -> TaskClocks | None:
        """The AI Core clock of each of :meth:`take`'s tasks of *device* (None: not known)."""
        with self._lock:
            return self._clocks.get(device)

    def release(self, cleanup: bool) -> None:
        """One consumer is done with its share; *cleanup* is its wish to delete the run."""
        with self._lock:
            self._votes.append(cleanup)
            if len(self._votes) >= self._consumers:
                self._tasks = {}
                self._clocks = {}

    def request_cleanup(self) -> None:
        """``cleanup()`` wants the run gone, whatever the votes, once nobody needs it."""
        with self._lock:
            self._cleanup_requested = True

    def claim_removal(self) -> bool:
        """True once, for whoever should delete the run now that nobody needs it.

        Nobody needs it when every consumer has had its share; it is deleted when every one asked
        for cleanup and the result has no error, or when ``cleanup()`` asked for it.
        """
        with self._lock:
            if self._removal_claimed or len(self._votes) < self._consumers:
                return False
            voted = bool(self._votes) and all(self._votes) and self._error is None
            wanted = voted or self._cleanup_requested
            self._removal_claimed = wanted
            return wanted

    @property
    def cleanup_requested(self) -> bool:
        """``cleanup()`` asked for the run's removal."""
        with self._lock:
            return self._cleanup_requested

    def settled(self) -> bool:
        """Every consumer has had its share (nobody still needs the run)."""
        with self._lock:
            return len(self._votes) >= self._consumers


class Window:
    """One collection: one config, one start, one stop, one ``PROF_*`` directory.

    The collection state is guarded by the collector's lock (``Collector._lock``) and written by
    the collector thread or under that lock; ``started`` and ``stopped`` are latches set once by
    the collector thread. The shared result has a lock of its own (:class:`SharedResult`).
    """

    def __init__(self, key: WindowKey, *, library_owned: bool) -> None:
        self.key = key
        self.library_owned = library_owned  # run dir lives in a temporary root we created
        self.devices: list[int] = []  # guarded by Collector._lock
        self.state = WindowState.GATHERING  # guarded by Collector._lock
        self.bodies = 0  # guarded by Collector._lock: bodies still running
        #: guarded by Collector._lock: when a hold for a cohort's missing devices ends (None: not held)
        self.hold_until: float | None = None
        self.config: ProfilerConfig | None = None  # collector thread only
        # Set by the collector thread before ``started``/``stopped`` are set; read after them.
        self.run_dir: Path | None = None
        # PROF_* names in the result path just before the start (the run is the one that is new)
        self.runs_before: frozenset[str] = frozenset()
        self.run_error: AmbiguousRunError | None = None
        #: order of the start among all windows of the collector (set on the collector thread)
        self.start_seq = 0
        self.start_error: BaseException | None = None
        #: errors of single devices the collection could not include (the others went ahead)
        self.device_errors: dict[int, BaseException] = {}
        self.stop_error: BaseException | None = None
        self.started = Latch()
        self.stopped = Latch()
        self.shared = SharedResult()

    def is_stopped(self) -> bool:
        return self.stopped.is_set()

    def check_started(self, device: int) -> None:
        error = self.device_errors.get(device, self.start_error)
        if error is not None:
            raise error

    def claim_removal(self) -> bool:
        """True once, when the run is the library's, the collection stopped and nobody needs it."""
        return (
            self.library_owned
            and self.run_dir is not None
            and self.stopped.is_set()
            and self.shared.claim_removal()
        )


@dataclass(eq=False, slots=True)
class Participant:
    """One caller's place in a window."""

    window: Window
    device: int
    left: bool = False  # guarded by Collector._lock


def make_dirs(path: Path, mode: int = 0o750) -> None:
    """Create *path* and missing parents with *mode* (``Path.mkdir(parents=True)`` uses 0777 for parents)."""
    missing = []
    for parent in (path, *path.parents):
        if parent.exists():
            break
        missing.append(parent)
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            directory.mkdir(mode=mode)


#: Why a run was deleted: its result had been parsed and every caller asked for it with
#: ``cleanup=True`` (the default), or ``cleanup()`` asked.
REMOVED_BY_CLEANUP_TRUE: Final = (
    "cleanup=True (the default of profile() and sweep()), after its result was parsed"
)
REMOVED_BY_CLEANUP_CALL: Final = "cleanup()"
_REMOVED_MEMORY: Final = 4096

# Runs this process deleted, with the reason, so a later look-up can say why a run is gone.
_removed: dict[Path, str] = {}  # guarded by _removed_lock; oldest first, at most _REMOVED_MEMORY
_removed_lock = threading.Lock()


def remove_run_dir(run_dir: Path, root: Path, reason: str = REMOVED_BY_CLEANUP_CALL) -> bool:
    """Delete a run the library created, never following a symlink out of *root*.

    The deletion and its *reason* are remembered (see :func:`removal_reason`).

    :return: whether a directory was removed
    """
    if run_dir.is_symlink() or not run_dir.is_dir() or run_dir.parent.resolve() != root.resolve():
        return False
    shutil.rmtree(run_dir, ignore_errors=True)
    if run_dir.exists():
        return False
    with _removed_lock:
        _removed.pop(run_dir, None)
        _removed[run_dir] = reason
        while len(_removed) > _REMOVED_MEMORY:
            del _removed[next(iter(_removed))]
    return True


def removal_reason(run_dir: Path) -> str | None:
    """Why this process deleted *run_dir* (None when it did not, or has forgotten)."""
    with _removed_lock:
        return _removed.get(run_dir)


def removed_runs_in(root: Path) -> list[tuple[Path, str]]:
    """The runs this process deleted directly under *root*, oldest first, with the reasons."""
    with _removed_lock:
        return [(path, why) for path, why in _removed.items() if path.parent == root]


class Cohort:
    """Devices a driver will run in windows of one key next (see "Gathering" in the module docstring).

    Made by :meth:`Collector.gather`; :meth:`close` (or leaving its ``with`` block) ends it. Its
    expected devices are guarded by the collector's lock.
    """

    __slots__ = ("_collector", "devices", "key", "linger")

    def __init__(self, collector: Collector, key: WindowKey, devices: Iterable[int], linger: float) -> None:
        self._collector = collector
        self.key = key
        self.linger = linger
        self.devices = set(devices)  # guarded by Collector._lock

    def expect(self, device: int) -> None:
        """*device* will join a window soon again (it has its next case)."""
        self._collector._change(self, device, True)

    def withdraw(self, device: int) -> None:
        """*device* will not join soon (done, failed, cancelled, or waiting for work): stop waiting for it."""
        self._collector._change(self, device, False)

    @contextlib.contextmanager
    def member(self, device: int) -> Iterator[None]:
        """The block runs *device*'s part; however it ends, the device is withdrawn."""
        try:
            yield
        finally:
            self.withdraw(device)

    def close(self) -> None:
        self._collector._close(self)

    def __enter__(self) -> Cohort:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _nothing() -> None:
    pass


class _CallThread:
    """One dedicated daemon thread running submitted jobs in order, and timed jobs when they are due."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._timers_lock = threading.Lock()
        self._timers: list[tuple[float, int, Callable[[], None]]] = []  # guarded by _timers_lock (a heap)
        self._order = itertools.count()  # guarded by _timers_lock
        self._thread = threading.Thread(target=self._run, name="asc-aprof-collector", daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[], None]) -> None:
        self._jobs.put(job)

    def call_at(self, deadline: float, job: Callable[[], None]) -> None:
        """Run *job* on this thread once ``time.monotonic()`` reaches *deadline* (after queued jobs)."""
        with self._timers_lock:
            heapq.heappush(self._timers, (deadline, next(self._order), job))
        self._jobs.put(_nothing)  # wake the loop so it sleeps towards the new deadline

    def _due(self) -> tuple[list[Callable[[], None]], float | None]:
        """The timed jobs due now, and how long until the next one (None: no timer)."""
        now = time.monotonic()
        due = []
        with self._timers_lock:
            while self._timers and self._timers[0][0] <= now:
                due.append(heapq.heappop(self._timers)[2])
            wait = self._timers[0][0] - now if self._timers else None
        return due, wait

    def _run(self) -> None:
        while True:
            due, wait = self._due()
            for job in due:
                job()
            if due:
                continue
            try:
                job = self._jobs.get(timeout=wait)
            except queue.Empty:
                continue
            job()  # jobs catch their own exceptions


class Collector:
    """Owns aclprof state for the whole process; see the module docstring."""

    def __init__(self, interface_factory: Callable[[Toolkit], MsprofInterface] = MsprofInterface) -> None:
        """:param interface_factory: makes the binding of a toolkit (tests pass a fake one)"""
        self._interface_factory = interface_factory
        self._lock = threading.Lock()
        self._queue: list[Window] = []
        self._active: Window | None = None
        self._inited: tuple[Path, Path] | None = None  # (library, result path)
        self._interfaces: dict[Path, MsprofInterface] = {}
        self._undestroyed: list[tuple[MsprofInterface, ProfilerConfig]] = []
        self._cohorts: list[Cohort] = []  # guarded by _lock
        self._thread = _CallThread()
        self.windows_started = 0
        #: windows that started because a cohort's linger ran out with devices missing (diagnostics)
        self.windows_lingered = 0  # guarded by _lock

    # -- joining and leaving -----------------------------------------------------------------------
    def join(self, key: WindowKey, device: int, *, library_owned: bool) -> Participant:
        """Take a place for *device* in the next window with *key*."""
        with self._lock:
            for window in self._queue:
                if (
                    window.state is WindowState.GATHERING
                    and window.key == key
                    and device not in window.devices
                ):
                    break
            else:
                window = Window(key, library_owned=library_owned)
                self._queue.append(window)
            window.devices.append(device)
            participant = Participant(window, device)
            self._kick_locked()
        return participant

    def join_many(self, key: WindowKey, devices: list[int], *, library_owned: bool) -> list[Participant]:
        """Places for several distinct devices in one window, taken atomically."""
        if len(set(devices)) != len(devices):
            raise UsageError(f"duplicate devices: {devices}")
        with self._lock:
            for window in self._queue:
                if (
                    window.state is WindowState.GATHERING
                    and window.key == key
                    and not set(devices) & set(window.devices)
                ):
                    break
            else:
                window = Window(key, library_owned=library_owned)
                self._queue.append(window)
            window.devices.extend(devices)
            participants = [Participant(window, device) for device in devices]
            self._kick_locked()
        return participants

    def leave(self, participant: Participant, *, consume: bool = False) -> bool:
        """End *participant*'s body; True when this was the last body (the stop is submitted).

        :param consume: the caller will take its share of the window's result
        """
        window = participant.window
        with self._lock:
            if participant.left:
                return False
            participant.left = True
            if window.state is WindowState.GATHERING:
                window.devices.remove(participant.device)
                if not window.devices and window is not self._active:
                    self._queue.remove(window)
                    window.state = WindowState.STOPPED
                    window.started.set()
                    window.stopped.set()
                self._kick_locked()  # a held window may be complete now, or gone (the next one goes)
                return False
            if window.state is WindowState.STOPPED:
                return False
            window.bodies -= 1
            if consume:
                window.shared.add_consumer()
            if window.bodies == 0:
                if window.state is WindowState.RUNNING:
                    window.state = WindowState.STOPPING
                    self._thread.submit(lambda: self._stop_window(window))
                # while STARTING, the start job sees no bodies left and stops at once
                return True
            return False

    def _kick_locked(self) -> None:
        if self._active is None and self._queue:
            window = self._queue[0]
            if window.state is WindowState.GATHERING and self._held_locked(window):
                return
            self._active = window
            self._thread.submit(lambda: self._start_window(window))

    def _held_locked(self, window: Window) -> bool:
        """Whether *window* waits for a cohort's missing devices (arming its linger the first time)."""
        present = set(window.devices)
        linger: float | None = None
        for cohort in self._cohorts:
            if cohort.key == window.key and cohort.devices & present and cohort.devices - present:
                linger = cohort.linger if linger is None else min(linger, cohort.linger)
        if linger is None:
            return False
        now = time.monotonic()
        if window.hold_until is None:
            window.hold_until = now + linger
            self._thread.call_at(window.hold_until, self._linger_over)
        if now < window.hold_until:
            return True
        self.windows_lingered += 1
        return False

    def _linger_over(self) -> None:
        with self._lock:
            self._kick_locked()

    # -- cohorts ------------------------------------------------------------------------------------
    def gather(self, key: WindowKey, devices: Iterable[int], *, linger: float | None = None) -> Cohort:
        """Hold windows of *key* for *devices* (see "Gathering" in the module docstring).

        :param linger: seconds a window waits at most for missing devices (default
            :data:`DEFAULT_LINGER`)
        """
        wait = DEFAULT_LINGER if linger is None else float(linger)
        if not wait >= 0:
            raise UsageError(f"linger must be >= 0 seconds, got linger={linger}")
        cohort = Cohort(self, key, devices, wait)
        with self._lock:
            self._cohorts.append(cohort)
        return cohort

    def _change(self, cohort: Cohort, device: int, expected: bool) -> None:
        with self._lock:
            if expected:
                cohort.devices.add(device)
            else:
                cohort.devices.discard(device)
                self._kick_locked()

    def _close(self, cohort: Cohort) -> None:
        with self._lock:
            if cohort in self._cohorts:
                self._cohorts.remove(cohort)
            cohort.devices.clear()
            self._kick_locked()

    # -- the collector thread --------------------------------------------------------------------
    def interface(self, toolkit: Toolkit) -> MsprofInterface:
        iface = self._interfaces.get(toolkit.library)
        if iface is None:
            iface = self._interfaces[toolkit.library] = self._interface_factory(toolkit)
        return iface

    def _finalize(self, errors: list[BaseException]) -> None:
        """Finalize (retried once); on failure CANN stays initialised as far as we know."""
        if self._inited is None:
            return
        library, _ = self._inited
        for attempt in range(2):
            try:
                self._interfaces[library].finalize()
            except AclError as exc:
                if attempt == 0:
                    errors.append(exc)
                elif exc.code != NOT_INITIALISED:
                    return  # still initialised: the next window reuses or finalizes it again
                continue
            break
        self._inited = None

    def _destroy(self, iface: MsprofInterface, config: ProfilerConfig, errors: list[BaseException]) -> None:
        """Destroy a config (retried once); one that still fails is retried after later windows."""
        for attempt in range(2):
            try:
                iface.destroy_config(config)
                return
            except AclError as exc:
                if attempt == 0:
                    errors.append(exc)
        self._undestroyed.append((iface, config))

    def _retry_destroys(self) -> None:
        pending, self._undestroyed = self._undestroyed, []
        for iface, config in pending:
            self._destroy(iface, config, [])

    def _start_window(self, window: Window) -> None:
        key = window.key
        try:
            iface = self.interface(key.toolkit)
            wanted = (key.toolkit.library, key.result_path)
            if self._inited != wanted:
                self._finalize([])
                try:
                    make_dirs(key.result_path)
                except (OSError, ValueError) as exc:
                    raise UsageError(f"cannot create the result path {key.result_path}: {exc}") from exc
                iface.init(key.result_path)
                self._inited = wanted
            with self._lock:
                self._queue.remove(window)
                devices = list(window.devices)
                window.bodies = len(devices)
                window.state = WindowState.STARTING
                if not devices:
                    window.state = WindowState.STOPPED
            if not devices:
                self._after_window(window, [])
                return
            config = self._create_config(iface, window, devices)
            window.runs_before = run_names(key.result_path)
            try:
                iface.start(config)
            except BaseException:
                self._destroy(iface, config, [])
                raise
            window.config = config
            self.windows_started += 1
            window.start_seq = self.windows_started
            window.run_dir = self._new_run(window, final=False)
        except BaseException as exc:
            window.start_error = exc
            with self._lock:
                if window in self._queue:
                    self._queue.remove(window)
                window.state = WindowState.STOPPED
            errors: list[BaseException] = []
            self._after_window(window, errors, failed=True)
            return
        with self._lock:
            window.state = WindowState.RUNNING
            stop_now = window.bodies == 0
            if stop_now:
                window.state = WindowState.STOPPING
        window.started.set()
        if stop_now:
            self._stop_window(window)

    def _create_config(self, iface: MsprofInterface, window: Window, devices: list[int]) -> ProfilerConfig:
        """The window's config; devices CANN refuses alone are left out with an error of their own.

        A NULL for several devices is looked at device by device, so one caller's bad device id
        does not fail the callers that share its window.
        """
        key = window.key
        try:
            return iface.create_config(sorted(devices), key.metrics, key.types)
        except AclError as exc:
            if exc.code != 100000 or len(devices) < 2:
                raise
            bad = [d for d in devices if not self._accepts(iface, d, key)]
            if not bad or len(bad) == len(devices):
                raise
        for device in bad:
            window.device_errors[device] = create_config_null_error([device])
        return iface.create_config(sorted(d for d in devices if d not in bad), key.metrics, key.types)

    def _accepts(self, iface: MsprofInterface, device: int, key: WindowKey) -> bool:
        try:
            config = iface.create_config([device], key.metrics, key.types)
        except AclError:
            return False
        self._destroy(iface, config, [])
        return True

    def _new_run(self, window: Window, *, final: bool) -> Path | None:
        """The PROF_* directory the window's start made: the one new since the start (see _layout).

        An ambiguity right after the start is looked at again after the stop (CANN may write
        ``host/info.json``, whose pid breaks the tie, only then); after the stop it is an error
        for the window's callers.
        """
        try:
            return new_run_since(window.key.result_path, window.runs_before, os.getpid())
        except AmbiguousRunError as exc:
            if final:
                window.run_error = exc
            return None

    def _stop_window(self, window: Window) -> None:
        errors: list[BaseException] = []
        iface = self._interfaces[window.key.toolkit.library]
        assert window.config is not None
        try:
            iface.stop(window.config)
        except AclError as exc:
            errors.append(exc)
        self._destroy(iface, window.config, errors)
        window.config = None
        if window.run_dir is None:
            window.run_dir = self._new_run(window, final=True)
        with self._lock:
            window.state = WindowState.STOPPED
        self._after_window(window, errors, failed=bool(errors))

    def _after_window(self, window: Window, errors: list[BaseException], *, failed: bool = False) -> None:
        with self._lock:
            idle = not self._queue
        if idle or failed:
            # A failed stop may leave devices running: finalize cancels them.
            self._finalize(errors)
        if self._undestroyed:
            self._retry_destroys()
        if errors and window.stop_error is None and window.start_error is None:
            window.stop_error = errors[0]
        window.started.set()
        window.stopped.set()
        if window.claim_removal() and window.run_dir is not None:
            # cleanup() asked while the collection still ran, and no caller is left to do it
            remove_run_dir(window.run_dir, window.key.result_path, REMOVED_BY_CLEANUP_CALL)
        with self._lock:
            self._active = None
            self._kick_locked()

    # -- checking devices ---------------------------------------------------------------------------
    def check_devices(self, key: WindowKey, devices: list[int]) -> tuple[Latch, dict[int, BaseException]]:
        """Ask CANN, on the collector thread, whether it takes each device alone; nothing starts.

        ``aclprofCreateConfig`` validates device ids (count, visible-id mapping) without an
        ``aclprofInit``; each accepted config is destroyed at once. When the library cannot be
        loaded at all, nothing is reported (the collection that follows reports it).

        :return: a latch set when done, and the refused devices with their errors (filled by then)
        """
        done = Latch()
        refused: dict[int, BaseException] = {}

        def job() -> None:
            try:
                iface = self.interface(key.toolkit)
                for device in devices:
                    try:
                        config = iface.create_config([device], key.metrics, key.types)
                    except AprofError as exc:
                        refused[device] = exc
                    else:
                        self._destroy(iface, config, [])
            except Exception:
                refused.clear()  # not a device's fault: let the collection report it
            finally:
                done.set()

        self._thread.submit(job)
        return done, refused

    # -- introspection (tests, diagnostics) -------------------------------------------------------
    def idle(self) -> bool:
        with self._lock:
            return self._active is None and not self._queue and self._inited is None


_collector: Collector | None = None
_collector_lock = threading.Lock()


def get_collector() -> Collector:
    """The process-wide collector (created on first use; one dedicated thread)."""
    global _collector
    with _collector_lock:
        if _collector is None:
            _collector = Collector()
        return _collector


def timeout_error(what: str, timeout: float | None) -> CollectionTimeout:
    return CollectionTimeout(
        f"{what} did not finish within {timeout:g} s; the collector finishes the call in the "
        "background and accepts the next collection after it"
    )


#: Pseudo file systems where no run can be written.
PSEUDO_ROOTS: Final = (Path("/proc"), Path("/sys"), Path("/dev"))


def check_path_text(path: Path) -> None:
    """Refuse a result path with a NUL byte or a name the file system cannot encode, naming it."""
    text = str(path)
    if "\x00" in text:
        raise UsageError(f"result path contains a NUL byte: {text!r}")
    try:
        os.fsencode(text)
    except UnicodeEncodeError as exc:
        reason = exc.reason
        raise UsageError(f"result path cannot be encoded for the file system ({reason}): {text!r}") from None


def check_result_dir(path: Path) -> None:
    """Refuse a result path no collection can write into, naming it (before any collection).

    The path itself, or its nearest existing ancestor, must be a writable directory; a dangling
    symlink on the way, a file, a read-only mount or a pseudo file system are refused. Call
    :func:`check_path_text` (and the length check) first.

    :raises UsageError: saying what is wrong with which path
    """
    try:
        _check_result_dir(path)
    except OSError as exc:
        raise UsageError(f"result path {path} cannot be used: {exc.strerror or exc}") from exc


def _check_result_dir(path: Path) -> None:
    resolved = path.resolve()
    if any(resolved == root or root in resolved.parents for root in PSEUDO_ROOTS):
        raise UsageError(f"result path {path} is on a pseudo file system ({resolved}): use a real directory")
    for candidate in (path, *path.parents):
        if candidate.is_symlink() and not candidate.exists():
            raise UsageError(f"result path {path}: {candidate} is a dangling symlink")
        if not candidate.exists():
            continue
        if not candidate.is_dir():
            what = "exists and is not a directory" if candidate == path else f"is below a file ({candidate})"
            raise UsageError(f"result path {path} {what}")
        if not os.access(candidate, os.W_OK | os.X_OK):
            where = "" if candidate == path else f" (its existing parent {candidate} is not)"
            raise UsageError(f"result path {path} is not writable{where}: read-only mount or permissions")
        return
