"""The AI Core clock of a device's tasks, as a window's shared result carries it (DECISIONS 25)."""

from __future__ import annotations

import dataclasses
import math


@dataclasses.dataclass(frozen=True, slots=True)
class TaskClocks:
    """The AI Core clock at the start of each of a device's tasks, and the device's rated clock.

    :ivar mhz: one clock (MHz) per task, aligned with the device's tasks; NaN where unknown
    :ivar rated_mhz: the rated AI Core clock, the run's ``info.json`` ``aic_frequency`` (the
        clock before the first row of the run's clock data); NaN where unknown
    """

    mhz: tuple[float, ...]
    rated_mhz: float = math.nan

    def __post_init__(self) -> None:
        if not (math.isnan(self.rated_mhz) or self.rated_mhz > 0):
            raise ValueError(f"rated_mhz must be > 0 MHz or NaN, got {self.rated_mhz!r}")
