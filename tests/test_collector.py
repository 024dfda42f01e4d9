"""The collector alone, over a fake aclprof binding that records every call in order.

No simulator here: :class:`FakeAcl` plays CANN (one init at a time, one running collection, configs
that must be destroyed, a ``PROF_*`` directory per start), records each call, can fail a call with
a given code, and can *hold* a call until the test releases it, so a test can look at the
collector while a C call is in flight. The fake notes every rule a call breaks (``violations``);
tests assert there are none, and check the order of the calls.
"""

from __future__ import annotations

import itertools
import os
import random
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from asc_aprof import AclError, MsprofInterface, ProfilerConfig, ProfileType, Toolkit, UsageError
from asc_aprof._cann._binding import ProfileTypes
from asc_aprof._cann._collector import Collector, Participant, Window, WindowKey
from asc_aprof._model._enums import AicoreMetrics
from asc_aprof._model._latch import Latch

WAIT = 10.0  # bound on every wait, so a broken collector fails a test instead of hanging it
INIT, CREATE, START, STOP, DESTROY, FINALIZE = (
    "aclprofInit",
    "aclprofCreateConfig",
    "aclprofStart",
    "aclprofStop",
    "aclprofDestroyConfig",
    "aclprofFinalize",
)
NOT_INITIALISED = 100043
FAILURE = 500005


class FakeAcl:
    """One process's fake CANN profiling state, shared by every fake interface of a test."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.calls: list[tuple[str, object]] = []  # guarded by _cond
        self.violations: list[str] = []  # guarded by _cond
        self._faults: dict[str, list[int]] = {}  # guarded by _cond
        self._gates: dict[str, threading.Event] = {}  # guarded by _cond
        # CANN's state, touched by one call at a time (the collector thread): no lock needed
        self.inited: Path | None = None
        self.running: ProfilerConfig | None = None
        self.configs: dict[ProfilerConfig, tuple[int, ...]] = {}  # created, not destroyed
        self.handles = itertools.count(1)
        self.runs = itertools.count(1)

    # -- the test's knobs --------------------------------------------------------------------------
    def fail(self, function: str, *codes: int) -> None:
        """The next calls of *function* return these codes, one per call, doing nothing."""
        with self._cond:
            self._faults.setdefault(function, []).extend(codes)

    def hold(self, function: str) -> None:
        """Calls of *function* block, once recorded, until :meth:`release`."""
        with self._cond:
            self._gates[function] = threading.Event()

    def release(self, function: str | None = None) -> None:
        with self._cond:
            gates = list(self._gates.values()) if function is None else [self._gates[function]]
        for gate in gates:
            gate.set()

    def wait_calls(self, function: str, count: int = 1) -> None:
        """Wait until *function* was called *count* times (the last may still be in flight)."""
        with self._cond:
            assert self._cond.wait_for(lambda: self.count(function) >= count, WAIT), self.calls

    def count(self, function: str) -> int:
        with self._cond:
            return sum(1 for name, _ in self.calls if name == function)

    def names(self) -> list[str]:
        with self._cond:
            return [name for name, _ in self.calls]

    def created(self) -> list[tuple[int, ...]]:
        """The device lists of every create_config, in order."""
        with self._cond:
            return [arg for name, arg in self.calls if name == CREATE and isinstance(arg, tuple)]

    # -- the calls -------------------------------------------------------------------------------
    def call(self, function: str, arg: object) -> None:
        with self._cond:
            self.calls.append((function, arg))
            self._cond.notify_all()
            gate = self._gates.get(function)
        if gate is not None and not gate.wait(WAIT):
            self.violate(f"{function} was held and never released")
        with self._cond:
            codes = self._faults.get(function)
            code = codes.pop(0) if codes else 0
        if code:
            raise AclError(function, code)

    def violate(self, what: str) -> None:
        with self._cond:
            self.violations.append(what)


class FakeInterface(MsprofInterface):
    """The binding's interface over :class:`FakeAcl` (no library is loaded)."""

    def __init__(self, acl: FakeAcl, toolkit: Toolkit) -> None:  # no super(): nothing to dlopen
        self.toolkit = toolkit
        self.acl = acl

    def init(self, result_path: str | os.PathLike[str]) -> None:
        acl = self.acl
        acl.call(INIT, Path(result_path))
        if acl.inited is not None:
            acl.violate(f"init({result_path}) while initialised for {acl.inited}")
        acl.inited = Path(result_path)

    def create_config(
        self,
        device_ids: Iterable[int],
        metric: AicoreMetrics | int | str = AicoreMetrics.PIPE_UTILIZATION,
        types: ProfileTypes | None = ProfileType.TASK_TIME,
    ) -> ProfilerConfig:
        devices = tuple(device_ids)
        self.acl.call(CREATE, devices)
        if len(set(devices)) != len(devices) or not devices:
            self.acl.violate(f"create_config({list(devices)}): empty or a device twice")
        config = ProfilerConfig(next(self.acl.handles))
        self.acl.configs[config] = devices
        return config

    def start(self, config: ProfilerConfig) -> None:
        acl = self.acl
        acl.call(START, config)
        if acl.inited is None:
            acl.violate("start before init")
        if acl.running is not None:
            acl.violate(f"start({config}) while {acl.running} runs: collections overlap")
        if config not in acl.configs:
            acl.violate(f"start({config}) of a config not created or already destroyed")
        acl.running = config
        if acl.inited is not None:
            (acl.inited / f"PROF_{next(acl.runs):06d}_20260101000000000_FAKE{os.getpid()}").mkdir()

    def stop(self, config: ProfilerConfig) -> None:
        acl = self.acl
        acl.call(STOP, config)
        if acl.running != config:
            acl.violate(f"stop({config}) while {acl.running} runs")
        acl.running = None

    def destroy_config(self, config: ProfilerConfig) -> None:
        acl = self.acl
        acl.call(DESTROY, config)
        if acl.configs.pop(config, None) is None:
            acl.violate(f"destroy({config}) of a config not alive")

    def finalize(self) -> None:
        acl = self.acl
        try:
            acl.call(FINALIZE, None)
        except AclError as exc:
            if exc.code == NOT_INITIALISED:
                acl.inited = None  # CANN says so: the earlier failed finalize did its work
            raise
        if acl.inited is None:
            raise AclError(FINALIZE, NOT_INITIALISED)
        acl.inited = None
        acl.running = None  # finalize stops whatever still runs


