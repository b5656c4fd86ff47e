"""`GraphStore.neighbors(depth=2)` on a graph of 100,000 relationships.

The graph: 20,000 entities with a small property each, 100,000 relationships
of three types between random pairs (about 10 per entity), so a depth-2 walk
reaches around a hundred entities. Each operation walks from a different
start.

The floor is a pure-Python breadth-first walk over prebuilt adjacency dicts
(entity -> its relationships): it finds the same distances and the same
relationships, but returns ids, with no properties decoded, no checks and no
`Subgraph` built. The in-memory store adds those; the SQLite store also runs
the walk on its worker thread, one query a hop, and reads the entities and
relationships it found. `python -m bench.graph` runs only these rows
(`--quick`: a tenth of the graph).
"""

from __future__ import annotations

import asyncio
import random
import sys
import tempfile
from pathlib import Path

from bench.harness import Result, Step, compare
from bench.report import table
from pygents_ctx.context.stores import connect
from pygents_ctx.memory import (
    Entity,
    GraphStore,
    InMemoryGraphStore,
    Relationship,
    SQLiteGraphStore,
)

_Key = tuple[str, str, str]


def _graph(entities: int, relationships: int) -> tuple[list[Entity], list[Relationship]]:
    rng = random.Random(9)
    nodes = [Entity(f"e{i}", "thing", {"n": i}) for i in range(entities)]
    keys: set[_Key] = set()
    while len(keys) < relationships:
        source, target = rng.randrange(entities), rng.randrange(entities)
        if source != target:
            keys.add((f"e{source}", f"e{target}", rng.choice(("cites", "knows", "part_of"))))
    return nodes, [Relationship(*key) for key in sorted(keys)]


def _adjacency(relationships: list[Relationship]) -> dict[str, list[tuple[str, _Key]]]:
    adjacent: dict[str, list[tuple[str, _Key]]] = {}
    for r in relationships:
        adjacent.setdefault(r.source, []).append((r.target, r.key))
        adjacent.setdefault(r.target, []).append((r.source, r.key))
    return adjacent


def _floor_walk(
    adjacent: dict[str, list[tuple[str, _Key]]], start: str, depth: int
) -> tuple[dict[str, int], set[_Key]]:
    distances, walked, frontier = {start: 0}, set(), [start]
    for hop in range(1, depth + 1):
        reached = []
        for node in frontier:
            for other, key in adjacent.get(node, ()):
                walked.add(key)
                if other not in distances:
                    distances[other] = hop
                    reached.append(other)
        frontier = reached
    return distances, walked


async def _fill(graph: GraphStore, nodes: list[Entity], edges: list[Relationship]) -> None:
    for start in range(0, len(nodes), 5000):
        await graph.upsert_entities(nodes[start : start + 5000])
    for start in range(0, len(edges), 5000):
        await graph.upsert_relationships(edges[start : start + 5000])


async def graph(scale: int = 1) -> list[Result]:
    """Time `neighbors(depth=2)`; `scale` divides the graph and the walks (10 for --quick)."""
    nodes, edges = _graph(20_000 // scale, 100_000 // scale)
    adjacent = _adjacency(edges)
    starts = [node.id for node in random.Random(2).sample(nodes, 400 // scale)]
    label = f"{len(edges) // 1000}k" if len(edges) >= 1000 else str(len(edges))

    async def floor(n: int) -> None:
        for start in starts[:n]:
            _floor_walk(adjacent, start, 2)

    def ours_for(store: GraphStore) -> Step:
        async def ours(n: int) -> None:
            for start in starts[:n]:
                await store.neighbors(start, 2)

        return ours

    in_memory = InMemoryGraphStore()
    await _fill(in_memory, nodes, edges)
    results = [
        await compare(
            f"graph neighbors depth 2, {label} edges, memory",
            ours_for(in_memory),
            floor,
            len(starts),
            None,
        )
    ]
    with tempfile.TemporaryDirectory() as directory:
        async with connect(Path(directory) / "graph.db") as conn:
            stored = SQLiteGraphStore(conn)
            await _fill(stored, nodes, edges)
            results.append(
                await compare(
                    f"graph neighbors depth 2, {label} edges, SQLite",
                    ours_for(stored),
                    floor,
                    len(starts) // 4,
                    None,
                )
            )
    return results


def main() -> None:
    scale = 10 if "--quick" in sys.argv else 1
    print(table(asyncio.run(graph(scale))))


if __name__ == "__main__":
    main()
