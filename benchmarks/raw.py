"""Section 7: the raw reader — stop-to-result latency and throughput against msprof.py + CSV parse.

Latency: the time from a stopped collection to its ``ProfilingResult`` for a real run
(``910b_l1_div``: 510 tasks from a real 910B), on a fresh copy each repetition:
``store_result()`` with ``reader="raw"`` (list, read and decode the raw files) against
``export()`` with CANN's real ``msprof.py`` followed by ``store_result()`` (what ``profile()``
does without the raw reader).

Throughput: tasks per second of the raw reader (``read_run``: files from a warm page cache;
``decode_run``: bytes already in memory) against the CSV parser reading the real exporter's CSVs
of the same runs (``store_result()`` of the exported copy).

Simulated runs (the simulator writes CANN's raw formats, which the real exporter accepts): the
stop-to-result latency of a 10,000-task run, and a 16-case x 4-device sweep (every case one
4-device collection of 64 kernels per device), each result read by the raw reader against the
real ``msprof.py`` export + CSV parse of the same raw data: the sweep's cost with the real
exporter's per-run cost, without and with the raw reader.

Needs the reference data beside the repository (``../shared/reference`` or
``ASC_APROF_REFERENCE``): the real runs and the real ``msprof.py``. Without it the section says
so and measures nothing.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from pathlib import Path

from asc_aprof import MsprofInterface, Profiler, ProfileType, Toolkit, sim
from asc_aprof._model._toolkit import LIBRARY_NAME, MSPROF_SCRIPT
from asc_aprof._plans._raw import RawResult, RunPlan, decode_run
from asc_aprof._runs._raw_files import _listing, read_run

from ._common import REPO_ROOT, Config, Section, Table, Target, fmt_ms, fmt_rate, fmt_x, median, timed

LATENCY_RUN = "910b_l1_div"
THROUGHPUT_RUNS = ("910b_l1_div", "910b_l0_add_torch_b16", "910b_l0_add_pypto_b16")
GOAL = 50.0


def reference() -> Path:
    return Path(os.environ.get("ASC_APROF_REFERENCE") or REPO_ROOT.parent / "shared" / "reference")


def real_toolkit(root: Path) -> Toolkit:
    """A CANN-shaped tree whose msprof.py is the real one (the library is never loaded to export)."""
    (root / "lib64").mkdir(parents=True)
    (root / "lib64" / LIBRARY_NAME).symlink_to(sim.toolkit().library)
    analysis = root / MSPROF_SCRIPT.parents[1]
    analysis.parent.mkdir(parents=True)
    analysis.symlink_to((reference() / "real_msprof" / "analysis").resolve(), target_is_directory=True)
    return Toolkit.from_root(root)


def copy_run(name: str, into: Path) -> tuple[Path, str]:
    source = next((reference() / "real_runs" / name).glob("PROF_*"))
    result_path = into / name
    if result_path.exists():
        shutil.rmtree(result_path)
    shutil.copytree(source, result_path / source.name, symlinks=True)
    return result_path, source.name


def sim_run(into: Path, devices: int, kernels: int, case: int) -> tuple[Path, str]:
    """One simulated collection on *devices* devices, *kernels* kernels each; (result path, run id)."""
    control = sim.control()
    control.reset()
    control.configure(cann="9.0")
    acl = MsprofInterface(sim.toolkit())
    into.mkdir(parents=True, exist_ok=True)
    acl.init(into)
    config = acl.create_config(range(devices), types=ProfileType.TASK_TIME)
    acl.start(config)
    for device in range(devices):
        sim.launch(f"case{case}_kernel", device=device, duration_us=5.0 + case, count=kernels, block_dim=8)
    acl.stop(config)
    acl.destroy_config(config)
    acl.finalize()
    control.reset()
    (run_dir,) = into.glob("PROF_*")
    return into, run_dir.name


def copy_sim(source: tuple[Path, str], into: Path) -> tuple[Path, str]:
    if into.exists():
        shutil.rmtree(into)
    shutil.copytree(source[0] / source[1], into / source[1])
    return into, source[1]


def simulated(cfg: Config, toolkit: Toolkit, work: Path, section: Section) -> None:
    """The 10,000-task latency and the 16 x 4 sweep on simulated raw data (see the module doc)."""
    big = sim_run(work / "big", 1, 10_000, 0)
    raw_times = []
    for _ in range(3 if cfg.quick else 10):
        path, run_id = copy_sim(big, work / "big_raw")
        raw_times.append(
            timed(functools.partial(Profiler(path, toolkit=toolkit, reader="raw").store_result, run_id))
        )
    exports = []
    for _ in range(1 if cfg.quick else 2):
        path, run_id = copy_sim(big, work / "big_msprof")
        profiler = Profiler(path, toolkit=toolkit, reader="msprof", export_timeout=900)
        exports.append(
            timed(functools.partial(profiler.export, run_id))
            + timed(functools.partial(profiler.store_result, run_id))
        )
    ratio = median(exports) / median(raw_times)
    section.tables.append(
        Table(
            "Stop to result, simulated 10,000-task run (1 device)",
            ["path", "median", "min", "reps"],
            [
                [
                    "raw reader (`reader='raw'`)",
                    fmt_ms(median(raw_times)),
                    fmt_ms(min(raw_times)),
                    str(len(raw_times)),
                ],
                [
                    "real msprof.py export + CSV parse",
                    fmt_ms(median(exports)),
                    fmt_ms(min(exports)),
                    str(len(exports)),
                ],
            ],
        )
    )
    section.targets.append(
        Target(
            "10,000-task run: raw reader vs real msprof.py + parse",
            f">= {GOAL:.0f}x",
            fmt_x(ratio),
            ratio >= GOAL,
        )
    )
    cases = 4 if cfg.quick else 16
    runs = [sim_run(work / "sweep" / f"case{case}", 4, 64, case) for case in range(cases)]
    raw_total = export_total = 0.0
    per_export = []
    for case, source in enumerate(runs):
        path, run_id = copy_sim(source, work / "sweep_raw" / f"case{case}")
        raw_total += timed(
            functools.partial(Profiler(path, toolkit=toolkit, reader="raw").store_result, run_id)
        )
        path, run_id = copy_sim(source, work / "sweep_msprof" / f"case{case}")
        profiler = Profiler(path, toolkit=toolkit, reader="msprof", export_timeout=900)
        cost = timed(functools.partial(profiler.export, run_id)) + timed(
            functools.partial(profiler.store_result, run_id)
        )
        per_export.append(cost)
        export_total += cost
    section.tables.append(
        Table(
            f"{cases}-case x 4-device sweep (64 kernels per device), results after the stops",
            ["path", "total", "per run (median)"],
            [
                ["raw reader", fmt_ms(raw_total), fmt_ms(raw_total / cases)],
                ["real msprof.py export + CSV parse", fmt_ms(export_total), fmt_ms(median(per_export))],
            ],
        )
    )
    section.notes.append(
        f"Sweep: {cases} cases of one 4-device collection each; the export path costs "
        f"{fmt_x(export_total / raw_total)} the raw reader's time (collection time, the same for both, "
        "not counted)."
    )


def run(cfg: Config) -> Section:
    section = Section(
        "raw",
        "7. Reading raw data natively (raw reader vs msprof.py + CSV parse)",
        intro=(
            f"Stop-to-result latency of real run `{LATENCY_RUN}` (510 tasks, Ascend 910B), fresh copy "
            "each repetition: `store_result()` with `reader='raw'` against the real `msprof.py export "
            "summary` (CANN's pure-Python exporter, Ascend/msprof 9ba1ac7be) + `store_result()`. "
            "Then tasks/s of the raw reader against the CSV parser on the same runs."
        ),
    )
    if not (reference() / "real_msprof" / "analysis" / "msprof" / "msprof.py").is_file():
        section.notes.append(
            f"Skipped: the reference data (real runs, real msprof.py) is not at {reference()}."
        )
        return section
    raw_reps = 5 if cfg.quick else 30
    export_reps = 1 if cfg.quick else 3
    work = Path(tempfile.mkdtemp(prefix="asc-aprof-raw-"))
    try:
        toolkit = real_toolkit(work / "cann")
        raw_times: list[float] = []
        raw_counter_times: list[float] = []
        for _ in range(raw_reps):
            result_path, run_id = copy_run(LATENCY_RUN, work / "raw")
            profiler = Profiler(result_path, toolkit=toolkit, reader="raw")
            raw_times.append(timed(functools.partial(profiler.store_result, run_id)))
            raw_counter_times.append(timed(functools.partial(profiler.store_result, run_id, counters=True)))
        export_times: list[float] = []
        parse_times: list[float] = []
        parse_counter_times: list[float] = []
        for _ in range(export_reps):
            result_path, run_id = copy_run(LATENCY_RUN, work / "msprof")
            profiler = Profiler(result_path, toolkit=toolkit, reader="msprof", export_timeout=600)
            export_times.append(timed(functools.partial(profiler.export, run_id)))
            parse_times.append(timed(functools.partial(profiler.store_result, run_id)))
            parse_counter_times.append(timed(functools.partial(profiler.store_result, run_id, counters=True)))
        msprof = [e + p for e, p in zip(export_times, parse_times, strict=True)]
        msprof_counters = [e + p for e, p in zip(export_times, parse_counter_times, strict=True)]
        ratio = median(msprof) / median(raw_times)
        counter_ratio = median(msprof_counters) / median(raw_counter_times)
        section.tables.append(
            Table(
                f"Stop to result, {LATENCY_RUN}",
                ["path", "median", "min", "reps"],
                [
                    [
                        "raw reader (`reader='raw'`)",
                        fmt_ms(median(raw_times)),
                        fmt_ms(min(raw_times)),
                        str(raw_reps),
                    ],
                    [
                        "msprof.py export + CSV parse",
                        fmt_ms(median(msprof)),
                        fmt_ms(min(msprof)),
                        str(export_reps),
                    ],
                    ["  of which CSV parse", fmt_ms(median(parse_times)), fmt_ms(min(parse_times)), ""],
                    [
                        "raw reader, `counters=True` (PMU counters from ffts_profile)",
                        fmt_ms(median(raw_counter_times)),
                        fmt_ms(min(raw_counter_times)),
                        str(raw_reps),
                    ],
                    [
                        "msprof.py export + CSV parse, `counters=True`",
                        fmt_ms(median(msprof_counters)),
                        fmt_ms(min(msprof_counters)),
                        str(export_reps),
                    ],
                ],
            )
        )
        section.targets.append(
            Target(
                "with counters=True: raw reader vs msprof.py + parse, stop to result",
                f">= {GOAL:.0f}x",
                fmt_x(counter_ratio),
                counter_ratio >= GOAL,
            )
        )
        section.targets.append(
            Target(
                "raw reader vs msprof.py + parse, stop to result",
                f">= {GOAL:.0f}x",
                fmt_x(ratio),
                ratio >= GOAL,
            )
        )

        rows = []
        for name in THROUGHPUT_RUNS:
            result_path, run_id = copy_run(name, work / "tp")
            run_dir = result_path / run_id
            outcome = read_run(run_dir)
            assert isinstance(outcome, RawResult), outcome
            tasks = len(outcome.tasks)
            read_t = min(timed(functools.partial(read_run, run_dir)) for _ in range(raw_reps))
            plan = RunPlan.from_listing(_listing(run_dir))
            files = {rel: (run_dir / rel).read_bytes() for rel in plan.wanted}
            decode_t = min(timed(functools.partial(decode_run, plan, files)) for _ in range(raw_reps))
            Profiler(result_path, toolkit=toolkit, export_timeout=600).export(run_id)
            reader = Profiler(result_path, toolkit=toolkit)
            csv_t = min(timed(functools.partial(reader.store_result, run_id)) for _ in range(raw_reps))
            rows.append(
                [
                    f"`{name}`",
                    str(tasks),
                    fmt_rate(tasks / read_t),
                    fmt_rate(tasks / decode_t),
                    fmt_rate(tasks / csv_t),
                    fmt_x(csv_t / read_t),
                ]
            )
        section.tables.append(
            Table(
                "Throughput (best of the repetitions)",
                [
                    "run",
                    "tasks",
                    "raw `read_run`",
                    "raw `decode_run` (in memory)",
                    "CSV parse (`store_result`)",
                    "raw / CSV speed",
                ],
                rows,
            )
        )
        simulated(cfg, toolkit, work, section)
        section.notes.append(
            "The raw reader does the exporter's work (pairing the device's start/end records, the host "
            "call tree, the host/device join, the printed start times), so per task it is slower than "
            "parsing the CSVs the exporter wrote; it is the export it saves that makes the latency ratio."
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return section
