"""`make bench`: run every scenario, print a table, write bench/out/results.json.

`python -m bench --quick` runs each scenario at a tenth of its size;
`python -m bench --markdown` prints the latest run's table for guides/performance.md.
`python -m bench --peer` runs the head-to-head with pygents 0.7.0 instead (see
`bench/peer.py`), writing bench/out/peer.json; `--peer --markdown` prints it.
`python -m bench service [--sessions N --turns M --workers W --postgres]` load-tests
the served example instead (see `bench/service.py`), writing bench/out/service.json;
`python -m bench service --markdown` prints it.
`python -m bench context [--steps N --facts F --budget B --store KIND --quick ...]`
plays a long conversation through every context strategy instead (see
`bench/context.py`: facts kept, orphans, prompt-cache share, cost, build time),
writing bench/out/context.json and context.md.
`python -m bench tokens [--quick]` measures the token estimates against the exact
counts (see `bench/tokens.py`), writing bench/out/tokens.json; `python -m bench
tokens --markdown` prints it.
`python -m bench --scale` runs the vector stores at 100,000 x 384 beside numpy
and sqlite-vec (see `bench/scale.py`), writing bench/out/scale.json.
`python -m bench --peers` runs history and vectors beside the OpenAI Agents SDK's
sessions, axio-context-sqlite, langgraph-checkpoint-sqlite, numpy and sqlite-vec in
`bench/.peers` (see `bench/peers.py`), writing bench/out/peers.json; `--peers
--markdown` prints it.
`python -m bench --postgres` runs HNSW beside exact search at 200,000 vectors and
100,000 sessions beside an empty database (see `bench/postgres_scale.py`).
`python -m bench --forks` times a fork at message 50,000 of 100,000 and the
storage it adds, on SQLite and PostgreSQL (see `bench/forks.py`).
`python -m bench --checkpoints` times an agent's checkpoint and a rewind that
restores one, with queues of 10 and 1,000 messages, on memory, SQLite and
PostgreSQL (see `bench/checkpoints.py`), writing bench/out/checkpoints.json.
`python -m bench --search` times `ContextStore.search` over 100,000 archived
messages on SQLite and PostgreSQL, with recall@5 on planted facts (see
`bench/search.py`), writing bench/out/search.json.
`python -m bench --recall-forks` counts what `SemanticRecall` embeds for the first
search of a fork of an indexed 10,000-message session, and times it, on SQLite (see
`bench/recall_forks.py`), writing bench/out/recall_forks.json.
`python -m bench --owners` times `list_sessions(owner=...)` among 1,000,000 sessions
on SQLite and PostgreSQL (see `bench/owners.py`), writing bench/out/owners.json.
`python -m bench --memory` measures only peak memory (see `bench/footprint.py`),
which the full run also does last, writing bench/out/memory.json; `--memory
--markdown` prints it.
"""

from __future__ import annotations

import asyncio
import json
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path

from bench import (
    checkpoints,
    footprint,
    forks,
    graph,
    memory,
    messages,
    model,
    peer,
    peer_env,
    peers,
    peers_env,
    postgres_scale,
    recall_forks,
    runtime,
    scale,
    search,
    stores,
    strategies,
    tracing,
    viewer,
)
from bench.harness import Result
from bench.report import markdown, table

OUT = Path(__file__).parent / "out" / "results.json"
PEER_OUT = OUT.with_name("peer.json")
MEMORY_OUT = OUT.with_name("memory.json")
PEERS_OUT = OUT.with_name("peers.json")
MEMORY_STEPS = 3_000


