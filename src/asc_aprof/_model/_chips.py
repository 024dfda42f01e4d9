"""The chips' peaks: what a kernel's figures are a fraction of (see docs/speed_of_light.md).

Every entry names its public source. Where an entry gives a *rate* (bytes or operations per
cycle and core), the chip-wide peak is derived: ``rate x cores x clock``, with the cores and the
clock of the run itself when its ``info.json`` records them (``ai_core_num``, ``aiv_num``,
``aic_frequency``), else the entry's. Figures no public source gives are None, and the figures
that need them are left out (never guessed).

Rates common to a family:

- cube: 16 x 16 x 16 multiply-adds a cycle on FP16 (``cube_m/n/k_size`` of CANN's platform
  files), 2 operations each: 8,192 FP16 operations per cycle and AI Core; the real exporter's
  ``cube_fops`` counts them so (``mac_fp16_ratio x cycles x 16 x 16 x 16 x 2``);
- vector: 128 FP16 lanes a cycle (``vec_calc_size``); the exporter's ``vector_fops`` counts at
  most 128 operations per cycle (``vec_fp16_128lane_ratio x cycles x 128``);
- global memory and L2: ``ddr_rate`` and ``l2_rate`` of ``[AICoreMemoryRates]``, bytes per cycle
  and AI Core, as CANN's own tiling cost model uses them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Final

from ._errors import InvalidArgumentError

#: FP16 operations per cycle of one AI Core's cube unit (16 x 16 x 16 multiply-adds, 2 each).
CUBE_FP16_OPS_PER_CYCLE: Final = 16 * 16 * 16 * 2
#: FP16 operations per cycle of one vector unit (128 lanes).
VECTOR_FP16_OPS_PER_CYCLE: Final = 128

_INI_910B3: Final = (
    "CANN platform_config/Ascend910B3.ini ([SoCInfo] ai_core_cnt=20, vector_core_cnt=40; "
    "[AICoreSpec] cube_freq=1800; [AICoreMemoryRates] ddr_rate=32, l2_rate=110), public copy: "
    "https://github.com/nihaopeng/AscendUsage/blob/d7a33818ed20f6476e7bead9e66f5cd6e13a2338/Ascend910B3.ini"
)


@dataclasses.dataclass(frozen=True, slots=True)
class ChipSpec:
    """One chip's peaks, per core and cycle, with where each comes from.

    :ivar name: the SoC name CANN uses (``Ascend910B3``)
    :ivar platform: ``info.json``'s ``platform_version`` of the family (``5`` for 910B), or None
    :ivar cube_cores: AI Cores (cube cores on split chips), None where no source gives them
    :ivar vector_cores: vector cores (``aiv_num``; on a chip without split cores, the AI Cores)
    :ivar mhz: the AI Core clock (``cube_freq``)
    :ivar gm_bytes_per_cycle: global memory (HBM/DDR) bytes per cycle and AI Core (``ddr_rate``)
    :ivar l2_bytes_per_cycle: L2 bytes per cycle and AI Core (``l2_rate``)
    :ivar source: where the figures come from (a public address, or the run it was read from)
    """

    name: str
    platform: str | None
    cube_cores: int | None
    vector_cores: int | None
    mhz: float | None
    gm_bytes_per_cycle: float | None
    l2_bytes_per_cycle: float | None
    source: str
    cube_ops_per_cycle: int = CUBE_FP16_OPS_PER_CYCLE
    vector_ops_per_cycle: int = VECTOR_FP16_OPS_PER_CYCLE

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


#: The chips asc-aprof knows the peaks of, by SoC name (docs/speed_of_light.md lists the sources).
CHIP_TABLE: Final[Mapping[str, ChipSpec]] = {
    spec.name: spec
    for spec in (
        ChipSpec("Ascend910B3", "5", 20, 40, 1800.0, 32.0, 110.0, _INI_910B3),
        ChipSpec(
            "Ascend910B1",
            "5",
            24,
            48,
            1850.0,
            32.0,
            110.0,
            "CANN platform_config/Ascend910B1.ini as quoted in public tests of CANN tooling "
            "(cube_core_cnt=24, vector_core_cnt=48, cube_freq=1850, ddr_rate=32, l2_rate=110); "
            "not cross-checked against a second source",
        ),
        ChipSpec(
            "Ascend910B4",
            "5",
            20,
            40,
            1500.0,
            32.0,
            None,
            "CANN platform_config/Ascend910B4.ini as quoted in public tests of CANN tooling "
            "(ai_core_cnt=20, vector_core_cnt=40, cube_freq=1500, ddr_rate=32; no l2_rate quoted)",
        ),
        ChipSpec(
            "Ascend310B",
            "7",
            1,
            1,
            1250.0,
            None,
            None,
            "info.json of public runs on an Ascend 310B (ai_core_num=1, aiv_num=1, "
            "aic_frequency=1250; github.com/hansheng1001/AscendCContest, see reference/real_runs); no "
            "public memory rate",
        ),
        ChipSpec(
            "Ascend310P3",
            None,
            8,
            7,
            1060.0,
            17.0,
            114.0,
            "CANN's platform-info unit test of the Ascend710 (310P) configuration (ai_core_cnt=8, "
            "vector_core_cnt=7, cube_freq=1060, ddr_rate=17, l2_rate=114), in the public CANN "
            "graph-engine sources",
        ),
    )
}

#: The entry a run of each platform falls back on when it records no SoC name: the family's
#: first public entry (its per-cycle rates are the family's; cores and clock come from the run).
PLATFORM_DEFAULT: Final = {"5": "Ascend910B3", "7": "Ascend310B"}


def chip_spec(name: str) -> ChipSpec:
    """The table entry of *name* (a SoC name, any case, with or without ``Ascend``; or a
    ``platform_version`` such as ``"5"``).

    :raises InvalidArgumentError: an unknown chip, listing the known ones
    """
    key = name.replace(" ", "").lower()
    for spec in CHIP_TABLE.values():
        if key in (spec.name.lower(), spec.name.lower().removeprefix("ascend")):
            return spec
    default = PLATFORM_DEFAULT.get(name)
    if default is not None:
        return CHIP_TABLE[default]
    raise InvalidArgumentError(
        f"no peaks known for chip {name!r}; give one of {', '.join(CHIP_TABLE)} (or a platform: "
        f"{', '.join(PLATFORM_DEFAULT)})"
    )


def rated_aic_mhz(device_info: Mapping[str, object]) -> float | None:
    """The AI Core clock (MHz) one ``DeviceInfo`` entry of a run's ``info.json`` records
    (``aic_frequency``, a number or its text): a positive finite number, else None.

    The one reader of that fact: :attr:`RunInfo.core_mhz` (the speed-of-light figures' clock),
    the raw reader's rated clock (``ClockTable.rated_mhz``: the clock before a device's first clock
    row) and the time of its PMU cycles all take it from here (docs/speed_of_light.md).
    """
    value = device_info.get("aic_frequency")
    if isinstance(value, bool):
        return None
    try:
        mhz = float(str(value))
    except ValueError:
        return None
    return mhz if math.isfinite(mhz) and mhz > 0 else None
