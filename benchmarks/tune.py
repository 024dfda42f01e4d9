"""tune(): racing against measuring every candidate equally; a Ray sweep on 2 nodes against 1.

Racing: 8 simulated candidates (medians 10 to 20 us, the fastest 3% ahead of the next, 3%
log-normal jitter), one device, ``tune(racing=True)`` against ``tune(racing=False)`` (every
candidate measured to the same 2% interval width, same doubling schedule), over several seeds.
Ray: a local ``ray.cluster_utils.Cluster`` with 4 fake NPUs per node, 64 one-window cases,
1 node against 2 (each node's actor runs the simulator). Skipped without the ``ray`` extra.
"""

from __future__ import annotations

import time

from asc_aprof import Profiler, sim

from ._common import Config, Section, Table, Target

MEDIANS = (12.0, 10.0, 10.3, 15.0, 11.0, 20.0, 13.0, 10.6)


def _candidate(config: int, device: int) -> None:
    sim.launch("tile", device=device, duration_us=MEDIANS[config])


def _case(case: int, device: int) -> None:
    sim.launch(f"k{case % 4}", device=device, duration_us=10.0, count=8)


def _racing(cfg: Config) -> tuple[Table, Target]:
    toolkit = sim.toolkit()
    seeds = 1 if cfg.quick else 3
    rows, totals = [], {True: [0, 0.0], False: [0, 0.0]}
    wins = 0
    for seed in range(seeds):
        for racing in (True, False):
            sim.control().set_jitter(0.03, seed=seed)
            began = time.monotonic()
            result = Profiler(toolkit=toolkit).tune(
                range(len(MEDIANS)), _candidate, seed=seed, racing=racing, cache=False
            )
            wall = time.monotonic() - began
            totals[racing][0] += result.reps
            totals[racing][1] += wall
            wins += racing and result.best == 1
            rows.append(
                [
                    str(seed),
                    "racing" if racing else "equal",
                    str(result.reps),
                    f"{wall:.2f}",
                    str(result.best),
                ]
            )
    sim.control().set_jitter(0)
    reps_ratio = totals[True][0] / totals[False][0]
    wall_ratio = totals[True][1] / totals[False][1]
    table = Table(
        "tune(): 8 candidates, 3% jitter, 1 device: racing vs measuring all to the same 2% width",
        ["seed", "mode", "calls measured", "wall s", "best"],
        rows,
    )
    target = Target(
        "tune() racing vs equal measuring",
        "under half the repetitions and wall time",
        f"calls {reps_ratio:.2f}x, wall {wall_ratio:.2f}x; fastest found {wins}/{seeds}",
        reps_ratio < 0.5 and wall_ratio < 0.5,
    )
    return table, target


def _ray(cfg: Config) -> tuple[Table | None, Target | None, str]:
    try:
        import ray
        from ray.cluster_utils import Cluster

        from asc_aprof.ray_sweep import npu_nodes, ray_sweep
    except ImportError:
        return None, None, "Ray part skipped: install the [ray] extra"
    sim.root()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {"NPU": 4}})
    cluster.add_node(num_cpus=1, resources={"NPU": 4})
    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
    cluster.wait_for_nodes()
    rows, rate = [], {}
    try:
        nodes = npu_nodes()
        for chosen in (nodes[:1], nodes):
            with ray_sweep(range(4), _case, simulate=True, nodes=chosen) as items:
                list(items)  # actors' imports and the simulator's first load, not timed
            began = time.monotonic()
            with ray_sweep(range(64), _case, simulate=True, nodes=chosen) as items:
                errors = sum(i.error is not None for i in items)
            wall = time.monotonic() - began
            rate[len(chosen)] = 64 / wall
            rows.append([f"{len(chosen)} x 4", f"{wall:.2f}", f"{64 / wall:.1f}", str(errors)])
    finally:
        ray.shutdown()
        cluster.shutdown()
    speedup = rate[2] / rate[1]
    table = Table("ray_sweep(): 64 one-window cases", ["nodes x NPUs", "wall s", "cases/s", "errors"], rows)
    target = Target("2 nodes x 4 vs 1 node x 4", ">= 1.7x throughput", f"{speedup:.2f}x", speedup >= 1.7)
    return table, target, ""


def run(cfg: Config) -> Section:
    began = time.monotonic()
    section = Section(
        "tune", "tune() racing and Ray scale-out", intro=__doc__.split("\n\n", 1)[1] if __doc__ else ""
    )
    table, target = _racing(cfg)
    section.tables.append(table)
    section.targets.append(target)
    ray_table, ray_target, note = _ray(cfg)
    if ray_table is not None and ray_target is not None:
        section.tables.append(ray_table)
        section.targets.append(ray_target)
        if not ray_target.met:
            section.analysis.append(
                "Every node of the local cluster shares this machine's 2 cores: each case's export "
                "(a msprof.py process) and each actor's parsing are CPU-bound, so a second node adds "
                "NPUs but no CPU; on separate hosts each node brings its own cores."
            )
    if note:
        section.notes.append(note)
    section.seconds = time.monotonic() - began
    return section
