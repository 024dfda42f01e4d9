"""``tune()``: the fastest of a set of kernel configurations, by racing, remembered across processes.

Theory of operation
-------------------
**Plans and drivers.** Every decision is written once, as sans-IO generators that yield steps
and receive their outcomes (like :func:`asc_aprof._plans._bench.plan`); drivers only perform steps:
:func:`tune` (threads), :func:`tune_async` (tasks) and :func:`asc_aprof.ray_sweep.ray_tune`
(one actor per Ray node). :func:`tune_plan` is the whole tune (:class:`Probe` the platform,
:class:`FileIO` on the cache, :class:`Round` s of the race); :func:`race` yields the rounds,
each a list of :class:`Request` (measure candidate *i* for *reps* calls) and receives each
request's :class:`Measured` samples or exception; a driver deals a round's requests over its
devices (:func:`split`; Ray: over the nodes first) and runs each device's share with
:func:`device_plan`, which yields :class:`Warm` calls and :class:`Collect` windows.

* Round 0 measures every candidate ``first_reps`` calls.
* After each round, every live candidate's samples so far give its median and the median's
  distribution-free interval at ``confidence``. The **leader** is the live candidate with the
  lowest median. A candidate whose interval lies entirely above the leader's (its low end
  above the leader's high end) is **eliminated**: it is clearly slower and is measured no more.
  Disjoint intervals are conservative: each misses its median with probability at most
  ``1 - confidence``, so a wrong elimination needs both to miss on the wrong side.
* A live candidate whose interval is already at most ``rel_width`` of its median is
  **converged** and is not measured again either (more samples would only narrow it).
* The next round measures each live, unconverged candidate as many calls again as it has
  (its sample count doubles, so its interval narrows by about sqrt(2) a round: successive
  halving's doubling budget, with elimination by intervals instead of by rank), bounded by
  ``max_reps`` calls per candidate.
* The race ends when every live candidate is converged or at ``max_reps``. The best is the
  live candidate with the lowest median; live candidates whose interval overlaps the best's
  are reported as **tied** (indistinguishable at this width).

With ``racing=False`` nothing is eliminated: every candidate is measured to the same width
(the brute-force baseline the benchmarks compare against).

**Interleaving.** Within a round, requests are shuffled by a ``random.Random(seed)``, so no
candidate always runs first (after a cold device) or right after another (in its L2 state);
the shuffled order is also the order on each device.

**Windows.** A collection window costs far more than the calls in it (stop, read: ~15 ms with
the simulator, seconds with real CANN), so a device measures its whole share of a round in
**one window**: each candidate's part is ``warmup + reps`` repetitions of the optional
``flush`` then the call, the first ``warmup`` of them dropped. The parts are told apart by
position, from each candidate's kernels (names and types, in start order), learned as follows.

* **Calibration is folded into round 0.** A new candidate gets ``warmup`` calls outside any
  window (as :meth:`~asc_aprof.Profiler.bench` warms up), then its part in the round's window
  like any other; the flush's kernels come from one window of a flush alone, once per device.
  The new candidates' kernels are read off that window: each part must be its calls' count of
  repetitions of one signature (flush kernels, then k >= 1 call kernels), and when exactly one
  choice of every new candidate's k fits the window, those are the signatures (:func:`_fold`).
  When none fits, or several do (candidates launching kernels alike, e.g. one ``tile`` against
  two, read either way by position), each new candidate is calibrated as before, one call alone
  in a window, and the round's window, kept, is split with those signatures. So a device spends
  one window on round 0, not one more per candidate, unless its kernels are ambiguous.
* **The statistics are unchanged by it**: the signature is read from names and types only,
  never from durations, and every sample is still a call after its part's ``warmup`` dropped
  calls, so no calibration call is a sample (before, the lone calibration call was never one
  either; the calls measured are the same ``reps`` per part). The one difference: a new
  candidate's first sample follows ``2 * warmup`` earlier calls, not ``2 * warmup + 1`` (the
  lone call is gone); with ``warmup=0`` its first sample is its first call on that device.
  A flush that fails in its window fails every new candidate of that device's share.
* Every later part must be exactly that many repetitions of flush kernels then call kernels. A
  part whose kernels do not match (or a window whose kernel count is not the parts' sum) is an
  :class:`~asc_aprof.AttributionError`; since one part's extra kernels shift every later part,
  such a window's parts are all measured again, one window each, so the error lands on the
  candidate that caused it (a part whose call raised fails at once; the others are re-measured).

With several devices, a round's windows are shared: the devices measuring a share form a
:class:`~asc_aprof._cann._collector.Cohort`, so each window waits (bounded) until every device still
measuring joined it, and a round is one window for all of them rather than one per device that
happened to be late.

**Failures.** A request that raises (the run function or the flush: the window goes on with
the next part; attribution; the collection: the window's parts are retried alone) marks its
candidate **failed** with the error's text; the race goes on with the others. On Ray, a node
that dies fails its candidates of that round with :class:`~asc_aprof.ray_sweep.NodeLost`; later
rounds use the other nodes. Only when every
candidate failed does :func:`tune` raise :class:`TuneError` (carrying the table).

**Cache.** With a ``key`` (e.g. ``("matmul", (M, N, K))``), the winner is stored as one JSON
file per key in ``cache_dir`` (default ``$ASC_APROF_TUNE_CACHE``, else
``${XDG_CACHE_HOME:-~/.cache}/asc-aprof/tune``), written atomically (temporary file and
rename). The file's name is a hash of: the user's key, the candidates (their JSON, or repr),
the chip, the CANN version and asc-aprof's version. Chip and CANN version come from the
parameters when given, else from one empty collection window's ``host/info.json`` (the
simulator writes ``aprofsim_chip`` and ``aprofsim_cann_version``; real CANN's
``platform_version``) and the toolkit's ``version.info``/``version.cfg`` files. A later
process with the same key, candidates and platform gets the stored table back
(``cached=True``) without measuring; ``retune=True`` measures again and overwrites it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import enum
import functools
import hashlib
import inspect
import json
import math
import os
import random
import re
import tempfile
import threading
from collections.abc import Awaitable, Callable, Collection, Generator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Generic, TypeVar

import anyio

from .._cann._collector import Cohort, get_collector
from .._cann._files import Bound, RunFileError, read_in_run
from .._model._defaults import CONFIDENCE, FIRST_REPS, MAX_REPS, REL_WIDTH, SEED
from .._model._enums import AicoreMetrics
from .._model._errors import AprofError, InvalidArgumentError
from .._model._json import loads as json_loads
from .._model._records import ProfilingTask
from .._model._warmup import warming_up
from .._plans._bench import (
    DEFAULT_BENCH_TYPES,
    AttributionError,
    Signature,
    _call_times,
    _signature,
    attribute,
    one_call,
)
from .._plans._stats import median_interval, quantile
from .._runs._drive import drive, drive_async
from .._version import __version__

ConfigT = TypeVar("ConfigT")

CACHE_VARIABLE: Final = "ASC_APROF_TUNE_CACHE"
CACHE_FORMAT: Final = "asc-aprof.tune"
CACHE_VERSION: Final = 1


class CandidateStatus(enum.Enum):
    """Where a candidate ended the race."""

    BEST = "best"  #: the lowest median among the live candidates
    TIED = "tied"  #: live, its interval overlaps the best's
    ELIMINATED = "eliminated"  #: its interval lay entirely above the leader's
    FAILED = "failed"  #: a measurement raised (see ``error``)


class TuneStop(enum.Enum):
    """Why the race ended."""

    CONVERGED = "converged"  #: every live candidate's interval reached ``rel_width``
    MAX_REPS = "max_reps"  #: some live candidate reached ``max_reps`` first
    CACHED = "cached"  #: the winner came from the cache


@dataclasses.dataclass(frozen=True, slots=True)
class Candidate(Generic[ConfigT]):
    """One configuration's outcome.

    :ivar index: its position in the candidates given
    :ivar config: the configuration as given
    :ivar status: how it ended
    :ivar median_us: median call time over every round (nan when it failed before any sample)
    :ivar ci_low_us: low end of the median's interval
    :ivar ci_high_us: high end
    :ivar count: calls measured
    :ivar rounds: rounds it was measured in
    :ivar error: the failure's text (failed candidates)
    """

    index: int
    config: ConfigT
    status: CandidateStatus
    median_us: float
    ci_low_us: float
    ci_high_us: float
    count: int
    rounds: int
    error: str | None = None

    @property
    def rel_width(self) -> float:
        if not self.count or self.median_us <= 0:
            return math.inf
        return (self.ci_high_us - self.ci_low_us) / self.median_us

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "config": _jsonable(self.config),
            "status": self.status.value,
            "median_us": self.median_us,
            "ci_low_us": self.ci_low_us,
            "ci_high_us": self.ci_high_us,
            "count": self.count,
            "rounds": self.rounds,
            "error": self.error,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class TuneResult(Generic[ConfigT]):
    """What :func:`tune` found.

    :ivar best: the winning configuration (one of those given)
    :ivar best_index: its index
    :ivar candidates: every candidate, in the order given
    :ivar stop: why the race ended
    :ivar rounds: rounds measured
    :ivar reps: calls measured in all
    :ivar cached: the result came from the cache (nothing was measured)
    :ivar key: the cache key's fields (None without a ``key``)
    """

    best: ConfigT
    best_index: int
    candidates: tuple[Candidate[ConfigT], ...]
    stop: TuneStop
    rounds: int
    reps: int
    cached: bool = False
    key: Mapping[str, Any] | None = None

    def table(self) -> str:
        """Every candidate's median and interval, fastest first, as aligned text."""
        rows = [("#", "config", "status", "median us", "interval us", "calls")]
        ordered = sorted(self.candidates, key=lambda c: (math.isnan(c.median_us), c.median_us))
        for c in ordered:
            interval = "-" if not c.count else f"[{c.ci_low_us:.3f}, {c.ci_high_us:.3f}]"
            median = "-" if not c.count else f"{c.median_us:.3f}"
            status = c.status.value + (f": {c.error}" if c.error else "")
            rows.append((str(c.index), _short(c.config), status, median, interval, str(c.count)))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        text = "\n".join("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows)
        if self.cached:
            text = "from the tune cache (nothing measured this call; retune=True measures again)\n" + text
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "best_index": self.best_index,
            "best": _jsonable(self.best),
            "stop": self.stop.value,
            "rounds": self.rounds,
            "reps": self.reps,
            "candidates": [c.to_dict() for c in self.candidates],
        }


