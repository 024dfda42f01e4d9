"""How long the export runners take to drain a flood of stderr, and how long they stall the loop.

``python -m benchmarks.stderr_drain [--mb 48] [--reps 3]`` runs a fake ``msprof.py`` that writes
*mb* MiB of ``\\r`` progress output (``\\r progress  N/M``, no newline, as a progress bar redraws
itself) before writing a valid op_summary and exiting 0, through the sync runner and the async
one on asyncio and trio; and the same fake writing nothing, as the baseline. A ticker task sleeps
1 ms in a loop during the async exports and records how late each wake-up is (the stall).
Prints a markdown table (medians of the repetitions).

It imports ``asc_aprof`` from wherever Python finds it, so ``PYTHONPATH=<old checkout>/src``
measures another version of the runners (their signatures have not changed).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

from asc_aprof import Toolkit
from asc_aprof._cann._export import run_export, run_export_async

FAKE = """\
import os, sys
from pathlib import Path

run = Path(sys.argv[sys.argv.index("-dir") + 1])
mib = int(os.environ["FAKE_MIB"])
piece = b"".join(b"\\r progress %7d/%d" % (i, 1 << 16) for i in range(1 << 16))
written = 0
while written < mib << 20:
    sys.stderr.buffer.write(piece)
    written += len(piece)
sys.stderr.flush()
out = run / "mindstudio_profiler_output"
out.mkdir(exist_ok=True)
(out / "op_summary_20260101000000.csv").write_text("Op Name,Task Type,Task Duration(us)\\nk,AI_CORE,1\\n")
"""


def _toolkit(root: Path, mib: int) -> Toolkit:
    script = root / "msprof.py"
    script.write_text(FAKE, encoding="utf-8")
    return Toolkit(
        library=root / "none.so", msprof_script=script, python=sys.executable, env={"FAKE_MIB": str(mib)}
    )


def _sync(toolkit: Toolkit, run: Path) -> tuple[float, float]:
    began = time.perf_counter()
    run_export(toolkit, run, timeout=600)
    return time.perf_counter() - began, float("nan")


def _async(toolkit: Toolkit, run: Path, backend: str) -> tuple[float, float]:
    async def main() -> tuple[float, float]:
        worst = 0.0
        done = False

        async def ticker() -> None:
            nonlocal worst
            while not done:
                before = time.perf_counter()
                await anyio.sleep(0.001)
                worst = max(worst, time.perf_counter() - before - 0.001)

        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            began = time.perf_counter()
            await run_export_async(toolkit, run, timeout=600)
            elapsed = time.perf_counter() - began
            done = True
        return elapsed, worst

    return anyio.run(main, backend=backend)


def _ms(seconds: float) -> str:
    return "-" if seconds != seconds else f"{seconds * 1000:.1f} ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stderr_drain", description=__doc__)
    parser.add_argument("--mb", type=int, default=48, help="MiB of \\r progress output (48)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions per runner (3)")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="asc-aprof-stderr-") as tmp:
        root = Path(tmp)
        run = root / "PROF_000001_20260101000000000_00000001AAAAAAAA"
        run.mkdir()
        runners = [("sync", "-")] + [("async", b) for b in ("asyncio", "trio")]
        for kind, backend in runners:
            results: dict[int, list[tuple[float, float]]] = {0: [], args.mb: []}
            for _ in range(args.reps):
                for mib in (0, args.mb):
                    toolkit = _toolkit(root, mib)
                    results[mib].append(
                        _sync(toolkit, run) if kind == "sync" else _async(toolkit, run, backend)
                    )
            flood = results[args.mb]
            base = results[0]
            rows.append(
                (
                    f"{kind} ({backend})" if kind == "async" else kind,
                    statistics.median(t for t, _ in base),
                    statistics.median(s for _, s in base),
                    statistics.median(t for t, _ in flood),
                    statistics.median(s for _, s in flood),
                )
            )
    print(
        f"| runner | export, no stderr | max loop stall | export, {args.mb} MiB of `\\r` progress "
        "| max loop stall |"
    )
    print("|---|---|---|---|---|")
    for name, base_s, base_stall, flood_s, stall in rows:
        print(f"| {name} | {base_s:.3f} s | {_ms(base_stall)} | {flood_s:.3f} s | {_ms(stall)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
