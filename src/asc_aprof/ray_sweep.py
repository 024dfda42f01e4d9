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
  window's items come together, and one streamed object costs Ray more than its items); the driver reads every node's stream in a
  thread of its own and hands the items out in arrival order, with the driver's own case
  objects, as :class:`~asc_aprof.SweepItem`. Device ids are node-local.
* **A dying node.** When a node's stream fails (the actor or its node died), every case of that
  node not yet received becomes an item whose ``error`` is a :class:`NodeLost` naming the node
  and the cause; the other nodes go on.
* **Cancellation.** Leaving the ``with`` block early (``break``, an exception, a
  KeyboardInterrupt) kills the actors; their collections die with their processes (raw data
  already written stays on the node's disk).
* **One report.** :func:`merge_report` writes the items' results as one asc-aprof JSON report
  that ``asc-aprof compare`` and ``asc-aprof summary`` read.

**Tune.** :func:`ray_tune` / :func:`ray_tune_async` drive :func:`asc_aprof._tune.tune_plan` (the
race and the cache, written once for every driver) with the same actors: the configurations,
``run`` and ``flush`` are pickled to each actor once (``setup_tune``); each round's requests are
dealt to the live nodes by NPU count (:func:`deal`) and each actor measures its share with
:func:`asc_aprof._tune.measure_sync` on its NPUs (one thread per device, the devices sharing
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
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

import anyio
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ._async import SweepItem
from ._bench import BenchConfig
from ._errors import AprofError
from ._records import ProfilingResult
from ._report import report
from ._stats import run_kernel_stats
from ._tune import (
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

CaseT = TypeVar("CaseT")
ConfigT = TypeVar("ConfigT")

NOSET_VARIABLE: Final = "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES"
RESOURCE: Final = "NPU"


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
    """The per-node actor: the local sweep over the NPUs Ray assigned to it."""

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
    ) -> Iterator[list[tuple[int, SweepItem[Any]]]]:
        import anyio

        from ._async import AsyncProfiler

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

            async with profiler.sweep(cases, run_case, devices, bench=bench) as stream:
                async for item in stream:
                    index, case = item.case
                    items.put(
                        (
                            index,
                            SweepItem(case, item.device, item.result, _portable(item.error), item.bench),
                        )
                    )

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

    # -- tune: the candidates stay on the actor; each round sends only the requests --------------------
    def setup_tune(
        self,
        configs: list[Any],
        run: Callable[[Any, int], object],
        flush: Callable[[int], object] | None,
        warmup: int,
        simulate: bool,
    ) -> None:
        from ._profiler import Profiler

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
        ).remote()
        for node in chosen
    ]