@pytest.fixture
def acl() -> Iterator[FakeAcl]:
    fake = FakeAcl()
    yield fake
    fake.release()  # never leave a collector thread blocked in a held call


@pytest.fixture
def collector(acl: FakeAcl) -> Collector:
    return Collector(lambda toolkit: FakeInterface(acl, toolkit))


@pytest.fixture
def toolkit(tmp_path: Path) -> Toolkit:
    return Toolkit(library=tmp_path / "libmsprofiler_fake.so", msprof_script=tmp_path / "msprof.py")


def key_for(toolkit: Toolkit, path: Path, metrics: int = 1) -> WindowKey:
    return WindowKey(toolkit, path, metrics, 1)


def wait(latch: Latch) -> None:
    assert latch.wait(WAIT), "a latch was never set"


def assert_clean(acl: FakeAcl, collector: Collector) -> None:
    """Nothing runs, nothing is alive, CANN is finalized, the collector is idle, no rule broken."""
    assert acl.violations == []
    assert acl.running is None and acl.configs == {} and acl.inited is None
    assert collector.idle()


def leave_all(collector: Collector, participants: list[Participant]) -> None:
    """Each participant's body ends as soon as its window started (windows start one by one)."""
    pending = list(participants)
    deadline = time.monotonic() + WAIT
    while pending:
        for participant in [p for p in pending if p.window.started.is_set()]:
            participant.window.check_started(participant.device)
            collector.leave(participant, consume=True)
            pending.remove(participant)
        assert time.monotonic() < deadline, "a window never started"
        time.sleep(0.001)
    for participant in participants:
        wait(participant.window.stopped)


