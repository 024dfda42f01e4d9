"""``python -m benchmarks``: every figure of benchmarks/RESULTS.md in one run.

Sections: parse speed, memory, event-loop stalls, sweep throughput, per-run overhead, waiting
callers, sweep backpressure, reading raw data natively, tune() racing, the Ray scale-out,
per-task counters, the columnar statistics, and reading natively from async code (loop stalls,
memory, the stop-to-result guard). Each figure
is a median or a ratio measured in this run, against a baseline measured next to it.
"""

from __future__ import annotations

import argparse
import dataclasses
import faulthandler
import shlex
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from ._common import REPO_ROOT, Config, Section, environment, markdown_table, quick_config

SECTIONS = (
    "parse", "memory", "stalls", "sweep", "overhead", "waiters", "raw", "tune", "counters", "columnar",
    "rawread", "imports",
)  # fmt: skip
DEFAULT_OUT = REPO_ROOT / "benchmarks" / "RESULTS.md"


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 50,000 rows, 2 repetitions, one sweep size; writes no RESULTS.md unless --out",
    )
    parser.add_argument(
        "--rows", type=int, help="rows of the op_summary file and simulated tasks (1,000,000)"
    )
    parser.add_argument("--reps", type=int, help="repetitions per parse contender (3; quick: 2)")
    parser.add_argument(
        "--only",
        help=f"comma-separated sections to run (default: all of {','.join(SECTIONS)}); "
        "writes no RESULTS.md unless --out",
    )
    parser.add_argument("--out", type=Path, help=f"where to write the report (default: {DEFAULT_OUT})")
    parser.add_argument("--data-dir", type=Path, help="keep generated CSVs here (default: a temporary dir)")
    return parser.parse_args(argv)


