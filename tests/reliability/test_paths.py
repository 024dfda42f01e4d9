"""Paths and processes: run ids that escape, cleanup that must not, modes, odd names, no shell."""

from __future__ import annotations

import ast
import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from asc_aprof import AsyncProfiler, CollectionTimeout, Profiler, Toolkit, UsageError, sim
from asc_aprof._cann._collector import get_collector
from asc_aprof._cann._paths import default_result_root
from asc_aprof.sim import SimControl

from ._support import assert_nothing_left

pytestmark = pytest.mark.anyio

SRC = Path(__file__).resolve().parents[2] / "src"
#: What msprof.py refuses in a path (its path checks), written out independently of the library.
MSPROF_REJECTED = "\n\f\r\b\t\v\x7f\"'%><|&$;`\\"
#: A run directory name as CANN makes it (PROF_<counter>_<17-digit time>_<pid><8 letters>).
RUN_NAME_BYTES = len("/PROF_000001_20260101000000000_00012345ABCDEFGH")


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def long_path(base: Path, total_bytes: int) -> Path:
    """A path of exactly *total_bytes* bytes under *base*, in components the filesystem accepts."""
    path = base
    while len(os.fsencode(str(path))) < total_bytes - 201:
        path = path / ("d" * 200)
    rest = total_bytes - len(os.fsencode(str(path))) - 1
    assert rest >= 1
    path = path / ("e" * rest)
    assert len(os.fsencode(str(path))) == total_bytes
    return path


# -- run ids -------------------------------------------------------------------------------------


@pytest.fixture
def escape_setup(toolkit: Toolkit, tmp_path: Path) -> tuple[Path, str, list[str]]:
    """A result path with one real run, plus exported runs outside it that bad ids point to."""
    root = tmp_path / "runs"
    outside = tmp_path / "outside"
    profiler = Profiler(root, toolkit=toolkit)
    with profiler.profile() as run:
        sim.launch("inside")
    other = Profiler(outside, toolkit=toolkit)
    with other.profile() as foreign:
        sim.launch("outside")
    assert run.run_id is not None and foreign.run_id is not None
    # Exported and parseable: following any of these ids would succeed, so refusal is observable.
    (root / "PROF_999999_20260101000000000_00000001AAAAAAAA").symlink_to(outside / foreign.run_id)
    (root / "linkdir").symlink_to(outside)
    bad = [
        "..",
        f"../outside/{foreign.run_id}",
        f"{run.run_id}/../../outside/{foreign.run_id}",
        str(outside / foreign.run_id),
        "PROF_999999_20260101000000000_00000001AAAAAAAA",
        f"linkdir/{foreign.run_id}",
        "",
    ]
    return root, run.run_id, bad


def test_sync_run_ids_that_leave_the_result_path_are_refused(
    toolkit: Toolkit, escape_setup: tuple[Path, str, list[str]]
) -> None:
    root, good, bad = escape_setup
    profiler = Profiler(root, toolkit=toolkit)
    for run_id in bad:
        with pytest.raises(UsageError):
            profiler.store_result(run_id)
        with pytest.raises(UsageError):
            profiler.export(run_id)
    assert profiler.results == {}
    assert [t.name for t in profiler.store_result(good).tasks] == ["inside"]
    # a run's absolute path inside the result path is its run id (issue 29, item 9)
    assert profiler.store_result(str(root / good)).run_id == good


async def test_async_run_ids_that_leave_the_result_path_are_refused(
    toolkit: Toolkit, escape_setup: tuple[Path, str, list[str]]
) -> None:
    root, good, bad = escape_setup
    profiler = AsyncProfiler(root, toolkit=toolkit)
    for run_id in bad:
        with pytest.raises(UsageError):
            await profiler.store_result(run_id)
        with pytest.raises(UsageError):
            await profiler.export(run_id)
        with pytest.raises(UsageError):
            async for _ in profiler.iter_tasks(run_id):
                pass
    assert profiler.results == {}
    assert [t.name for t in (await profiler.store_result(good)).tasks] == ["inside"]


# -- export folders ------------------------------------------------------------------------------


