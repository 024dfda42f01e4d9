"""The README's screenshots regenerate: the script runs a simulated sweep and shoots its report."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .browser_support import _unavailable


def test_readme_screenshot_script_regenerates(simctl: object, tmp_path: Path) -> None:
    reason = _unavailable()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI installs it in .ci/run)")
        pytest.skip(reason)
    from scripts import readme_screenshot

    out = tmp_path / "shot.png"
    assert (
        readme_screenshot.main(["--out", str(out), "--work", str(tmp_path / "work"), "--height", "900"]) == 0
    )
    for png in (out, tmp_path / "shot-sweep.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    report = (tmp_path / "work" / "report.html").read_text(encoding="utf-8")
    assert "cases:matmul_custom" in report and "timeline" in report
    assert (tmp_path / "work" / "trace.json.gz").stat().st_size > 1000
