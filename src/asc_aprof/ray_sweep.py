"""A sweep or a tune over every NPU of a Ray cluster: one actor per node, each measuring locally.

Install with ``pip install 'asc-aprof[ray]'``. Never imported by ``import asc_aprof``.

Theory of operation
-------------------
* **One actor per node** that has the resource ``NPU``, pinned to it (node affinity) and
  holding all of that node's NPUs, so one process per node owns the process-wide collector and
  its collection windows (two processes profiling one device would fight over aclprof).
* **Device ids.** CANN does not support ``ASCEND_RT_VISIBLE_DEVICES`` while profiling, so every
  actor runs with ``RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1`` (Ray leaves the
  variable alone) and passes the NPU ids Ray assigned it
  (``get_runtime_context().get_accelerator_ids()["NPU"]``) as explicit ``devices=`` to
  :meth:`AsyncProfiler.sweep <asc_aprof.AsyncProfiler.sweep>`.
* **Distribution.** Cases are dealt to the nodes up front in proportion to their NPU counts
  (round-robin over a list where each node appears once per NPU), so the split is known and
  deterministic; each node's sweep then balances its share over its NPUs.
* **Streaming.** Each actor's ``sweep`` is a Ray streaming generator yielding ``(index,
  SweepItem)`` pairs as its local sweep produces them, every pair ready at once in one list (a
  window's items come together, and one streamed object costs Ray more than its items); the
  driver reads every node's stream in a thread of its own and hands the items out in arrival
  order, with the driver's own case objects, as :class:`~asc_aprof.SweepItem`. Device ids are
  node-local.
* **A dying node.** When a node's stream fails (the actor or its node died), every case of that
  node not yet received becomes an item whose ``error`` is a :class:`NodeLost` naming the node
  and the cause; the other nodes go on.
* **Cancellation.** Leaving the ``with`` block early (``break``, an exception, a
  KeyboardInterrupt) kills the actors; their collections die with their processes (raw data
  already written stays on the node's disk).
* **Kept actors.** Starting the actors costs seconds per call (a new process per node
  importing Ray, asc-aprof and the toolkit). :class:`NodeActors` starts them once for any
  number of sweeps and tunes, one at a time. Each actor runs two calls at once, so that a sweep
  left early is cancelled on the actor (``cancel_sweep``: bodies in flight finish, nothing new
  starts) rather than by killing it; the driver drains the stream until it ends, at most
  :data:`CANCEL_TIMEOUT` per node, then kills that actor. A tune left early lets its round in
  flight end the same way. A node whose actor died or was killed is *lost*: later calls deal
  their work over the others.
* **One report.** :func:`merge_report` writes the items' results as one asc-aprof JSON report
  that ``asc-aprof compare`` and ``asc-aprof summary`` read.

**Tune.** :func:`ray_tune` / :func:`ray_tune_async` drive :func:`asc_aprof._profilers._tune.tune_plan` (the
race and the cache, written once for every driver) with the same actors: the configurations,
``run`` and ``flush`` are pickled to each actor once (``setup_tune``); each round's requests are
dealt to the live nodes by NPU count (:func:`deal`) and each actor measures its share with
:func:`asc_aprof._profilers._tune.measure_sync` on its NPUs (one thread per device, the devices sharing
one window per round), returning each candidate's samples and calibration, which the driver
sends back with the candidate's next request wherever it runs. A node whose round fails (its actor died) turns
that round's candidates on it into :class:`NodeLost` failures and gets no more rounds; when no
node is left, the remaining candidates fail the same way. The platform for the cache key comes
from one empty window on the first node.

Without Ray: run the same sweep on every host (``asc-aprof`` or a script writing
``merge_report``/the pytest plugin's report) and give all the reports to ``asc-aprof compare``
or ``asc-aprof summary``, which read several reports at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import pickle
import queue
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
import ray
import ray.exceptions
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ._model._defaults import CONFIDENCE, FIRST_REPS, MAX_REPS, REL_WIDTH, SEED, WARMUP_CALLS
from ._model._errors import AprofError, UsageError
from ._model._records import ProfilingResult
from ._outputs._json_report import report
from ._plans._bench import BenchConfig
from ._plans._stats import run_kernel_stats
from ._profilers._async import SweepItem
from ._profilers._tune import (
    FileIO,
    Measured,
    Outcome,
    Probe,
    Request,
    TuneOptions,
    TuneResult,
    check_candidates,
    measure_sync,
    probe_sync,
    tune_plan,
)
from ._runs._drive import drive, drive_async

CaseT = TypeVar("CaseT")
ConfigT = TypeVar("ConfigT")

NOSET_VARIABLE: Final = "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES"
RESOURCE: Final = "NPU"
#: Seconds a sweep left early waits for each kept actor's sweep to end before killing the actor.
CANCEL_TIMEOUT: Final = 60.0


class NodeLost(AprofError):
    """The node running a case died (or its actor did) before the case's item came back."""