@pytest.fixture(params=["new", "old-summary", "old-device"])
def linked_export(
    request: pytest.FixtureRequest, tmp_path: Path, simctl: SimControl
) -> tuple[Path, str, Path]:
    """A run whose export folder is a symlink to another run's export, outside the result path.

    ``new``: ``mindstudio_profiler_output``; ``old-summary``: ``device_0/summary``;
    ``old-device``: ``device_0`` itself (old per-device layout).
    """
    toolkit = sim.toolkit(layout="new" if request.param == "new" else "old")
    root, outside = tmp_path / "runs", tmp_path / "outside"
    # reader="msprof": both runs exported (a simulated run is otherwise read natively, with no export)
    with Profiler(root, toolkit=toolkit, reader="msprof").profile() as run:
        sim.launch("inside")
    with Profiler(outside, toolkit=toolkit, reader="msprof").profile() as foreign:
        sim.launch("outside")
    assert run.run_dir is not None and run.run_id is not None and foreign.run_dir is not None
    relative = {
        "new": "mindstudio_profiler_output",
        "old-summary": "device_0/summary",
        "old-device": "device_0",
    }[request.param]
    link = run.run_dir / relative
    shutil.rmtree(link)
    link.symlink_to(foreign.run_dir / relative)  # parseable: following it would succeed
    return root, run.run_id, link


def test_sync_a_symlinked_export_folder_is_refused(
    toolkit: Toolkit, linked_export: tuple[Path, str, Path]
) -> None:
    root, run_id, link = linked_export
    with pytest.raises(UsageError, match=re.escape(str(link))) as info:
        Profiler(root, toolkit=toolkit).store_result(run_id)
    assert "symbolic link" in str(info.value)


async def test_async_a_symlinked_export_folder_is_refused(
    toolkit: Toolkit, linked_export: tuple[Path, str, Path]
) -> None:
    root, run_id, link = linked_export
    profiler = AsyncProfiler(root, toolkit=toolkit)
    with pytest.raises(UsageError, match=re.escape(str(link))):
        await profiler.store_result(run_id)
    with pytest.raises(UsageError, match=re.escape(str(link))):
        async for _ in profiler.iter_tasks(run_id):
            pass


@pytest.mark.parametrize("reader", ["auto", "msprof"])
def test_an_export_folder_planted_as_a_symlink_during_the_run_is_refused(
    toolkit: Toolkit, tmp_path: Path, simctl: SimControl, reader: str
) -> None:
    """msprof: it writes through the link, its CSVs out of the run are not read; auto: the run is
    read natively, and refused before (a later export would write through the link)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    profiler = Profiler(tmp_path / "runs", toolkit=toolkit, reader=reader)
    with pytest.raises(UsageError, match="symbolic link"), profiler.profile() as run:
        sim.launch("k")
        assert run.run_dir is not None
        (run.run_dir / "mindstudio_profiler_output").symlink_to(elsewhere)
    assert profiler.results == {}
    assert_nothing_left(simctl)


@pytest.mark.parametrize("reader", ["auto", "raw"])
@pytest.mark.parametrize("folder", ["device_0", "device_0/data", "host", "host/data"])
async def test_a_symlinked_raw_folder_is_refused_by_the_native_read(
    tmp_path: Path, simctl: SimControl, folder: str, reader: str
) -> None:
    """A run never exported, one of whose raw folders leads to another run's: not read through."""
    toolkit = sim.toolkit()
    root, outside = tmp_path / "runs", tmp_path / "outside"
    with Profiler(root, toolkit=toolkit).profile(cleanup=False) as run:
        sim.launch("inside")
    with Profiler(outside, toolkit=toolkit).profile(cleanup=False) as foreign:
        sim.launch("outside")
    assert run.run_dir is not None and run.run_id is not None and foreign.run_dir is not None
    link = run.run_dir / folder
    shutil.rmtree(link)
    link.symlink_to(foreign.run_dir / folder)  # readable: following it would give "outside"
    with pytest.raises(UsageError, match=re.escape(str(link)) + ".*symbolic link"):
        Profiler(root, toolkit=toolkit, reader=reader).store_result(run.run_id)
    with pytest.raises(UsageError, match=re.escape(str(link))):
        await AsyncProfiler(root, toolkit=toolkit, reader=reader).store_result(run.run_id)
    assert not (run.run_dir / "mindstudio_profiler_output").exists()  # nothing exported through it


# -- cleanup -------------------------------------------------------------------------------------


def user_tree(tmp_path: Path) -> tuple[Path, Path]:
    user = tmp_path / "precious"
    user.mkdir()
    (user / "thesis.txt").write_text("do not delete")
    (user / "sub").mkdir()
    (user / "sub" / "data.bin").write_bytes(b"\x00" * 16)
    return user, user / "thesis.txt"


def assert_user_tree_intact(user: Path) -> None:
    assert (user / "thesis.txt").read_text() == "do not delete"
    assert (user / "sub" / "data.bin").read_bytes() == b"\x00" * 16


