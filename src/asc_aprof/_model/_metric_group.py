"""A metric group as users give it (a member, a number, or msprof's name), as CANN takes it."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ._enums import METRIC_SPELLINGS, AicoreMetrics
from ._errors import InvalidArgumentError


def metric_group(value: AicoreMetrics | int | str) -> int:
    """The ``aclprofAicoreMetrics`` number of *value* (a member, a number, or a group's name).

    :raises InvalidArgumentError: an unknown name, listing the valid ones
    """
    if isinstance(value, str):
        try:
            return int(AicoreMetrics(value))  # type: ignore[arg-type]  # str goes to _missing_
        except ValueError:
            pass
    elif isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    raise InvalidArgumentError(f"metrics={value!r} is not a metric group; give one of: {METRIC_SPELLINGS}")


#: ``metrics=`` of bench: one group (as :func:`metric_group` takes it), ``"all"``, or several.
MetricsArg = AicoreMetrics | int | str | Sequence[AicoreMetrics | int | str]


@dataclasses.dataclass(frozen=True, slots=True)
class MetricSelection:
    """Several metric groups for one bench call (DECISIONS 26).

    :ivar groups: the groups asked for, in order, without repeats (empty with *every_supported*)
    :ivar every_supported: ``"all"``: every group the chip supports, known once a run says the chip
    """

    groups: tuple[int, ...]
    every_supported: bool


def metric_selection(value: MetricsArg) -> MetricSelection | None:
    """*value* as several groups, or None for one group (one collection with it, as ever).

    :raises InvalidArgumentError: an unknown group, or an empty list
    """
    if isinstance(value, str) and value.strip().lower() == "all":
        return MetricSelection((), True)
    if isinstance(value, str | int):
        metric_group(value)  # one group: checked here, collected as before
        return None
    groups = tuple(dict.fromkeys(metric_group(v) for v in value))
    if not groups:
        raise InvalidArgumentError("metrics=[] names no group; give 'all', one group, or a list of groups")
    return MetricSelection(groups, False)