async def collect(quick: bool) -> list[Result]:
    scale = 10 if quick else 1
    results = []
    results += await runtime.agent_loop(20_000 // scale)
    results += await runtime.argument_checks(20_000 // scale)
    results.append(await runtime.generator_loop(2_000 // scale))
    results += await runtime.routing(20_000 // scale)
    results += await runtime.queue_and_pool(100_000 // scale)
    results += await runtime.saving_and_branching(max(1, 10 // scale))
    results += await runtime.turn_costs(20_000 // scale)  # last: see its docstring
    results += await messages.token_queue(20_000 // scale)
    results += await strategies.strategies(3_000 // scale, 100_000 // scale)
    results += await stores.stores(scale)
    results += await memory.selection_and_search(scale)
    results += await graph.graph(scale)
    results += await model.model_loop(1_000 // scale)
    results += await model.model_loop_sdk(2 * model.SDK_TURNS)
    results += await viewer.viewer(scale)
    results += await tracing.tracing(1_000 // scale)
    return results


def saved_results() -> list[Result]:
    """The results of the latest run, read back from `OUT`."""
    saved = json.loads(OUT.read_text())
    return [
        Result(r["scenario"], r["ours_ns"], r["floor_ns"], r["target"], r.get("bound_ns"))
        for r in saved["results"]
    ]


def _about_this_run() -> dict[str, str]:
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}",
    }


def peer_table(rows: list[peer.Row], markdown: bool = False) -> str:
    """The head-to-head as a table, with the geometric mean of the speed-ups."""
    if markdown:
        lines = [
            "| scenario | pygents µs/op | pygents_ctx µs/op | speed-up |",
            "|---|---:|---:|---:|",
        ]
        lines += [
            f"| {r.name} | {r.peer_us:,.2f} | {r.ours_us:,.2f} | {r.speedup:.1f}x |" for r in rows
        ]
        lines.append(f"| **geometric mean** | | | **{peer.geometric_mean(rows):.1f}x** |")
        return "\n".join(lines)
    lines = [f"{'scenario':<46} {'pygents':>11} {'ours':>11} {'speed-up':>9}"]
    lines += [
        f"{r.name:<46} {r.peer_us:>8,.2f} µs {r.ours_us:>8,.2f} µs {r.speedup:>8.1f}x" for r in rows
    ]
    lines.append(f"{'geometric mean':<46} {'':>11} {'':>11} {peer.geometric_mean(rows):>8.1f}x")
    return "\n".join(lines)


def run_peer() -> int:
    """The head-to-head, here if pygents imports, else in the peer virtualenv."""
    if "--markdown" in sys.argv:
        saved = json.loads(PEER_OUT.read_text())
        rows = [peer.Row(r["scenario"], r["pygents_us"], r["ours_us"]) for r in saved["results"]]
        print(f"{saved['date']}, Python {saved['python']}, {saved['machine']}\n")
        print(peer_table(rows, markdown=True))
        return 0
    if not peer_env.has_peer():
        try:
            return peer_env.run_inside(sys.argv[1:])
        except peer_env.PeerUnavailable as exc:
            print(f"head-to-head skipped: {exc}")
            return 0
    import pygents

    import pygents_ctx

    rows = asyncio.run(peer.head_to_head(pygents, pygents_ctx))
    print(peer_table(rows))
    PEER_OUT.parent.mkdir(exist_ok=True)
    PEER_OUT.write_text(
        json.dumps(
            {
                **_about_this_run(),
                "geometric_mean": peer.geometric_mean(rows),
                "results": [
                    {"scenario": r.name, "pygents_us": r.peer_us, "ours_us": r.ours_us}
                    for r in rows
                ],
            },
            indent=2,
        )
    )
    return 0


def memory_table(rows: list[footprint.Memory], markdown: bool = False) -> str:
    """Peak memory as a table, in KB."""
    if markdown:
        lines = ["| measurement | memory |", "|---|---:|"]
        lines += [f"| {r.name} | {r.bytes / 1024:,.1f} KB |" for r in rows]
        return "\n".join(lines)
    return "\n".join(f"{r.name:<62} {r.bytes / 1024:>10,.1f} KB" for r in rows)


def run_memory(quick: bool) -> None:
    """Measure peak memory (a tenth of the steps when `quick`), print it, write `MEMORY_OUT`."""
    rows = asyncio.run(footprint.memory(MEMORY_STEPS // (10 if quick else 1)))
    print(memory_table(rows))
    MEMORY_OUT.parent.mkdir(exist_ok=True)
    MEMORY_OUT.write_text(
        json.dumps(
            {**_about_this_run(), "results": [{"name": r.name, "bytes": r.bytes} for r in rows]},
            indent=2,
        )
    )


def run_peers() -> int:
    """History and vectors beside the peers, in the peers virtualenv (made on first use)."""
    if "--markdown" not in sys.argv and not peers_env.has_peers():
        try:
            return peers_env.run_inside(sys.argv[1:])
        except peer_env.PeerUnavailable as exc:
            print(f"peers skipped: {exc}")
            return 0
    scale.run(_about_this_run(), peers.collect, PEERS_OUT)
    return 0


def main() -> None:
    if sys.argv[1:2] == ["service"]:  # its own options; imported only when asked for
        from bench import service

        sys.exit(service.main(sys.argv[2:]))
    if sys.argv[1:2] == ["context"]:
        from bench import context

        sys.exit(context.main(sys.argv[2:]))
    if sys.argv[1:2] == ["tokens"]:
        from bench import tokens

        sys.exit(tokens.main(sys.argv[2:]))
    if "--postgres" in sys.argv:
        postgres_scale.run(_about_this_run())
        return
    if "--forks" in sys.argv:
        forks.run(_about_this_run())
        return
    if "--checkpoints" in sys.argv:
        checkpoints.run(_about_this_run())
        return
    if "--recall-forks" in sys.argv:
        recall_forks.run(_about_this_run())
        return
    if "--search" in sys.argv:
        search.run(_about_this_run())
        return
    if "--owners" in sys.argv:
        from bench import owners

        owners.run(_about_this_run())
        return
    if "--peers" in sys.argv:
        sys.exit(run_peers())
    if "--scale" in sys.argv:
        scale.run(_about_this_run(), scale.collect, scale.OUT)
        return
    if "--peer" in sys.argv:
        sys.exit(run_peer())
    if "--memory" in sys.argv:
        if "--markdown" in sys.argv:
            saved = json.loads(MEMORY_OUT.read_text())
            print(f"{saved['date']}, Python {saved['python']}, {saved['machine']}\n")
            rows = [footprint.Memory(r["name"], r["bytes"]) for r in saved["results"]]
            print(memory_table(rows, markdown=True))
        else:
            run_memory("--quick" in sys.argv)
        return
    if "--markdown" in sys.argv:  # the latest run's table, for guides/performance.md
        print(markdown(saved_results()))
        return
    quick = "--quick" in sys.argv
    results = asyncio.run(collect(quick))
    print(table(results))
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(
        json.dumps(
            {
                **_about_this_run(),
                "results": [
                    {
                        "scenario": r.name,
                        "ours_ns": r.ours_ns,
                        "floor_ns": r.floor_ns,
                        "ratio": r.ratio,
                        "target": r.target,
                        "bound_ns": r.bound_ns,
                    }
                    for r in results
                ],
            },
            indent=2,
        )
    )
    print(f"\nwrote {OUT.relative_to(Path.cwd()) if OUT.is_relative_to(Path.cwd()) else OUT}\n")
    run_memory(quick)


if __name__ == "__main__":
    main()
