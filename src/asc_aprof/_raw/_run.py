"""A whole run: which files to read, and the tasks the exporter's CSVs would hold (sans-IO).

:func:`dirs_to_list` and :class:`RunPlan` decide from directory listings which files a run needs
(declining on anything unknown); :func:`decode_run` turns their bytes into a :class:`RawResult`.
Neither opens a file: :mod:`asc_aprof._raw._driver` does the reading.

The device side, per ``device_N``: the ``stars_soc`` task log pairs start and end records per
(task id, stream id) in time order (an end before its start is dropped, a start whose end never
came is dropped); counters become times with the exporter's float arithmetic; each device task
is matched with the host task of the same (stream, task, context, batch) id. op_summary is the
join of those tasks with the GE tasks of the same ids, in start order; task_time is every
matched or device-only task with its runtime type. Durations are ``round(ns / 1000, 3)`` of the
float difference, start times the exporter's Decimal sum of device time and the start_info
offset, printed to the nanosecond.
"""

from __future__ import annotations

import dataclasses
import decimal
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

from .._parser import CONTROL_TYPES
from . import _decode as d
from ._host import NA, GeTask, HostRecords, HostTables, HostTask, host_tables
from ._types import (
    SOURCE_OP_SUMMARY,
    SOURCE_TASK_TIME,
    DeclinedError,
    DeclineReason,
    RawResult,
    RawTask,
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
    "hash_dic": re.compile(r"^(aging|unaging)\.additional\.hash_dic\.slice_\d+$"),
    "type_info_dic": re.compile(r"^(aging|unaging)\.additional\.type_info_dic\.slice_\d+$"),
    # whether streams are "expanded": changes only stream ids of 2048 and above, declined below
    "expand_stream_spec": re.compile(r"^(aging|unaging)\.compact\.expand_stream_spec\.slice_\d+$"),
}
#: Host data files that name a feature this reader has not verified.
HOST_DECLINED: Final = {
    re.compile(r"^(aging|unaging)\.additional\.context_id_info\."): "context ids (FFTS+ / MIX kernels)",
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
    if "host" not in names:
        raise DeclinedError(DeclineReason.NOT_A_RUN, "no host/ folder")
    devices = sorted(n for n in names if DEVICE_DIR.match(n))
    if not devices:
        raise DeclinedError(DeclineReason.NOT_A_RUN, "no device_N/ folder")
    return ["host", "host/data", *(p for n in devices for p in (n, f"{n}/data"))]


def _conf(entries: Sequence[str], pattern: str, where: str, *, required: bool = True) -> str | None:
    """The one config file of *where* matching *pattern* (the exporter takes the first it lists)."""
    regex = re.compile(pattern)
    found = [n for n in entries if regex.match(n) and not _is_marker(n)]
    if len(found) > 1:
        raise DeclinedError(DeclineReason.AMBIGUOUS, f"several {pattern!r} files in {where}: {sorted(found)}")
    if not found:
        if required:
            raise DeclinedError(DeclineReason.MISSING_FILE, f"{where} has no {pattern.strip('^$')} file")
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


@dataclasses.dataclass(frozen=True, slots=True)
class RunPlan:
    """The files of a run to read, classified (built from listings; never opens a file)."""

    host_info: str
    host_sample: str
    host_data: Mapping[str, tuple[str, ...]]
    devices: tuple[DevicePlan, ...]

    @property
    def wanted(self) -> list[str]:
        paths = [self.host_info, self.host_sample, *(p for ps in self.host_data.values() for p in ps)]
        for dev in self.devices:
            paths += [dev.info, dev.sample, dev.start_info, dev.dev_start, dev.host_start]
            paths += [*dev.stars, *dev.ffts, *dev.ts_track]
        return paths

    @classmethod
    def from_listing(cls, listing: Mapping[str, Sequence[str]]) -> RunPlan:
        """*listing*: the names in each directory :func:`dirs_to_list` asked for."""
        host = listing.get("host", [])
        host_info = _conf(host, r"^info\.json$", "host")
        host_sample = _conf(host, r"^sample\.json$", "host")
        assert host_info is not None and host_sample is not None
        host_data: dict[str, list[str]] = {}
        for name in listing.get("host/data", []):
            if _is_marker(name):
                continue
            kind = next((k for k, p in HOST_FILES.items() if p.match(name)), None)
            if kind is None:
                feature = next((f for p, f in HOST_DECLINED.items() if p.match(name)), None)
                if feature is not None:
                    raise DeclinedError(DeclineReason.UNSUPPORTED, f"host/data/{name}: {feature}")
                raise DeclinedError(DeclineReason.UNKNOWN_FILE, f"host/data/{name}")
            host_data.setdefault(kind, []).append(name)
        for required in ("task_track", "type_info_dic", "hash_dic", "api_event"):
            if required not in host_data:
                raise DeclinedError(DeclineReason.MISSING_FILE, f"host/data has no {required} file")
        ordered: dict[str, tuple[str, ...]] = {}
        for kind, names in host_data.items():
            modes = {n.split(".", 1)[0] for n in names}
            if len(modes) > 1 and kind not in ("hash_dic", "type_info_dic"):
                # Their relative order in the exporter follows the directory listing.
                raise DeclinedError(DeclineReason.AMBIGUOUS, f"both aging and unaging {kind} files in host/data")
            ordered[kind] = tuple(f"host/data/{n}" for n in sorted(names, key=lambda n: (n.split(".")[0], _slice_key(n))))
        devices: list[DevicePlan] = []
        for folder in sorted(k for k in listing if DEVICE_DIR.match(k)):
            device = int(DEVICE_DIR.match(folder).group(1))  # type: ignore[union-attr]
            entries = listing.get(folder, [])
            data = [n for n in listing.get(f"{folder}/data", []) if not _is_marker(n)]
            kinds: dict[str, list[str]] = {"stars_soc": [], "ffts_profile": [], "ts_track": [], "lpmInfoConv": []}
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

    def ns(self, counter: int) -> float:
        return float(counter - self.dev_cnt * 1e9) / self.hwts_freq * 1e9 + self.host_mon * 1e9

    def local(self, ns: float) -> str:
        """The printed start time: ``Decimal(str(ns)) / 1000 + offset``, 3 decimals."""
        raw = _DECIMAL.divide(decimal.Decimal(str(ns)), decimal.Decimal(1000))
        value = _DECIMAL.add(raw, decimal.Decimal(str(self.local_offset)))
        return str(value.quantize(_MILLI, context=_DECIMAL))

    def kept(self, start: str, duration_us: float) -> bool:
        """The exporter's filter: tasks started before the collection are dropped (string order)."""
        cell = start + "\t"
        begin = self.collect_begin
        end = str(_DECIMAL.add(decimal.Decimal(start), decimal.Decimal(str(duration_us))).quantize(_MILLI, context=_DECIMAL))
        return cell > begin or cell < begin < end


def _number(value: object, what: str) -> float:
    try:
        result = float(str(value))
    except ValueError:
        raise DeclinedError(DeclineReason.MALFORMED, f"{what} is not a number: {value!r}") from None
    return result


def _clock(info: Mapping[str, object], dev_start: Mapping[str, str], host_start: Mapping[str, str],
           start_info: Mapping[str, object], folder: str) -> DeviceClock:
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
    except (KeyError, ValueError):
        raise DeclinedError(DeclineReason.MALFORMED, f"{folder}/host_start.log is incomplete") from None
    begin = start_info.get("collectionTimeBegin")
    raw = start_info.get("clockMonotonicRaw")
    if not isinstance(begin, str) or not begin or not raw:
        raise DeclinedError(DeclineReason.MALFORMED, f"{folder}/start_info lacks collectionTimeBegin")
    offset = float(begin) - _number(raw, "clockMonotonicRaw") / 1000.0
    return DeviceClock(dev_cnt, hwts, float(host_mon_ns) / 1e9, offset, begin)


# -- device tasks -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _DeviceTask:
    stream_id: int
    task_id: int
    sqe_type: str
    start: float  # ns
    duration: float  # ns
    start_cycles: int
    end_cycles: int


_PLACE_HOLDER_SQE: Final = 3
_EVENT_RECORD_SQE: Final = 4


def stream_task_ids(stream: int, task: int, sqe_type: int, expanded: bool) -> tuple[int, int]:
    """The (stream id, task id) a device record stands for: ids are bit-packed when streams are
    many (the exporter's rules, with and without "stream expansion")."""
    if expanded:
        if sqe_type in (_PLACE_HOLDER_SQE, _EVENT_RECORD_SQE):
            return stream & 0x7FFF, task
        if stream & 0x8000:
            return task & 0x7FFF, (task & 0x8000) | (stream & 0x7FFF)
        return stream & 0x7FFF, task
    if stream & 0x1000:
        return stream % 2048, (task & 0x1FFF) | (stream & 0xE000)
    if stream & 0x2000:
        return (task & 0x0FFF) % 2048, (stream & 0x0FFF) | (task & 0xF000)
    return stream % 2048, task


def _device_tasks(stars: list[d.StarsRecord], clock: DeviceClock, folder: str, expanded: bool) -> list[_DeviceTask]:
    timed: list[tuple[float, int, int, d.StarsRecord]] = []
    for rec in stars:
        if rec.function not in (0, 1):
            what = "FFTS+ subtask records (MIX kernels)" if rec.function in (34, 35) else f"function {rec.function}"
            raise DeclinedError(DeclineReason.UNKNOWN_RECORD, f"{folder} stars_soc holds {what}")
        if rec.sqe_type >= len(d.SQE_TYPES):
            raise DeclinedError(DeclineReason.UNKNOWN_RECORD, f"{folder} stars_soc SQE type {rec.sqe_type}")
        stream, task = stream_task_ids(rec.stream_id, rec.task_id, rec.sqe_type, expanded)
        timed.append((clock.ns(rec.counter), stream, task, rec))
    timed.sort(key=lambda item: item[0])
    groups: dict[tuple[int, int], tuple[list[tuple[float, int, int, d.StarsRecord]], list[tuple[float, int, int, d.StarsRecord]]]] = {}
    for item in timed:
        starts, ends = groups.setdefault((item[2], item[1]), ([], []))
        (starts if item[3].function == 0 else ends).append(item)
    matched: list[_DeviceTask] = []
    for starts, ends in groups.values():
        i = j = 0
        while i < len(starts) and j < len(ends):
            s_time, stream, task, s_rec = starts[i]
            e_time, _, _, e_rec = ends[j]
            if e_time < s_time:
                j += 1  # an end without its start
                continue
            if i + 1 == len(starts) or e_time < starts[i + 1][0]:
                matched.append(
                    _DeviceTask(
                        stream, task, d.SQE_TYPES[s_rec.sqe_type], s_time, e_time - s_time, s_rec.counter, e_rec.counter
                    )
                )
                i += 1
                j += 1
            else:
                i += 1  # a start whose end was lost
    matched.sort(key=lambda t: t.start)
    return matched


@dataclasses.dataclass(frozen=True, slots=True)
class _Ascend:
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
    hosts: dict[tuple[int, int, int, int], list[HostTask]] = {}
    for h in host:
        hosts.setdefault((h.stream_id, h.task_id, h.context_id, h.batch_id), []).append(h)
    devices: dict[tuple[int, int, int, int], list[_DeviceTask]] = {}
    for t in device:
        devices.setdefault((t.stream_id, t.task_id, INVALID_CONTEXT, 0), []).append(t)
    out: list[_Ascend] = []
    for key in hosts.keys() | devices.keys():
        hs, ds = hosts.get(key, []), devices.get(key, [])
        if len(hs) > 1 or len(ds) > 1:
            raise DeclinedError(
                DeclineReason.AMBIGUOUS,
                f"{folder}: {len(hs)} host and {len(ds)} device tasks share stream {key[0]} task {key[1]}",
            )
        stream, task, context, batch = key
        if hs and ds:
            h, t = hs[0], ds[0]
            out.append(_Ascend(stream, task, context, batch, t.start, t.duration, h.task_type, t.sqe_type,
                               t.start_cycles, t.end_cycles))
        elif hs:
            out.append(_Ascend(stream, task, context, batch, -1, -1, hs[0].task_type, UNKNOWN, 0, 0))
        else:
            t = ds[0]
            out.append(_Ascend(stream, task, context, batch, t.start, t.duration, UNKNOWN, t.sqe_type,
                               t.start_cycles, t.end_cycles))
    out.sort(key=lambda a: a.start)
    return out


def _check_ties(starts: Iterable[float], folder: str, what: str) -> None:
    seen: set[float] = set()
    for start in starts:
        if start in seen:
            # The exporter orders equal starts by set iteration and SQLite's sorter.
            raise DeclinedError(DeclineReason.AMBIGUOUS, f"{folder}: two {what} rows start at the same time")
        seen.add(start)


def _task_type(host_type: str, device_type: str) -> str:
    if host_type == "FFTS_PLUS":
        return device_type
    if host_type == UNKNOWN:
        return device_type  # SQE names are never digits here
    return host_type


@dataclasses.dataclass(frozen=True, slots=True)
class _Row:
    """One exported row, before the library's level-0 join."""

    raw: RawTask
    stream_id: int


def _device_rows(
    dev: DevicePlan,
    files: Mapping[str, bytes],
    tables: HostTables,
    hashes: Mapping[str, str],
    *,
    expanded: bool,
    all_export: bool,
    level0: bool,
    check_info: Callable[[Mapping[str, object], str], None],
) -> tuple[list[_Row], list[_Row]]:
    """(op_summary rows, task_time rows) of one device, in their CSV order."""
    folder = dev.folder
    info = d.json_object(files[dev.info], f"{folder}/info.json")
    check_info(info, folder)
    devices_field = str(info.get("devices", ""))
    if devices_field != str(dev.device):
        raise DeclinedError(DeclineReason.AMBIGUOUS, f"{folder}/info.json says devices={devices_field!r}")
    clock = _clock(
        info,
        d.key_values(files[dev.dev_start], f"{folder}/dev_start.log"),
        d.ini_first_section(files[dev.host_start], f"{folder}/host_start.log"),
        d.json_object(files[dev.start_info], f"{folder}/start_info"),
        folder,
    )
    stars = d.stars_records(d.joined(files[p] for p in dev.stars))
    device_tasks = _device_tasks(stars, clock, folder, expanded)
    if dev.ts_track:
        flips = d.ts_track_flips(d.joined(files[p] for p in dev.ts_track))
        if all_export:
            first: dict[int, float] = {}
            for flip in flips:
                first[flip.stream_id] = min(first.get(flip.stream_id, clock.ns(flip.counter)), clock.ns(flip.counter))
            for task in device_tasks:
                limit = first.get(task.stream_id)
                if limit is not None and task.start >= limit:
                    raise DeclinedError(
                        DeclineReason.UNSUPPORTED, f"{folder}: task ids of stream {task.stream_id} wrapped around"
                    )
    host = [h for h in tables.host_tasks if h.device_id == dev.device]
    ascend = _top_down(host, device_tasks, folder)

    ge: dict[tuple[int, int, int, int], list[GeTask]] = {}
    for g in tables.ge_tasks:
        if g.device_id == dev.device:
            ge.setdefault((g.stream_id, g.task_id, g.batch_id, g.context_id), []).append(g)

    # op_summary: the device tasks joined with their GE tasks.
    op_rows: list[_Row] = []
    joined_rows: list[tuple[_Ascend, GeTask]] = []
    for a in ascend:
        if a.start == -1:
            continue
        for g in ge.get((a.stream_id, a.task_id, a.batch_id, a.context_id), []):
            if g.task_type in ("WRITE_BACK", "INVALID"):
                continue
            joined_rows.append((a, g))
    _check_ties((a.start for a, _ in joined_rows), folder, "op_summary")
    joined_rows.sort(key=lambda item: item[0].start)
    for a, g in joined_rows:
        name = hashes.get(g.op_name, g.op_name)
        duration = round(a.duration / 1000.0, 3)
        start = clock.local(a.start)
        if not clock.kept(start, duration):
            continue
        block = None if level0 else g.block_num
        mix = None if level0 else g.mix_block_num
        raw = RawTask(
            dev.device, a.stream_id, a.task_id, a.batch_id, name, g.task_type, g.task_type,
            duration, a.duration, int(decimal.Decimal(start) * 1000), a.start_cycles, a.end_cycles, block, mix,
        )
        op_rows.append(_Row(raw, a.stream_id))

    # task_time: every task the device ran, with its host's type.
    ge_info = {k: v[-1] for k, v in ge.items()}
    kernel_names = {(h.stream_id, h.task_id, h.batch_id, h.context_id): h.kernel_name
                    for h in sorted(host, key=lambda h: h.timestamp)}
    ran = [a for a in ascend if a.device_type != UNKNOWN]
    _check_ties((a.start for a in ran), folder, "task_time")
    groups: dict[tuple[int, int, int], list[_Ascend]] = {}
    for a in ran:
        groups.setdefault((a.stream_id, a.task_id, a.batch_id), []).append(a)
    cells: list[tuple[str, _Ascend, str, str, float]] = []
    for group in groups.values():
        if len(group) > 1:
            raise DeclinedError(DeclineReason.UNSUPPORTED, f"{folder}: a task with several contexts (FFTS+/MIX)")
        for a in group:
            key = (a.stream_id, a.task_id, a.batch_id, a.context_id)
            op = ge_info.get(key)
            name = kernel_names.get(key) or (op.op_name if op is not None else NA)
            op_type = op.task_type if op is not None else None
            ttype = op_type if op_type not in (None, NA) else _task_type(a.host_type, a.device_type)
            duration = round(a.duration / 1000.0, 3)
            cells.append((clock.local(a.start), a, name, ttype, duration))
    cells.sort(key=lambda c: c[0])
    time_rows: list[_Row] = []
    for start, a, name, ttype, duration in cells:
        if not clock.kept(start, duration):
            continue
        raw = RawTask(
            dev.device, a.stream_id, a.task_id, a.batch_id, name, ttype, ttype, duration, a.duration,
            int(decimal.Decimal(start) * 1000), a.start_cycles, a.end_cycles,
        )
        time_rows.append(_Row(raw, a.stream_id))
    for rows, what in ((op_rows, "op_summary"), (time_rows, "task_time")):
        if len(rows) >= CSV_LIMIT:
            raise DeclinedError(DeclineReason.UNSUPPORTED, f"{folder}: over {CSV_LIMIT} {what} rows (sliced CSVs)")
    return op_rows, time_rows


def decode_run(plan: RunPlan, files: Mapping[str, bytes]) -> RawResult:
    """The tasks the library would read after a real ``msprof.py export summary`` of the run.

    :raises DeclinedError: for anything not verified against the real exporter
    """
    host_info = d.json_object(files[plan.host_info], "host/info.json")
    host_sample = d.json_object(files[plan.host_sample], "host/sample.json")
    platform = str(host_info.get("platform_version", ""))
    driver = host_info.get("drvVersion", 0)
    if not isinstance(driver, int):
        raise DeclinedError(DeclineReason.UNKNOWN_PLATFORM, f"drvVersion {driver!r}")
    if str(host_info.get("version", "")) != COLLECTION_VERSION:
        raise DeclinedError(DeclineReason.UNKNOWN_PLATFORM, f"collection version {host_info.get('version')!r}")
    if platform == PLATFORM_910B and driver >= ALL_EXPORT_VERSION:
        all_export = True
    elif platform == PLATFORM_310B and driver < ALL_EXPORT_VERSION:
        all_export = False
    else:
        raise DeclinedError(
            DeclineReason.UNKNOWN_PLATFORM,
            f"platform_version {platform!r} with drvVersion {driver} (verified: 910B '5' from {ALL_EXPORT_VERSION}, "
            f"310B '7' below it)",
        )
    if str(host_sample.get("devices", "")) != "64":
        # The exporter ignores such a host folder without a word.
        raise DeclinedError(DeclineReason.UNSUPPORTED, f"host/sample.json devices={host_sample.get('devices')!r}")
    level0 = _level(host_sample) in LEVEL0_NAMES

    def check_info(info: Mapping[str, object], folder: str) -> None:
        if str(info.get("platform_version", "")) != platform or info.get("drvVersion") != driver:
            raise DeclinedError(DeclineReason.AMBIGUOUS, f"{folder}/info.json and host/info.json disagree on the chip")

    hashes: dict[str, str] = {}
    for path in plan.host_data.get("hash_dic", ()):
        d.hash_dic(files[path], hashes)
    types: dict[str, dict[str, str]] = {}
    for path in plan.host_data.get("type_info_dic", ()):
        d.type_info_dic(files[path], types)
    records = HostRecords(hashes, types)
    records.apis = d.api_records(d.joined(files[p] for p in plan.host_data.get("api_event", ())))
    records.tracks = d.task_track_records(d.joined(files[p] for p in plan.host_data["task_track"]))
    basics = plan.host_data.get("node_basic_info", ())
    if basics and basics[0].split("/")[-1].startswith("unaging"):
        raise DeclinedError(DeclineReason.UNSUPPORTED, "static-shape nodes (unaging node_basic_info)")
    records.node_basics = d.node_basic_records(d.joined(files[p] for p in basics))
    records.tensors = d.header_records(
        d.joined(files[p] for p in plan.host_data.get("tensor_info", ())), d.ADDITIONAL_SIZE, "tensor_info"
    )
    if not level0 and not records.node_basics:
        raise DeclinedError(DeclineReason.MISSING_FILE, "task time level 1 without node_basic_info")
    tables = host_tables(records, level0=level0, all_export=all_export)
    expanded = _stream_expansion(files, plan.host_data.get("expand_stream_spec", ()))

    if len(plan.devices) > 1:
        raise DeclinedError(DeclineReason.UNSUPPORTED, "several devices in one run (their merge is not verified)")
    op_rows: list[_Row] = []
    time_rows: list[_Row] = []
    for dev in plan.devices:
        ops, times = _device_rows(
            dev, files, tables, hashes, expanded=expanded, all_export=all_export, level0=level0,
            check_info=check_info,
        )
        op_rows += ops
        time_rows += times
    if op_rows:
        return RawResult(tuple(_join_level0(op_rows, time_rows)), SOURCE_OP_SUMMARY, level0)
    tasks = [r.raw for r in time_rows if r.raw.type not in CONTROL_TYPES]
    if not tasks:
        raise DeclinedError(DeclineReason.NO_TASKS, "the exporter would write no op_summary or task_time row")
    return RawResult(tuple(tasks), SOURCE_TASK_TIME, level0)


def _stream_expansion(files: Mapping[str, bytes], paths: Sequence[str]) -> bool:
    """Whether streams are "expanded": the first ``expand_stream_spec`` record's status byte."""
    for path in paths:
        data = files[path]
        records = list(d.records(data, d.HOST_COMPACT_SIZE))
        if records:
            status = records[0][24]
            if status not in (0, 1):
                raise DeclinedError(DeclineReason.UNKNOWN_RECORD, f"expand_stream_spec status {status}")
            return status == 1
    return False


def _level(sample: Mapping[str, object]) -> str:
    level = sample.get("profLevel")
    return str(level if level else sample.get("prof_level"))


def _join_level0(op_rows: list[_Row], time_rows: list[_Row]) -> list[RawTask]:
    """op_summary's ``N/A`` types taken from task_time, as :class:`asc_aprof._reader.RunReader` does."""
    unknown = [r.raw.csv_type == NA for r in op_rows]
    if not any(unknown):
        return [r.raw for r in op_rows]
    if not all(unknown):
        # The library decides per CSV batch whether to join: mixed files depend on chunking.
        raise DeclinedError(DeclineReason.AMBIGUOUS, "op_summary mixes N/A and known task types")
    types: dict[tuple[int, str, int, int], str | None] = {}
    for row in time_rows:
        raw = row.raw
        if raw.type in CONTROL_TYPES:
            continue
        key = (raw.device, str(row.stream_id), raw.task_id, raw.start_ns)
        types[key] = raw.type if types.get(key, raw.type) == raw.type else None
    out: list[RawTask] = []
    for row in op_rows:
        found = types.get((row.raw.device, str(row.stream_id), row.raw.task_id, row.raw.start_ns))
        if found is not None and found != NA:
            out.append(dataclasses.replace(row.raw, type=found))
        else:
            out.append(row.raw)
    return out
