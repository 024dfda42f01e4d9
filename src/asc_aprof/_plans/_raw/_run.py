"""A whole run: which files to read, and the tasks the exporter's CSVs would hold (sans-IO).

:func:`dirs_to_list` and :class:`RunPlan` decide from directory listings which files a run needs
(declining on anything unknown); :func:`decode_run` turns their bytes into a :class:`RawResult`.
Neither opens a file: :mod:`asc_aprof._runs._raw_files` does the reading.

The device side, per ``device_N``: the ``stars_soc`` task log pairs start and end records per
(task id, stream id) in time order (an end before its start is dropped, a start whose end never
came is dropped), and the FFTS+ subtask log gives the contexts of MIX kernels; counters become
times with the exporter's float arithmetic; each device task is matched with the host task of
the same (stream, task, context, batch) id. op_summary is the join of those tasks with the GE
tasks of the same ids, in start order; task_time is every matched or device-only task with its
runtime type (of a MIX task only context 0). Durations are ``round(ns / 1000, 3)`` of the float
difference, start times the exporter's Decimal sum of device time and the start_info offset,
printed to the nanosecond. Devices follow each other in folder-name order, as the exporter
merges them.

The hot loops of the device side (the pairing, read straight from the stars_soc bytes, the
top-down join, the op_summary rows, printed starts) also exist in C (``_cdevice``, switched by
:mod:`._accel`). The Python code here is the reference: each C call gives exactly its result or
returns None, and then the Python code runs (and raises any decline itself).
"""

from __future__ import annotations

import dataclasses
import decimal
import itertools
import math
import mmap
import operator
import re
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any, Final, NamedTuple, TypeVar, cast

from ..._model._chips import rated_aic_mhz
from ..._model._counters import TaskCounters
from ..._model._join import NEAREST_START_BOUND_NS, Level0Join, nearest_start
from ..._model._records import joinable
from .._parser import CONTROL_TYPES
from ._accel import active as _accelerated
from ._chunked import empty, to_tuple
from ._decode import (
    FUNCTION_SUBTASK_START,
    HOST_COMPACT_SIZE,
    SQE_TYPES,
    STARS_MAGIC,
    STARS_SIZE,
    FlipRecord,
    PieceSource,
    RawData,
    StarsColumns,
    SubtaskRecord,
    context_records,
    hash_dic,
    header_records,
    ini_first_section,
    joined,
    json_object,
    key_values,
    records,
    stars_columns,
    ts_track_flips,
    type_info_dic,
)
from ._freq import clock_table
from ._host import NA, GeTask, HostRecords, HostTask, LeanWalk, PackedGe, host_tables, lean_walk_ready
from ._pmu import JoinedRow, PmuTable, device_cells, pmu_records, run_counters
from ._sqlite import STORED_HOST_FILES, check_storable, host_slice_unstorable
from ._types import (
    SOURCE_OP_SUMMARY,
    SOURCE_TASK_TIME,
    ClockTable,
    DeclinedError,
    DeclineReason,
    PackedPart,
    PackedRows,
    RawResult,
    RawTask,
    WholeDecodeNeeded,
)

#: Platforms whose export was verified, with the driver versions seen (platform -> rule).
#: 910B (platform 5) and 310B (platform 7), as ``info.json``'s ``platform_version`` gives them.
PLATFORM_910B: Final = "5"
PLATFORM_310B: Final = "7"
#: From this driver version on (``drvVersion``) the exporter numbers task-id wraps (batch ids).
ALL_EXPORT_VERSION: Final = 0x072211
COLLECTION_VERSION: Final = "1.0"
LEVEL0_NAMES: Final = frozenset({"l0", "level0"})
UNKNOWN: Final = "UNKNOWN"
INVALID_CONTEXT: Final = 4294967295
#: Rows per exported CSV slice: beyond it the merge order depends on directory listing order.
CSV_LIMIT: Final = 1_000_000

DEVICE_DIR: Final = re.compile(r"^device_(\d+)$")
_SLICE: Final = re.compile(r"\.slice_(\d+)$")
_MARKERS: Final = (".done", ".complete", ".zip")

#: Host data files (``host/data``) and what they hold.
HOST_FILES: Final = {
    "api_event": re.compile(r"^(aging|unaging)\.api_event\.data\.slice_\d+$"),
    "task_track": re.compile(r"^(aging|unaging)\.compact\.task_track\.slice_\d+$"),
    "node_basic_info": re.compile(r"^(aging|unaging)\.compact\.node_basic_info\.slice_\d+$"),
    "tensor_info": re.compile(r"^(aging|unaging)\.additional\.tensor_info\.slice_\d+$"),
    "context_id_info": re.compile(r"^(aging|unaging)\.additional\.context_id_info\.slice_\d+$"),
    "hash_dic": re.compile(r"^(aging|unaging)\.additional\.hash_dic\.slice_\d+$"),
    "type_info_dic": re.compile(r"^(aging|unaging)\.additional\.type_info_dic\.slice_\d+$"),
    # whether streams are "expanded": changes only stream ids of 2048 and above, declined below
    "expand_stream_spec": re.compile(r"^(aging|unaging)\.compact\.expand_stream_spec\.slice_\d+$"),
}


def _device_pattern(kind: str, device: int) -> re.Pattern[str]:
    return re.compile(rf"^{kind}\.data\.{device}\.slice_\d+$")


def _is_marker(name: str) -> bool:
    return name.endswith(_MARKERS) or name == "all_file.complete"


def _slice_key(name: str) -> int:
    match = _SLICE.search(name)
    return int(match.group(1)) if match else 0


def dirs_to_list(root_entries: Iterable[str]) -> list[str]:
    """The directories (relative to the run) whose listing :class:`RunPlan` needs."""
    names = set(root_entries)
    devices = sorted(n for n in names if DEVICE_DIR.match(n))
    if not devices:
        raise DeclinedError(DeclineReason.NOT_A_RUN, "no device_N/ folder")
    # Without host/ (a collection that overlapped another's) the exporter writes task_time only.
    host = ["host", "host/data"] if "host" in names else []
    return [*host, *(p for n in devices for p in (n, f"{n}/data"))]


def _conf(entries: Sequence[str], pattern: str, where: str, *, required: bool = True) -> str | None:
    """The one config file of *where* matching *pattern* (the exporter takes the first it lists)."""
    regex = re.compile(pattern)
    found = [n for n in entries if regex.match(n) and not _is_marker(n)]
    if len(found) > 1:
        raise DeclinedError(DeclineReason.AMBIGUOUS, f"several {pattern!r} files in {where}: {sorted(found)}")
    if not found:
        if required:
            label = pattern.strip("^$").replace("\\", "").replace("(.d+)?", "").replace(".d+", ".N")
            raise DeclinedError(DeclineReason.MISSING_FILE, f"{where} has no {label} file")
        return None
    return f"{where}/{found[0]}"


@dataclasses.dataclass(frozen=True, slots=True)
class DevicePlan:
    device: int
    folder: str
    info: str
    sample: str
    start_info: str
    dev_start: str
    host_start: str
    stars: tuple[str, ...]
    ffts: tuple[str, ...]
    ts_track: tuple[str, ...]
    freq: tuple[str, ...] = ()  # lpmFreqConv: the AI Core clock (see ._freq)
    lpm: tuple[str, ...] = ()  # lpmInfoConv: the AI Core clock and voltages


@dataclasses.dataclass(frozen=True, slots=True)
class RunPlan:
    """The files of a run to read, classified (built from listings; never opens a file)."""

    host_info: str | None  # None: the run has no host/ folder
    host_sample: str | None
    host_data: Mapping[str, tuple[str, ...]]
    devices: tuple[DevicePlan, ...]

    @property
    def wanted(self) -> list[str]:
        paths = [p for p in (self.host_info, self.host_sample) if p is not None]
        paths += [p for ps in self.host_data.values() for p in ps]
        for dev in self.devices:
            paths += [dev.info, dev.sample, dev.start_info, dev.dev_start, dev.host_start]
            # ffts_profile holds the PMU counters (read by ._pmu only when they are asked for).
            paths += [*dev.stars, *dev.ts_track, *dev.ffts, *dev.freq, *dev.lpm]
        return paths

    @property
    def record_files(self) -> frozenset[str]:
        """The files of fixed-size binary records (every wanted file but the text ones): the
        big ones, which :mod:`._driver` may read into memory maps (see :data:`._decode.RawData`)."""
        text = {*self.host_data.get("hash_dic", ()), *self.host_data.get("type_info_dic", ())}
        binary = [p for ps in self.host_data.values() for p in ps if p not in text]
        binary += [
            p for dev in self.devices for p in (*dev.stars, *dev.ts_track, *dev.ffts, *dev.freq, *dev.lpm)
        ]
        return frozenset(binary)

    @classmethod
    def from_listing(cls, listing: Mapping[str, Sequence[str]]) -> RunPlan:
        """*listing*: the names in each directory :func:`dirs_to_list` asked for."""
        has_host = "host" in listing
        host = listing.get("host", [])
        host_info = _conf(host, r"^info\.json$", "host") if has_host else None
        host_sample = _conf(host, r"^sample\.json$", "host") if has_host else None
        host_data: dict[str, list[str]] = {}
        for name in listing.get("host/data", []):
            if _is_marker(name):
                continue
            kind = next((k for k, p in HOST_FILES.items() if p.match(name)), None)
            if kind is None:
                raise DeclinedError(DeclineReason.UNKNOWN_FILE, f"host/data/{name}")
            host_data.setdefault(kind, []).append(name)
        for required in ("task_track", "type_info_dic", "hash_dic", "api_event"):
            if has_host and required not in host_data:
                raise DeclinedError(DeclineReason.MISSING_FILE, f"host/data has no {required} file")
        ordered: dict[str, tuple[str, ...]] = {}
        for kind, names in host_data.items():
            modes = {n.split(".", 1)[0] for n in names}
            if len(modes) > 1 and kind not in ("hash_dic", "type_info_dic"):
                # Their relative order in the exporter follows the directory listing.
                raise DeclinedError(
                    DeclineReason.AMBIGUOUS, f"both aging and unaging {kind} files in host/data"
                )
            ordered[kind] = tuple(
                f"host/data/{n}" for n in sorted(names, key=lambda n: (n.split(".")[0], _slice_key(n)))
            )
        devices: list[DevicePlan] = []
        for folder in sorted(k for k in listing if DEVICE_DIR.match(k)):
            device = int(DEVICE_DIR.match(folder).group(1))  # type: ignore[union-attr]
            entries = listing.get(folder, [])
            data = [n for n in listing.get(f"{folder}/data", []) if not _is_marker(n)]
            kinds: dict[str, list[str]] = {
                "stars_soc": [],
                "ffts_profile": [],
                "ts_track": [],
                "lpmInfoConv": [],
                "lpmFreqConv": [],
            }
            for name in data:
                kind = next((k for k in kinds if _device_pattern(k, device).match(name)), None)
                if kind is None:
                    raise DeclinedError(DeclineReason.UNKNOWN_FILE, f"{folder}/data/{name}")
                kinds[kind].append(f"{folder}/data/{name}")
            if not kinds["stars_soc"]:
                raise DeclinedError(DeclineReason.MISSING_FILE, f"{folder}/data has no stars_soc file")
            conf = [
                _conf(entries, r"^info\.json", folder),
                _conf(entries, r"^sample\.json", folder),
                _conf(entries, r"^start_info", folder),
                _conf(entries, r"^dev_start\.log\.\d+", folder),
                _conf(entries, r"^host_start\.log(\.\d+)?", folder),
            ]
            info, sample, start_info, dev_start, host_start = (c or "" for c in conf)
            devices.append(
                DevicePlan(
                    device,
                    folder,
                    info,
                    sample,
                    start_info,
                    dev_start,
                    host_start,
                    tuple(sorted(kinds["stars_soc"], key=_slice_key)),
                    tuple(sorted(kinds["ffts_profile"], key=_slice_key)),
                    tuple(sorted(kinds["ts_track"], key=_slice_key)),
                    tuple(sorted(kinds["lpmFreqConv"], key=_slice_key)),
                    tuple(sorted(kinds["lpmInfoConv"], key=_slice_key)),
                )
            )
        return cls(host_info, host_sample, ordered, tuple(devices))