@contextlib.contextmanager
def ray_sweep(
    cases: Iterable[CaseT],
    run: Callable[[CaseT, int], Any],
    *,
    bench: BenchConfig | None = None,
    simulate: bool = False,
    nodes: Sequence[Node] | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[Iterator[SweepItem[CaseT]]]:
    """Profile (or with *bench*, benchmark) every case on the cluster's NPUs; items as they finish.

    ``with ray_sweep(cases, run) as items: for item in items: ...``, ``ray.init()`` done by the
    caller. ``run(case, device)`` runs on the node actor with a node-local device id (it and the
    cases are pickled with Ray's cloudpickle). *simulate* runs the simulated toolkit in every
    actor (tests, demos); *env* adds environment variables to the actors. *nodes* defaults to
    :func:`npu_nodes`. Cases of a node that dies come back as items with a :class:`NodeLost`
    error. Leaving the block early kills the actors.
    """
    listed = list(cases)
    chosen = list(npu_nodes() if nodes is None else nodes)
    if not chosen:
        raise AprofError("ray_sweep(): no live Ray node has the resource 'NPU' (ray.init() first?)")
    shares = deal(len(listed), chosen)
    actors = _start_actors(chosen, env)
    out: queue.Queue[tuple[int, SweepItem[Any]] | None] = queue.Queue()
    stopping = threading.Event()

    def read(k: int) -> None:
        share = shares[k]
        received: set[int] = set()
        try:
            if share:
                stream = (
                    actors[k]
                    .sweep.options(num_returns="streaming")
                    .remote([(i, listed[i]) for i in share], run, bench, simulate)
                )
                for ref in stream:
                    for index, item in ray.get(ref):
                        received.add(index)
                        out.put((index, item))
                    if stopping.is_set():
                        return
        except Exception as exc:
            lost = NodeLost(
                f"node {chosen[k].node_id} ({chosen[k].address}) was lost with "
                f"{len(share) - len(received)} case(s) unfinished: {type(exc).__name__}: {exc}"
            )
            for index in share:
                if index not in received:
                    out.put((index, SweepItem(listed[index], -1, None, lost)))
        finally:
            out.put(None)

    readers = [threading.Thread(target=read, args=(k,), daemon=True) for k in range(len(chosen))]
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
        for actor in actors:
            ray.kill(actor, no_restart=True)


# -- tune over the cluster ----------------------------------------------------------------------------------
class _Fleet:
    """The tune's actors: which are alive, a round dealt over the live ones, lost nodes' outcomes."""

    def __init__(
        self,
        chosen: Sequence[Node],
        env: dict[str, str] | None,
        configs: list[Any],
        run: Callable[[Any, int], object],
        flush: Callable[[int], object] | None,
        warmup: int,
        simulate: bool,
    ) -> None:
        self.nodes = list(chosen)
        self.actors = _start_actors(self.nodes, env)
        self.lost: dict[int, str] = {}  # node position -> why; only the driver's thread touches it
        try:
            ray.get([a.setup_tune.remote(configs, run, flush, warmup, simulate) for a in self.actors])
        except BaseException:
            self.kill()
            raise

    def platform(self) -> Any:
        return self.actors[0].platform.remote()

    def submit(self, requests: Sequence[Request]) -> list[tuple[int, list[Request], Any]]:
        """Deal *requests* over the live nodes by NPU count: (node position, its share, its reference)."""
        live = [k for k in range(len(self.nodes)) if k not in self.lost]
        if not live:
            return [(-1, list(requests), None)]
        shares = deal(len(requests), [self.nodes[k] for k in live])
        return [
            (k, share, self.actors[k].measure.remote(share))
            for k, share in zip(live, ([requests[i] for i in s] for s in shares), strict=True)
            if share
        ]

    def outcomes(self, k: int, share: Sequence[Request], get: Callable[[], Any]) -> dict[int, Outcome]:
        """*get()* the node's outcomes; a node that died (or none left) fails its share with NodeLost."""
        if k < 0:
            why = "; ".join(self.lost.values()) or "no node"
            lost = NodeLost(f"no live Ray node with NPUs is left ({why})")
            return {r.index: lost for r in share}
        try:
            return dict(get())
        except Exception as exc:
            node = self.nodes[k]
            self.lost[k] = f"node {node.node_id} ({node.address}): {type(exc).__name__}: {exc}"
            lost = NodeLost(f"node {node.node_id} ({node.address}) was lost measuring this round: {exc}")
            return {r.index: lost for r in share}

    def kill(self) -> None:
        for actor in self.actors:
            ray.kill(actor, no_restart=True)


def _tune_setup(
    configs: Iterable[ConfigT],
    nodes: Sequence[Node] | None,
    options: dict[str, Any],
) -> tuple[list[ConfigT], list[Node], Any]:
    listed, _ = check_candidates(configs, None)
    chosen = list(npu_nodes() if nodes is None else nodes)
    if not chosen:
        raise AprofError("ray_tune(): no live Ray node has the resource 'NPU' (ray.init() first?)")
    tune_options = TuneOptions(
        options.pop("rel_width", 0.02),
        options.pop("confidence", 0.95),
        options.pop("first_reps", 10),
        options.pop("max_reps", 1000),
        options.pop("warmup", 2),
        options.pop("seed", 0),
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
    return listed, chosen, (plan, tune_options)


def ray_tune(
    configs: Iterable[ConfigT],
    run: Callable[[ConfigT, int], object],
    *,
    flush: Callable[[int], object] | None = None,
    simulate: bool = False,
    nodes: Sequence[Node] | None = None,
    env: dict[str, str] | None = None,
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
    """
    listed, chosen, (plan, tune_options) = _tune_setup(configs, nodes, dict(options))
    fleet = _Fleet(chosen, env, listed, run, flush, tune_options.warmup, simulate)
    try:
        outcome: Any = None
        while True:
            try:
                step = plan.send(outcome)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            if isinstance(step, Probe):
                outcome = ray.get(fleet.platform())
            elif isinstance(step, FileIO):
                outcome = step.action()
            else:
                outcome = {}
                for k, share, ref in fleet.submit(step.requests):
                    outcome.update(fleet.outcomes(k, share, functools.partial(ray.get, ref)))
    finally:
        fleet.kill()


async def ray_tune_async(
    configs: Iterable[ConfigT],
    run: Callable[[ConfigT, int], object],
    *,
    flush: Callable[[int], object] | None = None,
    simulate: bool = False,
    nodes: Sequence[Node] | None = None,
    env: dict[str, str] | None = None,
    **options: Any,
) -> TuneResult[ConfigT]:
    """:func:`ray_tune`, awaiting (asyncio or trio): Ray's blocking calls run in worker threads.

    Cancelled: the actors are killed (their windows die with them, raw data already written stays
    on the nodes' disks); nothing is cached or returned.
    """
    listed, chosen, (plan, tune_options) = _tune_setup(configs, nodes, dict(options))
    fleet = await anyio.to_thread.run_sync(
        functools.partial(_Fleet, chosen, env, listed, run, flush, tune_options.warmup, simulate)
    )

    async def wait(ref: Any) -> Any:
        return await anyio.to_thread.run_sync(ray.get, ref, abandon_on_cancel=True)

    try:
        outcome: Any = None
        while True:
            try:
                step = plan.send(outcome)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            if isinstance(step, Probe):
                outcome = await wait(fleet.platform())
            elif isinstance(step, FileIO):
                outcome = await anyio.to_thread.run_sync(step.action)
            else:
                outcome = await _round_async(fleet, step.requests, wait)
    finally:
        fleet.kill()


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


__all__ = ["Node", "NodeLost", "deal", "merge_report", "npu_nodes", "ray_sweep", "ray_tune", "ray_tune_async"]
