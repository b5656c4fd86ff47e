"""Charts drawn on the server as inline SVG: no JavaScript, no library, no network.

`stacked_bars` draws one bar per model call (or per bucket of calls when
there are more than fit), each split into parts; `bars_against` draws a
size per call against a horizontal budget line. Each bar carries a `<title>`,
which browsers show as a tooltip.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from pygents_ctx.cli.viewer._html import esc, number

__all__ = ["Series", "bars_against", "stacked_bars"]

_WIDTH: Final = 900
_HEIGHT: Final = 260
_LEFT: Final = 64  # room for the y axis labels
_BOTTOM: Final = 28
_TOP: Final = 12
_STEPS: Final = (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10)  # where an axis may end, times 10^n
_MOST_BARS: Final = 240  # more calls than this are summed in buckets


@dataclass(frozen=True, slots=True)
class Series:
    """One part of each bar: its name, its colour, and its value per call."""

    name: str
    colour: str
    values: Sequence[int]


def _nice_top(value: int) -> int:
    """The round number at or above `value` the y axis ends at (1, 1.5, 2, 2.5, ... times 10^n).

    Examples:
        >>> _nice_top(2_050), _nice_top(7), _nice_top(0)
        (2500, 8, 1)
    """
    if value <= 0:
        return 1
    power: int = 10 ** math.floor(math.log10(value))
    return next(math.ceil(step * power) for step in _STEPS if step * power >= value)


def _buckets(count: int) -> list[range]:
    """The calls each bar stands for: one each, or equal runs when there are too many."""
    size = max(1, math.ceil(count / _MOST_BARS))
    return [range(start, min(start + size, count)) for start in range(0, count, size)]


def _bucket_name(labels: Sequence[str], bucket: range) -> str:
    """What a bar's tooltip calls the calls it stands for: the call's label, or their range."""
    return (
        labels[bucket[0]] if len(bucket) == 1 else f"calls {bucket[0] + 1}&ndash;{bucket[-1] + 1}"
    )


def _frame(top: int, label: str, count: int) -> list[str]:
    plot_h = _HEIGHT - _TOP - _BOTTOM
    parts = []
    for step in range(5):
        value = top * step // 4
        y = _TOP + plot_h - plot_h * step / 4
        parts.append(
            f'<line x1="{_LEFT}" x2="{_WIDTH}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e4e7ec"/>'
            f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11" '
            f'fill="#667085">{number(value)}</text>'
        )
    parts.append(
        f'<text x="{_LEFT}" y="{_HEIGHT - 8}" font-size="11" fill="#667085">call 1</text>'
        f'<text x="{_WIDTH}" y="{_HEIGHT - 8}" font-size="11" fill="#667085" '
        f'text-anchor="end">call {number(count)}</text>'
        f'<text x="{(_LEFT + _WIDTH) / 2}" y="{_HEIGHT - 8}" font-size="11" fill="#667085" '
        f'text-anchor="middle">{esc(label)}</text>'
    )
    return parts


def _svg(title: str, parts: list[str]) -> str:
    return (
        f'<svg class=plot role=img aria-label="{esc(title)}" viewBox="0 0 {_WIDTH} {_HEIGHT}" '
        f'width="100%" preserveAspectRatio="xMinYMin meet" xmlns="http://www.w3.org/2000/svg">'
        f"<title>{esc(title)}</title>{''.join(parts)}</svg>"
    )


def _legend(series: Sequence[tuple[str, str]]) -> str:
    return (
        "<div class=legend>"
        + "".join(
            f'<span><i style="background:{colour}"></i>{esc(name)}</span>'
            for name, colour in series
        )
        + "</div>"
    )


def stacked_bars(title: str, series: Sequence[Series], labels: Sequence[str]) -> str:
    """Bars stacked from `series` (bottom first), one per call; `labels` name each call."""
    count = len(labels)
    buckets = _buckets(count)
    sums = [[sum(part.values[i] for i in bucket) for bucket in buckets] for part in series]
    top = _nice_top(max((sum(column) for column in zip(*sums, strict=True)), default=0))
    plot_w, plot_h = _WIDTH - _LEFT, _HEIGHT - _TOP - _BOTTOM
    slot = plot_w / max(len(buckets), 1)
    parts = _frame(
        top,
        "tokens per model call"
        + ("" if len(buckets) == count else f" (each bar sums {len(buckets[0])})"),
        count,
    )
    for column, bucket in enumerate(buckets):
        x = _LEFT + column * slot + slot * 0.1
        base = float(_TOP + plot_h)
        what = _bucket_name(labels, bucket)
        tip = f"{what}: " + ", ".join(
            f"{part.name} {number(sums[index][column])}" for index, part in enumerate(series)
        )
        for index, part in enumerate(series):
            height = plot_h * sums[index][column] / top
            if height <= 0:
                continue
            base -= height
            parts.append(
                f'<rect class=bar x="{x:.1f}" y="{base:.1f}" width="{max(slot * 0.8, 1):.1f}" '
                f'height="{height:.1f}" fill="{part.colour}"><title>{esc(tip)}</title></rect>'
            )
    return _svg(title, parts) + _legend([(part.name, part.colour) for part in series])


def bars_against(
    title: str, values: Sequence[int], labels: Sequence[str], budget: int | None, colour: str
) -> str:
    """One bar per call (the largest of each bucket), and the `budget` as a dashed red line."""
    count = len(values)
    buckets = _buckets(count)
    heights = [max(values[i] for i in bucket) for bucket in buckets]
    top = _nice_top(max([*heights, budget or 0], default=0))
    plot_w, plot_h = _WIDTH - _LEFT, _HEIGHT - _TOP - _BOTTOM
    slot = plot_w / max(len(buckets), 1)
    parts = _frame(top, "window tokens per model call", count)
    for column, bucket in enumerate(buckets):
        height = plot_h * heights[column] / top
        x = _LEFT + column * slot + slot * 0.1
        what = _bucket_name(labels, bucket)
        over = budget is not None and heights[column] > budget
        parts.append(
            f'<rect class=bar x="{x:.1f}" y="{_TOP + plot_h - height:.1f}" '
            f'width="{max(slot * 0.8, 1):.1f}" height="{height:.1f}" '
            f'fill="{"#d92d20" if over else colour}"><title>{esc(what)}: '
            f"{number(heights[column])} tokens</title></rect>"
        )
    legend = [("window", colour)]
    if budget is not None:
        y = _TOP + plot_h - plot_h * budget / top
        parts.append(
            f'<line class=budget x1="{_LEFT}" x2="{_WIDTH}" y1="{y:.1f}" y2="{y:.1f}" '
            f'stroke="#d92d20" stroke-width="2" stroke-dasharray="6 4"><title>budget '
            f"{number(budget)} tokens</title></line>"
        )
        legend.append((f"budget {number(budget)}", "#d92d20"))
    return _svg(title, parts) + _legend(legend)