def one_cycle(collector: Collector, key: WindowKey, device: int) -> Window:
    """join -> started -> leave -> stopped, as one caller does."""
    participant = collector.join(key, device, library_owned=False)
    wait(participant.window.started)
    participant.window.check_started(participant.device)
    collector.leave(participant, consume=True)
    wait(participant.window.stopped)
    return participant.window


# -- one window --------------------------------------------------------------------------------------


def test_one_window_calls_in_order_and_sets_its_latches(
    acl: FakeAcl, collector: Collector, toolkit: Toolkit, tmp_path: Path
) -> None:
    key = key_for(toolkit, tmp_path / "out")
    acl.hold(START)
    participant = collector.join(key, 3, library_owned=False)
    window = participant.window
    acl.wait_calls(START)
    assert not window.started.is_set(), "started must wait for aclprofStart to return"
    acl.release(START)
    wait(window.started)
    window.check_started(participant.device)
    assert window.run_dir is not None and window.run_dir.parent == tmp_path / "out"
    assert acl.names() == [INIT, CREATE, START] and acl.created() == [(3,)]
    acl.hold(STOP)
    assert collector.leave(participant, consume=True), "the last body out submits the stop"
    acl.wait_calls(STOP)
    assert not window.stopped.is_set(), "stopped must wait for the stop"
    acl.release(STOP)
    wait(window.stopped)
    assert window.stop_error is None and window.start_error is None
    assert acl.names() == [INIT, CREATE, START, STOP, DESTROY, FINALIZE]
    assert collector.leave(participant) is False, "leaving twice is a no-op"
    assert_clean(acl, collector)


def test_init_only_when_the_result_path_changes_and_finalize_only_when_idle(
    acl: FakeAcl, collector: Collector, toolkit: Toolkit, tmp_path: Path
) -> None:
    """Back-to-back windows of one path share the init; a window of another path re-inits."""
    same, other = key_for(toolkit, tmp_path / "a"), key_for(toolkit, tmp_path / "b")
    acl.hold(START)
    first = collector.join(same, 0, library_owned=False)
    acl.wait_calls(START)
    second = collector.join(same, 0, library_owned=False)  # same device: the next window
    third = collector.join(other, 0, library_owned=False)
    assert len({first.window, second.window, third.window}) == 3
    acl.release(START)
    for participant in (first, second, third):
        wait(participant.window.started)
        collector.leave(participant, consume=True)
        wait(participant.window.stopped)
    assert acl.calls[0] == (INIT, tmp_path / "a")
    assert acl.names() == [
        *(INIT, CREATE, START, STOP, DESTROY),  # a window waits: no finalize
        *(CREATE, START, STOP, DESTROY),  # same path: no init
        *(FINALIZE, INIT, CREATE, START, STOP, DESTROY, FINALIZE),  # another path; idle at the end
    ]
    assert [arg for name, arg in acl.calls if name == INIT] == [tmp_path / "a", tmp_path / "b"]
    assert_clean(acl, collector)


def test_windows_never_overlap_under_contention(
    acl: FakeAcl, collector: Collector, toolkit: Toolkit, tmp_path: Path
) -> None:
    keys = [
        key_for(toolkit, tmp_path / "a"),
        key_for(toolkit, tmp_path / "a", 2),
        key_for(toolkit, tmp_path / "b"),
    ]
    errors: list[BaseException] = []

    def caller(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(15):
                participant = collector.join(rng.choice(keys), rng.randrange(4), library_owned=False)
                wait(participant.window.started)
                participant.window.check_started(participant.device)
                collector.leave(participant, consume=rng.random() < 0.5)
                wait(participant.window.stopped)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=caller, args=(seed,)) for seed in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert acl.count(START) == acl.count(STOP) == acl.count(CREATE) == acl.count(DESTROY) >= 1
    assert acl.count(INIT) == acl.count(FINALIZE)
    assert_clean(acl, collector)  # among them: no start while another collection ran


# -- failures -----------------------------------------------------------------------------------------