def test_user_result_path_is_never_deleted(toolkit: Toolkit, tmp_path: Path) -> None:
    user, _ = user_tree(tmp_path)
    profiler = Profiler(user, toolkit=toolkit)
    with profiler.profile(cleanup=True) as run:
        sim.launch("k")
    assert run.run_dir is not None and run.run_dir.is_dir()
    assert profiler.cleanup() == []
    assert run.run_dir.is_dir()
    assert_user_tree_intact(user)


async def test_async_user_result_path_is_never_deleted(toolkit: Toolkit, tmp_path: Path) -> None:
    user, _ = user_tree(tmp_path)
    profiler = AsyncProfiler(user, toolkit=toolkit)
    async with profiler.profile(cleanup=True) as run:
        sim.launch("k")
    assert run.run_dir is not None and run.run_dir.is_dir()
    assert await profiler.cleanup() == []
    assert run.run_dir.is_dir()
    assert_user_tree_intact(user)


def test_cleanup_true_does_not_follow_a_symlink_inside_the_run(toolkit: Toolkit, tmp_path: Path) -> None:
    user, _ = user_tree(tmp_path)
    profiler = Profiler(toolkit=toolkit)  # the library's temporary root: cleanup=True deletes
    # the read refuses a run with a link below it (DECISIONS 23) and keeps the run, as after any error
    with pytest.raises(UsageError, match="escape: is a symbolic link"), profiler.profile(cleanup=True) as run:
        sim.launch("k")
        assert run.run_dir is not None
        (run.run_dir / "escape").symlink_to(user)
    assert run.run_dir is not None and os.path.lexists(run.run_dir)
    assert profiler.cleanup() == [run.run_dir]  # removes the link itself, not what it points to
    assert not os.path.lexists(run.run_dir)
    assert_user_tree_intact(user)


def test_cleanup_does_not_follow_a_run_replaced_by_a_symlink(toolkit: Toolkit, tmp_path: Path) -> None:
    user, _ = user_tree(tmp_path)
    profiler = Profiler(toolkit=toolkit)
    with profiler.profile(cleanup=False) as run:
        sim.launch("k")
    assert run.run_dir is not None and run.run_dir.parent == default_result_root()
    moved = tmp_path / "moved run"
    run.run_dir.rename(moved)
    run.run_dir.symlink_to(user)
    profiler.cleanup()
    assert_user_tree_intact(user)
    assert moved.is_dir()
    run.run_dir.unlink()


def test_cleanup_reports_only_what_it_removed(toolkit: Toolkit, tmp_path: Path) -> None:
    """cleanup() returns the directories it deleted, so a run it refused to touch is not listed."""
    user, _ = user_tree(tmp_path)
    profiler = Profiler(toolkit=toolkit)
    with profiler.profile(cleanup=False) as kept:
        sim.launch("k")
    with profiler.profile(cleanup=False) as swapped:
        sim.launch("k")
    assert kept.run_dir is not None and swapped.run_dir is not None
    swapped.run_dir.rename(tmp_path / "moved run")
    swapped.run_dir.symlink_to(user)
    try:
        removed = profiler.cleanup()
        assert not kept.run_dir.exists()
        assert swapped.run_dir.is_symlink(), "the symlink must be left alone"
        assert removed == [kept.run_dir], f"cleanup() reported {removed}"
    finally:
        swapped.run_dir.unlink()
    assert_user_tree_intact(user)


def prof_dirs(root: Path) -> set[str]:
    return {p.name for p in root.iterdir() if p.name.startswith("PROF_")}


def test_sync_run_of_a_caller_that_timed_out_before_its_start_is_cleaned_up(
    toolkit: Toolkit, simctl: SimControl
) -> None:
    """The collector finishes a start the caller stopped waiting for; cleanup() removes that run."""
    simctl.set_latency(start=0.3)
    root = default_result_root()
    before = prof_dirs(root)
    profiler = Profiler(toolkit=toolkit, call_timeout=0.05)
    with pytest.raises(CollectionTimeout), profiler.profile():
        pytest.fail("the body must not run")
    assert_nothing_left(simctl)  # waits for the collector to finish the start and the stop
    profiler.cleanup()
    assert prof_dirs(root) - before == set(), "a run in the temporary root outlived cleanup()"


async def test_async_run_of_a_caller_cancelled_before_its_start_is_cleaned_up(
    toolkit: Toolkit, simctl: SimControl
) -> None:
    simctl.set_latency(start=0.3)
    root = default_result_root()
    before = prof_dirs(root)
    profiler = AsyncProfiler(toolkit=toolkit)
    with anyio.move_on_after(0.05) as scope:
        async with profiler.profile():
            pytest.fail("the body must not run")
    assert scope.cancelled_caught
    assert_nothing_left(simctl)
    await profiler.cleanup()
    assert prof_dirs(root) - before == set(), "a run in the temporary root outlived cleanup()"


