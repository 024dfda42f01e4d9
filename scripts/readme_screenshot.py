"""Regenerate the README's report screenshot (``docs/images/report.png``) from the simulator.

Run from the repository root, with the test extra installed and Debian's Chromium present::

    python -m scripts.readme_screenshot

It profiles a simulated 4-device sweep of 8 cases (three kernels, each case a little slower, with
launch-to-launch jitter), writes the HTML report and the trace of it under ``build/readme/``, and
screenshots the top of the report and its cases and timeline sections in headless Chromium
(``docs/images/report.png`` and ``docs/images/report-sweep.png``).
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Final

import anyio

from asc_aprof import AsyncProfiler, SweepItem, sim, sweep_timelines, write_report, write_trace

REPO: Final = Path(__file__).resolve().parents[1]
CHROMIUM: Final = "/usr/bin/chromium"
FLAGS: Final = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
KERNELS: Final = (
    ("matmul_custom", "MIX_AIC", 42.0),
    ("softmax_custom", "AI_CORE", 15.0),
    ("add_custom", "AI_VECTOR_CORE", 8.5),
)


def launch(case: int, device: int) -> None:
    rng = random.Random(case * 31 + device)
    for name, task_type, base in KERNELS:
        for _ in range(24):
            duration = base * (1 + 0.06 * case) * rng.lognormvariate(0, 0.025)
            sim.launch(name, device=device, task_type=task_type, duration_us=round(duration, 3))


async def sweep(root: Path) -> list[SweepItem[int]]:
    # the report reads timelines from exported CSVs: export every run (the raw reader would not)
    profiler = AsyncProfiler(root, toolkit=sim.toolkit(), reader="msprof")
    items: list[SweepItem[int]] = []
    async with profiler.sweep(range(8), launch, devices=[0, 1, 2, 3]) as stream:
        async for item in stream:
            if item.error is not None:
                raise item.error
            items.append(item)
    return items


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "images" / "report.png")
    parser.add_argument("--work", type=Path, default=REPO / "build" / "readme")
    parser.add_argument("--height", type=int, default=1700, help="pixels of the page shown (from the top)")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    root = args.work / f"runs-{random.randrange(1 << 30):08x}"  # a fresh result path
    items = anyio.run(sweep, root)
    timelines = sweep_timelines(items, root)
    page = write_report(timelines, args.work / "report.html", title="Simulated tile sweep on 4 devices")
    trace = write_trace(timelines, args.work / "trace.json.gz")

    from playwright.sync_api import FloatRect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=list(FLAGS), headless=True)
        try:
            view = browser.new_page(viewport={"width": 1280, "height": args.height})
            view.goto(page.resolve().as_uri(), wait_until="load")
            view.wait_for_function(
                "() => [...document.querySelectorAll('.aprof-chart')].every(d => d.querySelector('svg'))"
            )
            args.out.parent.mkdir(parents=True, exist_ok=True)
            view.screenshot(path=str(args.out))
            top = view.locator("#cases").bounding_box()
            bottom = view.locator("#timeline").bounding_box()
            assert top is not None and bottom is not None
            clip: FloatRect = {
                "x": 0,
                "y": top["y"] - 8,
                "width": 1280,
                "height": bottom["y"] + bottom["height"] - top["y"] + 16,
            }
            view.screenshot(
                path=str(args.out.with_name(f"{args.out.stem}-sweep.png")), clip=clip, full_page=True
            )
        finally:
            browser.close()
    print(f"wrote {args.out} (from {page}; the trace of the same sweep: {trace})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