def test_start_failure_destroys_the_config_finalizes_and_sets_both_latches(
    acl: FakeAcl, collector: Collector, toolkit: Toolkit, tmp_path: Path
) -> None:
    acl.fail(START, FAILURE)
    participant = collector.join(key_for(toolkit, tmp_path), 0, library_owned=False)
    window = participant.window
    wait(window.started)
    assert window.stopped.is_set()
    with pytest.raises(AclError) as info:
        window.check_started(participant.device)
    assert (info.value.function, info.value.code) == (START, FAILURE)
    assert window.stop_error is None  # the start error is the one callers get
    assert acl.names() == [INIT, CREATE, START, DESTROY, FINALIZE]
    assert collector.leave(participant) is False
    assert_clean(acl, collector)
    one_cycle(collector, key_for(toolkit, tmp_path), 0)  # the next window works
    assert_clean(acl, collector)


def test_create_config_failure_finalizes_and_destroys_nothing(
    acl: FakeAcl, collector: Collector, toolkit: Toolkit, tmp_path: Path
) -> None:
    acl.fail(CREATE, 100000)
    participant = collector.join(key_for(toolkit, tmp_path), 0, library_owned=False)
    wait(participant.window.started)
    assert participant.window.stopped.is_set()
    with pytest.raises(AclError, match=CREATE):
        participant.window.check_started(participant.device)
    assert acl.names() == [INIT, CREATE, FINALIZE]
    assert_clean(acl, collector)


def test_init_failure_sets_both_latches(
    acl: FakeAcl, collector: Collector, toolkit: Toolkit, tmp_path: Path
) -> None:
    acl.fail(INIT, 100003)
    participant = collector.join(key_for(toolkit, tmp_path), 0, library_owned=False)
    wait(participant.window.started)
    assert participant.window.stopped.is_set()
    with pytest.raises(AclError, match=INIT):
        participant.window.check_started(participant.device)
    assert acl.names() == [INIT]  # nothing initialised: nothing to finalize
    assert_clean(acl, collector)


def test_stop_failure_destroys_and_finalizes_even_with_a_window_waiting(
    acl: FakeAcl, collector: Collector, toolkit: Toolkit, tmp_path: Path
) -> None:
    key = key_for(toolkit, tmp_path)
    acl.fail(STOP, FAILURE)
    acl.hold(START)
    first = collector.join(key, 0, library_owned=False)
    acl.wait_calls(START)
    waiting = collector.join(key, 0, library_owned=False)
    acl.release(START)
    wait(first.window.started)
    collector.leave(first, consume=True)
    wait(first.window.stopped)
    assert isinstance(first.window.stop_error, AclError) and first.window.stop_error.function == STOP
    wait(waiting.window.started)
    collector.leave(waiting, consume=True)
    wait(waiting.window.stopped)
    assert waiting.window.stop_error is None
    assert acl.names() == [
        *(INIT, CREATE, START, STOP, DESTROY, FINALIZE),  # a failed stop may leave devices running
        *(INIT, CREATE, START, STOP, DESTROY, FINALIZE),
    ]
    assert_clean(acl, collector)


def test_destroy_is_retried_once(
    acl: FakeAcl, collector: Collector, toolkit: Toolkit, tmp_path: Path
) -> None:
    acl.fail(DESTROY, FAILURE)
    window = one_cycle(collector, key_for(toolkit, tmp_path), 0)
    assert acl.names() == [INIT, CREATE, START, STOP, DESTROY, DESTROY, FINALIZE]
    assert window.stopped.is_set()
    assert_clean(acl, collector)


def test_a_config_that_cannot_be_destroyed_is_retried_after_later_windows(
    acl: FakeAcl, collector: Collector, toolkit: Toolkit, tmp_path: Path
) -> None:
    key = key_for(toolkit, tmp_path)
    acl.fail(DESTROY, *[FAILURE] * 4)  # the window's two attempts and the retry's two
    first = one_cycle(collector, key, 0)
    assert isinstance(first.stop_error, AclError) and first.stop_error.function == DESTROY
    assert acl.names() == [INIT, CREATE, START, STOP, DESTROY, DESTROY, FINALIZE, DESTROY, DESTROY]
    first_config = acl.calls[2][1]
    assert list(acl.configs) == [first_config], "the config is still alive"
    one_cycle(collector, key, 1)
    assert acl.names()[9:] == [INIT, CREATE, START, STOP, DESTROY, FINALIZE, DESTROY]
    assert acl.calls[-1] == (DESTROY, first_config)
    assert_clean(acl, collector)


