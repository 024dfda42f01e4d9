"""The README's examples run, in order, against the simulated toolkit, as a new user would run them.

Every fenced block of README.md is a case, run in one temporary working directory:

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

README = Path(__file__).resolve().parents[1] / "README.md"
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
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    not_run: str | None  # the reason, when marked

    @property
    def id(self) -> str:
        return f"L{self.line}-{self.lang or 'plain'}"


def readme_blocks() -> list[Block]:
    lines = README.read_text(encoding="utf-8").splitlines()
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
        blocks.append(Block(index + 1, fence[3:].strip(), text, marker.group(1) if marker else None))
        index = end + 1
    return blocks


BLOCKS = readme_blocks()
RUN = [b for b in BLOCKS if b.not_run is None]


def masked(text: str) -> str:
    """A line with what differs between runs masked: numbers (with signs), run-name letters, spacing."""
    text = re.sub(r"[+-]?\d+(\.\d+)?", "0", text)
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
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("readme")


@pytest.fixture
def in_workdir(workdir: Path, simctl: SimControl, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shared working directory, the simulated toolkit selected by environment, as the README says."""
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
    code = compile(block.text, f"README.md:{block.line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if code.co_flags & inspect.CO_COROUTINE:

        async def top_level() -> None:
            await eval(code, namespace)

        anyio.run(top_level)
    else:
        exec(code, namespace)


def run_text(block: Block, workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    steps = commands(block)
    status: int | None = None
    for step, following in zip(steps, [*steps[1:], None], strict=True):
        argv = step.argv
        if argv == ["echo", "$?"]:
            assert status == int(step.shown[0]), f"README.md:{block.line}: `$?` is {status}"
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
            raise AssertionError(f"README.md:{block.line}: the harness cannot run {argv[0]!r}; mark it")
        if following is None or following.argv != ["echo", "$?"]:
            assert status == 0, f"README.md:{block.line}: `{shlex.join(argv)}` exited {status}:\n{out}{err}"
        printed = {masked(line) for line in (out + err).splitlines()}
        for line in step.shown:
            if line.strip() in ("", "..."):  # an elided part of the output
                continue
            assert masked(line) in printed, (
                f"README.md:{block.line}: `{shlex.join(argv)}` no longer prints\n  {line}\n"
                f"it printed:\n{out}{err}"
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


@pytest.mark.parametrize("block", RUN, ids=[b.id for b in RUN])
def test_readme_block_runs(block: Block, in_workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if block.lang == "python":
        run_python(block, in_workdir)
    elif block.lang == "text":
        run_text(block, in_workdir, capsys)
    elif block.lang == "json":
        run_json(block, in_workdir)
    else:
        raise AssertionError(
            f"README.md:{block.line}: a {block.lang or 'plain'} block the harness cannot run: make it "
            "runnable or mark it <!-- not-run: why --> on the line above"
        )


def test_few_blocks_are_not_run_and_each_says_why() -> None:
    skipped = [b for b in BLOCKS if b.not_run is not None]
    assert all(b.not_run for b in skipped)  # each says why
    # the install/CI commands, and two fragments of the timelines section that tests/look runs
    installs = [b for b in skipped if "pip install" in b.text or ".ci/run" in b.text]
    assert len(installs) == 3 and len(skipped) <= 5, [b.id for b in skipped]


def test_the_harness_sees_every_kind_of_example() -> None:
    langs = [b.lang for b in RUN]
    assert langs.count("python") >= 6 and "json" in langs
    shell = [c.argv[0] for b in RUN if b.lang == "text" for c in commands(b)]
    assert {"asc-aprof", "pytest", "echo"} <= set(shell)


def test_the_quickstart_reads_its_run_again(in_workdir: Path) -> None:
    """The async quickstart as written: its run is still there for iter_tasks() (it once was not)."""
    (quickstart,) = [b for b in RUN if "iter_tasks(run.run_id)" in b.text]
    source = quickstart.text.replace("        ...\n", "        seen.append(task)\n")
    block = dataclasses.replace(quickstart, text="seen = []\n" + source + "assert len(seen) == 10\n")
    run_python(block, in_workdir)
