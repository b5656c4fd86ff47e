"""The exact top-k search under every vector backend in memory: with numpy, and without."""

from __future__ import annotations

import math
import sys
import tracemalloc
from array import array
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx.memory import _table
from pygents_ctx.memory._table import VectorTable, check_vector, numpy_or_none, stored_norm
from tests.memory.oracles import assert_top_k, cosine_scores, exact_cosine, float32

DIMENSION = 6
components = st.one_of(
    st.integers(-3, 3).map(float),  # small integers: exact ties are common
    st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False),
)
vectors = st.lists(components, min_size=DIMENSION, max_size=DIMENSION).filter(
    lambda v: any(float32(v))
)
# Norms far outside (1e-30, 1e30) are scored exactly even on the numpy path.
extreme = st.sampled_from([1e-41, 1e-39, 1e-20, 1e25, 1e35]).flatmap(
    lambda scale: vectors.map(lambda v: [x * scale for x in v]).filter(
        lambda v: all(abs(x) <= _table.FLOAT32_MAX for x in v) and any(float32(v))
    )
)
ids = st.sampled_from([f"v{i:02}" for i in range(24)])
operations = st.lists(
    st.one_of(
        st.tuples(st.just("put"), ids, vectors),
        st.tuples(st.just("put"), ids, vectors),
        st.tuples(st.just("put"), ids, extreme),
        st.tuples(st.just("discard"), ids),
    ),
    max_size=60,
)


def search(table: VectorTable, query: list[float], k: int, among: Any, numpy: bool) -> Any:
    """`table.top_k` on the numpy path whatever the table's size, or in plain Python."""
    np = numpy_or_none()
    assert np is not None, "numpy is a dev dependency"
    saved = _table._numpy, _table._NUMPY_FROM
    _table._numpy, _table._NUMPY_FROM = (np if numpy else None), 0
    try:
        return table.top_k(array("f", query), k, among)
    finally:
        _table._numpy, _table._NUMPY_FROM = saved


@settings(max_examples=200, deadline=None)
@given(
    operations=operations,
    query=vectors | extreme,
    k=st.integers(1, 8),
    among=st.none() | st.sets(ids, max_size=10),
    copy=st.booleans(),
)
def test_numpy_and_python_give_the_exact_top_k(
    operations: list[tuple[Any, ...]],
    query: list[float],
    k: int,
    among: set[str] | None,
    copy: bool,
) -> None:
    table = VectorTable(DIMENSION)
    model: dict[str, list[float]] = {}
    for op in operations:
        if op[0] == "put":
            table.put(op[1], check_vector(op[2], "v"))
            model[op[1]] = op[2]
        else:
            assert table.discard(op[1]) == (op[1] in model)
            model.pop(op[1], None)
    if copy:
        table = table.copy()
    candidates = model if among is None else {i: v for i, v in model.items() if i in among}

    fast = search(table, query, k, among, numpy=True)
    slow = search(table, query, k, among, numpy=False)

    assert fast == slow
    assert_top_k(fast, cosine_scores(candidates, query), k, tolerance=1e-12)
    assert sorted(table.ids()) == sorted(model)
    for item_id, vector in model.items():
        assert table.vector(item_id) == float32(vector)


def array_table(dimension: int) -> VectorTable:
    """A table made as it is where numpy is not installed: its rows in an `array('f')`."""
    saved = _table._numpy
    _table._numpy = None
    try:
        return VectorTable(dimension)
    finally:
        _table._numpy = saved


batches = st.lists(st.tuples(ids, vectors), max_size=8).map(lambda pairs: dict(pairs))