def test_finalize_is_retried_once(
    acl: FakeAcl, collector: Collector, toolkit: Toolkit, tmp_path: Path
) -> None:
    key = key_for(toolkit, tmp_path)
    acl.fail(FINALIZE, FAILURE)
    one_cycle(collector, key, 0)
    assert acl.names() == [INIT, CREATE, START, STOP, DESTROY, FINALIZE, FINALIZE]
    assert_clean(acl, collector)


def test_a_finalize_that_fails_twice_keeps_cann_initialised_for_the_next_window(
    acl: FakeAcl, collector: Collector, toolkit: Toolkit, tmp_path: Path
) -> None:
    acl.fail(FINALIZE, FAILURE, FAILURE)
    one_cycle(collector, key_for(toolkit, tmp_path / "a"), 0)
    assert acl.names() == [INIT, CREATE, START, STOP, DESTROY, FINALIZE, FINALIZE]
    assert acl.inited == tmp_path / "a" and not collector.idle()
    one_cycle(collector, key_for(toolkit, tmp_path / "a"), 0)  # same path: reused, no second init
    assert acl.names()[7:] == [CREATE, START, STOP, DESTROY, FINALIZE]
    acl.fail(FINALIZE, FAILURE, FAILURE)
    one_cycle(collector, key_for(toolkit, tmp_path / "a"), 0)
    one_cycle(collector, key_for(toolkit, tmp_path / "b"), 0)  # another path: finalize first
    assert acl.names()[-7:] == [FINALIZE, INIT, CREATE, START, STOP, DESTROY, FINALIZE]
    assert acl.violations == []
    assert_clean(acl, collector)


def test_a_finalize_answered_not_initialised_counts_as_done(
    acl: FakeAcl, collector: Collector, toolkit: Toolkit, tmp_path: Path
) -> None:
    acl.fail(FINALIZE, FAILURE, NOT_INITIALISED)
    one_cycle(collector, key_for(toolkit, tmp_path), 0)
    assert collector.idle()
    one_cycle(collector, key_for(toolkit, tmp_path), 0)
    assert acl.names()[7:] == [INIT, CREATE, START, STOP, DESTROY, FINALIZE]
    assert_clean(acl, collector)


# -- who shares which window -----------------------------------------------------------------------


def test_a_window_whose_callers_all_leave_while_queued_is_never_started(
    acl: FakeAcl, collector: Collector, toolkit: Toolkit, tmp_path: Path
) -> None:
    key = key_for(toolkit, tmp_path)
    acl.hold(START)
    running = collector.join(key, 0, library_owned=False)
    acl.wait_calls(START)
    queued = [collector.join(key, device, library_owned=False) for device in (1, 2)]
    assert queued[0].window is queued[1].window is not running.window
    for participant in queued:
        assert collector.leave(participant) is False
    assert queued[0].window.started.is_set() and queued[0].window.stopped.is_set()
    assert queued[0].window.run_dir is None
    acl.release(START)
    wait(running.window.started)
    collector.leave(running, consume=True)
    wait(running.window.stopped)
    assert acl.created() == [(0,)]
    assert acl.names() == [INIT, CREATE, START, STOP, DESTROY, FINALIZE]
    assert_clean(acl, collector)


def test_a_window_whose_callers_leave_during_init_is_never_started(
    acl: FakeAcl, collector: Collector, toolkit: Toolkit, tmp_path: Path
) -> None:
    acl.hold(INIT)
    participant = collector.join(key_for(toolkit, tmp_path), 0, library_owned=False)
    acl.wait_calls(INIT)  # the collector took the window; it still gathers callers
    assert collector.leave(participant) is False
    acl.release(INIT)
    wait(participant.window.started)
    wait(participant.window.stopped)
    participant.window.check_started(participant.device)  # no error: nobody was left to start for
    assert acl.names() == [INIT, FINALIZE]
    assert_clean(acl, collector)