# -- modes and names -----------------------------------------------------------------------------


def test_created_directories_are_0750(toolkit: Toolkit, tmp_path: Path, umask_022: None) -> None:
    """Like CANN (recursive create, 0750), every directory the library creates is 0750."""
    result = tmp_path / "new" / "nested" / "runs"
    profiler = Profiler(result, toolkit=toolkit)
    with profiler.profile() as run:
        sim.launch("k")
    assert run.run_dir is not None
    assert mode(default_result_root()) == 0o750
    assert oct(mode(run.run_dir)) == oct(0o750)
    for directory in (result, result.parent, result.parent.parent):
        assert oct(mode(directory)) == oct(0o750), f"{directory} was created {oct(mode(directory))}"


@pytest.mark.parametrize("name", ["prof out", "résultats 結果 ü", "tab-free name with spaces and ünïcödé"])
def test_sync_path_with_spaces_and_non_ascii(toolkit: Toolkit, tmp_path: Path, name: str) -> None:
    profiler = Profiler(tmp_path / name / name, toolkit=toolkit)
    with profiler.profile(device_id=2) as run:
        sim.launch("k", device=2, count=3)
    assert run.result is not None and [(t.name, t.device) for t in run.result.tasks] == [("k", 2)] * 3
    assert run.run_dir is not None and run.run_dir.parent == tmp_path / name / name
    assert profiler.store_result(run.run_dir.name).tasks == run.result.tasks


@pytest.mark.parametrize("name", ["prof out", "résultats 結果 ü"])
async def test_async_path_with_spaces_and_non_ascii(toolkit: Toolkit, tmp_path: Path, name: str) -> None:
    profiler = AsyncProfiler(tmp_path / name / name, toolkit=toolkit)
    async with profiler.profile(device_id=2) as run:
        sim.launch("k", device=2, count=3)
    assert run.result is not None and [(t.name, t.device) for t in run.result.tasks] == [("k", 2)] * 3
    assert run.run_dir is not None and run.run_dir.parent == tmp_path / name / name


@pytest.mark.parametrize("char", list(MSPROF_REJECTED), ids=[f"U+{ord(c):04X}" for c in MSPROF_REJECTED])
@pytest.mark.parametrize("cls", [Profiler, AsyncProfiler])
def test_path_with_a_character_msprof_rejects_fails_up_front(
    toolkit: Toolkit, simctl: SimControl, tmp_path: Path, char: str, cls: type[Profiler | AsyncProfiler]
) -> None:
    started = get_collector().windows_started
    path = tmp_path / f"bad{char}name" / "runs"
    with pytest.raises(UsageError) as info:
        cls(path, toolkit=toolkit)
    assert repr(char) in str(info.value) and "msprof.py rejects" in str(info.value)
    assert not (tmp_path / f"bad{char}name").exists(), "nothing may be created for a refused path"
    assert get_collector().windows_started == started
    assert_nothing_left(simctl)


@pytest.mark.parametrize("total", [4097, 5000])
@pytest.mark.parametrize("cls", [Profiler, AsyncProfiler])
def test_path_over_4096_bytes_is_refused_up_front(
    toolkit: Toolkit, simctl: SimControl, tmp_path: Path, total: int, cls: type[Profiler | AsyncProfiler]
) -> None:
    path = long_path(tmp_path, total)
    with pytest.raises(UsageError, match="4096"):
        cls(path, toolkit=toolkit)
    assert not (tmp_path / ("d" * 200)).exists()
    assert_nothing_left(simctl)


def test_non_ascii_path_over_4096_bytes_but_not_characters_is_refused(
    toolkit: Toolkit, tmp_path: Path
) -> None:
    """The limit is in bytes (what aclprofInit gets), not characters."""
    path = tmp_path
    while len(os.fsencode(str(path))) <= 4096:
        path = path / ("é" * 100)  # 200 bytes, 100 characters
    assert len(str(path)) < 4096 < len(os.fsencode(str(path)))
    with pytest.raises(UsageError, match="4096"):
        Profiler(path, toolkit=toolkit)