# -- clocks ------------------------------------------------------------------------------------

#: The exporter's Decimal arithmetic runs in Python's default context; pinned here so that a
#: caller's own decimal context cannot change a printed start time.
_DECIMAL: Final = decimal.Context(prec=28, rounding=decimal.ROUND_HALF_EVEN)
_MILLI: Final = decimal.Decimal("0.000")


@dataclasses.dataclass(frozen=True, slots=True)
class DeviceClock:
    """Counter to time, exactly as the exporter computes it (floats where it uses floats)."""

    dev_cnt: float  # dev_start.log cntvct / 1e9
    hwts_freq: float  # Hz
    host_mon: float  # host_start.log clock_monotonic_raw in s
    local_offset: float  # µs: start_info collectionTimeBegin - clockMonotonicRaw / 1000
    collect_begin: str  # start_info collectionTimeBegin, as text
    offset: decimal.Decimal = dataclasses.field(init=False)
    _terms: tuple[tuple[int, int, int], ...] = dataclasses.field(init=False, repr=False, compare=False)
    _begin_bounds: tuple[int, ...] = dataclasses.field(init=False, repr=False, compare=False)
    #: _terms and _begin_bounds in the form the C printer takes (see :func:`_c_terms`)
    _c_terms: tuple[tuple[int, int, int, int, int] | None, ...] = dataclasses.field(
        init=False, repr=False, compare=False
    )
    _c_bounds: tuple[int, int, int] | None = dataclasses.field(init=False, repr=False, compare=False)
    #: the offset as whole ns and its decimals in repr, where it has at most 3 (ns then in C without repr)
    _c_offset: tuple[int, int] | None = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "offset", decimal.Decimal(repr(self.local_offset)))
        # Per number of decimals in repr(ns): (factor of ns's digits, the offset's digits over
        # the same power of ten, the power of ten of 1 ns); empty: the offset's repr has an
        # exponent, so every start takes the Decimal path.
        terms: list[tuple[int, int, int]] = []
        digits = _repr_digits(self.local_offset)
        if digits is not None:
            off_value, off_places = digits
            for places in range(_MAX_PLACES + 1):
                scale = max(places + 3, off_places, 4)
                terms.append(
                    (_TEN[scale - places - 3], off_value * _TEN[scale - off_places], _TEN[scale - 3])
                )
        object.__setattr__(self, "_terms", tuple(terms))
        begin = self.collect_begin
        # (lowest and highest+1 integer part with the begin's digit count, the begin) for
        # kept_ns; empty where the begin is not plain ASCII digits.
        bounds = (
            (10 ** (len(begin) - 1), 10 ** len(begin), int(begin))
            if begin.isascii() and begin.isdigit()
            else ()
        )
        object.__setattr__(self, "_begin_bounds", bounds)
        object.__setattr__(self, "_c_terms", _c_terms(self._terms))
        fits = len(bounds) == 3 and max(bounds) < 2**63
        object.__setattr__(self, "_c_bounds", bounds if fits else None)
        whole: tuple[int, int] | None = None
        if digits is not None and digits[0] >= 0 and digits[1] <= 3:
            whole = (digits[0] * 10 ** (3 - digits[1]), digits[1])
        object.__setattr__(self, "_c_offset", whole if whole and whole[0] < _C_RANGE else None)

    def ns(self, counter: int) -> float:
        return float(counter - self.dev_cnt * 1e9) / self.hwts_freq * 1e9 + self.host_mon * 1e9

    def terms(self) -> tuple[float, float, float]:
        """(cntvct in counts, Hz, host offset in ns): ``ns = float(c - a) / b * 1e9 + c0`` gives
        exactly :meth:`ns` (the same float products, computed once)."""
        return self.dev_cnt * 1e9, self.hwts_freq, self.host_mon * 1e9

    def local(self, ns: float) -> str:
        """The printed start time: ``Decimal(str(ns)) / 1000 + offset``, 3 decimals (exact shifts)."""
        try:
            value = _DECIMAL.add(decimal.Decimal(repr(ns)).scaleb(-3, _DECIMAL), self.offset)
            if value.is_finite():
                return str(value.quantize(_MILLI, context=_DECIMAL))
        except decimal.InvalidOperation:  # over 28 digits: clock metadata far out of range
            pass
        raise DeclinedError(
            DeclineReason.MALFORMED,
            f"start time out of range ({ns!r} ns + {self.offset} µs): odd clock metadata",
        )

    def printed(self, ns: float) -> tuple[str, int]:
        """(:meth:`local`, the same value as integer ns), in integer arithmetic where it is exact.

        ``local`` adds two decimals read from ``repr`` strings (``Decimal(repr(x))`` is exactly
        the integer of repr's digits over a power of ten) in a 28-digit context and rounds half
        even to 3 decimals. With both digit strings as integers over a common power of ten, the
        sum is the same integer; below 10**28 the Decimal sum is exact, so rounding that integer
        half even gives the same 3-decimal value. Anything else (exponent forms, sums of 28
        digits or more, values below 1 µs) takes the Decimal path.
        """
        texts, values = self.printed_all([ns])
        return texts[0] or _ns_text(values[0]), values[0]

    def c_printer(self) -> tuple[object, ...]:
        """The arguments of the C printer (``_cdevice``): integer terms, the start filter's
        bounds, and the pure code for the values they do not cover."""
        return self._c_terms, self._c_bounds, self._printed_one, self.kept_ns, self._c_offset

    def _printed_one(self, ns: float, text: bool) -> tuple[str | None, int]:
        texts, values = self._printed_pure((ns,), text)
        return texts[0], values[0]

    def printed_all(
        self, values: Sequence[float], *, text: bool = True
    ) -> tuple[list[str | None], list[int]]:
        """:meth:`printed` of every value: (the printed starts, the same as integer ns).

        Without *text*, a printed start that is ``_ns_text`` of its integer is None (the caller
        formats it only where it needs it: :meth:`kept_ns`)."""
        if (c := _accelerated()) is not None:
            result: tuple[list[str | None], list[int]] = c.printed_all(
                values if isinstance(values, list) else list(values), text, self.c_printer()
            )
            return result
        return self._printed_pure(values, text)

    def _printed_pure(self, values: Sequence[float], text: bool) -> tuple[list[str | None], list[int]]:
        texts: list[str | None] = []
        out: list[int] = []
        text_append = texts.append
        out_append = out.append
        terms = self._terms
        for ns in values:
            written = repr(ns)
            if terms and "e" not in written and "n" not in written:  # not an exponent, inf, nan
                whole, _, fraction = written.partition(".")
                # ns = digits / 10**places; µs = digits / 10**(places + 3), plus the offset's
                # digits, both over 10**scale: total / 10**scale µs, rounded to 10**(scale - 3).
                factor, offset_term, unit = terms[len(fraction)]
                total = int(whole + fraction) * factor + offset_term
                if 0 < total < _DIGITS_LIMIT:
                    quotient, rest = divmod(total, unit)
                    if 2 * rest > unit or (2 * rest == unit and quotient & 1):
                        quotient += 1
                    if quotient >= 1000:
                        text_append(f"{quotient // 1000}.{quotient % 1000:03d}" if text else None)
                        out_append(quotient)
                        continue
            start = self.local(ns)
            text_append(start)
            out_append(int(_DECIMAL.multiply(decimal.Decimal(start), 1000)))  # not the caller's context
        return texts, out

    def kept_ns(self, start_ns: int, start: str | None, duration_us: float) -> bool:
        """:meth:`kept` of a printed start given as integer ns (*start*: its text, or None where
        it is ``_ns_text(start_ns)``). The shortcut of :meth:`kept` in integers: the printed
        integer part has no leading zero, so it has the begin's number of digits exactly when it
        lies in [10**(n-1), 10**n), and equal-length digit strings compare as their numbers."""
        bounds = self._begin_bounds
        if start is None:
            whole = start_ns // 1000
            if bounds and bounds[0] <= whole < bounds[1] and whole >= bounds[2]:
                return True
            start = _ns_text(start_ns)
        return self.kept(start, duration_us)

    def kept(self, start: str, duration_us: float) -> bool:
        """The exporter's filter: tasks that started before the collection are dropped.

        It compares the printed start (with its tab) to ``collectionTimeBegin`` *as strings*;
        when the integer part has the begin's digits and is not smaller, that is true at once.
        """
        cell = start + "\t"
        begin = self.collect_begin
        if begin.isdigit() and start.find(".") == len(begin) and start[: len(begin)] >= begin:
            return True
        end = _DECIMAL.add(decimal.Decimal(start), decimal.Decimal(repr(duration_us)))
        return cell > begin or cell < begin < str(end.quantize(_MILLI, context=_DECIMAL))


#: Powers of ten for :meth:`DeviceClock.printed`: repr writes a float without exponent only
#: from 1e-4 to 1e16, so with at most 21 decimals (and the offset, from 1e-4 µs on, too).
_MAX_PLACES: Final = 24
_TEN: Final = tuple(10**n for n in range(_MAX_PLACES + 8))
_DIGITS_LIMIT: Final = 10**28  # the Decimal context's precision


#: Decimals of ``repr(ns)`` the C printer handles in 64-bit integers.
_C_PLACES: Final = 17
_C_RANGE: Final = 2**62


