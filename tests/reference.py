"""Where the real-CANN ground truth lives for the conformance tests, and why they skip without it.

The real runs (raw ``PROF_*`` data collected on real Ascend 910B and 310B hardware, with the
exports their hosts made) and CANN's real ``msprof.py`` are not part of this repository: they sit
in ``shared/reference/`` beside the checkout (CI always has it), or where ``ASC_APROF_REFERENCE``
points.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import pytest

REPO: Final = Path(__file__).resolve().parents[1]
REFERENCE: Final = Path(os.environ.get("ASC_APROF_REFERENCE") or REPO.parent / "shared" / "reference")
REAL_RUNS: Final = REFERENCE / "real_runs"
REAL_MSPROF: Final = REFERENCE / "real_msprof" / "analysis" / "msprof" / "msprof.py"
REAL_CSV: Final = REFERENCE / "real_csv"

SKIP_REASON: Final = (
    f"real-CANN conformance tests need the reference data (real runs and CANN's msprof.py), which "
    f"is not in this repository and was not found at {REFERENCE}; CI runs them with ../shared beside "
    "the checkout (or set ASC_APROF_REFERENCE)"
)

needs_real_runs = pytest.mark.skipif(not (REAL_RUNS.is_dir() and REAL_MSPROF.is_file()), reason=SKIP_REASON)
needs_real_csv = pytest.mark.skipif(not REAL_CSV.is_dir(), reason=SKIP_REASON)


def real_run_names() -> list[str]:
    """Folder names under real_runs/ that hold a run (empty without the reference)."""
    if not REAL_RUNS.is_dir():
        return []
    return sorted(p.name for p in REAL_RUNS.iterdir() if p.is_dir() and any(p.glob("PROF_*")))
