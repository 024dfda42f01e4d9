"""Why is it slow: a bound verdict per kernel from the medians of its PMU pipe ratios.

Theory of operation
-------------------
PipeUtilization (and the 310B's PipelineExecuteUtilization) give, per task, the share of the
task's cycles each pipe of the AI Core was busy: ``*_mac_ratio`` (the cube unit), ``*_vec_ratio``,
``*_scalar_ratio``, ``*_mte1_ratio`` / ``*_mte2_ratio`` / ``*_mte3_ratio`` (the memory transfer
engines: L1 to L0, global memory in, results out) and ``*_fixpipe_ratio``. On a 910B the cube
core's columns are prefixed ``aic_`` and the vector core's ``aiv_``; a 310B has one core and
unprefixed names (``vec_ratio`` or ``vec_exe_ratio``, ...). :func:`bound_verdict` reads every
column of that shape, whatever the chip, and applies :data:`VERDICT_RULE`:

1. cube rule (``aic_`` ratios, or a single core's): bound by the cube unit when ``mac_ratio`` >
   0.8, by MTE2 when ``mte2_ratio`` > 0.95;
2. vector rule (``aiv_`` ratios, or a single core's): bound by the pipe whose ``vec``, ``mte2``
   or ``mte3`` ratio is > 0.7, or, when ``vec + mte2 + mte3`` > 0.9, by the largest of the three;
3. any other pipe (scalar, mte1, fixpipe) with a ratio > 0.8 bounds the kernel;
4. no rule fired: a median duration over 20 µs with no ratio above 0.8 is latency-bound (the
   pipes wait: synchronisation, dependencies, too few blocks); otherwise not bound.

Rules 1, 2 and 4 are msprof-analyze advisor's published thresholds; rule 3 is asc-aprof's (the
advisor leaves those pipes out, and the 0.8 is the one rule 4 calls saturated). When several
rules fire the verdict names the pipe with the largest ratio and the reason lists them all.

Groups without pipe ratios (ArithmeticUtilization, Memory, MemoryL0, MemoryUB,
ResourceConflictRatio, L2Cache) give no verdict: :attr:`Verdict.figures` holds their figures
(bandwidths, bank-conflict ratios, cache hits, instruction mixes) instead.

**In roofline terms.** Given the chip (:class:`~asc_aprof._plans._sol.ChipFacts`), the counters
also give each resource's fraction of the chip's peak (:func:`~asc_aprof._plans._sol.speed_of_light`).
When the largest is at least :data:`SOL_BOUND` (0.6) the verdict is that roof:
``memory-bound`` (a memory level or a transfer engine) or ``compute-bound`` (cube, vector,
scalar, fixpipe), e.g. ``memory-bound: gm at 71% of peak; cube at 12%``. Below it no roof
limits the kernel and the pipe rule above decides, its reason followed by the fractions. Without
the chip or the counters the fractions need, the pipe rule alone decides, as before.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ._sol import MEMORY_RESOURCES, ChipFacts, speed_of_light

CUBE_MAC: Final = 0.8
CUBE_MTE2: Final = 0.95
VECTOR_PIPE: Final = 0.7
VECTOR_TOTAL: Final = 0.9
OTHER_PIPE: Final = 0.8
LATENCY_US: Final = 20.0
SATURATED: Final = 0.8
#: A resource at or above this fraction of the chip's peak is the roof that limits the kernel.
SOL_BOUND: Final = 0.6

#: The rule, as shown by ``asc-aprof summary --metrics`` and in the README.
VERDICT_RULE: Final = (
    "cube-bound when mac_ratio > 0.8 or mte2_ratio > 0.95 (aic_ or single core); vector-bound when "
    "vec, mte2 or mte3 ratio > 0.7 or their sum > 0.9 (aiv_ or single core); scalar, mte1 or fixpipe "
    "ratio > 0.8: bound by it; else latency-bound when the median task is over 20 us and no ratio "
    "is above 0.8, not bound otherwise (msprof-analyze advisor thresholds)"
)

PIPES: Final = ("mac", "vec", "scalar", "mte1", "mte2", "mte3", "fixpipe")
_RATIO: Final = re.compile(r"^(?:(aic|aiv)_)?(vec|mac|scalar|mte1|mte2|mte3|fixpipe)(?:_exe)?_ratio$")
_CORES: Final = {"aic": "cube", "aiv": "vector"}


class VerdictKind(enum.Enum):
    """What the rule concluded."""

    BOUND = "bound"  #: a pipe is saturated (:attr:`Verdict.pipe`)
    LATENCY = "latency"  #: long tasks, no pipe saturated: waiting, not working
    NOT_BOUND = "not bound"  #: short tasks, no pipe saturated
    NO_RATIOS = "no ratios"  #: the metric group has no pipe ratios: see :attr:`Verdict.figures`
    NO_COUNTERS = "no counters"  #: every counter is N/A (AI CPU tasks, or no PMU match)
    MEMORY_BOUND = "memory-bound"  #: a memory roof: :attr:`Verdict.pipe` holds the resource
    COMPUTE_BOUND = "compute-bound"  #: a compute roof: :attr:`Verdict.pipe` holds the resource


@dataclasses.dataclass(frozen=True, slots=True)
class Verdict:
    """The bound verdict of one kernel (see :data:`VERDICT_RULE`).

    :ivar kind: what the rule concluded
    :ivar pipe: the bound pipe (``BOUND``), else the busiest one; ``mac`` (cube), ``vec``,
        ``scalar``, ``mte1``, ``mte2``, ``mte3`` or ``fixpipe``; None without pipe ratios
    :ivar core: ``"cube"`` (``aic_`` column), ``"vector"`` (``aiv_``), or None (a single,
        unprefixed core, or no ratio)
    :ivar column: the ratio column *pipe* was read from
    :ivar ratio: its median
    :ivar reason: the rule that decided, with the numbers
    :ivar ratios: every pipe ratio (column, median), largest first
    :ivar figures: for a group without pipe ratios, its figures (column, median) in file order
    :ivar fractions: each resource's fraction of the chip's peak, largest first (empty without
        the chip or the counters they need)
    """

    kind: VerdictKind
    pipe: str | None
    core: str | None
    column: str | None
    ratio: float | None
    reason: str
    ratios: tuple[tuple[str, float], ...] = ()
    figures: tuple[tuple[str, float], ...] = ()
    fractions: tuple[tuple[str, float], ...] = ()

    @property
    def label(self) -> str:
        """Short form: ``vec-bound``, ``memory-bound``, ``latency-bound``, ``not bound``, ..."""
        if self.kind in (VerdictKind.MEMORY_BOUND, VerdictKind.COMPUTE_BOUND):
            return str(self.kind.value)
        if self.kind is VerdictKind.BOUND:
            return f"{self.pipe}-bound"
        if self.kind is VerdictKind.LATENCY:
            return "latency-bound"
        return str(self.kind.value)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "label": self.label,
            "pipe": self.pipe,
            "core": self.core,
            "column": self.column,
            "ratio": self.ratio,
            "reason": self.reason,
            "ratios": dict(self.ratios),
            "figures": dict(self.figures),
            "fractions": dict(self.fractions),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        return cls(
            VerdictKind(data["kind"]),
            data.get("pipe"),
            data.get("core"),
            data.get("column"),
            data.get("ratio"),
            str(data.get("reason", "")),
            tuple((str(k), float(v)) for k, v in (data.get("ratios") or {}).items()),
            tuple((str(k), float(v)) for k, v in (data.get("figures") or {}).items()),
            tuple((str(k), float(v)) for k, v in (data.get("fractions") or {}).items()),
        )


@dataclasses.dataclass(frozen=True, slots=True)
class _Ratio:
    column: str
    core: str | None
    pipe: str
    value: float


def _is_figure(column: str) -> bool:
    """A column worth showing for a group without ratios (not a core time or a cycle count)."""
    return not (column.endswith("_time(us)") or column.endswith("total_cycles"))


def fractions_text(fractions: Sequence[tuple[str, float]], limit: int = 3) -> str:
    """``gm at 71% of peak; cube at 12%``: the first *limit* fractions."""
    parts = [f"{name} at {value:.0%}" for name, value in fractions[:limit]]
    if parts:
        parts[0] += " of peak"
    return "; ".join(parts)


def bound_verdict(
    counters: Mapping[str, float | None], duration_us: float | None = None, chip: ChipFacts | None = None
) -> Verdict:
    """The verdict for one kernel from the medians of its counters and of its duration (µs).

    *counters* maps column names (the CSV's) to medians, None where there was no value. With
    *chip*, the verdict is given in roofline terms where the counters allow (module docstring).
    """
    verdict = _pipe_verdict(counters, duration_us)
    fractions = tuple(speed_of_light(counters, duration_us, chip).fractions.items())
    if not fractions:
        return verdict
    top, value = fractions[0]
    if value >= SOL_BOUND:
        kind = VerdictKind.MEMORY_BOUND if top in MEMORY_RESOURCES else VerdictKind.COMPUTE_BOUND
        return dataclasses.replace(
            verdict,
            kind=kind,
            pipe=top,
            core=None,
            column=None,
            ratio=value,
            reason=fractions_text(fractions),
            fractions=fractions,
        )
    reason = f"{verdict.reason}; of the chip's peak: {fractions_text(fractions).replace(' of peak', '')}"
    return dataclasses.replace(verdict, reason=reason, fractions=fractions)


def _pipe_verdict(counters: Mapping[str, float | None], duration_us: float | None) -> Verdict:
    """The pipe rule (:data:`VERDICT_RULE`) alone."""
    present = {name: value for name, value in counters.items() if value is not None}
    if not present:
        why = "every counter is N/A" if counters else "the CSV has no PMU counter column"
        return Verdict(VerdictKind.NO_COUNTERS, None, None, None, None, why)
    ratios: list[_Ratio] = []
    for name, value in present.items():
        match = _RATIO.match(name)
        if match is not None:
            ratios.append(_Ratio(name, _CORES.get(match.group(1) or ""), match.group(2), value))
    if not ratios:
        figures = tuple((name, value) for name, value in present.items() if _is_figure(name))
        return Verdict(
            VerdictKind.NO_RATIOS,
            None,
            None,
            None,
            None,
            "this metric group has no pipe ratios (collect PIPE_UTILIZATION for a verdict)",
            figures=figures,
        )
    ratios.sort(key=lambda r: r.value, reverse=True)
    fired: list[tuple[_Ratio, str]] = []
    cube = [r for r in ratios if r.core != "vector"]
    vector = [r for r in ratios if r.core != "cube"]
    for r in cube:
        if r.pipe == "mac" and r.value > CUBE_MAC:
            fired.append((r, f"{r.column} {r.value:.3g} > {CUBE_MAC} (cube rule)"))
        elif r.pipe == "mte2" and r.value > CUBE_MTE2:
            fired.append((r, f"{r.column} {r.value:.3g} > {CUBE_MTE2} (cube rule)"))
    for core in dict.fromkeys(r.core for r in vector):  # first seen: a stable order
        side = [r for r in vector if r.core == core and r.pipe in ("vec", "mte2", "mte3")]
        for r in side:
            if r.value > VECTOR_PIPE and all(r is not f for f, _ in fired):
                fired.append((r, f"{r.column} {r.value:.3g} > {VECTOR_PIPE} (vector rule)"))
        total = sum(r.value for r in side)
        if side and total > VECTOR_TOTAL and not any(f in side for f, _ in fired):
            names = " + ".join(r.column for r in side)
            fired.append((side[0], f"{names} = {total:.3g} > {VECTOR_TOTAL} (vector rule)"))
    for r in ratios:
        if r.pipe in ("scalar", "mte1", "fixpipe") and r.value > OTHER_PIPE:
            fired.append((r, f"{r.column} {r.value:.3g} > {OTHER_PIPE} (other pipes)"))
    all_ratios = tuple((r.column, r.value) for r in ratios)
    if fired:
        top = max(fired, key=lambda f: f[0].value)[0]
        return Verdict(
            VerdictKind.BOUND,
            top.pipe,
            top.core,
            top.column,
            top.value,
            "; ".join(reason for _, reason in fired),
            all_ratios,
        )
    top = ratios[0]
    busiest = f"busiest pipe: {top.column} {top.value:.3g}"
    if duration_us is not None and duration_us > LATENCY_US and top.value <= SATURATED:
        reason = (
            f"median task {duration_us:.3g} us > {LATENCY_US:g} us, no ratio above {SATURATED} ({busiest})"
        )
        return Verdict(VerdictKind.LATENCY, top.pipe, top.core, top.column, top.value, reason, all_ratios)
    if duration_us is None or duration_us <= LATENCY_US:
        shown = "unknown" if duration_us is None else f"{duration_us:.3g} us <= {LATENCY_US:g} us"
        reason = f"no pipe rule fired ({busiest}); median task {shown}"
    else:
        reason = f"no pipe rule fired ({busiest}, above {SATURATED}: not latency-bound)"
    return Verdict(VerdictKind.NOT_BOUND, top.pipe, top.core, top.column, top.value, reason, all_ratios)
