"""A sweep over every NPU of a Ray cluster: one actor per node, each running the local sweep.

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
  SweepItem)`` as its local sweep produces them; the driver reads every node's stream in a
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

Without Ray: run the same sweep on every host (``asc-aprof`` or a script writing
``merge_report``/the pytest plugin's report) and give all the reports to ``asc-aprof compare``
or ``asc-aprof summary``, which read several reports at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pickle
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ._async import SweepItem
from ._bench import BenchConfig
from ._errors import AprofError
from ._records import ProfilingResult
from ._report import report
from ._stats import run_kernel_stats

CaseT = TypeVar("CaseT")

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
    ) -> Iterator[tuple[int, SweepItem[Any]]]:
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
        while True:
            got = items.get()
            if got is None:
                return
            if isinstance(got, BaseException):
                raise got
            yield got


def _actor_class() -> Any:
    return ray.remote(_NodeSweeper)


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
    actor_env = {NOSET_VARIABLE: "1", **(env or {})}
    shares = deal(len(listed), chosen)
    Actor = _actor_class()
    actors = [
        Actor.options(
            resources={RESOURCE: node.npus},
            num_cpus=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False),
            runtime_env={"env_vars": actor_env},
            max_restarts=0,
        ).remote()
        for node in chosen
    ]
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
                    index, item = ray.get(ref)
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


def merge_report(items: Iterable[SweepItem[Any]], path: str | os.PathLike[str]) -> Path:
    """Write the items' results (profiled ones) as one asc-aprof JSON report at *path*."""
    results: list[ProfilingResult] = [i.result for i in items if i.result is not None]
    stats = run_kernel_stats([r.tasks for r in results])
    target = Path(path)
    target.write_text(json.dumps(report(results, stats)), encoding="utf-8")
    return target


__all__ = ["Node", "NodeLost", "deal", "merge_report", "npu_nodes", "ray_sweep"]