@pytest.mark.parametrize("total", [4060, 4096])
def test_result_path_too_long_for_its_runs_is_refused_up_front(
    toolkit: Toolkit, simctl: SimControl, tmp_path: Path, total: int
) -> None:
    """A result path within 4096 bytes whose PROF_* runs would exceed it cannot be exported.

    msprof.py refuses a ``-dir`` over 4096 characters and Linux refuses paths of 4096 bytes or
    more (PATH_MAX counts the NUL), so such a path can only waste a collection and then fail late
    (an OSError or an export error); it must be refused when the profiler is made.
    """
    path = long_path(tmp_path, total)
    assert len(os.fsencode(str(path))) + RUN_NAME_BYTES > 4096
    started = get_collector().windows_started
    try:
        with pytest.raises(UsageError):
            profiler = Profiler(path, toolkit=toolkit)
            with profiler.profile():
                sim.launch("k")
        assert get_collector().windows_started == started, "a collection ran before the refusal"
    finally:
        assert_nothing_left(simctl)


# -- no shell ------------------------------------------------------------------------------------

SHELL_CALLS = {
    ("os", "system"),
    ("os", "popen"),
    ("subprocess", "getoutput"),
    ("subprocess", "getstatusoutput"),
    ("asyncio", "create_subprocess_shell"),
}
PROCESS_CALLS = {"Popen", "run", "call", "check_call", "check_output", "open_process", "run_process"}


def shell_uses(source: str, filename: str) -> list[str]:
    """Every place *source* could start a shell: shell=<not False>, shell helpers, str commands."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.Call):
            continue
        where = f"{filename}:{node.lineno}"
        for keyword in node.keywords:
            if keyword.arg == "shell" and not (
                isinstance(keyword.value, ast.Constant) and keyword.value.value is False
            ):
                found.append(f"{where}: shell={ast.unparse(keyword.value)}")
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if (func.value.id, func.attr) in SHELL_CALLS:
                found.append(f"{where}: {func.value.id}.{func.attr}()")
            name = func.attr
        elif isinstance(func, ast.Name):
            name = func.id
        else:
            continue
        # anyio.open_process / run_process and subprocess with a str command run it in a shell
        first = node.args[0] if node.args else None
        if name in PROCESS_CALLS and (
            isinstance(first, ast.JoinedStr)
            or (isinstance(first, ast.Constant) and isinstance(first.value, str))
        ):
            found.append(f"{where}: {name}() with a string command")
    return found


def test_the_shell_scanner_finds_shells() -> None:
    sample = (
        "import os, subprocess, anyio\n"
        "subprocess.run(cmd, shell=True)\n"
        "subprocess.Popen(cmd, shell=flag)\n"
        "os.system('ls')\n"
        "await anyio.open_process(f'msprof {x}')\n"
        "subprocess.run(['ls'], shell=False)\n"
    )
    assert len(shell_uses(sample, "sample.py")) == 4


def test_no_shell_anywhere_in_src() -> None:
    files = sorted(SRC.rglob("*.py"))
    assert len(files) > 10
    found = [hit for path in files for hit in shell_uses(path.read_text(encoding="utf-8"), str(path))]
    assert found == []
    assert not any("shell=True" in path.read_text(encoding="utf-8") for path in files)


# -- roots of processes killed outright ----------------------------------------------------------

_MAKES_A_ROOT_AND_DIES = """
import os, sys
from asc_aprof._cann._paths import default_result_root
root = default_result_root()
(root / "PROF_left").mkdir()
print(root, flush=True)
if sys.argv[1] == "kill":
    os._exit(0)  # no atexit: as SIGKILL or a stopped actor would leave it
sys.stdin.readline()  # stays alive until told
"""


def test_a_root_left_by_a_killed_process_is_removed_by_the_next_one(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    dead = subprocess.run(
        [sys.executable, "-c", _MAKES_A_ROOT_AND_DIES, "kill"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    left = Path(dead.stdout.strip())
    assert left.is_dir() and left.parent == tmp_path and left.name.startswith("asc_aprof_")
    alive = subprocess.Popen(
        [sys.executable, "-c", _MAKES_A_ROOT_AND_DIES, "stay"], env=env, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert alive.stdout is not None
        live = Path(alive.stdout.readline().strip())
        assert not left.exists()  # the second process's root swept the dead one's
        other = tmp_path / "asc_aprof_notapid"  # not a root's name: never touched
        other.mkdir()
        third = subprocess.run(
            [sys.executable, "-c", _MAKES_A_ROOT_AND_DIES, "kill"], env=env, capture_output=True, text=True,
            check=True,
        )  # fmt: skip
        assert live.is_dir() and (live / "PROF_left").is_dir()  # its process runs: kept
        assert other.is_dir()
        assert Path(third.stdout.strip()).is_dir()
    finally:
        assert alive.stdin is not None
        alive.communicate("\n", timeout=30)
    assert not live.exists()  # removed at its own exit