def test_late_joiners_go_to_the_next_window(
    acl: FakeAcl, collector: Collector, toolkit: Toolkit, tmp_path: Path
) -> None:
    key = key_for(toolkit, tmp_path)
    early = collector.join(key, 0, library_owned=False)
    wait(early.window.started)
    late = collector.join(key, 1, library_owned=False)  # another device, but the start went out
    assert late.window is not early.window
    assert not late.window.started.is_set() and acl.created() == [(0,)]
    collector.leave(early, consume=True)
    wait(late.window.started)
    collector.leave(late, consume=True)
    wait(late.window.stopped)
    assert acl.created() == [(0,), (1,)]
    assert acl.names() == [INIT, CREATE, START, STOP, DESTROY, CREATE, START, STOP, DESTROY, FINALIZE]
    assert_clean(acl, collector)


def test_same_device_is_never_twice_in_one_window(
    acl: FakeAcl, collector: Collector, toolkit: Toolkit, tmp_path: Path
) -> None:
    key = key_for(toolkit, tmp_path)
    acl.hold(START)
    busy = collector.join(key, 9, library_owned=False)
    acl.wait_calls(START)
    zeros = [collector.join(key, 0, library_owned=False) for _ in range(3)]
    one = collector.join(key, 1, library_owned=False)
    assert len({p.window for p in zeros}) == 3
    assert one.window is zeros[0].window  # another device joins the first gathering window
    acl.release(START)
    leave_all(collector, [busy, *zeros, one])
    assert acl.created() == [(9,), (0, 1), (0,), (0,)]
    assert_clean(acl, collector)


def test_join_many_takes_its_places_in_one_window(
    acl: FakeAcl, collector: Collector, toolkit: Toolkit, tmp_path: Path
) -> None:
    key = key_for(toolkit, tmp_path)
    acl.hold(START)
    busy = collector.join(key, 9, library_owned=False)
    acl.wait_calls(START)
    single = collector.join(key, 1, library_owned=False)
    group = collector.join_many(key, [0, 1, 2], library_owned=False)
    assert len({p.window for p in group}) == 1, "join_many split its devices"
    assert group[0].window is not single.window  # device 1 is taken there: a window of its own
    other = collector.join_many(key, [3, 4], library_owned=False)
    assert {p.window for p in other} == {single.window}  # fits the first gathering window
    with pytest.raises(UsageError, match="duplicate"):
        collector.join_many(key, [5, 5], library_owned=False)
    acl.release(START)
    leave_all(collector, [busy, single, *group, *other])
    # the refused call took no place: no window holds device 5
    assert acl.created() == [(9,), (1, 3, 4), (0, 1, 2)]
    assert_clean(acl, collector)


