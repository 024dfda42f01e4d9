"""The examples of the README and of every page of the docs site (``docs/**/*.md``) run, in order,
against the simulated toolkit, as a new user would run them.

Every fenced block of README.md and of each page is a case, run in a temporary working directory
of that file's own (a page's blocks run in order, each seeing what the ones before it left):

* ``python``: executed (top-level ``await`` allowed) with :data:`STANDINS` defined, the kernels the
  README leaves to the reader; a block whose first line is ``# name.py`` is written to that file
  (stand-ins first) instead, for a later command to use;
* ``text``: its ``$ asc-aprof ...`` and ``$ pytest ...`` lines are run; the exit status must be 0,
  or what a following ``$ echo $?`` shows; the output the README shows must match what the command
  printed, with numbers and run-name letters masked (timings and ids differ from run to run);
* ``json``: must load (and a result must rebuild with ``ProfilingResult.from_dict``);
* anything else, and any block that cannot run, must be marked ``<!-- not-run: why -->`` on the
  line right above it; that set is kept small and checked here.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from asc_aprof import ProfilingResult, run_kernel_stats
from asc_aprof._outputs._json_report import load_json_columns
from asc_aprof.cli import main
from asc_aprof.sim import SimControl

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
#: README first, then the docs site's pages (every Markdown file under docs/)
PAGES = (README, *sorted((REPO / "docs").rglob("*.md")))
NOT_RUN = re.compile(r"^<!--\s*not-run\b:?\s*(.*?)\s*-->$")

#: What the README leaves to the reader: kernels and their arguments, as simulated launches.
STANDINS = '''
from asc_aprof import sim as _sim


class _Kernel:
    """``kernel[blocks](args...)``: simulated launches; an int argument scales the duration."""

    def __init__(self, name, task_type, duration_us):
        self.name, self.task_type, self.duration_us = name, task_type, duration_us

    def __getitem__(self, blocks):
        def launch(*args, device=0):
            size = next((a for a in args if isinstance(a, int)), 1024)
            _sim.launch(
                self.name, device=device, task_type=self.task_type,
                duration_us=self.duration_us * size / 1024, block_dim=blocks, count=5,
            )
        return launch


kernel = _Kernel("kernel", "AI_CORE", 10.0)
core_num = 8
add_custom = _Kernel("add_custom", "AI_VECTOR_CORE", 4.25)
x = y = z = None


async def launch_my_kernels():
    _sim.launch("add_custom", task_type="AI_VECTOR_CORE", duration_us=8.5, count=10)


async def compile_and_launch(case, device):
    _sim.launch(f"tile_{case}", device=device, task_type="AI_CORE", duration_us=case / 100, count=5)
'''


@dataclasses.dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    not_run: str | None  # the reason, when marked

    @property
    def id(self) -> str:
        where = "" if self.page == README else f"{self.page.relative_to(REPO / 'docs').with_suffix('')}:"
        return f"{where}L{self.line}-{self.lang or 'plain'}"

    @property
    def where(self) -> str:
        """``FILE:LINE`` of the block, for messages."""
        return f"{self.page.relative_to(REPO)}:{self.line}"


def readme_blocks(page: Path = README) -> list[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        fence = lines[index]
        if not fence.startswith("```"):
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        marker = NOT_RUN.match(lines[index - 1].strip()) if index else None
        text = "\n".join(lines[index + 1 : end]) + "\n"
        blocks.append(Block(page, index + 1, fence[3:].strip(), text, marker.group(1) if marker else None))
        index = end + 1
    return blocks


BLOCKS = readme_blocks()
#: every page's blocks, README's first
ALL_BLOCKS = [b for page in PAGES for b in readme_blocks(page)]
RUN = [b for b in BLOCKS if b.not_run is None]
ALL_RUN = [b for b in ALL_BLOCKS if b.not_run is None]


def masked(text: str) -> str:
    """A line with what differs between runs masked: numbers (with signs), run-name letters, spacing."""
    text = re.sub(r"[+-]?\d+(\.\d+)?", "0", text)
    text = re.sub(r"-{2,}", "--", text)  # a table's rule: its widths follow the numbers above
    text = re.sub(r"(?<=0)[A-Z]{8,16}\b", "X", text)
    return " ".join(text.split())


@dataclasses.dataclass
class Command:
    argv: list[str]
    shown: list[str]  # the output lines the README shows for it


def commands(block: Block) -> list[Command]:
    found: list[Command] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            found.append(Command(shlex.split(line[2:]), []))
        elif found:
            found[-1].shown.append(line)
    return found


@pytest.fixture(scope="module")
def workdirs(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, Path]:
    """Each page's working directory (made on first use)."""
    return {}


