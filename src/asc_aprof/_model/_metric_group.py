"""A metric group as users give it (a member, a number, or msprof's name), as CANN takes it."""

from __future__ import annotations

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