@settings(max_examples=150, deadline=None)
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("put"), ids, vectors | extreme),
            st.tuples(st.just("put_many"), batches),
            st.tuples(st.just("discard"), ids),
            st.tuples(st.just("copy")),
        ),
        max_size=40,
    ),
    query=vectors,
    k=st.integers(1, 8),
)
def test_the_numpy_block_holds_what_the_array_holds(
    steps: list[tuple[Any, ...]], query: list[float], k: int
) -> None:
    """Rows put one by one and in bulk (the numpy block grows), freed and reused, copied."""
    tables = [VectorTable(DIMENSION), array_table(DIMENSION)]
    model: dict[str, list[float]] = {}
    for step in steps:
        if step[0] == "put":
            for table in tables:
                table.put(step[1], check_vector(step[2], "v"))
            model[step[1]] = float32(step[2])
        elif step[0] == "put_many":
            rows = {i: check_vector(v, "v") for i, v in step[1].items()}
            for table in tables:
                block = array("f")
                for row in rows.values():
                    block.extend(row)
                table.put_many(list(rows), block, array("d", map(stored_norm, rows.values())))
            model.update((i, row.tolist()) for i, row in rows.items())
        elif step[0] == "discard":
            assert [t.discard(step[1]) for t in tables] == [step[1] in model] * 2
            model.pop(step[1], None)
        else:
            tables = [t.copy() for t in tables]
    for table in tables:
        assert sorted(table.ids()) == sorted(model)
        assert {i: table.vector(i) for i in model} == model
    found = [search(t, query, k, None, numpy) for t in tables for numpy in (True, False)]
    assert all(hits == found[0] for hits in found)
    assert_top_k(found[0], cosine_scores(model, query), k, tolerance=1e-12)


@pytest.mark.parametrize(
    ("block_kind", "numpy"), [("numpy", True), ("array", True), ("array", False)]
)
def test_a_bulk_load_holds_its_vectors_at_their_float32_size(block_kind: str, numpy: bool) -> None:
    """No spare rows after `put_many` into an empty table, whichever block it is given."""
    np = numpy_or_none()
    assert np is not None
    count, dimension = 5_000, 384
    matrix = np.random.default_rng(5).standard_normal((count, dimension), dtype=np.float32)
    row_ids = [f"doc-{i}" for i in range(count)]
    tracemalloc.start()
    try:
        if block_kind == "numpy":  # as add_many's checks make it, with numpy
            block: Any = matrix.copy()
        else:  # at its exact size, as add_many's checks make it without numpy
            block = array("f", bytes(4 * dimension)) * count
            np.frombuffer(block, dtype=np.float32)[:] = matrix.ravel()
        norms = array("d", np.linalg.norm(matrix.astype(np.float64), axis=1).tobytes())
        table = VectorTable(dimension) if numpy else array_table(dimension)
        table.put_many(row_ids, block, norms)
        del block, norms  # the caller's: kept by the table, or copied and let go
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    # The rows, and per row two norms, a slot and a dict entry: under a tenth more.
    assert matrix.nbytes <= held < 1.1 * matrix.nbytes
    assert table.vector("doc-4321") == matrix[4321].tolist()


@pytest.mark.parametrize("numpy", [True, False])
def test_the_table_keeps_its_own_copy_of_each_row(numpy: bool) -> None:
    table = VectorTable(2) if numpy else array_table(2)
    first, second = check_vector([1.0, 2.0], "v"), check_vector([3.0, 4.0], "v")
    table.put("a", first)
    table.put("b", second)
    first[0] = second[1] = 9.0

    assert (table.vector("a"), table.vector("b")) == ([1.0, 2.0], [3.0, 4.0])
    assert len(first) == len(second) == 2


def test_single_precision_rounding_never_changes_the_winner() -> None:
    # Found by search: in single precision "a" scores above "b"; exactly, "b" wins.
    a = [
        0.24580338597297668,
        0.4835739731788635,
        0.5903871059417725,
        0.8849005699157715,
        0.4797971546649933,
        0.8446499705314636,
        -0.941989541053772,
        -0.06875468790531158,
    ]
    b = [
        0.24580340087413788,
        0.4835739731788635,
        0.5903871059417725,
        0.8849005103111267,
        0.4797971546649933,
        0.8446499705314636,
        -0.941989541053772,
        -0.06875468790531158,
    ]
    q = [0.886713445186615, 0.2979491055011749, 0.8018009662628174, -0.7735880613327026,
         -0.061861906200647354, -0.5068543553352356, 0.08752171695232391,
         0.1478823721408844]  # fmt: skip
    table = VectorTable(8)
    table.put("a", check_vector(a, "a"))
    table.put("b", check_vector(b, "b"))
    assert exact_cosine(b, q) > exact_cosine(a, q)

    assert [i for i, _ in search(table, q, 1, None, numpy=True)] == ["b"]
    assert [i for i, _ in search(table, q, 1, {"a", "b"}, numpy=True)] == ["b"]