@dataclasses.dataclass(frozen=True, slots=True)
class Node:
    """A node with NPUs: its Ray id, address and NPU count."""

    node_id: str
    address: str
    npus: int


def npu_nodes() -> list[Node]:
    """The live nodes of the connected cluster that have the ``NPU`` resource."""
    found = []
    for node in ray.nodes():
        npus = int(node.get("Resources", {}).get(RESOURCE, 0))
        if node.get("Alive") and npus > 0:
            found.append(Node(node["NodeID"], node.get("NodeManagerAddress", ""), npus))
    return sorted(found, key=lambda n: n.node_id)


def deal(count: int, nodes: Sequence[Node]) -> list[list[int]]:
    """Case indices per node, in proportion to the nodes' NPU counts (see the module docstring)."""
    slots = [i for k in range(max(n.npus for n in nodes)) for i, n in enumerate(nodes) if k < n.npus]
    shares: list[list[int]] = [[] for _ in nodes]
    for case in range(count):
        shares[slots[case % len(slots)]].append(case)
    return shares


def _portable(error: BaseException | None) -> BaseException | None:
    """*error*, or an :class:`AprofError` with its text when it cannot be pickled back."""
    if error is None:
        return None
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        return AprofError(f"{type(error).__name__}: {error}")
    return error


