"""`make bench`: run every scenario, print a table, write bench/out/results.json.

`python -m bench --quick` runs each scenario at a tenth of its size;
`python -m bench --markdown` prints the latest run's table for the README.
"""

from __future__ import annotations

import asyncio
import json
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path

from bench import memory, messages, runtime, stores, strategies
from bench.harness import Result

OUT = Path(__file__).parent / "out" / "results.json"


async def collect(quick: bool) -> list[Result]:
    scale = 10 if quick else 1
    results = []
    results += await runtime.agent_loop(20_000 // scale)
    results.append(await runtime.generator_loop(2_000 // scale))
    results += await runtime.routing(20_000 // scale)
    results += await runtime.queue_and_pool(100_000 // scale)
    results += await runtime.saving_and_branching(max(1, 10 // scale))
    results += await runtime.turn_costs(20_000 // scale)  # last: see its docstring
    results += await messages.token_queue(20_000 // scale)
    results += await strategies.strategies(3_000 // scale, 100_000 // scale)
    results += await stores.stores(scale)
    results += await memory.selection_and_search(scale)
    return results


def table(results: list[Result]) -> str:
    rows = [f"{'scenario':<40} {'ours':>10} {'floor':>10} {'ratio':>7} {'target':>7}"]
    for r in results:
        target = "-" if r.target is None else f"<={r.target:g}"
        mark = "" if r.met is None else ("  ok" if r.met else "  MISSED")
        rows.append(
            f"{r.name:<40} {_ns(r.ours_ns):>10} {_ns(r.floor_ns):>10} "
            f"{r.ratio:>6.1f}x {target:>7}{mark}"
        )
    return "\n".join(rows)


def _ns(value: float) -> str:
    return f"{value / 1e6:.2f} ms" if value >= 1e6 else f"{value:,.0f} ns"


def markdown(results: list[Result]) -> str:
    """The table as the README shows it."""
    rows = ["| scenario | ours | floor | ratio | target |", "|---|---:|---:|---:|---|"]
    for r in results:
        target = "-" if r.target is None else f"≤{r.target:g} {'✓' if r.met else 'missed'}"
        rows.append(
            f"| {r.name} | {_ns(r.ours_ns)} | {_ns(r.floor_ns)} | {r.ratio:.1f}x | {target} |"
        )
    return "\n".join(rows)


def saved_results() -> list[Result]:
    """The results of the latest run, read back from `OUT`."""
    saved = json.loads(OUT.read_text())
    return [
        Result(r["scenario"], r["ours_ns"], r["floor_ns"], r["target"]) for r in saved["results"]
    ]


def main() -> None:
    if "--markdown" in sys.argv:  # the latest run's table, for the README
        print(markdown(saved_results()))
        return
    quick = "--quick" in sys.argv
    results = asyncio.run(collect(quick))
    print(table(results))
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(
        json.dumps(
            {
                "date": datetime.now(UTC).isoformat(timespec="seconds"),
                "python": platform.python_version(),
                "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}",
                "results": [
                    {
                        "scenario": r.name,
                        "ours_ns": r.ours_ns,
                        "floor_ns": r.floor_ns,
                        "ratio": r.ratio,
                        "target": r.target,
                    }
                    for r in results
                ],
            },
            indent=2,
        )
    )
    print(f"\nwrote {OUT.relative_to(Path.cwd()) if OUT.is_relative_to(Path.cwd()) else OUT}")


if __name__ == "__main__":
    main()