@pytest.fixture
def workdir(
    request: pytest.FixtureRequest, workdirs: dict[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The working directory of the page the test's block is from (README's for other tests)."""
    callspec = getattr(request.node, "callspec", None)
    block = callspec.params.get("block") if callspec is not None else None
    page = block.page if isinstance(block, Block) else README
    if page not in workdirs:
        workdirs[page] = tmp_path_factory.mktemp(page.stem.lower())
    return workdirs[page]


@pytest.fixture
def in_workdir(workdir: Path, simctl: SimControl, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The page's working directory, the simulated toolkit selected by environment, as the README says."""
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("ASC_APROF_SIMULATE", "1")
    monkeypatch.delenv("COLUMNS", raising=False)  # a pipe: full tables, as the README shows them
    return workdir


def run_python(block: Block, workdir: Path) -> None:
    first = block.text.splitlines()[0]
    target = re.fullmatch(r"# (\w+\.py)", first.strip())
    if target is not None:
        (workdir / target.group(1)).write_text(STANDINS + "\n" + block.text, encoding="utf-8")
        return
    namespace: dict[str, Any] = {"__name__": "__readme__"}
    exec(compile(STANDINS, "<readme stand-ins>", "exec"), namespace)
    code = compile(block.text, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if code.co_flags & inspect.CO_COROUTINE:

        async def top_level() -> None:
            await eval(code, namespace)

        anyio.run(top_level)
    else:
        exec(code, namespace)


def run_text(block: Block, workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    steps = commands(block)
    if not steps:  # a diagram or a listing: nothing to run
        return
    status: int | None = None
    for step, following in zip(steps, [*steps[1:], None], strict=True):
        argv = step.argv
        if argv == ["echo", "$?"]:
            assert status == int(step.shown[0]), f"{block.where}: `$?` is {status}"
            continue
        if argv[0] == "asc-aprof":
            capsys.readouterr()
            status = main(argv[1:])
            out, err = capsys.readouterr()
        elif argv[0] == "pytest":
            done = subprocess.run(
                [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *argv[1:]],
                cwd=workdir,
                capture_output=True,
                text=True,
                timeout=300,
            )
            status, out, err = done.returncode, done.stdout, done.stderr
        else:
            raise AssertionError(f"{block.where}: the harness cannot run {argv[0]!r}; mark it")
        if following is None or following.argv != ["echo", "$?"]:
            assert status == 0, f"{block.where}: `{shlex.join(argv)}` exited {status}:\n{out}{err}"
        printed = {masked(line) for line in (out + err).splitlines()}
        for line in step.shown:
            if line.strip() in ("", "..."):  # an elided part of the output
                continue
            assert masked(line) in printed, (
                f"{block.where}: `{shlex.join(argv)}` no longer prints\n  {line}\nit printed:\n{out}{err}"
            )


def run_json(block: Block, workdir: Path) -> None:
    data = json.loads(block.text)
    if data.get("format") == "asc-aprof.result":
        result = ProfilingResult.from_dict(data)
        assert result.tasks and result.to_dict()["tasks"] == data["tasks"]
    if data.get("format") == "asc-aprof.report":  # its kernels are what its samples give
        path = workdir / "readme_report.json"
        path.write_text(block.text, encoding="utf-8")
        loaded = load_json_columns(path)
        assert loaded.runs is not None and [len(r) for r in loaded.runs] == [r["tasks"] for r in data["runs"]]
        assert [k.to_dict() for k in run_kernel_stats(loaded.runs, skip=loaded.skip)] == data["kernels"]


@pytest.mark.parametrize("block", ALL_RUN, ids=[b.id for b in ALL_RUN])
def test_readme_block_runs(block: Block, in_workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if block.lang == "python":
        run_python(block, in_workdir)
    elif block.lang == "text":
        run_text(block, in_workdir, capsys)
    elif block.lang == "json":
        run_json(block, in_workdir)
    else:
        raise AssertionError(
            f"{block.where}: a {block.lang or 'plain'} block the harness cannot run: make it "
            "runnable or mark it <!-- not-run: why --> on the line above"
        )


def test_few_blocks_are_not_run_and_each_says_why() -> None:
    skipped = [b for b in BLOCKS if b.not_run is not None]
    assert all(b.not_run for b in skipped)  # each says why
    # the README's first screen: the two commands (set-up + demo, tests), and the docs build
    assert len(skipped) == 3 and all("pip install" in b.text for b in skipped), [b.id for b in skipped]


def test_the_docs_pages_run_their_examples_and_say_why_not() -> None:
    pages = [b for b in ALL_BLOCKS if b.page != README]
    skipped = [b for b in pages if b.not_run is not None]
    assert all(b.not_run for b in skipped)
    # the home page's commands (as the README's), CI recipes, the development set-up, two fragments of
    # the timelines guide that tests/look runs: not examples
    assert len(skipped) <= 9, [b.id for b in skipped]


def test_the_harness_sees_every_kind_of_example() -> None:
    langs = [b.lang for b in ALL_RUN]
    assert langs.count("python") >= 6 and "json" in langs
    shell = [c.argv[0] for b in ALL_RUN if b.lang == "text" for c in commands(b)]
    assert {"asc-aprof", "pytest", "echo"} <= set(shell)


def test_the_quickstart_reads_its_run_again(in_workdir: Path) -> None:
    """The async quickstart as written: its run is still there for iter_tasks() (it once was not)."""
    (quickstart, *_) = [b for b in RUN if "iter_tasks(run.run_id)" in b.text]
    source = quickstart.text.replace("        ...\n", "        seen.append(task)\n")
    block = dataclasses.replace(quickstart, text="seen = []\n" + source + "assert len(seen) == 10\n")
    run_python(block, in_workdir)