def _c_terms(terms: Sequence[tuple[int, int, int]]) -> tuple[tuple[int, int, int, int, int] | None, ...]:
    """:attr:`DeviceClock._terms` split so that 64-bit integers do :meth:`DeviceClock.printed_all`.

    With ``(factor, offset_term, unit)`` of *p* decimals (``unit == factor * 10**p``), write
    ``offset_term = a * unit + b1 * factor + b0`` (``b1 < 10**p``, ``b0 < factor``). For the
    digits *d* of ``repr(ns)``, ``total = d * factor + offset_term`` then has the quotient
    ``a + (d + b1) // 10**p`` by *unit*, and a rest that compares to half a unit as
    ``2 * ((d + b1) % 10**p) - 10**p`` (and, where that is 0 or -1, ``2 * b0`` against
    *factor*) says. ``total < 10**28`` is ``quotient < 10**28 // unit`` (*limit*), as unit is a
    power of ten. Per *p*: (a, b1, b0, factor, limit), or None where a value is out of range
    (that many decimals then take the Python path)."""
    out: list[tuple[int, int, int, int, int] | None] = []
    for places in range(_C_PLACES + 1):
        if places >= len(terms):
            out.append(None)
            continue
        factor, offset_term, unit = terms[places]
        a, b = divmod(offset_term, unit)
        b1, b0 = divmod(b, factor)
        limit = min(_DIGITS_LIMIT // unit if unit <= _DIGITS_LIMIT else 0, 2**64 - 1)
        ok = -_C_RANGE < a < _C_RANGE and factor < _C_RANGE
        out.append((a, b1, b0, factor, limit) if ok else None)
    return tuple(out)


def _ns_text(start_ns: int) -> str:
    """A printed start (µs, 3 decimals) from integer ns of at least 1 µs."""
    return f"{start_ns // 1000}.{start_ns % 1000:03d}"


def _repr_digits(value: float) -> tuple[int, int] | None:
    """``repr(value)`` as (its digits as an integer, the number of decimals), or None for the
    exponent form, infinities and NaN."""
    text = repr(value)
    if "e" in text or "n" in text:
        return None
    whole, _, fraction = text.partition(".")
    return int(whole + fraction), len(fraction)


def _number(value: object, what: str) -> float:
    try:
        result = float(str(value))
    except ValueError:
        raise DeclinedError(DeclineReason.MALFORMED, f"{what} is not a number: {value!r}") from None
    if not math.isfinite(result):  # nan, inf, 1e400: no clock; the exporter's arithmetic fails
        raise DeclinedError(DeclineReason.MALFORMED, f"{what} is not a finite number: {value!r}")
    return result


def _clock(
    info: Mapping[str, object],
    dev_start: Mapping[str, str],
    host_start: Mapping[str, str],
    start_info: Mapping[str, object],
    folder: str,
) -> DeviceClock:
    device_info = info.get("DeviceInfo")
    if not isinstance(device_info, list) or not device_info or not isinstance(device_info[0], dict):
        raise DeclinedError(DeclineReason.MALFORMED, f"{folder}/info.json has no DeviceInfo")
    hwts = _number(device_info[0].get("hwts_frequency", ""), f"{folder} hwts_frequency") * 1e6
    if hwts <= 0:
        raise DeclinedError(DeclineReason.MALFORMED, f"{folder} hwts_frequency <= 0")
    cpu = info.get("CPU")
    if not isinstance(cpu, list) or not cpu or not isinstance(cpu[0], dict):
        raise DeclinedError(DeclineReason.MALFORMED, f"{folder}/info.json has no CPU frequency")
    try:
        host_freq = float(str(cpu[0].get("Frequency")))
    except ValueError:
        host_freq = 0.0
    host_freq = host_freq * 1e6 if host_freq > 0 else 1e9
    cntvct = dev_start.get("cntvct")
    if cntvct is None or _number(cntvct, "cntvct") <= 0:
        raise DeclinedError(DeclineReason.MALFORMED, f"{folder}/dev_start.log has no cntvct")
    dev_cnt = float(cntvct) / 1e9
    try:
        mono = int(host_start["clock_monotonic_raw"])
        diff = host_start.get("cntvct_diff", "")
        host_mon_ns = mono + round(int(diff) * 1e9 / host_freq) if diff else mono
    except (KeyError, ValueError, OverflowError):  # (OverflowError: a huge diff or a tiny frequency)
        raise DeclinedError(DeclineReason.MALFORMED, f"{folder}/host_start.log is incomplete") from None
    begin = start_info.get("collectionTimeBegin")
    raw = start_info.get("clockMonotonicRaw")
    if not isinstance(begin, str) or not begin or not raw:
        raise DeclinedError(DeclineReason.MALFORMED, f"{folder}/start_info lacks collectionTimeBegin")
    offset = _number(begin, "collectionTimeBegin") - _number(raw, "clockMonotonicRaw") / 1000.0
    return DeviceClock(dev_cnt, hwts, float(host_mon_ns) / 1e9, offset, begin)


# -- device tasks -----------------------------------------------------------------------------


class _DeviceTask(NamedTuple):
    stream_id: int
    task_id: int
    context_id: int  # the FFTS+ subtask id, or the invalid id for a whole task
    sqe_type: str
    start: float  # ns
    duration: float  # ns
    start_cycles: int
    end_cycles: int


_START: Final = operator.itemgetter(4)  # _DeviceTask.start, _Ascend.start
_FIRST: Final = operator.itemgetter(0)
#: ``tuple.__new__(Record, fields)``: a named tuple built without a Python frame (hot loops).
_new: Final[Any] = tuple.__new__
_HostOrGe = TypeVar("_HostOrGe", HostTask, GeTask)

_PLACE_HOLDER_SQE: Final = 3
_EVENT_RECORD_SQE: Final = 4


def stream_task_ids(stream: int, task: int, sqe_type: int, expanded: bool) -> tuple[int, int]:
    """The (stream id, task id) a device record stands for.

    Above 2047 the exporter unpacks ids from both fields, by rules that differ with "stream
    expansion". Accepted are the two cases real runs show: without expansion the top bit alone
    (310B control tasks on stream 0x8000 are stream 0); with expansion, the top bit on a
    kernel's record (910B MIX kernels: the stream id is in the task field, the task id in the
    stream field's low bits).
    """
    if stream < 2048:
        return stream, task
    if not expanded and stream & 0xF800 == 0x8000:
        return stream % 2048, task
    if expanded and stream & 0x8000 and sqe_type not in (_PLACE_HOLDER_SQE, _EVENT_RECORD_SQE):
        return task & 0x7FFF, (task & 0x8000) | (stream & 0x7FFF)
    raise DeclinedError(
        DeclineReason.UNSUPPORTED,
        f"bit-packed stream id {stream:#06x} (SQE type {sqe_type}, expansion {'on' if expanded else 'off'})",
    )


def _stars_tasks(
    data: RawData, clock: DeviceClock, folder: str, expanded: bool
) -> tuple[list[_DeviceTask], list[SubtaskRecord]]:
    """The device tasks of a ``stars_soc`` log and its FFTS+ subtask records: :func:`_paired_tasks`
    of :func:`stars_columns` (in C straight from the bytes where every record is a plain one)."""
    if (c := _accelerated()) is not None:
        base, hertz, offset = clock.terms()
        fast: list[_DeviceTask] | None = c.paired_stars(
            data, STARS_MAGIC, base, hertz, offset, SQE_TYPES, INVALID_CONTEXT, _DeviceTask
        )
        if fast is not None:
            return fast, []
    stars, subtasks = stars_columns(data)
    return _paired_tasks(stars, clock, folder, expanded), subtasks


def _paired_tasks(
    columns: StarsColumns, clock: DeviceClock, folder: str, expanded: bool
) -> list[_DeviceTask]:
    """Start and end records paired per (task id, stream id) in time order (stable: equal times
    keep file order), as device tasks in start order (stable: equal starts in group order).

    Column by column: times in one pass, one sort of record indices, groups of indices."""
    headers, streams, tasks, counters = columns
    sqe_count = len(SQE_TYPES)
    kinds = set(headers)
    if any(h & 63 > 1 or h >> 10 >= sqe_count for h in kinds):
        # The first declined record in file order names the decline, as record by record.
        for header, stream, task in zip(headers, streams, tasks, strict=True):
            function, sqe = header & 63, header >> 10
            if function > 1:
                # Other logs (block log, fusion tasks, sampled data) feed tables not modelled here.
                raise DeclinedError(DeclineReason.UNKNOWN_RECORD, f"{folder} stars_soc function {function}")
            if sqe >= sqe_count:
                raise DeclinedError(DeclineReason.UNKNOWN_RECORD, f"{folder} stars_soc SQE type {sqe}")
            if stream >= 2048:
                stream_task_ids(stream, task, sqe, expanded)
    if streams and max(streams) >= 2048:
        streams, tasks = streams[:], tasks[:]
        for index, stream in enumerate(streams):
            if stream >= 2048:
                streams[index], tasks[index] = stream_task_ids(
                    stream, tasks[index], headers[index] >> 10, expanded
                )
    base, hertz, offset = clock.terms()
    if (c := _accelerated()) is not None:
        fast: list[_DeviceTask] | None = c.paired_tasks(
            headers, streams, tasks, counters, base, hertz, offset, SQE_TYPES, INVALID_CONTEXT, _DeviceTask
        )
        if fast is not None:
            return fast
    # The exporter's float arithmetic (``float(c - a) / b * 1e9 + c0``: c - a is a float already).
    times = [(counter - base) / hertz * 1e9 + offset for counter in counters]
    starts_of = {h: h & 63 == 0 for h in kinds}
    is_start = [starts_of[h] for h in headers]
    keys = [task << 16 | stream for task, stream in zip(tasks, streams, strict=True)]  # both < 65536
    groups: dict[int, list[int]] = {}
    get = groups.get
    for index in sorted(range(len(times)), key=times.__getitem__):
        key = keys[index]
        group = get(key)
        if group is None:
            groups[key] = [index]
        else:
            group.append(index)
    del keys
    matched: list[_DeviceTask] = []
    append = matched.append
    for group in groups.values():
        if len(group) == 2 and is_start[group[0]] and not is_start[group[1]]:
            pairs: Sequence[list[int]] = (group,)  # a start, then its end
        else:
            pairs = _pairs(group, is_start, times)
        for s_index, e_index in pairs:
            s_time = times[s_index]
            append(
                _new(
                    _DeviceTask,
                    (
                        streams[s_index],
                        tasks[s_index],
                        INVALID_CONTEXT,
                        SQE_TYPES[headers[s_index] >> 10],
                        s_time,
                        times[e_index] - s_time,
                        counters[s_index],
                        counters[e_index],
                    ),
                )
            )
    matched.sort(key=_START)
    return matched


def _pairs(group: list[int], is_start: list[bool], times: list[float]) -> list[list[int]]:
    """One (task, stream)'s records (indices in time order) paired: an end before its start is
    dropped, a start followed by another start before its end is dropped (its end was lost)."""
    starts = [i for i in group if is_start[i]]
    ends = [i for i in group if not is_start[i]]
    out: list[list[int]] = []
    i = j = 0
    while i < len(starts) and j < len(ends):
        s_time = times[starts[i]]
        e_time = times[ends[j]]
        if e_time < s_time:
            j += 1  # an end without its start
            continue
        if i + 1 == len(starts) or e_time < times[starts[i + 1]]:
            out.append([starts[i], ends[j]])
            i += 1
            j += 1
        else:
            i += 1  # a start whose end was lost
    return out


#: FFTS+ subtask types (``StarsConstant.SUBTASK_TYPE``).
SUBTASK_TYPES: Final = {
    0: "AIC",
    1: "AIV",
    3: "Notify Wait",
    4: "Notify Record",
    5: "Write Value",
    6: "MIX_AIC",
    7: "MIX_AIV",
    8: "SDMA",
    9: "Data Context",
    10: "Invalidate Data Context",
    11: "Writeback Data Context",
    12: "AI_CPU",
    13: "Load Context",
    15: "DSA",
}


def _subtask_tasks(
    subtasks: list[SubtaskRecord], clock: DeviceClock, folder: str, expanded: bool
) -> list[_DeviceTask]:
    """FFTS+ subtasks (contexts) as device tasks: start and end paired per (stream, task,
    subtask, thread) in time order, an end before its start dropped."""
    timed: list[tuple[float, int, int, SubtaskRecord]] = []
    for rec in subtasks:
        if rec.sqe_type >= len(SQE_TYPES) or rec.subtask_type not in SUBTASK_TYPES:
            raise DeclinedError(
                DeclineReason.UNKNOWN_RECORD,
                f"{folder} FFTS+ subtask with SQE type {rec.sqe_type}, subtask type {rec.subtask_type}",
            )
        stream, task = stream_task_ids(rec.stream_id, rec.task_id, rec.sqe_type, expanded)
        timed.append((clock.ns(rec.counter), stream, task, rec))
    timed.sort(key=lambda item: item[0])
    groups: dict[tuple[int, int, int, int], tuple[list[Any], list[Any]]] = {}
    for item in timed:
        rec = item[3]
        starts, ends = groups.setdefault((item[1], item[2], rec.subtask_id, rec.thread_id), ([], []))
        (starts if rec.function == FUNCTION_SUBTASK_START else ends).append(item)
    matched: list[_DeviceTask] = []
    for starts, ends in groups.values():
        i = j = 0
        while i < len(starts) and j < len(ends):
            s_time, stream, task, s_rec = starts[i]
            e_time, _, _, e_rec = ends[j]
            if s_time > e_time:
                j += 1
                continue
            name = SUBTASK_TYPES[s_rec.subtask_type]
            matched.append(
                _DeviceTask(
                    stream,
                    task,
                    s_rec.subtask_id,
                    name,
                    s_time,
                    e_time - s_time,
                    s_rec.counter,
                    e_rec.counter,
                )
            )
            i += 1
            j += 1
        for _s_time, _stream, _task, s_rec in starts[i:]:
            if SUBTASK_TYPES[s_rec.subtask_type] == "Notify Wait":
                # The exporter lists it with duration 0; no real run shows one.
                raise DeclinedError(
                    DeclineReason.UNSUPPORTED, f"{folder}: a Notify Wait subtask that never ended"
                )
    matched.sort(key=lambda t: t.start)
    return matched


class _Ascend(NamedTuple):
    """A top-down task: a device task and its host task (either may be missing)."""

    stream_id: int
    task_id: int
    context_id: int
    batch_id: int
    start: float  # -1 when the device never ran it
    duration: float
    host_type: str
    device_type: str
    start_cycles: int
    end_cycles: int


def _top_down(host: Sequence[HostTask], device: Sequence[_DeviceTask], folder: str) -> list[_Ascend]:
    """Device tasks matched with host tasks on (stream, task, context, batch), in start order;
    unmatched host tasks get start -1 and device type UNKNOWN, unmatched device tasks host type
    UNKNOWN (the exporter's rules for one task per id on each side, which is all that is accepted)."""
    if (c := _accelerated()) is not None:
        fast: list[_Ascend] | None = c.top_down(
            host if isinstance(host, list) else list(host),
            device if isinstance(device, list) else list(device),
            UNKNOWN,
            _Ascend,
        )
        if fast is not None:
            return fast
    hosts: dict[tuple[int, int, int, int], HostTask] = {}
    for h in host:
        key = (h[1], h[2], h[3], h[4])  # (stream, task, context, batch)
        if key in hosts:
            raise DeclinedError(
                DeclineReason.AMBIGUOUS, f"{folder}: two host tasks of stream {key[0]} task {key[1]}"
            )
        hosts[key] = h
    devices: dict[tuple[int, int, int, int], _DeviceTask] = {}
    for t in device:
        key = (t[0], t[1], t[2], 0)
        if key in devices:
            raise DeclinedError(
                DeclineReason.AMBIGUOUS, f"{folder}: two device tasks of stream {key[0]} task {key[1]}"
            )
        devices[key] = t
    out: list[_Ascend] = []
    append = out.append
    get = hosts.get
    for key, t in devices.items():
        stream, task, context, batch = key
        _s, _t, _c, sqe_type, start, duration, start_cycles, end_cycles = t
        found = get(key)
        host_type = found[5] if found is not None else UNKNOWN
        append(
            _new(
                _Ascend,
                (
                    stream,
                    task,
                    context,
                    batch,
                    start,
                    duration,
                    host_type,
                    sqe_type,
                    start_cycles,
                    end_cycles,
                ),
            )
        )
    for key, h in hosts.items():
        if key not in devices:
            append(_Ascend(*key, -1, -1, h.task_type, UNKNOWN, 0, 0))
    out.sort(key=_START)
    return out


def _check_ties(starts: Iterable[float], folder: str, what: str) -> None:
    starts = list(starts)
    if len(set(starts)) != len(starts):
        # The exporter orders equal starts by set iteration and SQLite's sorter.
        raise DeclinedError(DeclineReason.AMBIGUOUS, f"{folder}: two {what} rows start at the same time")


def _task_type(host_type: str, device_type: str) -> str:
    if host_type == "FFTS_PLUS":
        return device_type
    if host_type == UNKNOWN:
        return device_type  # SQE names are never digits here
    return host_type


class _Row(NamedTuple):
    """One op_summary row and the device task it stands for."""

    raw: RawTask
    ascend: _Ascend


class _Device:
    """One device's exported rows: op_summary at once, task_time when asked.

    With *rows_only* (only op_summary's rows will be read, none of them ``N/A``), the rows are the
    bare :class:`RawTask` records, and all else is let go once they are made (the host tasks
    before, by :func:`_device`): no pair or wrapper per row, so the next device reuses the memory.
    Otherwise each row is a :class:`_Row` (its device task beside it) and everything is kept.
    """

    def __init__(
        self,
        dev: DevicePlan,
        clock: DeviceClock,
        ascend: list[_Ascend],
        host: list[HostTask],
        ge_tasks: list[GeTask],
        hashes: Mapping[str, str],
        level0: bool,
        *,
        rows_only: bool = False,
        packed: bool = False,
        made: PackedRows | None = None,
    ) -> None:
        self.dev = dev
        self.clock = clock
        self.ascend = ascend
        self.host = host
        self.ge_tasks = ge_tasks  # the device's GE tasks, in order (see :attr:`ge`)
        self._ge: dict[tuple[int, int, int, int], list[GeTask]] | None = None
        self.joined: list[tuple[_Ascend, GeTask]] = []  # op_summary's join, before the start filter
        self.rows_only = rows_only or packed or made is not None
        #: op_summary's rows: _Row records; with rows_only RawTask records; packed, PackedRows
        #: where every value has its packed form (else RawTask records); or as *made* already
        self.op_rows: list[Any] | PackedRows = (
            made if made is not None else self._op_summary(hashes, level0, packed=packed)
        )
        self.pmu: _PmuSource | None = None
        self.clocks = ClockTable()
        self._types: dict[int, tuple[str, str]] | None = None
        self._kept_groups: dict[tuple[int, int, int], list[_Ascend]] | None = None
        if rows_only:
            # (in steps: see ._chunked)
            empty(self.joined, self.ascend, self.host, self.ge_tasks, self._ge)

    @property
    def ge(self) -> dict[tuple[int, int, int, int], list[GeTask]]:
        """The GE tasks by (stream, task, batch, context), each key's in order (:func:`_ge_index`;
        made when first asked for: the C op_summary indexes them itself, without a dict of every
        task, whose growth steps take milliseconds each)."""
        if self._ge is None:
            self._ge = _ge_index(self.ge_tasks, self.dev.device)
        return self._ge

    @property
    def row_records(self) -> list[_Row]:
        """:attr:`op_rows` of a device that keeps everything (each row beside its device task)."""
        rows = self.op_rows
        assert isinstance(rows, list) and not self.rows_only, "the device kept its op_summary rows only"
        return rows

    def _op_summary(self, hashes: Mapping[str, str], level0: bool, *, packed: bool) -> list[Any] | PackedRows:
        """op_summary: the device tasks joined with their GE tasks, in start order."""
        rows_only = self.rows_only
        if (c := _accelerated()) is not None and isinstance(hashes, dict):
            # packed where asked for and every value has its packed form; else records
            for mode in (2, 1) if packed else (1 if rows_only else 0,):
                fast: tuple[list[tuple[_Ascend, GeTask]] | None, Any] | None = c.op_summary(
                    self.ascend,
                    self.ge_tasks,
                    hashes,
                    self.dev.device,
                    level0,
                    self.clock.c_printer(),
                    RawTask,
                    _Row,
                    mode,
                )
                if fast is None:
                    continue
                if mode == 2:
                    capsule, size, strings = fast[1]
                    return PackedRows([PackedPart(capsule, size, strings, self.dev.device, level0)])
                self.joined = fast[0] or []
                rows_made: list[Any] = fast[1]
                return rows_made
        joined: list[tuple[_Ascend, GeTask]] = []
        ge = self.ge
        for a in self.ascend:
            if a.start == -1:
                continue
            found = ge.get((a[0], a[1], a[3], a[2]))  # (stream, task, batch, context)
            if found:
                for g in found:
                    if g.task_type not in ("WRITE_BACK", "INVALID"):
                        joined.append((a, g))
        _check_ties([a.start for a, _ in joined], self.dev.folder, "op_summary")
        # The exporter sorts these rows by start; self.ascend is in start order already (a
        # stable sort), so joined is too, and sorting it again would keep every row in place.
        if not rows_only:
            self.joined = joined
        rows: list[Any] = []
        append = rows.append
        clock = self.clock
        kept = clock.kept_ns
        texts, starts_ns = clock.printed_all([a[4] for a, _ in joined], text=False)
        device = self.dev.device
        names: dict[str, str] = {}
        for (a, g), start, start_ns in zip(joined, texts, starts_ns, strict=True):
            stream, task, _context, batch, _start, a_duration, _h, _d, start_cycles, end_cycles = a
            duration = round(a_duration / 1000.0, 3)
            if not kept(start_ns, start, duration):
                continue
            op_name = g.op_name
            name = names.get(op_name)
            if name is None:
                name = names[op_name] = hashes.get(op_name, op_name)
            raw = _new(
                RawTask,
                (
                    device,
                    stream,
                    task,
                    batch,
                    name,
                    g.task_type,
                    g.task_type,
                    duration,
                    a_duration,
                    start_ns,
                    start_cycles,
                    end_cycles,
                    None if level0 else g.block_num,
                    None if level0 else g.mix_block_num,
                ),
            )
            append(raw if rows_only else _new(_Row, (raw, a)))
        return rows

    def dispose(self) -> None:
        """Empties the big containers in steps (see :mod:`._chunked`); the device is unusable after."""
        rows = self.op_rows
        empty(
            rows if isinstance(rows, list) else None,
            self.joined,
            self.ascend,
            self.host,
            self.ge_tasks,
            self._ge,
        )
        empty(self._types, self._kept_groups)

    def _groups(self) -> dict[tuple[int, int, int], list[_Ascend]]:
        """The tasks task_time lists, by (stream, task, batch): every one the device ran, except
        that a task with FFTS+ contexts above 0 is left out and of a MIX task (contexts "invalid"
        and 0) only context 0 is kept, as the exporter's task_time view does."""
        assert not self.rows_only, "the device kept its op_summary rows only"
        if self._kept_groups is None:
            ran = [a for a in self.ascend if a.device_type != UNKNOWN]
            groups: dict[tuple[int, int, int], list[_Ascend]] = {}
            for a in ran:
                groups.setdefault((a.stream_id, a.task_id, a.batch_id), []).append(a)
            kept: dict[tuple[int, int, int], list[_Ascend]] = {}
            for key, group in groups.items():
                if len(group) > 1:
                    if any(a.context_id not in (0, INVALID_CONTEXT) for a in group):
                        continue  # an FFTS+ task: not in task_time
                    if any(a.context_id == 0 for a in group):
                        group = [a for a in group if a.context_id == 0]
                kept[key] = group
            self._kept_groups = kept
        return self._kept_groups

    def task_time_cells(self) -> dict[int, tuple[str, str]]:
        """Per listed device task (by identity): task_time's (kernel_name, kernel_type)."""
        assert not self.rows_only, "the device kept its op_summary rows only"
        if self._types is None:
            ge_info = {k: v[-1] for k, v in self.ge.items()}
            names = {
                (h.stream_id, h.task_id, h.batch_id, h.context_id): h.kernel_name
                for h in sorted(self.host, key=lambda h: h.timestamp)
            }
            types: dict[int, tuple[str, str]] = {}
            for group in self._groups().values():
                for a in group:
                    key = (a.stream_id, a.task_id, a.batch_id, a.context_id)
                    op = ge_info.get(key)
                    name = names.get(key) or (op.op_name if op is not None else NA)
                    op_type = op.task_type if op is not None else None
                    if op_type is not None and op_type != NA:
                        ttype = op_type
                    else:
                        ttype = _task_type(a.host_type, a.device_type)
                    types[id(a)] = (name, ttype)
            self._types = types
        return self._types

    def joined_types(self, rows: Sequence[_Row]) -> tuple[list[str | None], int]:
        """The type the library's level-0 join gives each op_summary row (None: it keeps ``N/A``),
        and how many rows the tolerant step typed, as :class:`asc_aprof._runs._csv.RunReader` joins.

        First the task_time row of the same (device, stream, task id, printed start), a key with
        two types counting as unknown. What is accepted has batch id 0 only, so the candidates are
        the listed tasks of the row's (stream, task); the row's own device task prints the same
        start (same time, same arithmetic) and passes the same start filter, others are printed
        and filtered here. Then, for a row whose key task_time lacks, the tolerant step of
        :mod:`asc_aprof._model._join`, in row order as the CSV reader meets the rows: the nearest
        start within the bound among the entries no earlier row took (exactly or by this step).
        """
        cells = self.task_time_cells()
        groups = self._groups()
        clock = self.clock
        out: list[str | None] = []
        hit = bytearray(len(rows))  # the row's key is in task_time
        missed: list[int] = []
        for index, row in enumerate(rows):
            a = row.ascend
            found: str | None = None
            seen = False
            for b in groups.get((a[0], a[1], a[3]), ()):  # (stream, task, batch)
                if b is not a:
                    start, start_ns = clock.printed(b.start)
                    if not clock.kept(start, round(b.duration / 1000.0, 3)):
                        continue
                    if start_ns != row.raw.start_ns:
                        continue
                ttype = cells[id(b)][1]
                if ttype in CONTROL_TYPES:
                    continue
                if seen and found != ttype:
                    found = None
                    break
                seen = True
                found = ttype
            out.append(found if found != NA else None)
            if seen:
                hit[index] = 1
            else:
                missed.append(index)
        return out, self._nearest_types(rows, out, hit, missed) if missed else 0

    def _nearest_types(
        self, rows: Sequence[_Row], out: list[str | None], hit: bytearray, missed: list[int]
    ) -> int:
        """:meth:`joined_types`' tolerant step: fills *out* at the *missed* rows it types; how many."""
        cells = self.task_time_cells()
        groups = self._groups()
        clock = self.clock
        # dicts, not sets: emptied in steps at the end (see ._chunked)
        wanted = {(rows[i].ascend[0], rows[i].ascend[1], rows[i].ascend[3]): None for i in missed}
        first_exact: dict[tuple[int, int, int, int], int] = {}  # an entry's first exact row
        for index, row in enumerate(rows):
            a = row.ascend
            if hit[index] and (a[0], a[1], a[3]) in wanted:
                first_exact.setdefault((a[0], a[1], a[3], row.raw.start_ns), index)
        taken: dict[tuple[int, int, int, int], None] = {}
        typed = 0
        for index in missed:
            row = rows[index]
            a = row.ascend
            stream, task, batch, start = a[0], a[1], a[3], row.raw.start_ns
            entries: dict[int, str | None] = {}  # printed start -> its one type (None: ambiguous)
            for b in groups.get((stream, task, batch), ()):
                text, start_ns = clock.printed(b.start)
                if abs(start_ns - start) > NEAREST_START_BOUND_NS:
                    continue
                if not clock.kept(text, round(b.duration / 1000.0, 3)):
                    continue
                ttype = cells[id(b)][1]
                if ttype in CONTROL_TYPES:
                    continue
                entries[start_ns] = ttype if entries.get(start_ns, ttype) == ttype else None
            # an entry a row before this one took, by the nearest start or exactly, is not free
            free = sorted(
                at
                for at, ttype in entries.items()
                if joinable(ttype)
                and (key := (stream, task, batch, at)) not in taken
                and first_exact.get(key, index) >= index
            )
            best = nearest_start(free, start)
            if best is not None:
                taken[(stream, task, batch, best)] = None
                out[index] = entries[best]
                typed += 1
        empty(wanted, first_exact, taken)
        return typed

    def task_time_rows(self) -> list[RawTask]:
        """task_time: the listed tasks in printed-start order, filtered as exported."""
        cells = self.task_time_cells()
        clock = self.clock
        listed = [a for group in self._groups().values() for a in group]
        # Only the order of task_time's rows depends on how equal starts are ordered.
        _check_ties((a.start for a in listed), self.dev.folder, "task_time")
        texts, starts_ns = clock.printed_all([a.start for a in listed])
        # In the order of the printed start *strings* (stable), as the exporter sorts them.
        printed = sorted(zip(texts, starts_ns, listed, strict=True), key=_FIRST)
        rows: list[RawTask] = []
        kept = clock.kept_ns
        device = self.dev.device
        for start, start_ns, a in printed:
            duration = round(a.duration / 1000.0, 3)
            if not kept(start_ns, start, duration):
                continue
            name, ttype = cells[id(a)]
            rows.append(
                RawTask(
                    device,
                    a.stream_id,
                    a.task_id,
                    a.batch_id,
                    name,
                    ttype,
                    ttype,
                    duration,
                    a.duration,
                    start_ns,
                    a.start_cycles,
                    a.end_cycles,
                )
            )
        return rows


class _PmuSource(NamedTuple):
    """What a device's PMU cells need besides its rows."""

    info: Mapping[str, object]
    expanded: bool
    all_export: bool
    flips: list[FlipRecord]


def _device_pmu(out: _Device, files: Mapping[str, RawData], *, verified_only: bool) -> PmuTable:
    """*out*'s PMU cells (see :func:`._pmu.device_cells`)."""
    dev, source = out.dev, out.pmu
    assert source is not None and not out.rows_only
    expanded = source.expanded

    def unpack(stream: int, task: int) -> tuple[int, int]:
        return stream_task_ids(stream, task, 0, expanded) if stream >= 2048 else (stream, task)

    def joined_rows() -> list[JoinedRow]:
        # The join before the start filter; the kept rows are a subsequence of it.
        rows, position, found = out.row_records, 0, []
        for a, g in out.joined:
            kept = position < len(rows) and rows[position].ascend is a
            position += kept
            found.append(
                JoinedRow(a.stream_id, a.task_id, a.batch_id, a.context_id, g.task_type, a.duration, kept)
            )
        assert position == len(rows)
        return found

    def ge() -> Iterator[tuple[int, int, int, str, int, int]]:
        for group in out.ge.values():
            for g in group:
                yield g.stream_id, g.task_id, g.context_id, g.task_type, g.block_num, g.mix_block_num

    return device_cells(
        dev.folder,
        joined(files[p] for p in dev.ffts) if dev.ffts else None,
        lambda: json_object(files[dev.sample], f"{dev.folder}/sample.json"),
        source.info,
        unpack,
        rows=len(out.op_rows),
        joined=joined_rows,
        ge=ge,
        flips=((f.stream_id, f.counter) for f in source.flips),
        all_export=source.all_export,
        verified_only=verified_only,
        clocks=out.clocks,
    )


def _counters(outputs: Sequence[_Device], files: Mapping[str, RawData]) -> TaskCounters:
    """The op_summary rows' PMU counters as the CSV path reads them (``N/A``: None)."""
    tables = [_device_pmu(out, files, verified_only=True) for out in outputs]
    try:
        return run_counters(tables)
    finally:
        empty(*(cells for _, cells in tables))  # (freed in steps: see ._chunked)


#: ``release(paths)``: the decode is done with these files (see :func:`_releaser`)
_Release = Callable[[Iterable[str]], None]


def _kept(paths: Iterable[str]) -> None:
    """The :data:`_Release` of files the caller keeps: nothing is taken out."""


def _releaser(files: Mapping[str, RawData], consume: bool) -> _Release:
    """What takes the data of files the decode is done with out of *files* (with *consume*; a
    mutable mapping, whose ``pop`` forgets a file): the last reference to a file's data, its
    memory goes back then (a map's with the GIL released), not only after the whole decode."""
    if not consume:
        return _kept
    assert isinstance(files, MutableMapping)

    def release(paths: Iterable[str]) -> None:
        for path in paths:
            files.pop(path, None)

    return release


def _device(
    dev: DevicePlan,
    files: Mapping[str, RawData],
    host: list[HostTask],
    ge_tasks: list[GeTask] | PackedGe,
    hashes: Mapping[str, str],
    *,
    expanded: bool,
    all_export: bool,
    level0: bool,
    check_info: Callable[[Mapping[str, object], str], None],
    release: _Release = _kept,
    lean: bool = False,
    with_host: bool = True,
    packed: bool = False,
) -> _Device:
    """*dev*'s rows, of its *host* and *ge_tasks* (its own lists: emptied with the device).
    *lean*: only op_summary's rows will be read: unless a GE task's type is ``N/A`` (the
    level-0 join would need the rest), the device keeps its rows only (``_Device.rows_only``).
    *with_host*: ``False`` where the host tasks were not made (*host* is empty; their ids were
    checked): only op_summary's rows can be made then, nothing that reads the host tasks.
    *packed*: a device that keeps its rows only keeps them packed (see ``_Device``)."""
    folder = dev.folder
    info = json_object(files[dev.info], f"{folder}/info.json")
    check_info(info, folder)
    devices_field = str(info.get("devices", ""))
    if devices_field != str(dev.device):
        raise DeclinedError(DeclineReason.AMBIGUOUS, f"{folder}/info.json says devices={devices_field!r}")
    clock = _clock(
        info,
        key_values(files[dev.dev_start], f"{folder}/dev_start.log"),
        ini_first_section(files[dev.host_start], f"{folder}/host_start.log"),
        json_object(files[dev.start_info], f"{folder}/start_info"),
        folder,
    )
    clocks = _clock_table(dev, files, info, clock)
    rows_only = lean and not _any_unknown_type(ge_tasks)
    stars: RawData | None = None
    if packed and rows_only and not with_host:
        # The task log handed over in a box (its pieces where the files can be read so): the C
        # pass lets go of it once its records are read.
        box: list[object] = [_task_log(files, dev)]
        release(dev.stars)
        fused = _packed_device(dev, files, box, clock, ge_tasks, hashes, all_export)
        if fused is None:
            left = box.pop() if box else None
            if not isinstance(left, bytes | mmap.mmap):  # (read, or pieces: nothing left to read)
                raise WholeDecodeNeeded(f"{folder}: the packed pass let go of the task log, then declined")
            stars = left
        else:
            rows, fused_flips = fused
            release(dev.ts_track)
            empty(host, ge_tasks if isinstance(ge_tasks, list) else None)
            out = _Device(dev, clock, [], [], [], hashes, level0, made=rows)
            out.pmu = _PmuSource(info, expanded, all_export, fused_flips)
            out.clocks = clocks
            return out
    if stars is None:
        stars = joined(files[p] for p in dev.stars)
    if isinstance(ge_tasks, PackedGe):
        ge_tasks = list(ge_tasks)  # (the steps read records; the packed pass declined, rare)
    device_tasks, subtasks = _stars_tasks(stars, clock, folder, expanded)
    del stars
    release(dev.stars)  # (the task log's records are in device_tasks now)
    if subtasks:
        if not level0:
            raise DeclinedError(
                DeclineReason.UNSUPPORTED, f"{folder}: FFTS+ subtasks (MIX kernels) at task time level 1"
            )
        device_tasks += _subtask_tasks(subtasks, clock, folder, expanded)
    flips: list[FlipRecord] = []
    if dev.ts_track:
        flips = ts_track_flips(joined(files[p] for p in dev.ts_track))
        release(dev.ts_track)
        if all_export:
            first = _first_flips(flips, clock)
            for task in device_tasks:
                limit = first.get(task.stream_id)
                if limit is not None and task.start >= limit:
                    raise DeclinedError(
                        DeclineReason.UNSUPPORTED,
                        f"{folder}: task ids of stream {task.stream_id} wrapped around",
                    )
    ascend = _top_down(host, device_tasks, folder)
    empty(device_tasks)  # (freed in steps: see ._chunked)
    if not rows_only and not with_host:
        raise WholeDecodeNeeded  # (N/A types at level 1: rare)
    if rows_only:
        empty(host)  # (op_summary reads the GE tasks; nothing reads the host tasks after it)
    out = _Device(
        dev, clock, ascend, host, ge_tasks, hashes, level0, rows_only=rows_only, packed=packed and rows_only
    )
    out.pmu = _PmuSource(info, expanded, all_export, flips)
    out.clocks = clocks
    return out


def _task_log(files: Mapping[str, RawData], dev: DevicePlan) -> RawData | Iterator[RawData]:
    """*dev*'s stars_soc slices: an iterator of pieces where *files* can give every one in
    pieces (:class:`PieceSource`), else their contents joined."""
    if isinstance(files, PieceSource):
        pieces = [files.pieces(p, STARS_SIZE) for p in dev.stars]
        if all(p is not None for p in pieces):
            return itertools.chain.from_iterable(cast(list[Iterator[RawData]], pieces))
    return joined(files[p] for p in dev.stars)


def _packed_device(
    dev: DevicePlan,
    files: Mapping[str, RawData],
    stars: list[object],
    clock: DeviceClock,
    ge_tasks: list[GeTask] | PackedGe,
    hashes: Mapping[str, str],
    all_export: bool,
) -> tuple[PackedRows, list[FlipRecord]] | None:
    """A level-1 device's op_summary rows packed straight from its task log, where no host task
    was made (``_cdevice.packed_device``: the pairing, the top-down join's checks and the join
    with the GE tasks in C, with no Python object per task), and its ts_track flips; None where
    the steps have to be taken one by one (no C loops; anything they would decline or leave to
    the pure code), which then give the same rows or the decline. *stars*: the task log in a
    list that is its only holder (its contents, or an iterator of their pieces), emptied once
    its records are read (then, on None, there is nothing to take the steps from: the caller
    decodes the run whole)."""
    c = _accelerated()
    if c is None or not isinstance(hashes, dict):
        return None
    flips: list[FlipRecord] = []
    limits: dict[int, float] | None = None
    if dev.ts_track:
        try:
            flips = ts_track_flips(joined(files[p] for p in dev.ts_track))
        except DeclinedError:
            return None  # (declined in the steps' order)
        if all_export:
            limits = _first_flips(flips, clock)
    base, hertz, offset = clock.terms()
    packed_ge: object = None
    ge: Sequence[GeTask] = ge_tasks
    if isinstance(ge_tasks, PackedGe):
        packed_ge, ge = ge_tasks.packed()  # (ge: the packed tasks' templates)
    found = c.packed_device(
        stars,
        STARS_MAGIC,
        base,
        hertz,
        offset,
        SQE_TYPES,
        ge,
        hashes,
        dev.device,
        clock.c_printer(),
        limits,
        INVALID_CONTEXT,
        packed_ge,
    )
    if found is None:
        return None
    capsule, size, strings = found
    return PackedRows([PackedPart(capsule, size, strings, dev.device, False)]), flips


def _first_flips(flips: Iterable[FlipRecord], clock: DeviceClock) -> dict[int, float]:
    """Per stream, the time (ns) of its first task-id flip: a task starting then or later would
    have a wrapped id, which the exporter numbers in a way not verified here."""
    first: dict[int, float] = {}
    for flip in flips:
        at = clock.ns(flip.counter)
        first[flip.stream_id] = min(first.get(flip.stream_id, at), at)
    return first


def _any_unknown_type(ge_tasks: Sequence[GeTask]) -> bool:
    """Whether a GE task's type is ``N/A`` (an op_summary row of it would need the level-0 join).
    (A generator: bytecode at each step, where the interpreter can switch threads.)"""
    if isinstance(ge_tasks, PackedGe):
        return ge_tasks.unknown_type()
    return any(g[6] == NA for g in ge_tasks)  # (task_type)


def _clock_table(
    dev: DevicePlan, files: Mapping[str, RawData], info: Mapping[str, object], clock: DeviceClock
) -> ClockTable:
    """The device's AI Core clock rows (:mod:`._freq`; empty without lpm files)."""
    if not dev.freq and not dev.lpm:
        return ClockTable()
    device_info = info.get("DeviceInfo")
    assert isinstance(device_info, list) and isinstance(device_info[0], dict)  # (checked by _clock)
    rated = rated_aic_mhz(device_info[0])  # (the one reader of it: RunInfo.core_mhz is the same)
    if rated is None:
        value = device_info[0].get("aic_frequency")
        raise DeclinedError(
            DeclineReason.MALFORMED,
            f"{dev.folder}/info.json aic_frequency is not a positive number: {value!r}",
        )
    return clock_table(
        str(info.get("platform_version", "")),
        clock.dev_cnt,
        rated,
        [(f"{p}", bytes(files[p])) for p in dev.freq],
        [(f"{p}", bytes(files[p])) for p in dev.lpm],
    )


def _of_device(records: Sequence[_HostOrGe], device: int) -> list[_HostOrGe]:
    """The records (host or GE tasks) of *device*, in order."""
    if (c := _accelerated()) is not None and isinstance(records, list | tuple):
        found: list[_HostOrGe] = c.of_device(records, device)
        return found
    return [r for r in records if r[0] == device]


def _ge_index(tasks: Sequence[GeTask], device: int) -> dict[tuple[int, int, int, int], list[GeTask]]:
    """*device*'s GE tasks by (stream, task, batch, context), each key's in their order."""
    if (c := _accelerated()) is not None and isinstance(tasks, list | tuple):
        index: dict[tuple[int, int, int, int], list[GeTask]] = c.ge_index(tasks, device)
        return index
    ge: dict[tuple[int, int, int, int], list[GeTask]] = {}
    for g in tasks:
        if g[0] == device:
            key = (g[1], g[2], g[4], g[3])  # (stream, task, batch, context)
            found = ge.get(key)
            if found is None:
                ge[key] = [g]
            else:
                found.append(g)
    return ge


@dataclasses.dataclass(frozen=True, slots=True)
class _HostSide:
    """What the host side of a run gives every device: the chip's rule, the names, and each
    device's host and GE tasks (taken by :meth:`device`, which makes that device's rows)."""

    level0: bool
    all_export: bool
    hashes: dict[str, str]
    #: by device, in plan order; an entry is emptied when its device is made
    own: list[tuple[list[HostTask], list[GeTask] | PackedGe]]
    with_host: bool
    expanded: bool
    check_info: Callable[[Mapping[str, object], str], None]

    def device(
        self,
        index: int,
        dev: DevicePlan,
        files: Mapping[str, RawData],
        release: _Release,
        *,
        lean: bool,
        packed: bool,
    ) -> _Device:
        """Device *index*'s rows (its host and GE tasks go with it: this holds them no longer)."""
        host_tasks, ge_tasks = self.own[index]
        self.own[index] = ([], [])
        return _device(
            dev,
            files,
            host_tasks,
            ge_tasks,
            self.hashes,
            expanded=self.expanded,
            all_export=self.all_export,
            level0=self.level0,
            check_info=self.check_info,
            release=release,
            lean=lean,
            with_host=self.with_host,
            packed=packed,
        )


def _outputs(
    plan: RunPlan,
    files: Mapping[str, RawData],
    release: _Release = _kept,
    *,
    lean: bool = False,
    packed: bool = False,
) -> tuple[list[_Device], bool]:
    """Every device's exported rows (folder-name order), and whether the run is task time level 0.
    *release*: told of each file no later step reads (the host files, a device's task logs);
    *lean*: only op_summary's rows will be read (not task_time's, nor the counters)."""
    side = _host_side(plan, files, release, lean=lean)
    outputs = [
        side.device(i, dev, files, release, lean=lean, packed=packed) for i, dev in enumerate(plan.devices)
    ]
    return outputs, side.level0


def _host_side(plan: RunPlan, files: Mapping[str, RawData], release: _Release, *, lean: bool) -> _HostSide:
    """The run's host side (:class:`_HostSide`): its metadata checked, its host files read."""
    if plan.host_info is not None and plan.host_sample is not None:
        host_info = json_object(files[plan.host_info], "host/info.json")
        host_sample: dict[str, object] | None = json_object(files[plan.host_sample], "host/sample.json")
    elif plan.devices:
        # No host/ folder: the chip from the first device, no host task at all.
        first = plan.devices[0]
        host_info = json_object(files[first.info], f"{first.folder}/info.json")
        host_sample = None
    else:
        raise DeclinedError(DeclineReason.NOT_A_RUN, "no device_N/ folder")
    platform = str(host_info.get("platform_version", ""))
    driver = host_info.get("drvVersion", 0)
    if not isinstance(driver, int):
        raise DeclinedError(DeclineReason.UNKNOWN_PLATFORM, f"drvVersion {driver!r}")
    if str(host_info.get("version", "")) != COLLECTION_VERSION:
        raise DeclinedError(
            DeclineReason.UNKNOWN_PLATFORM, f"collection version {host_info.get('version')!r}"
        )
    if platform == PLATFORM_910B and driver >= ALL_EXPORT_VERSION:
        all_export = True
    elif platform == PLATFORM_310B and driver < ALL_EXPORT_VERSION:
        all_export = False
    else:
        raise DeclinedError(
            DeclineReason.UNKNOWN_PLATFORM,
            f"platform_version {platform!r} with drvVersion {driver} (verified: 910B '5' from "
            f"{ALL_EXPORT_VERSION}, 310B '7' below it)",
        )
    if host_sample is not None and str(host_sample.get("devices", "")) != "64":
        # The exporter ignores such a host folder without a word.
        raise DeclinedError(
            DeclineReason.UNSUPPORTED, f"host/sample.json devices={host_sample.get('devices')!r}"
        )
    if host_sample is None:
        first = plan.devices[0]
        level0 = _level(json_object(files[first.sample], f"{first.folder}/sample.json")) in LEVEL0_NAMES
    else:
        level0 = _level(host_sample) in LEVEL0_NAMES

    def check_info(info: Mapping[str, object], folder: str) -> None:
        if str(info.get("platform_version", "")) != platform or info.get("drvVersion") != driver:
            raise DeclinedError(
                DeclineReason.AMBIGUOUS, f"{folder}/info.json and host/info.json disagree on the chip"
            )

    hashes: dict[str, str] = {}
    for path in plan.host_data.get("hash_dic", ()):
        one: dict[str, str] = {}
        hash_dic(files[path], one)
        _merge_names(hashes, one, path, "hash")
    types: dict[str, dict[str, str]] = {}
    for path in plan.host_data.get("type_info_dic", ()):
        levels: dict[str, dict[str, str]] = {}
        type_info_dic(files[path], levels)
        for level, names in levels.items():
            _merge_names(types.setdefault(level, {}), names, path, f"{level} type")
    release((*plan.host_data.get("hash_dic", ()), *plan.host_data.get("type_info_dic", ())))
    host = HostRecords(hashes, types)

    def slices(kind: str) -> RawData:
        # Several slices are copied into one: theirs are not read again (one slice is kept as it
        # is, by host, until host goes).
        paths = plan.host_data.get(kind, ())
        data = joined(files[p] for p in paths)
        release(paths)
        return data

    basics = plan.host_data.get("node_basic_info", ())
    own: list[tuple[list[HostTask], list[GeTask] | PackedGe]]
    if lean and not level0 and basics and not _unaging(basics) and lean_walk_ready():
        # Only op_summary's rows at level 1: the GE tasks alone, packed, the host files read and
        # let go of a slice at a time (see _host.LeanWalk); the host tasks' ids are checked.
        packs = _lean_host(plan, files, release, host, slices, all_export)
        with_host = False
        own = [([], packs.get(d.device, [])) for d in plan.devices]
    else:
        own, with_host = _host_tables(
            plan, files, host, slices, host_sample is not None, level0, all_export, lean
        )
    expanded = _stream_expansion(files, plan.host_data.get("expand_stream_spec", ()))
    release(plan.host_data.get("expand_stream_spec", ()))
    # Each device's tasks in its own lists: a device's go with its lists (see _HostSide.device).
    return _HostSide(level0, all_export, hashes, own, with_host, expanded, check_info)


def _lean_host(
    plan: RunPlan,
    files: Mapping[str, RawData],
    release: _Release,
    host: HostRecords,
    slices: Callable[[str], RawData],
    all_export: bool,
) -> dict[int, PackedGe]:
    """Each device's GE tasks by the lean walk, its host files fed and let go of a slice at a
    time; :class:`WholeDecodeNeeded` where it declines (a decline among them: the whole decode
    then raises it, in its order)."""
    try:
        walk = LeanWalk(host, all_export=all_export)

        def feed(kind: str) -> None:
            size = LeanWalk.KINDS[kind][1]
            for path in plan.host_data.get(kind, ()):
                # a piece of a few MiB at a time where the files can be read so, else whole
                pieces = files.pieces(path, size) if isinstance(files, PieceSource) else iter([files[path]])
                if pieces is None:
                    raise WholeDecodeNeeded(f"{path}: not a whole number of records (a torn head)")
                for data in pieces:
                    if kind in STORED_HOST_FILES and host_slice_unstorable(data):
                        raise WholeDecodeNeeded(f"{path}: a timestamp msprof.py cannot store")
                    walk.feed(kind, data)
                    del data
                release((path,))

        feed("api_event")
        walk.walk()
        feed("node_basic_info")
        if not walk.fed["node_basic_info"]:
            raise WholeDecodeNeeded("no node_basic_info record")
        context_records(slices("context_id_info"))  # (read for what it declines)
        walk.tensors(header_records(slices("tensor_info"), "tensor_info"))
        feed("task_track")
        return walk.finish()
    except DeclinedError as exc:
        raise WholeDecodeNeeded(f"the lean host walk met a decline: {exc}") from None


def _host_tables(
    plan: RunPlan,
    files: Mapping[str, RawData],
    host: HostRecords,
    slices: Callable[[str], RawData],
    host_sample: bool,
    level0: bool,
    all_export: bool,
    lean: bool,
) -> tuple[list[tuple[list[HostTask], list[GeTask] | PackedGe]], bool]:
    """Each device's host and GE tasks by the queue walk (``host_tables``), and whether the host
    tasks were made."""
    if lean:  # (decode_run left the host files to be looked at here)
        try:
            check_storable(plan.host_data, (), files)
        except DeclinedError:
            raise WholeDecodeNeeded(
                "a host timestamp msprof.py cannot store (declined in order there)"
            ) from None
    # Decoded here (declines in this order), or kept for the C host loops to read in place.
    host.take("apis", slices("api_event"))
    host.take("tracks", slices("task_track"))
    basics = plan.host_data.get("node_basic_info", ())
    if basics and _unaging(basics):
        raise DeclinedError(DeclineReason.UNSUPPORTED, "static-shape nodes (unaging node_basic_info)")
    host.take("node_basics", slices("node_basic_info"))
    host.contexts = context_records(slices("context_id_info"))
    host.tensors = header_records(slices("tensor_info"), "tensor_info")
    if host_sample and not level0 and not host.has("node_basics") and host.has("apis"):
        raise DeclinedError(DeclineReason.MISSING_FILE, "task time level 1 without node_basic_info")
    # Where only op_summary's rows are read and their types are known (level 1), the host tasks
    # are not needed (see _Device), only checked: not made at all.
    tables = host_tables(host, level0=level0, all_export=all_export, host_tasks=not lean or level0)
    # its records are in the tables now (freed in steps: see ._chunked)
    empty(host.apis, host.node_basics, host.tensors, host.contexts, host.tracks)
    own: list[tuple[list[HostTask], list[GeTask] | PackedGe]] = [
        (_of_device(tables.host_tasks, d.device), _of_device(tables.ge_tasks, d.device)) for d in plan.devices
    ]
    empty(tables.host_tasks, tables.ge_tasks)
    return own, tables.with_host_tasks


def _unaging(paths: Sequence[str]) -> bool:
    return paths[0].split("/")[-1].startswith("unaging")


def _check_limit(rows: Sequence[object], folder: str, what: str) -> None:
    if len(rows) >= CSV_LIMIT:
        raise DeclinedError(DeclineReason.UNSUPPORTED, f"{folder}: over {CSV_LIMIT} {what} rows")


def _merge_names(into: dict[str, str], more: Mapping[str, str], path: str, what: str) -> None:
    """*more* (one hash_dic or type_info_dic file) into *into*, declining a key that another
    file names differently: msprof.py reads the slices by slice number, then in directory
    listing order (aging and unaging files of one number in either order), and the last name
    wins, so the answer would rest on an order this reader does not share."""
    for key, name in more.items():
        if into.setdefault(key, name) != name:
            raise DeclinedError(
                DeclineReason.AMBIGUOUS,
                f"{what} {key} is named both {into[key]!r} and {name!r} ({path} and another slice)",
            )


def _check_sample_devices(plan: RunPlan, files: Mapping[str, RawData]) -> None:
    """Decline unless each ``device_N/sample.json`` names exactly its own device: its
    ``devices`` decides what msprof.py exports (``"0,1"``: every row twice; ``""``, no key or a
    number: no CSV at all), and only the own id is verified (every real run has it)."""
    for dev in plan.devices:
        if dev.sample not in files:
            raise DeclinedError(DeclineReason.MISSING_FILE, f"{dev.folder} has no sample.json")
        devices = json_object(files[dev.sample], f"{dev.folder}/sample.json").get("devices")
        if devices != str(dev.device):
            raise DeclinedError(
                DeclineReason.UNSUPPORTED,
                f"{dev.folder}/sample.json devices={devices!r}, not {str(dev.device)!r}: msprof.py "
                "would export these rows otherwise (repeated, or not at all)",
            )


def decode_run(
    plan: RunPlan,
    files: Mapping[str, RawData],
    *,
    with_task_time: bool = False,
    with_counters: bool = False,
    consume: bool = False,
    lean: bool = False,
    packed: bool = False,
) -> RawResult:
    """The tasks the library would read after a real ``msprof.py export summary`` of the run.

    *with_task_time*: also give every task_time row (``RawResult.task_time``); *with_counters*:
    the PMU counters op_summary would print (``RawResult.counters``, aligned with the tasks).
    *consume*: *files* is a mutable mapping handed over; the decode takes out each big file it is done with
    (host data, a device's task logs), so their memory goes back while the rest is decoded.
    *lean*: where neither is asked for, the host tasks are not made (level 1) and each device
    keeps its op_summary rows only (see :class:`_Device`): a fraction of the memory, and
    :class:`WholeDecodeNeeded` where that was not enough (decode again without). *packed*
    (with *lean*): the tasks as :class:`PackedRows` where the C loops can pack them, for a reader
    that takes them a slice at a time.

    :raises DeclinedError: for anything not verified against the real exporter
    :raises WholeDecodeNeeded: with *lean*, rarely
    """
    lean = lean and not with_task_time and not with_counters
    # (lean: the host files are looked at a slice at a time, as they are read: see _lean_host)
    check_storable({} if lean else plan.host_data, (dev.ffts for dev in plan.devices), files)
    _check_sample_devices(plan, files)
    outputs, level0 = _outputs(plan, files, _releaser(files, consume), lean=lean, packed=packed and lean)
    try:
        return _result(outputs, files, level0, with_task_time, with_counters)
    finally:
        for out in outputs:
            out.dispose()


def decode_devices(
    plan: RunPlan, files: Mapping[str, RawData], *, consume: bool = False
) -> Generator[RawResult, None, None]:
    """:func:`decode_run` with *lean* and *packed*, a device at a time: the host side first, then
    each device's op_summary rows as one result (folder-name order; a device without rows gives
    none), each made only when the one before is taken, so a reader that is done with a device's
    rows holds only the next device's. Together they are decode_run's tasks, in its order.

    Level 0 gives one result of every device (the join reads them all). A step of a later device
    can still decline, or raise :class:`WholeDecodeNeeded` (a device the packed pass cannot
    take, or no op_summary row at all: decode_run then gives task_time's): the caller decides
    what the results already given mean then.

    :raises DeclinedError: as decode_run, when its step comes
    :raises WholeDecodeNeeded: as decode_run with *lean*, when its step comes
    """
    check_storable({}, (dev.ffts for dev in plan.devices), files)
    _check_sample_devices(plan, files)
    release = _releaser(files, consume)
    side = _host_side(plan, files, release, lean=True)
    if side.level0:
        outputs = [
            side.device(i, dev, files, release, lean=True, packed=True) for i, dev in enumerate(plan.devices)
        ]
        try:
            yield _result(outputs, files, True, False, False)
        finally:
            for out in outputs:
                out.dispose()
        return
    given = False
    for i, dev in enumerate(plan.devices):
        out = side.device(i, dev, files, release, lean=True, packed=True)
        try:
            if not out.rows_only:  # (N/A types: the level-0 join across devices decides)
                raise WholeDecodeNeeded(f"{dev.folder}: op_summary rows of unknown type")
            rows = out.op_rows
            _check_limit(rows, dev.folder, "op_summary")
            tasks = rows if isinstance(rows, PackedRows) else to_tuple(rows)
            clocks = {dev.device: out.clocks} if out.clocks.rows else {}
        finally:
            out.dispose()
        del out, rows  # (the rows alone are kept: by the result, while the reader holds it)
        if not tasks:
            continue
        given = True
        yield RawResult(tasks, SOURCE_OP_SUMMARY, False, clocks=clocks)
        del tasks, clocks  # (before the next device is made)
    if not given:
        raise WholeDecodeNeeded("no op_summary row: task_time stands in (see _result)")


def _result(
    outputs: Sequence[_Device],
    files: Mapping[str, RawData],
    level0: bool,
    with_task_time: bool,
    with_counters: bool,
) -> RawResult:
    """:func:`decode_run` of the devices' rows."""
    for out in outputs:
        _check_limit(out.op_rows, out.dev.folder, "op_summary")
    op_rows = any(out.op_rows for out in outputs)
    task_time: tuple[RawTask, ...] | None = None
    if not op_rows and any(out.rows_only for out in outputs):
        raise WholeDecodeNeeded  # (task_time stands in: see there)
    if with_task_time or not op_rows:
        per_device = [out.task_time_rows() for out in outputs]
        for out, rows in zip(outputs, per_device, strict=True):
            _check_limit(rows, out.dev.folder, "task_time")
        task_time = to_tuple([t for rows in per_device for t in rows])
        empty(*per_device)
    if op_rows:
        counters = _counters(outputs, files) if with_counters else None
        joined_rows, join = _join_level0(outputs)
        return RawResult(
            joined_rows if isinstance(joined_rows, PackedRows) else to_tuple(joined_rows),
            SOURCE_OP_SUMMARY,
            level0,
            task_time,
            counters,
            _clocks(outputs),
            join,
        )
    assert task_time is not None
    # A run in which no kernel ran: the reference exporter writes task_time only (its control
    # rows); older exports (a 2024 310B CSV) listed them as op_summary PLACE_HOLDER_SQE rows.
    if with_counters and any(out.dev.ffts for out in outputs):
        # op_summary without GE rows (placeholders) or none: its PMU columns were not modelled.
        for out in outputs:
            if (
                out.dev.ffts
                and pmu_records(joined(files[p] for p in out.dev.ffts), lambda s, t: (s, t)).context
            ):
                raise DeclinedError(
                    DeclineReason.UNSUPPORTED,
                    f"{out.dev.folder}: PMU records in a run without op_summary kernels",
                )
    tasks = tuple(t for t in task_time if t.type not in CONTROL_TYPES)
    if not tasks:
        raise DeclinedError(DeclineReason.NO_TASKS, "the exporter would write no op_summary or task_time row")
    # The task_time CSV has no PMU column.
    no_counters = TaskCounters(length=len(tasks)) if with_counters else None
    return RawResult(
        tasks, SOURCE_TASK_TIME, level0, task_time if with_task_time else None, no_counters, _clocks(outputs)
    )


def _clocks(outputs: Sequence[_Device]) -> dict[int, ClockTable]:
    return {out.dev.device: out.clocks for out in outputs if out.clocks.rows}


class DeviceRows(NamedTuple):
    """One device's rows of the exporter's op_summary and task_time CSVs, in their order.

    op_summary rows keep the exporter's own type cell (``N/A`` at task time level 0: ``type``
    equals ``csv_type``, no level-0 join).
    """

    device: int
    op_summary: tuple[RawTask, ...]
    task_time: tuple[RawTask, ...]
    #: the PMU headers op_summary prints after ``Context ID`` (with *pmu*; else empty)
    pmu_header: tuple[str, ...] = ()
    #: each op_summary row's PMU cells, as the exporter prints them (``N/A``, ``0.423``, ``12463669``)
    pmu_cells: tuple[tuple[str, ...], ...] = ()


class ExportRows(NamedTuple):
    """What ``msprof.py export summary`` would write for op_summary and task_time, per device."""

    level0: bool
    devices: tuple[DeviceRows, ...]


def export_rows(
    plan: RunPlan, files: Mapping[str, RawData], *, pmu: bool = False, consume: bool = False
) -> ExportRows:
    """The rows of the exporter's op_summary and task_time CSVs, for a CSV writer (the simulated
    ``msprof.py``): like :func:`decode_run`, but every row, any number of them, and no decline for
    a run without tasks (its CSVs have control tasks only).

    *pmu*: also the PMU cells of op_summary (``DeviceRows.pmu_header`` / ``pmu_cells``), for every
    metric group the exporter maps, verified on real runs or not (see ``_pmu.VERIFIED_GROUPS``).
    *consume*: as :func:`decode_run`'s.

    :raises DeclinedError: for anything not verified against the real exporter
    """
    check_storable(plan.host_data, (dev.ffts for dev in plan.devices), files)
    _check_sample_devices(plan, files)
    outputs, level0 = _outputs(plan, files, _releaser(files, consume))
    devices: list[DeviceRows] = []
    for out in outputs:
        rows = DeviceRows(
            out.dev.device, tuple(row.raw for row in out.row_records), tuple(out.task_time_rows())
        )
        if pmu and out.op_rows:
            header, cells = _device_pmu(out, files, verified_only=False)
            printed = tuple(tuple(str(value) for value in row) for row in cells) if header else ()
            rows = rows._replace(pmu_header=header, pmu_cells=printed)
        devices.append(rows)
    return ExportRows(level0, tuple(devices))


def _stream_expansion(files: Mapping[str, RawData], paths: Sequence[str]) -> bool:
    """Whether streams are "expanded": the first ``expand_stream_spec`` record's status byte."""
    for path in paths:
        found = list(records(files[path], HOST_COMPACT_SIZE))
        if found:
            status = found[0][24]
            if status not in (0, 1):
                raise DeclinedError(DeclineReason.UNKNOWN_RECORD, f"expand_stream_spec status {status}")
            return status == 1
    return False


def _level(sample: Mapping[str, object]) -> str:
    level = sample.get("profLevel")
    return str(level if level else sample.get("prof_level"))


def _join_level0(outputs: Sequence[_Device]) -> tuple[list[RawTask] | PackedRows, Level0Join | None]:
    """op_summary's ``N/A`` types taken from task_time, as :class:`asc_aprof._runs._csv.RunReader`
    does, and the counts it records (None: no join, the types are known).

    See :meth:`_Device.joined_types`; the equality with the CSV path is tested on every real run.
    (Loops, not calls over whole lists such as ``any(a_list)``: the interpreter can switch
    threads between their steps, see :mod:`._chunked`.)
    """
    packed = [out.op_rows for out in outputs if isinstance(out.op_rows, PackedRows)]
    if packed and len(packed) == len(outputs):  # (no N/A row either)
        return PackedRows([part for rows in packed for part in rows._parts]), None
    rows = sum(len(out.op_rows) for out in outputs)
    # (a device that kept its rows only has no N/A row)
    unknown = sum(row.raw.csv_type == NA for out in outputs if not out.rows_only for row in out.row_records)
    if unknown and unknown != rows:
        # The library decides per CSV batch whether to join: mixed files depend on chunking.
        raise DeclinedError(DeclineReason.AMBIGUOUS, "op_summary mixes N/A and known task types")
    # A list of its final size, filled in place (a growing list copies itself as it grows).
    joined: list[Any] = [None] * rows
    at = 0
    typed = nearest = 0
    for device in outputs:
        if not unknown:
            bare = device.rows_only
            found_rows = device.op_rows
            if isinstance(found_rows, PackedRows):  # (beside a device that could not pack)
                found_rows = found_rows.records(0, len(found_rows))
            for row in found_rows:
                joined[at] = row if bare else row[0]  # (the RawTask)
                at += 1
            continue
        if device.rows_only:  # (no N/A row: none at all, or the mix was declined above)
            continue
        found_types, device_nearest = device.joined_types(device.row_records)
        nearest += device_nearest
        for row, found in zip(device.row_records, found_types, strict=True):
            raw = row.raw
            if found is not None:
                # raw._replace(type=found), built in C (type is field 5)
                joined[at] = _new(RawTask, (*raw[:5], found, *raw[6:]))
                typed += 1
            else:
                joined[at] = raw
            at += 1
    if not unknown:
        return joined, None
    return joined, Level0Join(typed - nearest, nearest, rows - typed)
