"""Speed of light: how far a kernel is from the chip's peak, per resource, from its counter medians.

Theory of operation
-------------------
Every PMU group's cells are per *core-time*: a ratio is busy cycles over the kernel's cycles
summed over its blocks (``*total_cycles``), a bandwidth (the exporter's GB/s, which divides by
``2**33``: bits to GiB) is bytes over those cycles at the core clock. So, with ``C`` the cycles of
a side (``aic_`` cube, ``aiv_`` vector, unprefixed on a single-core chip), ``f`` the clock, ``n``
the side's cores and ``T`` the kernel's median duration, the side kept ``C / (f T)`` cores busy on
average, and:

- a **pipe** (``mac`` = ``cube``, ``vec`` = ``vector``, ``scalar``, ``mte1``, ``mte2``, ``mte3``,
  ``fixpipe``) with ratio ``r`` used ``r C / (n f T)`` of what all the side's pipes could give
  (a pipe busy counts as its peak: an upper bound of its throughput); where both sides have the
  pipe, the larger fraction is kept;
- a **memory level** (``gm`` from ``main_mem_*``, ``l2``, ``ub``, ``l1``, ``l0a``, ``l0b``,
  ``l0c``) moved ``bw x 2**30 x C / f`` bytes, read and write summed over the sides; achieved
  bytes per second over ``T``, a fraction of the peak where the chip table has it
  (``gm`` and ``l2``: the per-cycle rate x AI Cores x clock);
- **compute** from ArithmeticUtilization: ``cube_fops`` / ``vector_fops`` operations over ``T``,
  a fraction of the cube's (8,192 FP16 a cycle and core) or the vector's (128) peak; these
  replace the pipe-ratio figure of ``cube`` / ``vector`` when present (they count operations,
  not busy cycles);
- **arithmetic intensity**: those operations over the GM bytes, when both groups were collected.

The cores and the clock are the run's own (``info.json``) where it records them, else the chip
table's (:mod:`asc_aprof._model._chips`). A kernel whose side has no cycles (a vector kernel's
``aic_`` cells are 0) contributes nothing from that side.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from typing import Any, Final

from .._model._chips import CHIP_TABLE, PLATFORM_DEFAULT, ChipSpec

#: Bytes per exporter "GB/s" x second (the exporter divides bits by 2**33: GiB).
GIB: Final = 2.0**30
#: Resources that are memory (a roof of bandwidth); the others are compute pipes.
MEMORY_RESOURCES: Final = frozenset({"gm", "l2", "ub", "l1", "l0a", "l0b", "l0c", "mte1", "mte2", "mte3"})
_PIPE: Final = re.compile(r"^(?:(aic|aiv)_)?(vec|mac|scalar|mte1|mte2|mte3|fixpipe)(?:_exe)?_ratio$")
_PIPE_NAMES: Final = {"mac": "cube", "vec": "vector"}
_BANDWIDTH: Final = re.compile(
    r"^(?:(aic|aiv)_)?(main_mem|l2|ub|l1|l0a|l0b|l0c)_(?:read|write)_bw(?:_[a-z]+)?\(GB/s\)$"
)
_LEVEL: Final = {"main_mem": "gm"}
_FOPS: Final = re.compile(r"^(?:(aic|aiv)_)?(cube|vector)_fops$")


@dataclasses.dataclass(frozen=True, slots=True)
class ChipFacts:
    """What the figures of one run are computed with: cores and clock (the run's where it has
    them), and the chip table's entry for the per-cycle rates (None: an unknown chip).

    :ivar from_run: the cores and the clock came from the run's ``info.json``
    """

    name: str
    platform: str | None
    cube_cores: int | None
    vector_cores: int | None
    mhz: float | None
    spec: ChipSpec | None
    from_run: bool

    @property
    def split(self) -> bool:
        """Cube and vector cores apart (``aic_`` / ``aiv_`` columns), as on the 910B."""
        return self.platform == "5" or (self.spec is not None and self.spec.platform == "5")

    def peaks(self) -> dict[str, float]:
        """Chip-wide peaks: operations per second (``cube``, ``vector``), bytes per second
        (``gm``, ``l2``), where the facts allow them."""
        out: dict[str, float] = {}
        if self.mhz is None:
            return out
        hz = self.mhz * 1e6
        spec = self.spec
        if self.cube_cores:
            ops = spec.cube_ops_per_cycle if spec else 16 * 16 * 16 * 2
            out["cube"] = ops * self.cube_cores * hz
        if self.vector_cores:
            ops = spec.vector_ops_per_cycle if spec else 128
            out["vector"] = ops * self.vector_cores * hz
        if spec is not None and self.cube_cores:
            if spec.gm_bytes_per_cycle:
                out["gm"] = spec.gm_bytes_per_cycle * self.cube_cores * hz
            if spec.l2_bytes_per_cycle:
                out["l2"] = spec.l2_bytes_per_cycle * self.cube_cores * hz
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "platform": self.platform,
            "cube_cores": self.cube_cores,
            "vector_cores": self.vector_cores,
            "mhz": self.mhz,
            "spec": None if self.spec is None else self.spec.name,
            "from_run": self.from_run,
        }


def chip_facts(
    *,
    platform: str | None = None,
    soc: str | None = None,
    ai_cores: int | None = None,
    vector_cores: int | None = None,
    mhz: float | None = None,
) -> ChipFacts | None:
    """The facts of a run: its own cores and clock, the table's entry for its SoC (*soc*) or
    its platform's family; None when nothing is known at all."""
    spec = CHIP_TABLE.get(soc or "") or CHIP_TABLE.get(PLATFORM_DEFAULT.get(platform or "", ""))
    if spec is None and ai_cores is None and mhz is None:
        return None
    from_run = ai_cores is not None and mhz is not None
    vector = vector_cores if vector_cores is not None else ai_cores
    return ChipFacts(
        name=spec.name if spec is not None and soc else (spec.name if spec else f"platform {platform}"),
        platform=platform if platform is not None else (spec.platform if spec else None),
        cube_cores=ai_cores if from_run else (spec.cube_cores if spec else ai_cores),
        vector_cores=vector if from_run else (spec.vector_cores if spec else vector),
        mhz=mhz if from_run else (spec.mhz if spec else mhz),
        spec=spec,
        from_run=from_run,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class SolFigures:
    """A kernel's figures against the chip's peaks (see the module docstring).

    :ivar fractions: resource -> fraction of its peak (0..1, may exceed 1 where the counters do)
    :ivar achieved: resource -> achieved operations per second (``cube``, ``vector`` from fops)
        or bytes per second (memory levels)
    :ivar peaks: resource -> the peak the fraction is of (same units), where known
    :ivar intensity: operations per GM byte, when both were measured
    :ivar flops: operations per second (cube + vector fops), when measured
    """

    fractions: Mapping[str, float]
    achieved: Mapping[str, float]
    peaks: Mapping[str, float]
    intensity: float | None = None
    flops: float | None = None

    @property
    def limiter(self) -> tuple[str, float] | None:
        """The resource with the largest fraction, and the fraction."""
        if not self.fractions:
            return None
        name = max(self.fractions, key=lambda k: self.fractions[k])
        return name, self.fractions[name]

    def to_dict(self) -> dict[str, Any]:
        return {
            "fractions": dict(self.fractions),
            "achieved": dict(self.achieved),
            "peaks": dict(self.peaks),
            "intensity": self.intensity,
            "flops": self.flops,
        }


def _side(prefix: str | None, chip: ChipFacts) -> str:
    if prefix == "aiv":
        return "aiv"
    if prefix == "aic":
        return "aic"
    return ""


def speed_of_light(
    counters: Mapping[str, float | None], duration_us: float | None, chip: ChipFacts | None
) -> SolFigures:
    """The figures of one kernel from its counter medians and median duration (one launch, µs).

    Empty (no fraction) without a chip, a clock or a duration, or without cycle counts.
    """
    empty = SolFigures({}, {}, {})
    if chip is None or chip.mhz is None or not duration_us or duration_us <= 0:
        return empty
    hz = chip.mhz * 1e6
    seconds = duration_us * 1e-6
    values = {k: v for k, v in counters.items() if v is not None and math.isfinite(v)}

    def cycles(side: str) -> float | None:
        value = values.get(f"{side}_total_cycles" if side else "total_cycles")
        return value if value else None

    def cores(side: str) -> int | None:
        if side == "aiv":
            return chip.vector_cores
        if side == "aic":
            return chip.cube_cores
        return chip.cube_cores

    peaks = chip.peaks()
    fractions: dict[str, float] = {}
    achieved: dict[str, float] = {}
    moved: dict[str, float] = {}
    ops: dict[str, float] = {}
    for name, value in values.items():
        if (match := _PIPE.match(name)) is not None:
            side = _side(match.group(1), chip)
            busy, count = cycles(side), cores(side)
            if busy is None or not count:
                continue
            resource = _PIPE_NAMES.get(match.group(2), match.group(2))
            fraction = value * busy / (count * hz * seconds)
            fractions[resource] = max(fraction, fractions.get(resource, 0.0))
        elif (match := _BANDWIDTH.match(name)) is not None:
            busy = cycles(_side(match.group(1), chip))
            if busy is None:
                continue
            level = _LEVEL.get(match.group(2), match.group(2))
            moved[level] = moved.get(level, 0.0) + value * GIB * busy / hz
        elif (match := _FOPS.match(name)) is not None and value > 0:
            ops[match.group(2)] = ops.get(match.group(2), 0.0) + value
    for level, total in moved.items():
        achieved[level] = total / seconds
        if level in peaks:
            fractions[level] = achieved[level] / peaks[level]
    for unit, total in ops.items():
        achieved[unit] = total / seconds
        if unit in peaks:
            fractions[unit] = achieved[unit] / peaks[unit]
    flops = sum(ops.values()) / seconds if ops else None
    gm = moved.get("gm")
    intensity = sum(ops.values()) / gm if ops and gm else None
    return SolFigures(
        fractions=dict(sorted(fractions.items(), key=lambda kv: -kv[1])),
        achieved=achieved,
        peaks={k: v for k, v in peaks.items() if k in fractions},
        intensity=intensity,
        flops=flops,
    )
