"""The bench's tables: the text one it prints and the markdown one guides/performance.md shows."""

from __future__ import annotations

from bench.harness import Result


def table(results: list[Result]) -> str:
    rows = [f"{'scenario':<40} {'ours':>10} {'floor':>10} {'ratio':>7} {'target':>7}"]
    for r in results:
        target = _target(r, "<=")
        mark = "" if r.met is None else ("  ok" if r.met else "  MISSED")
        rows.append(
            f"{r.name:<40} {_ns(r.ours_ns):>10} {_ns(r.floor_ns):>10} "
            f"{r.ratio:>6.1f}x {target:>7}{mark}"
        )
    return "\n".join(rows)


def _target(r: Result, at_most: str) -> str:
    if r.bound_ns is not None:
        return f"{at_most}{r.bound_ns / 1000:g} µs"
    return "-" if r.target is None else f"{at_most}{r.target:g}"


def _ns(value: float) -> str:
    return f"{value / 1e6:.2f} ms" if value >= 1e6 else f"{value:,.0f} ns"


def markdown(results: list[Result]) -> str:
    """The table as guides/performance.md shows it."""
    rows = ["| scenario | ours | floor | ratio | target |", "|---|---:|---:|---:|---|"]
    for r in results:
        target = "-" if r.met is None else f"{_target(r, '≤')} {'✓' if r.met else 'missed'}"
        rows.append(
            f"| {r.name} | {_ns(r.ours_ns)} | {_ns(r.floor_ns)} | {r.ratio:.1f}x | {target} |"
        )
    return "\n".join(rows)