def test_rows_of_extreme_length_are_scored_exactly() -> None:
    table = VectorTable(3)
    # The smallest 32-bit float: times a query number under 0.5 it rounds to 0.
    table.put("tiny", check_vector([1e-45, 0.0, 0.0], "tiny"))
    table.put("huge", check_vector([0.0, -3e38, 3e38], "huge"))
    table.put("plain", check_vector([0.0, 1.0, -0.7], "plain"))
    query = [0.4, 1.0, 1.0]

    for among in (None, {"tiny", "huge", "plain"}, {"tiny", "plain"}):
        got = search(table, query, 1, among, numpy=True)
        assert got == search(table, query, 1, among, numpy=False)
        assert got[0][0] == "tiny"
        assert got[0][1] == pytest.approx(exact_cosine([1e-45, 0, 0], query))


def test_a_large_table_takes_the_numpy_path_and_stays_exact() -> None:
    if numpy_or_none() is None:  # pragma: no cover - numpy is a dev dependency
        pytest.fail("numpy is a dev dependency")
    table = VectorTable(64)
    model = {}
    for n in range(600):
        vector = [math.sin(n * 0.37 + j) + (j == n % 64) for j in range(64)]
        model[f"v{n:03}"] = vector
        table.put(f"v{n:03}", check_vector(vector, "v"))
    for n in range(0, 600, 7):
        table.discard(f"v{n:03}")
        del model[f"v{n:03}"]
    query = [math.cos(j) for j in range(64)]

    fast = table.top_k(array("f", query), 10)

    assert fast == search(table, query, 10, None, numpy=False)
    assert_top_k(fast, cosine_scores(model, query), 10, tolerance=1e-12)


def test_an_empty_table_or_a_zero_query_finds_nothing() -> None:
    table = VectorTable(2)
    assert table.top_k(array("f", [1.0, 0.0]), 3) == []
    table.put("a", check_vector([1.0, 0.0], "v"))
    assert table.top_k(array("f", [0.0, 0.0]), 3) == []
    assert table.top_k(array("f", [1.0, 0.0]), 3, among={"missing"}) == []
    assert len(table) == 1
    assert "a" in table


@pytest.mark.parametrize(
    ("values", "kwargs", "error", "match"),
    [
        ("abc", {}, TypeError, "must be a sequence of numbers, not str"),
        ({"a": 1.0}, {}, TypeError, "must be a sequence of numbers, not dict"),
        (3.0, {}, TypeError, "must be a sequence of numbers, not float"),
        ([1.0, "x"], {}, TypeError, "must hold only numbers, not 'x'"),
        ([1.0, None], {}, TypeError, "must hold only numbers, not None"),
        ([], {}, ValueError, "is empty"),
        ([1.0, 2.0], {"dimension": 3}, ValueError, "has 2 numbers, but the dimension is 3"),
        ([1.0, math.nan], {}, ValueError, "holds nan; every number must be finite"),
        ([math.inf], {}, ValueError, "holds inf"),
        ([1e39], {}, ValueError, "too large for a 32-bit float"),
        ([10**400], {}, ValueError, "integer too large"),
        ([0.0, 0.0], {}, ValueError, "all zeros"),
        ([1e-50], {}, ValueError, "all zeros \\(after rounding to 32-bit floats\\)"),
    ],
)
def test_bad_vectors_are_refused_with_a_clear_error(
    values: Any, kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        check_vector(values, "the vector", **kwargs)


def test_vectors_may_be_lists_tuples_arrays_or_numpy_arrays() -> None:
    np = numpy_or_none()
    assert np is not None
    expected = array("f", [1.0, 2.5])
    for values in ([1, 2.5], (1.0, 2.5), array("d", [1.0, 2.5]), np.array([1.0, 2.5])):
        assert check_vector(values, "v") == expected
    assert check_vector([0.0], "v", allow_zero=True) == array("f", [0.0])


def test_without_numpy_installed_the_search_runs_in_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)  # as if not installed
    monkeypatch.setattr(_table, "_numpy", False)  # not looked for yet
    monkeypatch.setattr(_table, "_NUMPY_FROM", 0)
    table = VectorTable(2)
    table.put("a", check_vector([1.0, 0.0], "a"))
    table.put("b", check_vector([1.0, 1.0], "b"))

    assert numpy_or_none() is None
    assert [i for i, _ in table.top_k(array("f", [1.0, 0.2]), 2)] == ["a", "b"]