class _NodeSweeper:
    """The per-node actor: the local sweep over the NPUs Ray assigned to it.

    It runs two calls at once (``max_concurrency=2``) so that :meth:`cancel_sweep` can reach a
    running :meth:`sweep`; the driver never runs two sweeps or tunes on one actor at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # guarded by _lock: sweeps running now (their loop's token and cancel scope), and sweeps
        # cancelled before they began
        self._running: dict[str, tuple[Any, anyio.CancelScope]] = {}
        self._cancelled: set[str] = set()

    def devices(self) -> list[int]:
        ids = ray.get_runtime_context().get_accelerator_ids().get(RESOURCE, [])
        return [int(i) for i in ids]

    def environ(self, name: str) -> str | None:
        return os.environ.get(name)

    def sweep(
        self,
        indexed: list[tuple[int, Any]],
        run: Callable[[Any, int], Any],
        bench: BenchConfig | None,
        simulate: bool,
        sweep_id: str = "",
    ) -> Iterator[list[tuple[int, SweepItem[Any]]]]:
        from ._profilers._async import AsyncProfiler

        toolkit = None
        if simulate:
            from . import sim

            toolkit = sim.toolkit()
        devices = self.devices()
        items: queue.Queue[tuple[int, SweepItem[Any]] | BaseException | None] = queue.Queue()

        async def main() -> None:
            profiler = AsyncProfiler(toolkit=toolkit)
            cases = [(i, case) for i, case in indexed]

            def run_case(pair: tuple[int, Any], device: int) -> Any:
                return run(pair[1], device)

            with anyio.CancelScope() as scope:
                with self._lock:
                    if sweep_id in self._cancelled:
                        scope.cancel()
                    self._running[sweep_id] = (anyio.lowlevel.current_token(), scope)
                try:
                    async with profiler.sweep(cases, run_case, devices, bench=bench) as stream:
                        async for item in stream:
                            index, case = item.case
                            error = _portable(item.error)
                            items.put((index, SweepItem(case, item.device, item.result, error, item.bench)))
                finally:
                    with self._lock:
                        del self._running[sweep_id]

        def body() -> None:
            try:
                anyio.run(main)
            except BaseException as exc:
                items.put(exc)
            else:
                items.put(None)

        threading.Thread(target=body, name="asc-aprof-node-sweep", daemon=True).start()
        # Every item ready at once goes back as one object: a window's items arrive together,
        # and each streamed object costs Ray far more CPU than pickling the item does.
        while True:
            got = items.get()
            batch: list[tuple[int, SweepItem[Any]]] = []
            while isinstance(got, tuple):
                batch.append(got)
                try:
                    got = items.get_nowait()
                except queue.Empty:
                    break
            if batch:
                yield batch
            if got is None:
                return
            if isinstance(got, BaseException):
                raise got

    def cancel_sweep(self, sweep_id: str) -> None:
        """Cancel sweep *sweep_id* (running or not yet begun): bodies in flight finish, nothing
        new starts, its stream ends."""
        with self._lock:
            running = self._running.get(sweep_id)
            if running is None:
                self._cancelled.add(sweep_id)
                return
        token, scope = running
        with contextlib.suppress(RuntimeError):  # its loop ended meanwhile
            anyio.from_thread.run_sync(scope.cancel, token=token)

    # -- tune: the candidates stay on the actor; each round sends only the requests --------------------
    def setup_tune(
        self,
        configs: list[Any],
        run: Callable[[Any, int], object],
        flush: Callable[[int], object] | None,
        warmup: int,
        simulate: bool,
    ) -> None:
        from ._profilers._sync import Profiler

        toolkit = None
        if simulate:
            from . import sim

            toolkit = sim.toolkit()
        self._tune = (Profiler(toolkit=toolkit), configs, run, flush, warmup)

    def platform(self) -> tuple[str, str]:
        profiler = self._tune[0]
        return probe_sync(profiler, self.devices()[0])

    def measure(self, requests: list[Request]) -> dict[int, Outcome]:
        profiler, configs, run, flush, warmup = self._tune
        got = measure_sync(profiler, configs, run, flush, requests, self.devices(), warmup)
        out: dict[int, Outcome] = {}
        for index, outcome in got.items():
            portable = outcome if isinstance(outcome, Measured) else _portable(outcome)
            assert portable is not None
            out[index] = portable
        return out


def _actor_class() -> Any:
    return ray.remote(_NodeSweeper)


def _start_actors(chosen: Sequence[Node], env: dict[str, str] | None) -> list[Any]:
    """One actor per node, pinned to it, holding all its NPUs, Ray told to leave the device variable alone."""
    actor_env = {NOSET_VARIABLE: "1", **(env or {})}
    Actor = _actor_class()
    return [
        Actor.options(
            resources={RESOURCE: node.npus},
            num_cpus=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False),
            runtime_env={"env_vars": actor_env},
            max_restarts=0,
            max_concurrency=2,
        ).remote()
        for node in chosen
    ]


class NodeActors:
    """One actor per node with NPUs, kept for several sweeps and tunes.

    ``with NodeActors() as actors:`` then ``ray_sweep(cases, run, actors=actors)`` or
    ``ray_tune(configs, run, actors=actors)`` as often as needed: each call uses these actors
    instead of starting (and at its end killing) its own, which costs seconds per call (a new
    Python process per node importing Ray, asc-aprof and the toolkit). *nodes* defaults to
    :func:`npu_nodes`; *env* adds environment variables to the actors. One sweep or tune at a
    time (another one raises :class:`~asc_aprof.UsageError`). A node whose actor dies, or does
    not end a sweep left early within :data:`CANCEL_TIMEOUT`, is :attr:`lost`: later calls deal
    their work over the others. Leaving the block (or :meth:`close`) kills the actors.
    """

    def __init__(self, nodes: Sequence[Node] | None = None, *, env: dict[str, str] | None = None) -> None:
        chosen = list(npu_nodes() if nodes is None else nodes)
        if not chosen:
            raise AprofError("no live Ray node has the resource 'NPU' (ray.init() first?)")
        #: the nodes, in the order of the actors
        self.nodes: tuple[Node, ...] = tuple(chosen)
        self._handles = _start_actors(chosen, env)
        self._lock = threading.Lock()
        self._lost: dict[int, str] = {}  # guarded by _lock: node position -> why it is gone
        self._in_use = ""  # guarded by _lock: the call running on the actors, "" when none
        self._closed = False  # guarded by _lock

    @property
    def lost(self) -> dict[Node, str]:
        """The nodes lost so far, and why."""
        with self._lock:
            return {self.nodes[k]: why for k, why in self._lost.items()}

    def live(self) -> list[int]:
        """Positions (in :attr:`nodes`) of the nodes not lost."""
        with self._lock:
            return [k for k in range(len(self.nodes)) if k not in self._lost]

    def handle(self, k: int) -> Any:
        return self._handles[k]

    def mark_lost(self, k: int, why: str, *, kill: bool = False) -> None:
        """Node *k* is gone (the first reason stays); *kill* also kills its actor."""
        with self._lock:
            self._lost.setdefault(k, why)
        if kill:
            ray.kill(self._handles[k], no_restart=True)

    @contextlib.contextmanager
    def using(self, what: str) -> Iterator[None]:
        """Run *what* (a sweep or a tune) on the actors: one at a time, never after :meth:`close`."""
        with self._lock:
            if self._closed:
                raise UsageError(f"{what}: these NodeActors were closed")
            if self._in_use:
                raise UsageError(f"{what}: these NodeActors are running {self._in_use}; one call at a time")
            self._in_use = what
        try:
            yield
        finally:
            with self._lock:
                self._in_use = ""

    def close(self) -> None:
        """Kill the actors (idempotent); their collections die with them."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for actor in self._handles:
            ray.kill(actor, no_restart=True)

    def __enter__(self) -> NodeActors:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _own_actors(
    what: str, actors: NodeActors | None, nodes: Sequence[Node] | None, env: dict[str, str] | None
) -> tuple[NodeActors, bool]:
    """The call's actors and whether the call owns them (started here, killed at its end)."""
    if actors is None:
        chosen = list(npu_nodes() if nodes is None else nodes)
        if not chosen:
            raise AprofError(f"{what}: no live Ray node has the resource 'NPU' (ray.init() first?)")
        return NodeActors(chosen, env=env), True
    if nodes is not None or env is not None:
        raise UsageError(f"{what}: pass nodes= and env= to NodeActors(), not with actors=")
    return actors, False