def test_join_many_is_atomic_among_concurrent_joiners(
    acl: FakeAcl, collector: Collector, toolkit: Toolkit, tmp_path: Path
) -> None:
    key = key_for(toolkit, tmp_path)
    acl.hold(START)
    busy = collector.join(key, 9, library_owned=False)
    acl.wait_calls(START)
    taken: list[list[Participant]] = []
    lock = threading.Lock()
    go = threading.Barrier(4)

    def joiner(seed: int) -> None:
        rng = random.Random(seed)
        go.wait()
        for _ in range(25):
            devices = rng.sample(range(8), rng.randint(1, 4))
            got = (
                collector.join_many(key, devices, library_owned=False)
                if len(devices) > 1
                else [collector.join(key, devices[0], library_owned=False)]
            )
            with lock:
                taken.append(got)

    threads = [threading.Thread(target=joiner, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for got in taken:
        assert len({p.window for p in got}) == 1
    for window in {p.window for got in taken for p in got}:
        assert len(window.devices) == len(set(window.devices)), "a device twice in one window"
    acl.release(START)
    leave_all(collector, [busy, *(p for got in taken for p in got)])
    assert sorted(d for devices in acl.created()[1:] for d in devices) == sorted(
        p.device for got in taken for p in got
    )
    assert_clean(acl, collector)  # the fake also refused a device twice in one config


# -- gathering a driver's devices (cohorts) -------------------------------------------------------------


def test_a_window_waits_for_every_device_of_its_cohort(
    acl: FakeAcl, collector: Collector, toolkit: Toolkit, tmp_path: Path
) -> None:
    key = key_for(toolkit, tmp_path)
    with collector.gather(key, [0, 1, 2], linger=60.0):
        first = [collector.join(key, 0, library_owned=False), collector.join(key, 1, library_owned=False)]
        assert not first[0].window.started.is_set()
        assert START not in acl.names(), "a held window started"
        last = collector.join(key, 2, library_owned=False)
        assert last.window is first[0].window
        leave_all(collector, [*first, last])
    assert acl.names().count(START) == 1
    assert collector.windows_lingered == 0
    assert_clean(acl, collector)


def test_a_device_that_fails_before_joining_stops_holding_the_others(
    acl: FakeAcl, collector: Collector, toolkit: Toolkit, tmp_path: Path
) -> None:
    key = key_for(toolkit, tmp_path)
    cohort = collector.gather(key, [0, 1, 2], linger=60.0)
    joined = [collector.join(key, d, library_owned=False) for d in (0, 1)]
    assert not joined[0].window.started.is_set()

    raised: list[BaseException] = []

    def device_2() -> None:
        try:
            with cohort.member(2):
                raise RuntimeError("its case failed before its profile() began")
        except RuntimeError as exc:
            raised.append(exc)

    failing = threading.Thread(target=device_2)
    failing.start()
    failing.join(WAIT)
    assert len(raised) == 1
    leave_all(collector, joined)  # the window started without device 2
    assert sorted(joined[0].window.devices) == [0, 1]
    cohort.close()
    assert_clean(acl, collector)


def test_the_linger_bounds_the_wait_for_a_device_that_never_comes(
    acl: FakeAcl, collector: Collector, toolkit: Toolkit, tmp_path: Path
) -> None:
    key = key_for(toolkit, tmp_path)
    with collector.gather(key, [0, 1], linger=0.02):
        window = one_cycle(collector, key, 0)
    assert window.devices == [0]
    assert collector.windows_lingered == 1
    assert_clean(acl, collector)


def test_a_window_without_cohort_devices_is_never_held(
    acl: FakeAcl, collector: Collector, toolkit: Toolkit, tmp_path: Path
) -> None:
    key = key_for(toolkit, tmp_path)
    with collector.gather(key, [0, 1], linger=60.0):
        one_cycle(collector, key, 5)  # a lone profile() of another device
        one_cycle(collector, key_for(toolkit, tmp_path, metrics=2), 0)  # the cohort's device, another key
    assert collector.windows_lingered == 0
    assert_clean(acl, collector)


def test_closing_a_cohort_releases_its_held_window_and_a_withdrawn_device_can_come_back(
    acl: FakeAcl, collector: Collector, toolkit: Toolkit, tmp_path: Path
) -> None:
    key = key_for(toolkit, tmp_path)
    cohort = collector.gather(key, [0, 1], linger=60.0)
    cohort.withdraw(1)
    one_cycle(collector, key, 0)  # device 1 is not expected: no hold
    cohort.expect(1)
    held = collector.join(key, 0, library_owned=False)
    assert not held.window.started.is_set()
    cohort.close()
    leave_all(collector, [held])
    assert collector.windows_lingered == 0
    assert_clean(acl, collector)


def test_a_held_window_whose_callers_all_leave_lets_the_next_one_go(
    acl: FakeAcl, collector: Collector, toolkit: Toolkit, tmp_path: Path
) -> None:
    key = key_for(toolkit, tmp_path)
    with collector.gather(key, [0, 1], linger=60.0):
        held = collector.join(key, 0, library_owned=False)
        other = collector.join(key_for(toolkit, tmp_path, metrics=2), 3, library_owned=False)
        assert not other.window.started.is_set()  # queued behind the held window
        collector.leave(held)  # e.g. cancelled while waiting for its start
        leave_all(collector, [other])
    assert acl.names().count(START) == 1
    assert_clean(acl, collector)
