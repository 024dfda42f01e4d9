"""A checker of the Trace Event Format rules that Perfetto and chrome://tracing rely on.

Rules checked (the format's JSON object form):
- the top level is an object with a ``traceEvents`` list; ``displayTimeUnit``, when present, is
  ``"ms"`` or ``"ns"``; ``otherData``, when present, is an object;
- every event has a string ``ph``, integer ``pid`` and ``tid``, a string ``name``; ``args``, when
  present, is an object;
- complete events (``X``) have numeric ``ts`` and ``dur`` >= 0 (microseconds), a string ``cat``;
- counter events (``C``) have a numeric ``ts`` >= 0 and a numeric ``args.value``, on a named
  process (Perfetto draws one counter track per process and name);
- metadata events (``M``) are one of process_name / process_sort_index / thread_name /
  thread_sort_index, with a string ``name`` or an integer ``sort_index`` in ``args``;
- every process and thread that has a complete event is named by metadata;
- complete events on one thread nest: each one either starts at or after the end of the one
  before it on the stack, or ends within it (the viewers draw a thread as a stack of slices).

Numbers are read as :class:`decimal.Decimal`, so "exact to 1 ns" is checked on the text itself.
"""

from __future__ import annotations

import decimal
import gzip
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

METADATA = {"process_name": "name", "process_sort_index": "sort_index", "thread_name": "name"}
METADATA["thread_sort_index"] = "sort_index"


def load(path: Path) -> dict[str, Any]:
    """A trace file (gzip when it starts with gzip's magic), numbers as Decimal."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    data: dict[str, Any] = json.loads(raw.decode("utf-8"), parse_float=decimal.Decimal)
    return data


def check(data: Mapping[str, Any]) -> list[str]:
    """Every rule *data* breaks (empty when it follows them all)."""
    problems: list[str] = []
    events = data.get("traceEvents")
    if not isinstance(events, list):
        return ["traceEvents is not a list"]
    if data.get("displayTimeUnit", "ms") not in ("ms", "ns"):
        problems.append(f"displayTimeUnit {data['displayTimeUnit']!r}")
    if not isinstance(data.get("otherData", {}), dict):
        problems.append("otherData is not an object")
    named_processes: set[int] = set()
    named_threads: set[tuple[int, int]] = set()
    counter_processes: set[int] = set()
    slices: dict[tuple[int, int], list[tuple[decimal.Decimal, decimal.Decimal, str]]] = {}
    for index, event in enumerate(events):
        where = f"event {index}"
        if not isinstance(event, dict):
            problems.append(f"{where} is not an object")
            continue
        ph, pid, tid, name = event.get("ph"), event.get("pid"), event.get("tid"), event.get("name")
        if not isinstance(ph, str) or not isinstance(name, str):
            problems.append(f"{where}: ph / name not strings")
            continue
        if type(pid) is not int or type(tid) is not int:
            problems.append(f"{where}: pid / tid not integers")
            continue
        if "args" in event and not isinstance(event["args"], dict):
            problems.append(f"{where}: args not an object")
        if ph == "M":
            key = METADATA.get(name)
            value = (event.get("args") or {}).get(key or "")
            if key is None:
                problems.append(f"{where}: unknown metadata {name!r}")
            elif (key == "name" and not isinstance(value, str)) or (
                key == "sort_index" and type(value) is not int
            ):
                problems.append(f"{where}: {name} args.{key} = {value!r}")
            elif name == "process_name":
                named_processes.add(pid)
            elif name == "thread_name":
                named_threads.add((pid, tid))
        elif ph == "X":
            ts, dur = event.get("ts"), event.get("dur")
            if not isinstance(ts, decimal.Decimal | int) or not isinstance(dur, decimal.Decimal | int):
                problems.append(f"{where}: ts / dur not numbers")
                continue
            if ts < 0 or dur < 0:
                problems.append(f"{where}: negative ts / dur")
            if not isinstance(event.get("cat"), str):
                problems.append(f"{where}: cat not a string")
            slices.setdefault((pid, tid), []).append((decimal.Decimal(ts), decimal.Decimal(dur), where))
        elif ph == "C":
            ts, value = event.get("ts"), (event.get("args") or {}).get("value")
            if not isinstance(ts, decimal.Decimal | int) or ts < 0:
                problems.append(f"{where}: counter ts not a number >= 0")
            if not isinstance(value, decimal.Decimal | int) or isinstance(value, bool):
                problems.append(f"{where}: counter args.value not a number")
            counter_processes.add(pid)
        else:
            problems.append(f"{where}: phase {ph!r} not written by asc-aprof")
    for pid, tid in slices:
        if pid not in named_processes:
            problems.append(f"process {pid} has events but no process_name")
        if (pid, tid) not in named_threads:
            problems.append(f"thread {pid}/{tid} has events but no thread_name")
    for pid in counter_processes - named_processes:
        problems.append(f"process {pid} has counter events but no process_name")
    for thread, items in slices.items():
        stack: list[decimal.Decimal] = []  # ends of the open slices
        for ts, dur, where in sorted(items, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1] <= ts:
                stack.pop()
            if stack and ts + dur > stack[-1]:
                problems.append(f"{where} on thread {thread} overlaps the slice it starts in without nesting")
            stack.append(ts + dur)
    return problems


def complete_events(data: Mapping[str, Any], cat: str | None = None) -> list[dict[str, Any]]:
    """The ``X`` events (of category *cat*, or all but the per-run lanes)."""
    return [
        e
        for e in data["traceEvents"]
        if e["ph"] == "X" and (e["cat"] == cat if cat is not None else e["cat"] != "run")
    ]


def names(data: Mapping[str, Any], kind: str) -> dict[tuple[int, int], str]:
    """process_name (keys (pid, 0)) or thread_name (keys (pid, tid)) metadata."""
    return {
        (e["pid"], e["tid"] if kind == "thread_name" else 0): e["args"]["name"]
        for e in data["traceEvents"]
        if e["ph"] == "M" and e["name"] == kind
    }