@contextlib.contextmanager
def ray_sweep(
    cases: Iterable[CaseT],
    run: Callable[[CaseT, int], Any],
    *,
    bench: BenchConfig | None = None,
    simulate: bool = False,
    nodes: Sequence[Node] | None = None,
    env: dict[str, str] | None = None,
    actors: NodeActors | None = None,
) -> Iterator[Iterator[SweepItem[CaseT]]]:
    """Profile (or with *bench*, benchmark) every case on the cluster's NPUs; items as they finish.

    ``with ray_sweep(cases, run) as items: for item in items: ...``, ``ray.init()`` done by the
    caller. ``run(case, device)`` runs on the node actor with a node-local device id (it and the
    cases are pickled with Ray's cloudpickle). *simulate* runs the simulated toolkit in every
    actor (tests, demos); *env* adds environment variables to the actors. *nodes* defaults to
    :func:`npu_nodes`. Cases of a node that dies come back as items with a :class:`NodeLost`
    error. *actors*: kept :class:`NodeActors` to run on (instead of *nodes* and *env*).

    Leaving the block early kills the actors; with *actors*, it cancels their sweeps instead
    (bodies in flight finish, nothing new starts) and waits for them to end, at most
    :data:`CANCEL_TIMEOUT` per node before that node's actor is killed and the node lost.
    """
    listed = list(cases)
    fleet, owned = _own_actors("ray_sweep()", actors, nodes, env)
    try:
        with fleet.using("ray_sweep()"):
            yield from _sweep_on(fleet, owned, listed, run, bench, simulate)
    finally:
        if owned:
            fleet.close()


