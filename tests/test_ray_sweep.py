"""asc_aprof.ray_sweep on a real local Ray cluster: two nodes with 4 fake NPUs each, the simulator in
every actor: the sweep, and tune() over the cluster. One module-scoped cluster (starting one takes
~15 s on 2 cores); skipped (failed in CI) without ray (``pip install -e '.[test]'``)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest

from .extras import require

ray = require("ray")

from ray.cluster_utils import Cluster  # noqa: E402

from asc_aprof import (  # noqa: E402
    BenchConfig,
    CandidateStatus,
    SweepItem,
    TuneStop,
    UsageError,
    sim,
)
from asc_aprof._outputs._json_report import load_json  # noqa: E402
from asc_aprof._profilers._tune import race  # noqa: E402
from asc_aprof.ray_sweep import (  # noqa: E402
    NOSET_VARIABLE,
    Node,
    NodeActors,
    NodeLost,
    deal,
    merge_report,
    npu_nodes,
    ray_sweep,
    ray_tune,
    ray_tune_async,
)

pytestmark = pytest.mark.filterwarnings("ignore")  # ray's own deprecation warnings


@pytest.fixture(scope="module")
def cluster() -> Iterator[list[Node]]:
    sim.root()  # build once, before the actors race to
    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {"NPU": 4}})
    nodes.add_node(num_cpus=1, resources={"NPU": 4})
    ray.init(address=nodes.address, logging_level="ERROR", log_to_driver=False)
    nodes.wait_for_nodes()
    try:
        yield npu_nodes()
    finally:
        ray.shutdown()
        nodes.shutdown()


def launch(case: int, device: int) -> None:
    assert "ASCEND_RT_VISIBLE_DEVICES" not in os.environ, "Ray must not set it while profiling"
    assert os.environ.get(NOSET_VARIABLE) == "1"
    sim.launch(f"k{case % 3}", device=device, duration_us=10.0 + case % 3)


def pid_of(run_id: str) -> str:
    found = re.search(r"_(\d{8})[A-Z]{8}$", run_id)
    assert found, run_id
    return found.group(1)


def test_deal_follows_npu_counts() -> None:
    nodes = [Node("a", "", 4), Node("b", "", 2)]
    shares = deal(12, nodes)
    assert sorted(shares[0] + shares[1]) == list(range(12))
    assert (len(shares[0]), len(shares[1])) == (8, 4)


def test_cases_run_on_every_node_and_merge_into_one_report(cluster: list[Node], tmp_path: Path) -> None:
    assert [n.npus for n in cluster] == [4, 4]
    with ray_sweep(range(24), launch, simulate=True) as items:
        got = list(items)
    assert sorted(i.case for i in got) == list(range(24))
    assert [i.error for i in got if i.error is not None] == []
    assert {i.device for i in got} == {0, 1, 2, 3}  # the assigned NPU ids, passed explicitly
    results = [i.result for i in got if i.result is not None]
    assert len({pid_of(r.run_id) for r in results}) == 2  # one process per node
    path = merge_report(got, tmp_path / "all.json")
    loaded = load_json(path)
    assert len(loaded) == 24
    assert sum(len(r.tasks) for r in loaded) == 24


def test_bench_sweep_streams_bench_items(cluster: list[Node]) -> None:
    with ray_sweep(range(8), launch, simulate=True, bench=BenchConfig(reps=10)) as items:
        got = sorted(items, key=lambda i: i.case)
    assert [i.error for i in got] == [None] * 8
    assert [i.bench.median_us for i in got if i.bench is not None] == [10.0 + c % 3 for c in range(8)]


def die_on_five(case: int, device: int) -> None:
    if case == 5:
        os._exit(3)  # the node's actor dies mid-sweep
    time.sleep(0.05)
    launch(case, device)


def test_a_dead_node_turns_its_unfinished_cases_into_errors(cluster: list[Node]) -> None:
    shares = deal(16, cluster)
    dying = next(k for k, share in enumerate(shares) if 5 in share)
    with ray_sweep(range(16), die_on_five, simulate=True) as items:
        got = list(items)
    assert sorted(i.case for i in got) == list(range(16))  # every case has an item
    lost = [i for i in got if isinstance(i.error, NodeLost)]
    assert 5 in {i.case for i in lost}
    assert {i.case for i in lost} <= set(shares[dying])
    other = 1 - dying
    assert all(i.error is None for i in got if i.case in shares[other])


def slow(case: int, device: int) -> None:
    time.sleep(0.5)
    launch(case, device)


def test_leaving_early_kills_the_actors(cluster: list[Node]) -> None:
    with ray_sweep(range(64), slow, simulate=True) as items:
        first = next(items)
    assert first.error is None
    # the NPUs are free again: a new sweep gets both nodes' actors scheduled and finishes
    with ray_sweep(range(4), launch, simulate=True) as items:
        assert sorted(i.case for i in items) == [0, 1, 2, 3]


# -- tune over the cluster -----------------------------------------------------------------------------
#: candidates of known speed (µs): the fastest is 1, 3% ahead of the next; every launch has 3% noise
SPEEDS = (12.0, 10.0, 10.3, 15.0, 11.0, 20.0)


def tile(config: int, device: int) -> None:
    sim.launch("tile", device=device, duration_us=SPEEDS[config], jitter=0.03)


def logged(log: Path) -> Callable[[int, int], None]:
    def run(config: int, device: int) -> None:
        assert "ASCEND_RT_VISIBLE_DEVICES" not in os.environ, "Ray must not set it while profiling"
        with log.open("a", encoding="utf-8") as out:
            out.write(f"{os.getpid()} {device} {config}\n")
        tile(config, device)

    return run


def test_tune_races_candidates_on_every_node_and_caches(cluster: list[Node], tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    result = ray_tune(
        range(len(SPEEDS)), logged(log), simulate=True, key=("tile", 64), cache_dir=tmp_path, seed=2
    )
    assert result.best == 1 and not result.cached
    assert result.candidates[5].status is CandidateStatus.ELIMINATED
    assert sum(c.count for c in result.candidates) == result.reps
    calls = [line.split() for line in log.read_text().splitlines()]
    assert len({pid for pid, _, _ in calls}) == 2  # both nodes' actors measured
    assert {int(d) for _, d, _ in calls} <= {0, 1, 2, 3} and len({d for _, d, _ in calls}) > 1
    assert result.key is not None and result.key["chip"] == "910B"  # probed on a node
    again = ray_tune(range(len(SPEEDS)), logged(log), simulate=True, key=("tile", 64), cache_dir=tmp_path)
    assert again.cached and again.stop is TuneStop.CACHED and again.best == 1


def fail_or_die(config: int, device: int) -> None:
    if config == 0:
        raise RuntimeError("tiling 0 does not fit")
    if config == 3:
        os._exit(3)  # the node's actor dies mid-round
    tile(config, device)


def apart(a: int, b: int) -> int:
    """A seed whose first round deals candidates *a* and *b* to different nodes (two of 4 NPUs each)."""
    for seed in range(100):
        order = [r.index for r in next(race(len(SPEEDS), seed=seed)).requests]
        if order.index(a) % 2 != order.index(b) % 2:
            return seed
    raise AssertionError("no such seed")


def test_tune_reports_a_failing_candidate_and_a_dead_nodes_candidates(cluster: list[Node]) -> None:
    seed = apart(0, 3)
    result = ray_tune(range(len(SPEEDS)), fail_or_die, simulate=True, cache=False, seed=seed)
    by_index = result.candidates
    assert by_index[0].status is CandidateStatus.FAILED and "does not fit" in (by_index[0].error or "")
    assert by_index[3].status is CandidateStatus.FAILED and "NodeLost" in (by_index[3].error or "")
    failed = {c.index for c in by_index if c.status is CandidateStatus.FAILED}
    assert all("NodeLost" in (by_index[i].error or "") for i in failed - {0})
    survivors = [i for i in range(len(SPEEDS)) if i not in failed]
    assert survivors and result.best == min(survivors, key=lambda i: SPEEDS[i])


async def test_async_tune_over_the_cluster(cluster: list[Node]) -> None:
    result = await ray_tune_async(range(len(SPEEDS)), tile, simulate=True, cache=False, seed=5)
    assert result.best == 1
    assert result.candidates[3].status is CandidateStatus.ELIMINATED


def slow_tile(config: int, device: int) -> None:
    time.sleep(0.2)
    tile(config, device)


async def test_cancelling_an_async_tune_kills_its_actors(cluster: list[Node]) -> None:
    with anyio.move_on_after(8) as scope:
        await ray_tune_async(range(len(SPEEDS)), slow_tile, simulate=True, cache=False)
    assert scope.cancelled_caught
    # the NPUs are free again: a new tune gets both nodes' actors scheduled and finishes
    result = await ray_tune_async(range(2), tile, simulate=True, cache=False)
    assert result.best == 1


# -- kept actors -----------------------------------------------------------------------------------------
def pids(items: list[SweepItem[int]]) -> set[str]:
    return {pid_of(i.result.run_id) for i in items if i.result is not None}


def test_kept_actors_serve_several_sweeps_and_a_tune(cluster: list[Node], tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    with NodeActors() as actors:
        assert actors.nodes == tuple(cluster)
        with ray_sweep(range(16), launch, simulate=True, actors=actors) as items:
            first = list(items)
        with ray_sweep(range(16), launch, simulate=True, actors=actors) as items:
            second = list(items)
        assert [i.error for i in first + second if i.error is not None] == []
        assert len(pids(first)) == 2 and pids(first) == pids(second)  # the same two processes
        result = ray_tune(range(len(SPEEDS)), logged(log), simulate=True, cache=False, seed=2, actors=actors)
        assert result.best == 1
        assert {f"{int(line.split()[0]):08d}" for line in log.read_text().splitlines()} == pids(first)
        assert actors.lost == {}
    # closed: the actors are gone and their NPUs free for a new sweep
    with ray_sweep(range(4), launch, simulate=True) as items:
        got = list(items)
    assert not pids(got) & pids(first)
    with pytest.raises(UsageError, match="closed"):
        ray_sweep(range(4), launch, actors=actors).__enter__()


def test_one_call_at_a_time_on_kept_actors(cluster: list[Node]) -> None:
    with NodeActors() as actors:
        with ray_sweep(range(4), launch, simulate=True, actors=actors) as items:
            with pytest.raises(UsageError, match="one call at a time"):
                ray_tune(range(2), tile, simulate=True, cache=False, actors=actors)
            assert len(list(items)) == 4
        with pytest.raises(UsageError, match="nodes= and env="):
            ray_sweep(range(4), launch, nodes=cluster, actors=actors).__enter__()


def counted(log: Path) -> Callable[[int, int], None]:
    def run(case: int, device: int) -> None:
        with log.open("a", encoding="utf-8") as out:
            out.write(f"{case}\n")
        time.sleep(0.3)
        launch(case, device)

    return run


def test_leaving_a_sweep_on_kept_actors_early_cancels_it(cluster: list[Node], tmp_path: Path) -> None:
    log = tmp_path / "cases.log"
    with NodeActors() as actors:
        with ray_sweep(range(64), counted(log), simulate=True, actors=actors) as items:
            first = next(items)
        assert first.error is None
        started = len(log.read_text().splitlines())
        assert started < 64  # cancelled on the actors: the rest never started
        time.sleep(1.0)
        assert len(log.read_text().splitlines()) == started  # and nothing starts later
        # the same actors run the next sweep at once, every case of it
        with ray_sweep(range(8), launch, simulate=True, actors=actors) as items:
            got = list(items)
        assert sorted(i.case for i in got) == list(range(8))
        assert [i.error for i in got] == [None] * 8
        assert first.result is not None
        assert pid_of(first.result.run_id) in pids(got) and len(pids(got)) == 2
        assert actors.lost == {}


def test_a_node_lost_on_kept_actors_stays_lost(cluster: list[Node]) -> None:
    shares = deal(16, cluster)
    dying = next(k for k, share in enumerate(shares) if 5 in share)
    with NodeActors() as actors:
        with ray_sweep(range(16), die_on_five, simulate=True, actors=actors) as items:
            got = list(items)
        assert 5 in {i.case for i in got if isinstance(i.error, NodeLost)}
        assert list(actors.lost) == [cluster[dying]]
        # later calls deal every case to the node left
        with ray_sweep(range(8), launch, simulate=True, actors=actors) as items:
            again = list(items)
        assert [i.error for i in again] == [None] * 8
        assert len(pids(again)) == 1


async def test_cancelling_an_async_tune_on_kept_actors_keeps_them(cluster: list[Node]) -> None:
    with NodeActors() as actors:
        with anyio.move_on_after(3) as scope:
            await ray_tune_async(range(len(SPEEDS)), slow_tile, simulate=True, cache=False, actors=actors)
        assert scope.cancelled_caught
        assert actors.lost == {}
        # the round in flight ended on the actors; the same actors tune again
        result = await ray_tune_async(range(2), tile, simulate=True, cache=False, actors=actors)
        assert result.best == 1