class TuneError(AprofError):
    """Every candidate failed; :attr:`candidates` says how (their ``error``)."""

    def __init__(self, message: str, candidates: Sequence[Candidate[Any]]) -> None:
        super().__init__(message)
        self.candidates = tuple(candidates)


# -- the race (sans-IO) ---------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, slots=True)
class Calibration:
    """A candidate's kernels, learned from its first windows: the call's and the flush's, in start order.

    :ivar call: (name, type) of each kernel one call launches
    :ivar flush: the same for one flush (empty: it launched none; None: measured without a flush)
    """

    call: Signature
    flush: Signature | None


@dataclasses.dataclass(frozen=True, slots=True)
class Measured:
    """What measuring a request gave: its calls' times (µs, in order) and the candidate's calibration."""

    samples_us: tuple[float, ...]
    calibration: Calibration


Outcome = Measured | BaseException


@dataclasses.dataclass(frozen=True, slots=True)
class Request:
    """Measure candidate *index* for *reps* calls (*calibration*: learned in an earlier round, or None)."""

    index: int
    reps: int
    calibration: Calibration | None


@dataclasses.dataclass(frozen=True, slots=True)
class Round:
    """One round's requests, in the (shuffled) order to run them.

    The outcome is a mapping from each request's index to its :class:`Measured` or exception.
    """

    number: int
    requests: tuple[Request, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class RaceOutcome:
    """The race's end, before the configurations are attached."""

    best_index: int
    statuses: tuple[CandidateStatus, ...]
    samples: tuple[tuple[float, ...], ...]
    rounds_measured: tuple[int, ...]
    errors: tuple[str | None, ...]
    stop: TuneStop
    rounds: int
    confidence: float

    def interval(self, index: int) -> tuple[float, float, float]:
        """(median, low, high) of candidate *index* (nan without samples)."""
        return _stats(self.samples[index], self.confidence)


Race = Generator[Round, Mapping[int, Outcome], RaceOutcome]


def _stats(samples: Sequence[float], confidence: float) -> tuple[float, float, float]:
    if not samples:
        return math.nan, math.nan, math.nan
    ordered = sorted(samples)
    low, high, _ = median_interval(ordered, confidence)
    return quantile(ordered, 0.5), low, high


def race(
    count: int,
    *,
    rel_width: float = REL_WIDTH,
    confidence: float = CONFIDENCE,
    first_reps: int = FIRST_REPS,
    max_reps: int = MAX_REPS,
    seed: int = SEED,
    racing: bool = True,
) -> Race:
    """Race *count* candidates (see the module docstring for the rule)."""
    rng = random.Random(seed)
    samples: list[list[float]] = [[] for _ in range(count)]
    calibrations: list[Calibration | None] = [None] * count
    rounds_of = [0] * count
    errors: list[str | None] = [None] * count
    status: list[CandidateStatus | None] = [None] * count  # None: live
    number = 0
    stop = TuneStop.CONVERGED
    while True:
        live = [i for i in range(count) if status[i] is None]
        stats = {i: _stats(samples[i], confidence) for i in live}
        if number and live and racing:
            leader = min(live, key=lambda i: stats[i][0])
            for i in live:
                if stats[i][1] > stats[leader][2]:
                    status[i] = CandidateStatus.ELIMINATED
            live = [i for i in live if status[i] is None]
        todo = []
        for i in live:
            median, low, high = stats[i]
            have = len(samples[i])
            if number and (have >= max_reps or (median > 0 and (high - low) / median <= rel_width)):
                continue
            if number and median <= 0 and high - low <= 0:
                continue  # all-zero samples: nothing to narrow
            want = have or first_reps
            todo.append(Request(i, max(1, min(want, max_reps - have)), calibrations[i]))
        if not todo:
            if any(len(samples[i]) >= max_reps and _width(stats[i]) > rel_width for i in live):
                stop = TuneStop.MAX_REPS
            break
        rng.shuffle(todo)
        outcome = yield Round(number, tuple(todo))
        for request in todo:
            got = outcome[request.index]
            if isinstance(got, BaseException):
                status[request.index] = CandidateStatus.FAILED
                errors[request.index] = f"{type(got).__name__}: {got}"
                continue
            samples[request.index].extend(got.samples_us)
            rounds_of[request.index] += 1
            calibrations[request.index] = got.calibration
        number += 1
    live = [i for i in range(count) if status[i] is None]
    if not live:
        return RaceOutcome(
            -1,
            tuple(CandidateStatus.FAILED for _ in range(count)),
            tuple(tuple(s) for s in samples),
            tuple(rounds_of),
            tuple(errors),
            stop,
            number,
            confidence,
        )
    stats = {i: _stats(samples[i], confidence) for i in live}
    best = min(live, key=lambda i: (stats[i][0], i))
    for i in live:
        if i == best:
            status[i] = CandidateStatus.BEST
        elif stats[i][1] <= stats[best][2]:
            status[i] = CandidateStatus.TIED
        else:
            status[i] = CandidateStatus.ELIMINATED
    final = tuple(s if s is not None else CandidateStatus.FAILED for s in status)
    return RaceOutcome(
        best,
        final,
        tuple(tuple(s) for s in samples),
        tuple(rounds_of),
        tuple(errors),
        stop,
        number,
        confidence,
    )


def _width(stats: tuple[float, float, float]) -> float:
    median, low, high = stats
    return (high - low) / median if median > 0 else 0.0


def _result(
    configs: Sequence[ConfigT], outcome: RaceOutcome, key: Mapping[str, Any] | None
) -> TuneResult[ConfigT]:
    candidates = []
    for i, config in enumerate(configs):
        median, low, high = outcome.interval(i)
        candidates.append(
            Candidate(
                i,
                config,
                outcome.statuses[i],
                median,
                low,
                high,
                len(outcome.samples[i]),
                outcome.rounds_measured[i],
                outcome.errors[i],
            )
        )
    if outcome.best_index < 0:
        table = "; ".join(f"#{c.index} {_short(c.config)}: {c.error}" for c in candidates)
        raise TuneError(f"tune(): every candidate failed: {table}", candidates)
    return TuneResult(
        best=configs[outcome.best_index],
        best_index=outcome.best_index,
        candidates=tuple(candidates),
        stop=outcome.stop,
        rounds=outcome.rounds,
        reps=sum(len(s) for s in outcome.samples),
        key=key,
    )


# -- the cache ----------------------------------------------------------------------------------------------
def default_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$ASC_APROF_TUNE_CACHE``, else ``${XDG_CACHE_HOME:-~/.cache}/asc-aprof/tune``."""
    env = os.environ if environ is None else environ
    if env.get(CACHE_VARIABLE):
        return Path(env[CACHE_VARIABLE])
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "asc-aprof" / "tune"


def _jsonable(value: Any) -> Any:
    """*value* as JSON data (round-tripped), objects JSON cannot encode as their repr."""
    return json.loads(json.dumps(value, sort_keys=True, default=repr))


def _short(config: Any, limit: int = 40) -> str:
    text = json.dumps(_jsonable(config), sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def cache_key(key: Any, configs: Sequence[Any], chip: str, cann: str) -> dict[str, Any]:
    """The fields a cache entry is keyed by (see the module docstring)."""
    return {
        "key": _jsonable(key),
        "candidates": [_jsonable(c) for c in configs],
        "chip": chip,
        "cann": cann,
        "asc_aprof": __version__,
    }


def cache_file(directory: Path, fields: Mapping[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:32]
    return directory / f"{digest}.json"


def load_cached(
    path: Path, fields: Mapping[str, Any], configs: Sequence[ConfigT]
) -> TuneResult[ConfigT] | None:
    """The stored result, or None (missing, unreadable, or stored for other fields)."""
    try:
        data = json_loads(path.read_text(encoding="utf-8"))
        if data.get("format") != CACHE_FORMAT or data.get("version") != CACHE_VERSION:
            return None
        if data["fields"] != json.loads(json.dumps(fields, sort_keys=True)):
            return None
        stored = data["result"]
        candidates = tuple(
            Candidate(
                index=int(c["index"]),
                config=configs[int(c["index"])],
                status=CandidateStatus(c["status"]),
                median_us=float(c["median_us"]),
                ci_low_us=float(c["ci_low_us"]),
                ci_high_us=float(c["ci_high_us"]),
                count=int(c["count"]),
                rounds=int(c["rounds"]),
                error=c["error"],
            )
            for c in stored["candidates"]
        )
        best = int(stored["best_index"])
        return TuneResult(
            best=configs[best],
            best_index=best,
            candidates=candidates,
            stop=TuneStop.CACHED,
            rounds=int(stored["rounds"]),
            reps=int(stored["reps"]),
            cached=True,
            key=dict(fields),
        )
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


def store(path: Path, fields: Mapping[str, Any], result: TuneResult[Any]) -> None:
    """Write the entry atomically (a reader sees the old file or the new one, never a part)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "format": CACHE_FORMAT,
        "version": CACHE_VERSION,
        "fields": dict(fields),
        "result": result.to_dict(),
    }
    fd, tmp = tempfile.mkstemp(prefix=".tune-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out, sort_keys=True, indent=1)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


_VERSION_LINE = re.compile(r"^\s*(?:version|Version)\s*=\s*(\S+)", re.MULTILINE)


def platform_of(info: Mapping[str, Any], toolkit_library: Path) -> tuple[str, str]:
    """(chip, CANN version) from a run's ``host/info.json`` and the toolkit's version files."""
    chip = str(info.get("aprofsim_chip") or f"platform {info.get('platform_version', 'unknown')}")
    cann = info.get("aprofsim_cann_version")
    if not cann:
        root = toolkit_library.resolve().parent.parent
        for name in ("version.info", "version.cfg", "compiler/version.info", "runtime/version.info"):
            try:
                found = _VERSION_LINE.search((root / name).read_text(encoding="utf-8", errors="replace"))
            except OSError:
                continue
            if found:
                cann = found.group(1)
                break
    return chip, str(cann or "unknown")


def read_info(run_dir: Path) -> dict[str, Any]:
    """The run's ``host/info.json`` (read by the one reading rule), or {} where it has none."""
    try:
        data = json_loads(read_in_run(run_dir, run_dir / "host" / "info.json", Bound.METADATA))
    except (RunFileError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


# -- checks shared by the drivers -------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, slots=True)
class TuneOptions:
    rel_width: float
    confidence: float
    first_reps: int
    max_reps: int
    warmup: int
    seed: int
    racing: bool

    def __post_init__(self) -> None:
        if not self.rel_width > 0:
            raise InvalidArgumentError(f"rel_width must be > 0, got rel_width={self.rel_width}")
        if not 0 < self.confidence < 1:
            raise InvalidArgumentError(f"confidence must be in (0, 1), got confidence={self.confidence}")
        if self.first_reps < 6:
            raise InvalidArgumentError(
                f"first_reps must be >= 6 (fewer calls give no median interval), got {self.first_reps}"
            )
        if self.max_reps < self.first_reps:
            raise InvalidArgumentError(
                f"max_reps must be >= first_reps, got max_reps={self.max_reps}, first_reps={self.first_reps}"
            )
        if self.warmup < 0:
            raise InvalidArgumentError(f"warmup must be >= 0 calls, got warmup={self.warmup}")

    def race(self, count: int) -> Race:
        return race(
            count,
            rel_width=self.rel_width,
            confidence=self.confidence,
            first_reps=self.first_reps,
            max_reps=self.max_reps,
            seed=self.seed,
            racing=self.racing,
        )


def check_candidates(
    configs: Iterable[ConfigT], devices: Iterable[int] | None
) -> tuple[list[ConfigT], list[int]]:
    listed = list(configs)
    if not listed:
        raise InvalidArgumentError("tune() needs at least one candidate configuration")
    device_list = [0] if devices is None else [int(d) for d in devices]
    if not device_list or len(set(device_list)) != len(device_list):
        raise InvalidArgumentError(f"devices must be distinct device ids, at least one, got {device_list}")
    return listed, device_list


def split(requests: Sequence[Request], ways: int) -> list[list[Request]]:
    """A round's requests dealt round-robin in their (shuffled) order: one share per device, none empty."""
    return [share for share in (list(requests[k::ways]) for k in range(ways)) if share]


# -- one device's share of a round (sans-IO) ----------------------------------------------------------------
@dataclasses.dataclass(frozen=True, slots=True)
class Warm:
    """Call ``flush(); run(config)`` *calls* times outside any window; outcome None or the exception."""

    index: int
    calls: int


@dataclasses.dataclass(frozen=True, slots=True)
class Part:
    """*calls* repetitions of ``flush()`` (if *flush*) then ``run(configs[index])`` (no call: index None)."""

    index: int | None
    calls: int
    flush: bool


@dataclasses.dataclass(frozen=True, slots=True)
class Collect:
    """One collection window holding *parts* in order; outcome a :class:`Collected` or the exception."""

    parts: tuple[Part, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Collected:
    """A window's device tasks in start order; *raised*: (position of the part, what it raised)."""

    tasks: Sequence[ProfilingTask]
    run_id: str
    raised: tuple[int, BaseException] | None = None


DeviceStep = Warm | Collect
DevicePlan = Generator[DeviceStep, Any, dict[int, Outcome]]


def device_plan(
    requests: Sequence[Request],
    *,
    device: int,
    warmup: int,
    flush: bool,
    types: Collection[str] = DEFAULT_BENCH_TYPES,
) -> DevicePlan:
    """Measure *requests* on one device (see "Windows" in the module docstring)."""
    out: dict[int, Outcome] = {}
    calibration = {r.index: r.calibration for r in requests}
    flush_sig: Signature | None = () if not flush else None
    for c in calibration.values():
        if flush and c is not None and c.flush is not None:
            flush_sig = c.flush
    for r in requests:
        if calibration[r.index] is None and warmup:
            warmed = yield Warm(r.index, warmup)
            if warmed is not None:
                out[r.index] = warmed
    if flush_sig is None and len(out) < len(requests):
        # The flush's kernels, once per device: every part with a flush needs them.
        window = yield Collect((Part(None, 1, True),))
        try:
            flushed = _alone(window, device, types, call=False)[1]
            flush_sig = _signature([t for t in flushed if t.type in types])
        except Exception as exc:
            for r in requests:
                out.setdefault(r.index, exc)
            return out
    pending = [r for r in requests if r.index not in out]
    alone = False
    while pending:
        group = pending[:1] if alone else pending
        parts = tuple(Part(r.index, warmup + r.reps, flush) for r in group)
        window = yield Collect(parts)
        unknown = [k for k, r in enumerate(group) if calibration[r.index] is None]
        if unknown and not isinstance(window, BaseException) and window.raised is None:
            assert flush_sig is not None
            learned = _fold(window.tasks, parts, [calibration[r.index] for r in group], flush_sig, types)
            if learned is None:
                # No single reading fits: learn each new call alone; the window is split after.
                for k in unknown:
                    try:
                        single = yield Collect((Part(group[k].index, 1, False),))
                        call = _signature(_alone(single, device, types)[0])
                    except Exception as exc:
                        out[group[k].index] = exc
                        continue
                    calibration[group[k].index] = Calibration(call, flush_sig if flush else None)
                if any(r.index in out for r in group):
                    # a part whose kernels are unknown cannot be skipped: the others go again alone
                    pending = [r for r in pending if r.index not in out]
                    alone = True
                    continue
            else:
                for k, call in zip(unknown, learned, strict=True):
                    calibration[group[k].index] = Calibration(call, flush_sig if flush else None)
        cals = [calibration[r.index] for r in group]
        failed: tuple[int, BaseException] | None
        measured: list[tuple[float, ...]] = []
        if isinstance(window, BaseException):
            failed = (0, window)
        else:
            measured, failed = _split_window(window, parts, cals, warmup, device, types)  # type: ignore[arg-type]
        if failed is None:
            for r, samples, cal in zip(group, measured, cals, strict=True):
                assert cal is not None
                out[r.index] = Measured(samples, cal)
            pending = pending[len(group) :]
        elif len(group) == 1:
            out[group[0].index] = failed[1]
            pending = pending[1:]
        else:
            # Kernels are told apart by position only, so one part's trouble can shift the
            # others': a part that raised fails, every other part is measured again alone.
            if not isinstance(window, BaseException) and window.raised is not None:
                out[group[window.raised[0]].index] = window.raised[1]
            pending = [r for r in pending if r.index not in out]
            alone = True
    return out


#: Readings :func:`_fold` tries before it gives up (the window is then calibrated part by part).
_FOLD_BUDGET: Final = 10_000


def _fold(
    tasks: Sequence[ProfilingTask],
    parts: Sequence[Part],
    calibrations: Sequence[Calibration | None],
    flush_sig: Signature,
    types: Collection[str],
) -> list[Signature] | None:
    """The call signatures of the uncalibrated parts, when exactly one reading of the window fits.

    A part is ``calls`` repetitions of the flush's kernels (with a flush) then one call's. A
    calibrated part's repetition is known; an uncalibrated one's call is any k >= 1 kernels,
    and every repetition must equal the part's first. Readings are searched part by part;
    None when none fits, more than one does (kernels alike across candidates can be read more
    than one way), or the search runs past its budget.
    """
    sigs = _signature([t for t in tasks if t.type in types])
    total = len(sigs)
    units: list[Signature | None] = [
        None if cal is None else (flush_sig if part.flush else ()) + cal.call
        for part, cal in zip(parts, calibrations, strict=True)
    ]
    # the fewest kernels parts p.. can hold, to prune readings that leave too few for the rest
    least = [0] * (len(parts) + 1)
    for p in range(len(parts) - 1, -1, -1):
        unit = units[p]
        size = len(unit) if unit is not None else len(flush_sig if parts[p].flush else ()) + 1
        least[p] = least[p + 1] + parts[p].calls * size
    found: list[tuple[Signature, ...]] = []
    budget = _FOLD_BUDGET

    def repeats(at: int, unit: Signature, calls: int) -> bool:
        size = len(unit)
        return all(sigs[at + i * size : at + (i + 1) * size] == unit for i in range(calls))

    def search(p: int, at: int, chosen: list[Signature]) -> None:
        nonlocal budget
        if len(found) > 1 or budget <= 0:
            return
        if p == len(parts):
            if at == total:
                found.append(tuple(chosen))
            return
        part, known = parts[p], units[p]
        if known is not None:
            end = at + part.calls * len(known)
            if end + least[p + 1] <= total and repeats(at, known, part.calls):
                search(p + 1, end, chosen)
            return
        lead = flush_sig if part.flush else ()
        k = 1
        while at + part.calls * (len(lead) + k) + least[p + 1] <= total and len(found) < 2:
            budget -= 1
            if budget <= 0:
                return
            unit = sigs[at : at + len(lead) + k]
            if unit[: len(lead)] == lead and repeats(at, unit, part.calls):
                chosen.append(unit[len(lead) :])
                search(p + 1, at + part.calls * len(unit), chosen)
                chosen.pop()
            k += 1

    search(0, 0, [])
    if len(found) != 1 or budget <= 0:
        return None
    return list(found[0])


def _alone(
    window: Collected | BaseException, device: int, types: Collection[str], *, call: bool = True
) -> tuple[Sequence[ProfilingTask], Sequence[ProfilingTask]]:
    """A one-part window's (call's kernels, all tasks), or raise what went wrong."""
    if isinstance(window, BaseException):
        raise window
    if window.raised is not None:
        raise window.raised[1]
    if not call:
        return (), window.tasks
    return one_call(window.tasks, device=device, run_id=window.run_id, types=types), window.tasks


def _split_window(
    window: Collected,
    parts: Sequence[Part],
    calibrations: Sequence[Calibration],
    warmup: int,
    device: int,
    types: Collection[str],
) -> tuple[list[tuple[float, ...]], tuple[int, BaseException] | None]:
    """Each part's samples, or the first failure: (position of the part, its error)."""
    if window.raised is not None:
        return [], window.raised
    counted = [t for t in window.tasks if t.type in types]
    sizes = []
    for part, cal in zip(parts, calibrations, strict=True):
        flush_sig = cal.flush if part.flush and cal.flush is not None else ()
        sizes.append(part.calls * (len(flush_sig) + len(cal.call)))
    if sum(sizes) != len(counted):
        return [], (
            0,
            AttributionError(
                f"cannot attribute kernels to calls (device {device}, run {window.run_id}): "
                f"{len(counted)} kernels where the calls launched {sum(sizes)} when each was measured "
                "alone; some call launched a different number of kernels"
            ),
        )
    measured: list[tuple[float, ...]] = []
    at = 0
    for position, (part, cal, size) in enumerate(zip(parts, calibrations, sizes, strict=True)):
        try:
            calls, _ = attribute(
                counted[at : at + size],
                part.calls,
                device=device,
                run_id=window.run_id,
                types=types,
                call=cal.call,
                kernels=len(cal.call),
                flush=part.flush,
                flush_sig=cal.flush if part.flush else None,
            )
        except AttributionError as exc:
            return measured, (position, exc)
        measured.append(tuple(_call_times(calls[warmup:])))
        at += size
    return measured, None


# -- the whole tune (sans-IO): cache, probe, race ------------------------------------------------------------
@dataclasses.dataclass(frozen=True, slots=True)
class Probe:
    """Open and close one empty window; outcome the platform's (chip, CANN version)."""


@dataclasses.dataclass(frozen=True, slots=True)
class FileIO:
    """Blocking file work (the cache): outcome ``action()``."""

    action: Callable[[], Any]


TuneStep = Probe | FileIO | Round
TunePlan = Generator[TuneStep, Any, "TuneResult[Any]"]


def tune_plan(
    configs: Sequence[ConfigT],
    options: TuneOptions,
    *,
    key: Any,
    cache: bool,
    retune: bool,
    cache_dir: str | os.PathLike[str] | None,
    chip: str | None,
    cann: str | None,
) -> Generator[TuneStep, Any, TuneResult[ConfigT]]:
    """Everything :func:`tune` decides, as steps every driver performs its own way."""
    path: Path | None = None
    fields: dict[str, Any] | None = None
    if key is not None and cache:
        if chip is None or cann is None:
            found = yield Probe()
            chip, cann = chip or found[0], cann or found[1]
        fields = cache_key(key, configs, chip, cann)
        path = cache_file(Path(cache_dir) if cache_dir is not None else default_cache_dir(), fields)
        if not retune:
            hit = yield FileIO(functools.partial(load_cached, path, fields, configs))
            if hit is not None:
                return hit  # type: ignore[no-any-return]
    result = _result(configs, (yield from options.race(len(configs))), fields)
    if path is not None and fields is not None:
        yield FileIO(functools.partial(store, path, fields, result))
    return result


# -- drivers ------------------------------------------------------------------------------------------------
def _metric() -> AicoreMetrics:
    return AicoreMetrics.PIPE_UTILIZATION


#: (chip, CANN version) per (toolkit library, device), probed once per process: on real CANN
#: a probe is a whole collection window, which a cached tune() should not pay for every call.
_probed: dict[tuple[str, int], tuple[str, str]] = {}  # guarded by _probed_lock
_probed_lock = threading.Lock()


def probed(profiler: Any, device: int) -> tuple[str, str] | None:
    """What the simulated toolkit says it is, or what an earlier probe of *device* with this
    profiler's toolkit found, if any."""
    simulated = profiler.msprof.simulated_platform()
    if simulated is not None:
        return simulated  # type: ignore[no-any-return]
    with _probed_lock:
        return _probed.get((str(profiler.toolkit.library), device))


def _remember(profiler: Any, device: int, found: tuple[str, str]) -> tuple[str, str]:
    with _probed_lock:
        _probed[(str(profiler.toolkit.library), device)] = found
    return found


def probe_sync(profiler: Any, device: int) -> tuple[str, str]:
    """(chip, CANN version) of *device*: from an earlier probe in this process, else from one
    empty window (not kept in ``results``, no warning; its raw run removed when ours)."""
    if (found := probed(profiler, device)) is not None:
        return found
    with profiler._collect(device, False, _metric(), None, keep=False) as probe:
        pass
    run_dir = profiler._run_dir(probe.result.run_id)
    found = platform_of(read_info(run_dir), profiler.toolkit.library)
    _drop_probe(profiler, run_dir)
    return _remember(profiler, device, found)


def _drop_probe(profiler: Any, run_dir: Path) -> None:
    if profiler.owns_result_path:
        from .._cann._collector import remove_run_dir

        remove_run_dir(run_dir, profiler.result_path)


def _body_sync(
    parts: Sequence[Part],
    configs: Sequence[Any],
    run: Callable[[Any, int], object],
    flush: Callable[[int], object] | None,
    device: int,
) -> tuple[int, BaseException] | None:
    for position, part in enumerate(parts):
        try:
            for _ in range(part.calls):
                if part.flush and flush is not None:
                    flush(device)
                if part.index is not None:
                    run(configs[part.index], device)
        except Exception as exc:
            return position, exc
    return None


def measure_sync(
    profiler: Any,
    configs: Sequence[ConfigT],
    run: Callable[[ConfigT, int], object],
    flush: Callable[[int], object] | None,
    requests: Sequence[Request],
    devices: Sequence[int],
    warmup: int,
) -> dict[int, Outcome]:
    """One round's *requests* on *devices*, one thread per device (also each Ray node's part)."""

    def one(device: int, share: Sequence[Request], cohort: Cohort | None = None) -> dict[int, Outcome]:
        with cohort.member(device) if cohort is not None else contextlib.nullcontext():
            return run_plan(device, share)

    def run_plan(device: int, share: Sequence[Request]) -> dict[int, Outcome]:
        def perform(step: Warm | Any) -> Any:
            if isinstance(step, Warm):
                with warming_up():
                    raised = _body_sync((Part(step.index, step.calls, True),), configs, run, flush, device)
                return None if raised is None else raised[1]
            try:
                with profiler._collect(device, True, _metric(), None, keep=False) as window:
                    raised = _body_sync(step.parts, configs, run, flush, device)
                assert window.result is not None
                return Collected(window.result.tasks, window.result.run_id, raised)
            except Exception as exc:
                return exc

        return drive(device_plan(share, device=device, warmup=warmup, flush=flush is not None), perform)

    shares = split(requests, len(devices))
    out: dict[int, Outcome] = {}
    if len(shares) == 1:
        return one(devices[0], shares[0])
    # Each window waits for every device still measuring its share (see asc_aprof._cann._collector).
    cohort = get_collector().gather(profiler._key(_metric(), None), devices[: len(shares)])
    pool = concurrent.futures.ThreadPoolExecutor(len(shares), thread_name_prefix="asc-aprof-tune")
    with cohort, pool:
        for f in [pool.submit(one, d, s, cohort) for d, s in zip(devices, shares, strict=False)]:
            out.update(f.result())
    return out


def tune(
    profiler: Any,
    configs: Iterable[ConfigT],
    run: Callable[[ConfigT, int], object],
    devices: Iterable[int] | None,
    *,
    key: Any,
    flush: Callable[[int], object] | None,
    options: TuneOptions,
    cache: bool,
    retune: bool,
    cache_dir: str | os.PathLike[str] | None,
    chip: str | None,
    cann: str | None,
) -> TuneResult[ConfigT]:
    """The blocking driver behind :meth:`Profiler.tune <asc_aprof.Profiler.tune>`."""
    listed, device_list = check_candidates(configs, devices)
    steps = tune_plan(
        listed, options, key=key, cache=cache, retune=retune, cache_dir=cache_dir, chip=chip, cann=cann
    )

    def perform(step: TuneStep) -> Any:
        if isinstance(step, Probe):
            return probe_sync(profiler, device_list[0])
        if isinstance(step, FileIO):
            return step.action()
        return measure_sync(profiler, listed, run, flush, step.requests, device_list, options.warmup)

    return drive(steps, perform)


async def _probe_async(profiler: Any, device: int) -> tuple[str, str]:
    if (found := probed(profiler, device)) is not None:
        return found
    async with profiler._collect(device, False, _metric(), None, keep=False) as probe:
        pass
    run_dir = profiler._run_dir(probe.result.run_id)
    info = await anyio.to_thread.run_sync(read_info, run_dir)
    await anyio.to_thread.run_sync(_drop_probe, profiler, run_dir)
    return _remember(profiler, device, platform_of(info, profiler.toolkit.library))


async def measure_async(
    profiler: Any,
    configs: Sequence[ConfigT],
    run: Callable[[ConfigT, int], Awaitable[object]] | Callable[[ConfigT, int], object],
    flush: Callable[[int], Awaitable[object]] | Callable[[int], object] | None,
    requests: Sequence[Request],
    devices: Sequence[int],
    warmup: int,
) -> dict[int, Outcome]:
    """:func:`measure_sync` awaiting: one task per device; plain *run*/*flush* run in a worker thread."""
    run_async = inspect.iscoroutinefunction(run)
    flush_async = flush is not None and inspect.iscoroutinefunction(flush)

    async def body(parts: Sequence[Part], device: int) -> tuple[int, BaseException] | None:
        if not run_async and not flush_async:
            return await anyio.to_thread.run_sync(_body_sync, parts, configs, run, flush, device)
        for position, part in enumerate(parts):
            try:
                for _ in range(part.calls):
                    if part.flush and flush is not None:
                        got = flush(device)
                        if flush_async:
                            await got  # type: ignore[misc]
                    if part.index is not None:
                        got = run(configs[part.index], device)
                        if run_async:
                            await got  # type: ignore[misc]
            except Exception as exc:
                return position, exc
        return None

    out: dict[int, Outcome] = {}

    async def one(device: int, share: Sequence[Request], cohort: Cohort | None) -> None:
        with cohort.member(device) if cohort is not None else contextlib.nullcontext():
            await run_plan(device, share)

    async def run_plan(device: int, share: Sequence[Request]) -> None:
        async def perform(step: Warm | Any) -> Any:
            if isinstance(step, Warm):
                with warming_up():
                    raised = await body((Part(step.index, step.calls, True),), device)
                return None if raised is None else raised[1]
            try:
                async with profiler._collect(device, True, _metric(), None, keep=False) as window:
                    raised = await body(step.parts, device)
                assert window.result is not None
                return Collected(window.result.tasks, window.result.run_id, raised)
            except Exception as exc:
                return exc

        steps = device_plan(share, device=device, warmup=warmup, flush=flush is not None)
        out.update(await drive_async(steps, perform=perform))

    shares = split(requests, len(devices))
    cohort = (
        get_collector().gather(profiler._key(_metric(), None), devices[: len(shares)])
        if len(shares) > 1
        else None
    )
    with cohort if cohort is not None else contextlib.nullcontext():
        async with anyio.create_task_group() as tg:
            for device, share in zip(devices, shares, strict=False):
                tg.start_soon(one, device, share, cohort)
    return out


async def tune_async(
    profiler: Any,
    configs: Iterable[ConfigT],
    run: Callable[[ConfigT, int], Awaitable[object]] | Callable[[ConfigT, int], object],
    devices: Iterable[int] | None,
    *,
    key: Any,
    flush: Callable[[int], Awaitable[object]] | Callable[[int], object] | None,
    options: TuneOptions,
    cache: bool,
    retune: bool,
    cache_dir: str | os.PathLike[str] | None,
    chip: str | None,
    cann: str | None,
) -> TuneResult[ConfigT]:
    """The awaiting driver behind :meth:`AsyncProfiler.tune <asc_aprof.AsyncProfiler.tune>`."""
    listed, device_list = check_candidates(configs, devices)
    steps = tune_plan(
        listed, options, key=key, cache=cache, retune=retune, cache_dir=cache_dir, chip=chip, cann=cann
    )

    async def perform(step: TuneStep) -> Any:
        if isinstance(step, Probe):
            return await _probe_async(profiler, device_list[0])
        if isinstance(step, FileIO):
            return await anyio.to_thread.run_sync(step.action)
        return await measure_async(profiler, listed, run, flush, step.requests, device_list, options.warmup)

    return await drive_async(steps, perform=perform)
