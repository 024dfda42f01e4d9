"""``write_report``: the public entry to the HTML report (plotly is imported only when called)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._model._errors import InvalidArgumentError
from ._report_model import ReportModel, Slice, Source, Verdict, bound_verdict_text, build_model, slices_of

if TYPE_CHECKING:
    from .._profilers._async import SweepItem

Sources = Iterable["Source | SweepItem[Any]"]


def model_of(
    sources: Sources | Mapping[str, Sources],
    *,
    compare: bool | None = None,
    title: str | None = None,
    skip: int = 0,
    threshold: float = 5.0,
    verdict: Verdict | None = bound_verdict_text,
    cases: Mapping[tuple[str, int | None], str] | None = None,
) -> ReportModel:
    """What :func:`write_report` shows, without drawing it (see :mod:`asc_aprof._outputs._report_model`)."""
    if skip < 0:
        raise InvalidArgumentError(f"skip must be >= 0, got skip={skip}")
    groups: list[tuple[str | None, Sequence[Slice]]]
    if isinstance(sources, Mapping):
        groups = [
            (str(label), slices_of(str(label), items, skip=skip, cases=cases))
            for label, items in sources.items()
        ]
    else:
        groups = [(None, slices_of(None, sources, skip=skip, cases=cases))]
    if compare is None:
        compare = isinstance(sources, Mapping) and len(groups) == 2
    return build_model(groups, compare=compare, title=title, threshold=threshold, skip=skip, verdict=verdict)


def write_report(
    sources: Sources | Mapping[str, Sources],
    path: str | os.PathLike[str],
    *,
    compare: bool | None = None,
    title: str | None = None,
    skip: int = 0,
    threshold: float = 5.0,
    verdict: Verdict | None = bound_verdict_text,
) -> Path:
    """Write a self-contained HTML report (opens offline; needs the ``report`` extra: plotly).

    :param sources: results (:class:`ProfilingResult`; parsed with ``counters=True``, their
        counters), timelines (:func:`read_timeline`: adds the timeline overview and the counters) or
        sweep items, labelled by case where they say
        so; or a mapping of input label -> such sources (two inputs are compared, the first as
        the base)
    :param compare: compare the two inputs of a mapping (default: when there are exactly two)
    :param skip: leading samples of each kernel dropped per run and device (warm-up)
    :param threshold: a significant slowdown beyond this many percent is a regression
    :param verdict: ``verdict(counter_medians, median_us)``: the text shown as a kernel's bound
        verdict (default: :func:`bound_verdict`'s label and reason, by :data:`VERDICT_RULE`, in
        roofline terms where the run says which chip; None: no verdict shown, in the header and
        the roofline section neither). The roofline section (docs/speed_of_light.md) draws the
        kernels against their chip's peaks where the inputs have counters and a chip
    :raises UsageError: when plotly is missing, there is no task, or *compare* lacks two inputs
    :return: the path written
    """
    model = model_of(sources, compare=compare, title=title, skip=skip, threshold=threshold, verdict=verdict)
    from ._report_html import write_html

    return write_html(model, path)