def _sweep_on(
    fleet: NodeActors,
    owned: bool,
    listed: list[CaseT],
    run: Callable[[CaseT, int], Any],
    bench: BenchConfig | None,
    simulate: bool,
) -> Iterator[Iterator[SweepItem[CaseT]]]:
    live = fleet.live()
    if not live:
        raise AprofError(f"ray_sweep(): every node of these NodeActors was lost: {fleet.lost}")
    chosen = [fleet.nodes[k] for k in live]
    shares = deal(len(listed), chosen)
    sweep_id = uuid.uuid4().hex
    out: queue.Queue[tuple[int, SweepItem[Any]] | None] = queue.Queue()
    stopping = threading.Event()

    def read(n: int) -> None:
        k, share = live[n], shares[n]
        received: set[int] = set()
        try:
            if share:
                stream = (
                    fleet.handle(k)
                    .sweep.options(num_returns="streaming")
                    .remote([(i, listed[i]) for i in share], run, bench, simulate, sweep_id)
                )
                for ref in stream:
                    got = ray.get(ref)
                    if stopping.is_set():
                        continue  # nobody reads them; the stream ends once the sweep is cancelled
                    for index, item in got:
                        received.add(index)
                        out.put((index, item))
        except Exception as exc:
            node = chosen[n]
            why = f"{type(exc).__name__}: {exc}"
            if not owned and isinstance(exc, ray.exceptions.RayActorError):
                fleet.mark_lost(k, why)
            lost = NodeLost(
                f"node {node.node_id} ({node.address}) was lost with "
                f"{len(share) - len(received)} case(s) unfinished: {why}"
            )
            for index in share:
                if index not in received:
                    out.put((index, SweepItem(listed[index], -1, None, lost)))
        finally:
            out.put(None)

    readers = [threading.Thread(target=read, args=(n,), daemon=True) for n in range(len(live))]
    for reader in readers:
        reader.start()

    def items() -> Iterator[SweepItem[CaseT]]:
        open_readers = len(readers)
        while open_readers:
            got = out.get()
            if got is None:
                open_readers -= 1
                continue
            index, item = got
            yield SweepItem(listed[index], item.device, item.result, item.error, item.bench)

    try:
        yield items()
    finally:
        stopping.set()
        if not owned:  # owned actors are killed, which ends their streams
            _cancel_sweeps(fleet, live, readers, sweep_id)


def _cancel_sweeps(
    fleet: NodeActors, live: list[int], readers: list[threading.Thread], sweep_id: str
) -> None:
    """Cancel the kept actors' unfinished sweeps and wait for their streams to end (bounded)."""
    running = [(k, reader) for k, reader in zip(live, readers, strict=True) if reader.is_alive()]
    for k, _ in running:
        fleet.handle(k).cancel_sweep.remote(sweep_id)
    deadline = time.monotonic() + CANCEL_TIMEOUT
    for k, reader in running:
        reader.join(max(0.0, deadline - time.monotonic()))
        if reader.is_alive():
            fleet.mark_lost(k, f"its sweep did not end within {CANCEL_TIMEOUT:g} s of leaving", kill=True)


# -- tune over the cluster ----------------------------------------------------------------------------------
class _Fleet:
    """A tune's view of its actors: a round dealt over the live ones, lost nodes' outcomes, and
    the rounds in flight (waited for, or their actors killed, when a tune on kept actors ends early)."""

    def __init__(
        self,
        actors: NodeActors,
        owned: bool,
        configs: list[Any],
        run: Callable[[Any, int], object],
        flush: Callable[[int], object] | None,
        warmup: int,
        simulate: bool,
    ) -> None:
        self.actors = actors
        self.owned = owned
        self.in_flight: dict[int, Any] = {}  # node position -> its round's reference (driver thread only)
        live = actors.live()
        refs = [actors.handle(k).setup_tune.remote(configs, run, flush, warmup, simulate) for k in live]
        for k, ref in zip(live, refs, strict=True):
            try:
                ray.get(ref)
            except ray.exceptions.RayActorError as exc:  # the actor died; anything else is raised
                self._lose(k, f"{type(exc).__name__}: {exc}")
        if not actors.live():
            raise AprofError(f"ray_tune(): no live Ray node with NPUs is left: {actors.lost}")

    def _lose(self, k: int, why: str) -> None:
        node = self.actors.nodes[k]
        self.actors.mark_lost(k, f"node {node.node_id} ({node.address}): {why}")

    def platform(self) -> Any:
        return self.actors.handle(self.actors.live()[0]).platform.remote()

    def submit(self, requests: Sequence[Request]) -> list[tuple[int, list[Request], Any]]:
        """Deal *requests* over the live nodes by NPU count: (node position, its share, its reference)."""
        live = self.actors.live()
        if not live:
            return [(-1, list(requests), None)]
        shares = deal(len(requests), [self.actors.nodes[k] for k in live])
        submitted = [
            (k, share, self.actors.handle(k).measure.remote(share))
            for k, share in zip(live, ([requests[i] for i in s] for s in shares), strict=True)
            if share
        ]
        self.in_flight = {k: ref for k, _, ref in submitted}
        return submitted

    def outcomes(self, k: int, share: Sequence[Request], get: Callable[[], Any]) -> dict[int, Outcome]:
        """*get()* the node's outcomes; a node that died (or none left) fails its share with NodeLost."""
        if k < 0:
            why = "; ".join(self.actors.lost.values()) or "no node"
            lost = NodeLost(f"no live Ray node with NPUs is left ({why})")
            return {r.index: lost for r in share}
        try:
            return dict(get())
        except Exception as exc:
            node = self.actors.nodes[k]
            self._lose(k, f"{type(exc).__name__}: {exc}")
            lost = NodeLost(f"node {node.node_id} ({node.address}) was lost measuring this round: {exc}")
            return {r.index: lost for r in share}
        finally:
            self.in_flight.pop(k, None)

    def end(self) -> None:
        """After the tune (returned, failed or cancelled), kept actors finish the round in
        flight (a bounded wait) or are killed and lost; owned ones are killed by the caller."""
        if self.owned or not self.in_flight:
            return
        refs = list(self.in_flight.values())
        _, unfinished = ray.wait(refs, num_returns=len(refs), timeout=CANCEL_TIMEOUT)
        for k, ref in self.in_flight.items():
            if ref in unfinished:
                self.actors.mark_lost(
                    k, f"its tune round did not end within {CANCEL_TIMEOUT:g} s of leaving", kill=True
                )
        self.in_flight = {}


