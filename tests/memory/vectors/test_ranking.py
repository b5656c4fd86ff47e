"""Every backend's search against a brute-force oracle: random vectors, metadata, filters."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pygents_ctx import VectorDocument
from pygents_ctx.memory._table import single_precision_norm
from tests import postgres_server
from tests.memory.oracles import assert_top_k, cosine_scores, float32
from tests.memory.vectors.conftest import BACKENDS, TOLERANCE, open_store

DIMENSION = 4
components = st.one_of(
    st.integers(-2, 2).map(float),  # exact ties and duplicates are common
    st.floats(-100, 100, allow_nan=False, allow_infinity=False, width=32),
)
vectors = st.lists(components, min_size=DIMENSION, max_size=DIMENSION).filter(
    lambda v: any(float32(v))
)
labels = st.sampled_from(["a", "b"]) | st.none() | st.integers(0, 1)
# Stored vectors keep to lengths that every backend can compute (pgvector sums
# squares in 32-bit floats and refuses the others); queries may be any length.
stored_vectors = vectors.filter(lambda v: single_precision_norm(float32(v)))
documents = st.dictionaries(
    st.text("abcdéB", min_size=1, max_size=3),
    st.tuples(stored_vectors, st.dictionaries(st.sampled_from(["label", "n"]), labels, max_size=2)),
    max_size=25,
)
filters = st.none() | st.dictionaries(st.sampled_from(["label", "n"]), labels, min_size=1)


def matches(metadata: dict[str, Any], conditions: dict[str, Any]) -> bool:
    """JSON equality of each condition's value (booleans are not numbers)."""
    for key, value in conditions.items():
        if key not in metadata:
            return False
        held = metadata[key]
        if isinstance(held, bool) != isinstance(value, bool) or held != value:
            return False
        if (held is None) != (value is None):
            return False
    return True


@pytest.mark.parametrize("backend", BACKENDS)
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(docs=documents, query=vectors, k=st.integers(1, 8), conditions=filters)
def test_search_ranks_like_a_brute_force_oracle(
    backend: str,
    postgres: postgres_server.PostgresServer,
    docs: dict[str, tuple[list[float], dict[str, Any]]],
    query: list[float],
    k: int,
    conditions: dict[str, Any] | None,
) -> None:
    async def run() -> list[tuple[str, float]]:
        async with open_store(backend, dsn=postgres.dsn, empty=False) as store:
            name = f"ranking-{uuid.uuid4().hex}"
            await store.create_collection(name, DIMENSION)
            try:
                await store.upsert(
                    name, [VectorDocument(i, i, meta, v) for i, (v, meta) in docs.items()]
                )
                found = await store.search(name, query, k=k, filter=conditions)
            finally:
                await store.delete_collection(name)
        return [(r.id, r.score) for r in found]

    got = asyncio.run(run())

    kept = {i: v for i, (v, meta) in docs.items() if matches(meta, conditions or {})}
    assert_top_k(got, cosine_scores(kept, query), k, tolerance=TOLERANCE[backend])
