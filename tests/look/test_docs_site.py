"""The documentation site in a real browser: built strictly, served on localhost, no console error,
every public name in the API reference, and its search finds ``task_time_median``.

The site is MkDocs with the Material theme and mkdocstrings (the ``docs`` extra): ``.ci/run`` builds
it (``mkdocs build --strict``, into ``build/site``) before the tests; elsewhere this module builds it
itself where MkDocs is installed, and skips with one sentence where it is not (in CI a missing
MkDocs fails). A screenshot of the search goes to ``build/ci-artifacts/``.
"""

from __future__ import annotations

import functools
import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import asc_aprof

from .browser_support import ARTIFACTS, REPO

SITE = REPO / "build" / "site"


@functools.cache
def _build() -> Path:
    """The built site: CI's, else built here into a fresh folder (once: both tests read the same)."""
    if os.environ.get("CI") == "true" and (SITE / "index.html").exists():
        return SITE
    try:
        import mkdocs  # noqa: F401
    except ImportError:
        reason = "the docs site needs MkDocs: pip install -e '.[docs]'"
        if os.environ.get("CI") == "true":
            pytest.fail(reason + " (CI installs the docs extra, so this is a broken CI setup)")
        pytest.skip(reason)
    out = REPO / "build" / "site-test"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return out


@pytest.fixture(scope="module")
def site_url() -> Iterator[str]:
    site = _build()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_the_api_reference_names_every_public_object(site_url: str) -> None:
    page = _build() / "reference" / "api" / "index.html"
    text = page.read_text(encoding="utf-8")
    public = [n for n in asc_aprof.__all__ if not n.startswith("_")]
    missing = [n for n in public if f'id="asc_aprof.{n}"' not in text and f"asc_aprof.{n}" not in text]
    assert not missing, missing


def test_the_site_loads_and_search_finds_task_time_median(browser: object, site_url: str) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(site_url, wait_until="load")
        page.click("input.md-search__input")  # (the header's search box, at a desktop width)
        page.keyboard.type("task_time_median")
        page.wait_for_selector(".md-search-result__item", timeout=30_000)
        found = page.inner_text(".md-search-result__list")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "docs-search.png"))
        page.goto(site_url + "reference/api/", wait_until="load")
    finally:
        page.close()
    assert "task_time_median" in found
    assert errors == []