def _config(args: argparse.Namespace) -> Config:
    cfg = quick_config(args.rows) if args.quick else Config()
    if args.rows and not args.quick:
        rows = int(args.rows)
        cfg = dataclasses.replace(cfg, rows=rows, side_rows=max(rows // 4, 1000), stall_tasks=rows)
    if args.reps:
        cfg = dataclasses.replace(cfg, reps=int(args.reps))
    return cfg


def render_section(section: Section) -> str:
    out = [f"## {section.title}", ""]
    if section.intro:
        out += [section.intro, ""]
    for table in section.tables:
        if table.caption:
            out += [f"{table.caption}:", ""]
        out += [markdown_table(table.headers, table.rows), ""]
    if section.targets:
        out += ["Targets:", ""]
        out += [
            f"- {'met' if t.met else '**missed**'}: {t.name}: {t.measured} (target {t.goal})"
            for t in section.targets
        ]
        out.append("")
    for note in section.notes:
        out += [note, ""]
    if section.analysis:
        out += ["### Gap and what limits it", ""]
        out += [f"- {text}" for text in section.analysis]
        out.append("")
    for caption, text in section.profiles:
        out += [f"{caption}:", "", "```text", text, "```", ""]
    out.append(f"_Section time: {section.seconds:.0f} s._")
    return "\n".join(out)


def render_report(sections: list[Section], command: str, env: dict[str, str], total: float) -> str:
    summary = [
        [s.title.split(":")[0].split(" (")[0], t.name, t.goal, t.measured, "met" if t.met else "**missed**"]
        for s in sections
        for t in s.targets
    ]
    env_rows = [[k, v] for k, v in env.items()]
    parts = [
        "# asc-aprof benchmarks",
        "",
        "Every figure below comes from one run of the command, on the machine described; each is a "
        "median of several repetitions or a ratio against a baseline measured in the same run. The "
        "machines are shared and noisy: compare the ratios, not the absolute times, across machines.",
        "",
        "Reproduce (from the repository root, with the `bench` extra installed: "
        "`pip install -e '.[bench]'`):",
        "",
        "```sh",
        command,
        "```",
        "",
        markdown_table(["environment", ""], env_rows),
        "",
        f"Total run time: {total / 60:.1f} min.",
        "",
        "## Targets",
        "",
        markdown_table(["section", "target", "goal", "measured", ""], summary),
        "",
    ]
    parts += [render_section(s) + "\n" for s in sections]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    if hasattr(signal, "SIGUSR1"):  # kill -USR1 <pid> prints every thread's stack (a hung run)
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    cfg = _config(args)
    chosen = SECTIONS if not args.only else tuple(s.strip() for s in args.only.split(",") if s.strip())
    unknown = set(chosen) - set(SECTIONS)
    if unknown:
        raise SystemExit(
            f"unknown sections: {', '.join(sorted(unknown))} (choose from {', '.join(SECTIONS)})"
        )
    # A partial run never replaces the whole RESULTS.md (its other sections are kept by hand).
    out_path = args.out if args.out is not None else (None if cfg.quick or args.only else DEFAULT_OUT)
    raw_argv = sys.argv[1:] if argv is None else argv
    command = shlex.join(["python", "-m", "benchmarks", *raw_argv])
    env = environment()
    print(f"{command}  ({', '.join(f'{k} {v}' for k, v in env.items() if k != 'platform')})", flush=True)

    began = time.perf_counter()
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="asc-aprof-bench-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    sections: list[Section] = []
    try:
        inputs: dict[str, Path] = {}
        if {"parse", "memory", "counters", "columnar"} & set(chosen):
            from .parse import write_inputs

            t0 = time.perf_counter()
            inputs = write_inputs(data_dir, cfg)
            print(f"generated {cfg.rows:,}-row CSVs in {time.perf_counter() - t0:.1f} s", flush=True)
        for name in SECTIONS:
            if name not in chosen:
                continue
            t0 = time.perf_counter()
            print(f"\n== running {name} ...", flush=True)
            section = _run_section(name, cfg, data_dir, inputs)
            section.seconds = time.perf_counter() - t0
            sections.append(section)
            print(render_section(section), flush=True)
    finally:
        if args.data_dir is None:
            shutil.rmtree(data_dir, ignore_errors=True)
    total = time.perf_counter() - began
    report = render_report(sections, command, env, total)
    print("\n" + report.split("## Targets", 1)[1].split("\n## ", 1)[0].strip())
    if out_path is not None:
        out_path.write_text(report, encoding="utf-8")
        print(f"\nwrote {out_path} ({total / 60:.1f} min)")
    else:
        what = "quick run" if cfg.quick else "partial run (--only)"
        print(f"\n{what}: no report written (pass --out PATH to keep one); {total / 60:.1f} min")
    broken = [f"{s.key}: {why}" for s in sections for why in s.broken]
    if broken and cfg.quick:
        # CI runs --quick to see that every section still runs: one that did not is a failure.
        print("\nnot run: " + "; ".join(broken), file=sys.stderr)
        return 1
    return 0


def _run_section(name: str, cfg: Config, data_dir: Path, inputs: dict[str, Path]) -> Section:
    if name == "parse":
        from . import parse

        return parse.run(cfg, data_dir, inputs)
    if name == "memory":
        from . import memory

        return memory.run(cfg, inputs)
    if name == "stalls":
        from . import stalls

        return stalls.run(cfg)
    if name == "sweep":
        from . import sweep

        return sweep.run(cfg)
    if name == "tune":
        from . import tune

        return tune.run(cfg)
    if name == "waiters":
        from . import waiters

        return waiters.run(cfg)
    if name == "raw":
        from . import raw

        return raw.run(cfg)
    if name == "counters":
        from . import counters

        return counters.run(cfg, data_dir, inputs)
    if name == "columnar":
        from . import columnar

        return columnar.run(cfg, data_dir, inputs)
    if name == "imports":
        from . import imports

        return imports.run(cfg)
    if name == "rawread":
        from . import rawread

        return rawread.run(cfg, data_dir)
    from . import overhead

    return overhead.run(cfg, data_dir)


if __name__ == "__main__":
    sys.exit(main())