def _tune_setup(configs: Iterable[ConfigT], options: dict[str, Any]) -> tuple[list[ConfigT], Any]:
    listed, _ = check_candidates(configs, None)
    tune_options = TuneOptions(
        options.pop("rel_width", REL_WIDTH),
        options.pop("confidence", CONFIDENCE),
        options.pop("first_reps", FIRST_REPS),
        options.pop("max_reps", MAX_REPS),
        options.pop("warmup", WARMUP_CALLS),
        options.pop("seed", SEED),
        options.pop("racing", True),
    )
    known = {"key", "cache", "retune", "cache_dir", "chip", "cann"}
    if set(options) - known:
        raise TypeError(f"ray_tune() got unexpected options: {sorted(set(options) - known)}")
    plan = tune_plan(
        listed,
        tune_options,
        key=options.get("key"),
        cache=options.get("cache", True),
        retune=options.get("retune", False),
        cache_dir=options.get("cache_dir"),
        chip=options.get("chip"),
        cann=options.get("cann"),
    )
    return listed, (plan, tune_options)


def ray_tune(
    configs: Iterable[ConfigT],
    run: Callable[[ConfigT, int], object],
    *,
    flush: Callable[[int], object] | None = None,
    simulate: bool = False,
    nodes: Sequence[Node] | None = None,
    env: dict[str, str] | None = None,
    actors: NodeActors | None = None,
    **options: Any,
) -> TuneResult[ConfigT]:
    """:meth:`Profiler.tune <asc_aprof.Profiler.tune>` with every round dealt over the cluster's NPUs.

    ``ray.init()`` done by the caller. One actor per node with NPUs (as :func:`ray_sweep`) keeps
    the configurations, *run* and *flush* (pickled once) and measures its share of each round on
    its NPUs (node-local device ids, one window per round shared by its devices); the race, the
    cache and the result are :func:`~asc_aprof.tune`'s. *options* are its keywords (``key``, ``rel_width``,
    ``seed``, ``racing``, ``retune``, ``cache_dir``, ``chip``, ``cann``...); the cache lives on
    this (the driver's) machine. A failing candidate is a row; a node that dies fails its
    candidates of that round with :class:`NodeLost` and later rounds use the others.
    *actors*: kept :class:`NodeActors` to run on (instead of *nodes* and *env*); the tune then
    leaves them alive, and one left early (an exception, a KeyboardInterrupt) first lets its
    round in flight end (at most :data:`CANCEL_TIMEOUT`, else those nodes' actors are killed).
    """
    listed, (plan, tune_options) = _tune_setup(configs, dict(options))
    actors, owned = _own_actors("ray_tune()", actors, nodes, env)
    try:
        with actors.using("ray_tune()"):
            fleet = _Fleet(actors, owned, listed, run, flush, tune_options.warmup, simulate)
            try:
                return _drive_tune(plan, fleet)
            finally:
                fleet.end()
    finally:
        if owned:
            actors.close()


