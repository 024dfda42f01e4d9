"""Section 12: what ``import asc_aprof`` costs (the pytest plugin's entry point imports it in every
test session of every user).

Each figure is the median of fresh interpreters (``python -c``), as a user meets it: wall time of
``import X`` inside the interpreter (``time.perf_counter`` around the import, bytecode caches as the
environment has them), and how many ``asc_aprof`` modules it loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys

from ._common import Config, Section, Table, Target, median

RUNS = 15
PROBE = (
    "import sys, time, json\n"
    "began = time.perf_counter()\n"
    "import {module}\n"
    "took = time.perf_counter() - began\n"
    "print(json.dumps({{'s': took, 'modules': sum(m.startswith('asc_aprof') for m in sys.modules)}}))"
)
#: What is imported: the package, the pytest plugin (every pytest session), and the heavy parts
#: for comparison (what a first profile() or the CLI loads).
MODULES = ("asc_aprof", "asc_aprof.pytest_plugin", "asc_aprof._profilers._async", "asc_aprof.cli")


def _once(module: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(module=module)], check=True, capture_output=True, text=True
    )
    found: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return found


def run(cfg: Config) -> Section:
    runs = 3 if cfg.quick else RUNS
    section = Section("imports", "12. Import cost: `import asc_aprof` and what loads on demand")
    section.intro = (
        f"Median of {runs} fresh interpreters per line; `modules`: asc_aprof modules in `sys.modules` after "
        "the import. Names resolve on first use (`asc_aprof.Profiler` loads the profiler then)."
    )
    rows = []
    measured: dict[str, tuple[float, int]] = {}
    for module in MODULES:
        samples = [_once(module) for _ in range(runs)]
        took = median([s["s"] for s in samples])
        count = int(samples[-1]["modules"])
        measured[module] = (took, count)
        rows.append([f"`import {module}`", f"{took * 1e3:.1f} ms", str(count)])
    section.tables.append(Table("", ["import", "median wall", "modules"], rows))
    took, count = measured["asc_aprof"]
    section.targets.append(
        Target("import asc_aprof: wall time", "< 0.1 s", f"{took * 1e3:.1f} ms", took < 0.1)
    )
    section.targets.append(Target("import asc_aprof: modules loaded", "<= 20", str(count), count <= 20))
    return section