def _drive_tune(plan: Any, fleet: _Fleet) -> TuneResult[Any]:
    def perform(step: Any) -> Any:
        if isinstance(step, Probe):
            return ray.get(fleet.platform())
        if isinstance(step, FileIO):
            return step.action()
        outcome: dict[int, Any] = {}
        for k, share, ref in fleet.submit(step.requests):
            outcome.update(fleet.outcomes(k, share, functools.partial(ray.get, ref)))
        return outcome

    result: TuneResult[Any] = drive(plan, perform)
    return result


async def ray_tune_async(
    configs: Iterable[ConfigT],
    run: Callable[[ConfigT, int], object],
    *,
    flush: Callable[[int], object] | None = None,
    simulate: bool = False,
    nodes: Sequence[Node] | None = None,
    env: dict[str, str] | None = None,
    actors: NodeActors | None = None,
    **options: Any,
) -> TuneResult[ConfigT]:
    """:func:`ray_tune`, awaiting (asyncio or trio): Ray's blocking calls run in worker threads.

    Cancelled: the actors it started are killed (their windows die with them, raw data already
    written stays on the nodes' disks); kept *actors* instead finish the round in flight
    (shielded, at most :data:`CANCEL_TIMEOUT`, else those nodes' actors are killed and lost)
    and stay alive. Nothing is cached or returned.
    """
    listed, (plan, tune_options) = _tune_setup(configs, dict(options))
    actors, owned = _own_actors("ray_tune_async()", actors, nodes, env)

    async def wait(ref: Any) -> Any:
        return await anyio.to_thread.run_sync(ray.get, ref, abandon_on_cancel=True)

    try:
        with actors.using("ray_tune_async()"):
            fleet = await anyio.to_thread.run_sync(
                functools.partial(_Fleet, actors, owned, listed, run, flush, tune_options.warmup, simulate)
            )

            async def perform(step: Any) -> Any:
                if isinstance(step, Probe):
                    return await wait(fleet.platform())
                if isinstance(step, FileIO):
                    return await anyio.to_thread.run_sync(step.action)
                return await _round_async(fleet, step.requests, wait)

            try:
                result: TuneResult[ConfigT] = await drive_async(plan, perform=perform)
                return result
            finally:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(fleet.end)
    finally:
        if owned:
            actors.close()


async def _round_async(
    fleet: _Fleet, requests: Sequence[Request], wait: Callable[[Any], Awaitable[Any]]
) -> dict[int, Outcome]:
    submitted = fleet.submit(requests)
    results: list[Any] = [None] * len(submitted)

    async def one(n: int, ref: Any) -> None:
        try:
            results[n] = await wait(ref)
        except Exception as exc:
            results[n] = exc

    async with anyio.create_task_group() as tg:
        for n, (_, _, ref) in enumerate(submitted):
            if ref is not None:
                tg.start_soon(one, n, ref)
    outcome: dict[int, Outcome] = {}
    for (k, share, _), got in zip(submitted, results, strict=True):
        outcome.update(fleet.outcomes(k, share, functools.partial(_reraise, got)))
    return outcome


def _reraise(got: Any) -> Any:
    if isinstance(got, BaseException):
        raise got
    return got


def merge_report(items: Iterable[SweepItem[Any]], path: str | os.PathLike[str]) -> Path:
    """Write the items' results (profiled ones) as one asc-aprof JSON report at *path*."""
    results: list[ProfilingResult] = [i.result for i in items if i.result is not None]
    stats = run_kernel_stats([r.tasks for r in results])
    target = Path(path)
    target.write_text(json.dumps(report(results, stats)), encoding="utf-8")
    return target


__all__ = [
    "CANCEL_TIMEOUT",
    "Node",
    "NodeActors",
    "NodeLost",
    "deal",
    "merge_report",
    "npu_nodes",
    "ray_sweep",
    "ray_tune",
    "ray_tune_async",
]
