"""Vectors in memory: checks, exact cosine scores, and `VectorTable`, the exact top-k search.

Every vector is kept as 32-bit floats (as pgvector and sqlite-vec keep them).
A score is the cosine similarity computed in double precision from those
32-bit values: `dot(v, q) / (|v| * |q|)`, the query rounded to 32 bits too.
Ties (equal scores) are ordered by id, ascending.

`VectorTable` holds one row per id in one block of 32-bit floats: a 2-D numpy
array with spare rows at its end when numpy is installed (numpy puts a large
array on huge pages where the system offers them, and a search reads every
row: over 100,000 x 384 rows the product runs about a fifth faster there than
in an `array('f')`), else a flat `array('f')`. Its search is exact and stays
exact with or without numpy: without it, every row is scored in Python; with
it, numpy scores every row in single precision, and only the rows that can
still be in the top `k` once that rounding is allowed for are scored again
exactly. numpy is optional; nothing else here needs it.
"""

from __future__ import annotations

import heapq
import math
import operator
from array import array
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from pygents_ctx.memory.embedders import Embedder

__all__ = [
    "FLOAT32_MAX",
    "VectorTable",
    "block_norms",
    "check_vector",
    "checked_values",
    "cosine",
    "dot",
    "embed_checked",
    "float_row",
    "norm",
    "numpy_or_none",
    "single_precision_norm",
    "single_precision_square",
    "stored_norm",
    "unit_vector",
]

FLOAT32_MAX: Final = 3.4028234663852886e38
# Rows whose norm is outside this range could under- or overflow numpy's
# single-precision dot products: they are always scored exactly instead.
_SAFE_NORMS: Final = (1e-30, 1e30)
# Below this many multiplications a search is scored in Python directly: numpy's
# fixed cost per call is larger than the work.
_NUMPY_FROM: Final = 16_384
# A search among less than this share of the rows scores only those (see _candidates).
_GATHER_BELOW: Final = 0.3


def _python_dot(a: Iterable[float], b: Iterable[float]) -> float:
    total: float = sum(map(operator.mul, a, b))
    return total


# math.sumprod (Python 3.12+) is a C loop, and more accurate than a plain sum.
dot: Callable[[Iterable[float], Iterable[float]], float] = getattr(math, "sumprod", _python_dot)


def norm(vector: Sequence[float]) -> float:
    """The Euclidean length of `vector`, in double precision."""
    return math.sqrt(dot(vector, vector))


def stored_norm(vector: array[float]) -> float:
    """The norm kept beside a stored 32-bit row.

    With numpy it is computed as the bulk loads compute a whole block's
    (`einsum` in double precision, which gives each row the same bits alone
    or in a block), so a row has the same norm, and a vector the same score,
    however it was added.
    """
    np = numpy_or_none()
    if np is None:
        return norm(vector)
    wide = np.frombuffer(vector, dtype=np.float32).astype(np.float64)
    return math.sqrt(float(np.einsum("i,i->", wide, wide)))


def block_norms(np: Any, rows: Any) -> Any:
    """`stored_norm` of every row of a 2-D float32 numpy array, as a float64 array."""
    return np.sqrt(np.einsum("ij,ij->i", rows, rows, dtype=np.float64))


# Backends that score in C in single precision (pgvector, sqlite-vec) sum the
# squares in 32-bit floats: a vector whose squared length is not a normal 32-bit
# float there gives a NaN or infinite score.
_SINGLE_PRECISION_SQUARES: Final = (1.1754943508222875e-38, FLOAT32_MAX)


def single_precision_norm(vector: Sequence[float]) -> bool:
    """Whether a single-precision backend can compute `vector`'s length."""
    return single_precision_square(dot(vector, vector))


def single_precision_square(square: float) -> bool:
    """Whether a squared length is a normal 32-bit float (see `single_precision_norm`)."""
    low, high = _SINGLE_PRECISION_SQUARES
    return low <= square <= high


def unit_vector(vector: Sequence[float]) -> array[float]:
    """`vector` scaled to length 1 (in double precision), as 32-bit floats.

    Cosine similarity ignores length, so a single-precision backend is given
    the unit query instead, whatever its length.
    """
    length = norm(vector)
    return array("f", [value / length for value in vector])


def float_row(data: memoryview, index: int, width: int) -> array[float]:
    """Row `index` of `data`, rows of `width` bytes of 32-bit floats, as its own `array('f')`."""
    row: array[float] = array("f")
    row.frombytes(data[index * width : (index + 1) * width])
    return row


def cosine(
    row: Sequence[float], row_norm: float, query: Sequence[float], query_norm: float
) -> float:
    """The cosine similarity of two vectors given with their norms (both non-zero)."""
    return dot(row, query) / (row_norm * query_norm)


_numpy: ModuleType | bool | None = False  # False: not looked for yet


def numpy_or_none() -> ModuleType | None:
    """numpy if it is installed, else None (looked up once, on first use)."""
    global _numpy
    if _numpy is False:
        try:
            import numpy
        except ImportError:
            _numpy = None
        else:
            _numpy = numpy
    return _numpy  # type: ignore[return-value]


def check_vector(
    values: object, what: str, dimension: int | None = None, *, allow_zero: bool = False
) -> array[float]:
    """`values` as 32-bit floats, after checking it is a usable vector (see `checked_values`)."""
    return checked_values(values, what, dimension, allow_zero=allow_zero)[0]


def checked_values(
    values: object, what: str, dimension: int | None = None, *, allow_zero: bool = False
) -> tuple[array[float], array[float]]:
    """`values` as 32-bit floats and as the doubles given, after checking it is a usable vector.

    Args:
        values: Real numbers: a list, tuple, `array` or numpy array.
        what: Names the vector in error messages (`"the embedding of 'doc-1'"`).
        dimension: The length it must have, if any.
        allow_zero: Accept a vector of zeros (it has no direction, so no cosine).

    Raises:
        TypeError: It is a str, bytes or mapping, not iterable, or holds a non-number.
        ValueError: It is empty, has the wrong length, holds NaN, an infinity
            or a value too large for a 32-bit float, or (unless `allow_zero`)
            is all zeros.
    """
    if isinstance(values, str | bytes | Mapping) or not isinstance(values, Iterable):
        raise TypeError(f"{what} must be a sequence of numbers, not {type(values).__name__}")
    try:
        # array('d') rejects what is not a real number (str, None, complex) in C.
        doubles = array("d", values)
    except TypeError:
        bad = next(v for v in values if not isinstance(v, int | float))
        raise TypeError(f"{what} must hold only numbers, not {bad!r}") from None
    except OverflowError:
        raise ValueError(f"{what} holds an integer too large for a float") from None
    size = len(doubles)
    if size == 0:
        raise ValueError(f"{what} is empty; a vector needs at least one number")
    if dimension is not None and size != dimension:
        raise ValueError(f"{what} has {size} numbers, but the dimension is {dimension}")
    if not all(map(math.isfinite, doubles)):
        bad_value = next(v for v in doubles if not math.isfinite(v))
        raise ValueError(f"{what} holds {bad_value}; every number must be finite")
    if max(map(abs, doubles)) > FLOAT32_MAX:
        raise ValueError(f"{what} holds a value too large for a 32-bit float (over 3.4e38)")
    vector = array("f", doubles)
    if not allow_zero and not any(vector):
        raise ValueError(
            f"{what} is all zeros (after rounding to 32-bit floats): it has no "
            "direction, so no cosine similarity"
        )
    return vector, doubles


async def embed_checked(
    embedder: Embedder,
    texts: Sequence[str],
    *,
    batch_size: int,
    dimension: int | None = None,
    allow_zero: bool = False,
) -> list[array[float]]:
    """`embedder`'s vectors for `texts`, asked for `batch_size` texts at a time, checked.

    Raises:
        ValueError: The embedder returned the wrong number of vectors, vectors
            of different lengths (or not of `dimension`), or a bad vector (see
            `check_vector`).
        TypeError: It returned something that is not a list of vectors.
    """
    vectors: list[array[float]] = []
    for start in range(0, len(texts), batch_size):
        batch = texts[start : start + batch_size]
        got: object = await embedder.embed(batch)
        if isinstance(got, str | bytes) or not isinstance(got, Sequence):
            raise TypeError(
                f"{embedder!r}.embed must return a list of vectors, not {type(got).__name__}"
            )
        if len(got) != len(batch):
            raise ValueError(
                f"{embedder!r}.embed returned {len(got)} vectors for {len(batch)} texts"
            )
        for offset, values in enumerate(got):
            text = batch[offset][:40]
            what = f"the vector {embedder!r} gave for text {start + offset} ({text!r})"
            vector = check_vector(values, what, dimension, allow_zero=allow_zero)
            if dimension is None:
                dimension = len(vector)
            vectors.append(vector)
    return vectors


class _ArrayRows:
    """The rows of a `VectorTable` in one flat `array('f')`, row after row (no numpy)."""

    __slots__ = ("count", "data", "size")

    def __init__(self, size: int, data: array[float] | None = None) -> None:
        self.size = size
        self.data: array[float] = array("f") if data is None else data
        self.count = len(self.data) // size

    def row(self, slot: int) -> Sequence[float]:
        return self.data[slot * self.size : (slot + 1) * self.size]

    def set(self, slot: int, vector: array[float]) -> None:
        self.data[slot * self.size : (slot + 1) * self.size] = vector

    def clear(self, slot: int) -> None:
        self.set(slot, array("f", bytes(4 * self.size)))

    def add_row(self, vector: array[float]) -> None:
        self.data.extend(vector)
        self.count += 1

    def add_block(self, block: Any, count: int) -> None:
        """Add `count` rows after the last: an empty table keeps an `array('f')` itself."""
        if self.count == 0 and isinstance(block, array):
            self.data = block
        else:
            self.data.frombytes(memoryview(block).cast("B"))
        self.count += count

    def matrix(self, np: Any) -> Any:
        """The rows as a 2-D float32 view (which keeps the array from growing while it lives)."""
        return np.frombuffer(self.data, dtype=np.float32).reshape(-1, self.size)

    def copy(self) -> _ArrayRows:
        return _ArrayRows(self.size, array("f", self.data))


class _NumpyRows:
    """The rows of a `VectorTable` in a 2-D float32 numpy array, with spare rows at its end.

    The array grows by an eighth at a time, so adding rows one by one copies
    each row a few times in all; a bulk add to an empty table keeps the
    block it is given (made at its exact size by `add_many`'s checks).
    """

    __slots__ = ("block", "count", "np", "size")

    def __init__(self, np: Any, size: int, block: Any = None) -> None:
        self.np = np
        self.size = size
        self.block = np.empty((0, size), dtype=np.float32) if block is None else block
        self.count = len(self.block)

    def row(self, slot: int) -> Sequence[float]:
        result: list[float] = self.block[slot].tolist()
        return result

    def set(self, slot: int, vector: array[float]) -> None:
        self.block[slot] = self.np.frombuffer(vector, dtype=self.np.float32)

    def clear(self, slot: int) -> None:
        self.block[slot] = 0.0

    def _reserve(self, count: int) -> None:
        """Room for `count` more rows."""
        start = self.count
        if start + count > len(self.block):
            grown = count if start == 0 else max(start + count, start + start // 8 + 4)
            bigger = self.np.empty((grown, self.size), dtype=self.np.float32)
            bigger[:start] = self.block[:start]
            self.block = bigger

    def add_row(self, vector: array[float]) -> None:
        self._reserve(1)
        self.set(self.count, vector)
        self.count += 1

    def add_block(self, block: Any, count: int) -> None:
        """Add `count` rows after the last: an empty table keeps a 2-D numpy `block` itself."""
        np = self.np
        if isinstance(block, np.ndarray):
            kept = block.dtype == np.float32 and block.flags.c_contiguous
            if self.count == 0 and kept and block.shape == (count, self.size):
                self.block = block
                self.count = count
                return
            rows = block
        else:
            rows = np.frombuffer(block, dtype=np.float32)
        self._reserve(count)
        self.block[self.count : self.count + count] = rows.reshape(count, self.size)
        self.count += count

    def matrix(self, np: Any) -> Any:
        """The rows in use, as a 2-D float32 view."""
        return self.block[: self.count]

    def copy(self) -> _NumpyRows:
        return _NumpyRows(self.np, self.size, self.block[: self.count].copy())


def _rows(size: int) -> _ArrayRows | _NumpyRows:
    np = numpy_or_none()
    return _ArrayRows(size) if np is None else _NumpyRows(np, size)


class VectorTable:
    """Vectors of one dimension under string ids, searched exactly by cosine similarity.

    Rows live in one block (see the module's docstring); a removed row's slot
    is reused.
    `shares` counts the other holders of this table (copy-on-write owners copy
    it before changing it).
    """

    __slots__ = (
        "_extreme",
        "_free",
        "_ids",
        "_inverse_norms",
        "_norms",
        "_rows",
        "_slots",
        "dimension",
        "shares",
    )

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self.shares = 0
        self._rows = _rows(dimension)
        self._norms: array[float] = array("d")
        # 1 / norm in 32 bits for the single-precision pass; 0.0 in a free slot.
        self._inverse_norms: array[float] = array("f")
        self._ids: list[str | None] = []
        self._slots: dict[str, int] = {}
        self._free: list[int] = []
        self._extreme: set[int] = set()

    def __len__(self) -> int:
        return len(self._slots)

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._slots

    def present(self, ids: Iterable[str]) -> set[str]:
        """Which of `ids` have a row."""
        return self._slots.keys() & ids

    def ids(self) -> list[str]:
        """The ids held, in no particular order."""
        return list(self._slots)

    def copy(self) -> VectorTable:
        """An independent copy (the arrays are copied in one block each)."""
        other = VectorTable(self.dimension)
        other._rows = self._rows.copy()
        other._norms = array("d", self._norms)
        other._inverse_norms = array("f", self._inverse_norms)
        other._ids = list(self._ids)
        other._slots = dict(self._slots)
        other._free = list(self._free)
        other._extreme = set(self._extreme)
        return other

    def put(self, item_id: str, vector: array[float], row_norm: float | None = None) -> None:
        """Store `vector` (32-bit, the table's dimension, non-zero) under `item_id`.

        `row_norm` is its norm when the caller has it (as stored beside it).
        """
        if row_norm is None:
            row_norm = stored_norm(vector)
        slot = self._slots.get(item_id)
        if slot is None and not self._free:
            slot = len(self._ids)
            self._ids.append(item_id)
            self._rows.add_row(vector)
            self._norms.append(0.0)
            self._inverse_norms.append(0.0)
            self._slots[item_id] = slot
        else:
            if slot is None:
                slot = self._free.pop()
                self._slots[item_id] = slot
                self._ids[slot] = item_id
            self._rows.set(slot, vector)
        self._norms[slot] = row_norm
        self._inverse_norms[slot] = 1.0 / row_norm
        if _SAFE_NORMS[0] <= row_norm <= _SAFE_NORMS[1]:
            self._extreme.discard(slot)
        else:
            self._extreme.add(slot)

    def put_many(self, ids: list[str], block: Any, norms: array[float]) -> None:
        """Store many rows at once: `block` holds them one after another, `norms` their norms.

        `block` is an `array('f')` or a 2-D float32 numpy array. The rows must
        be checked (32-bit, non-zero) and `ids` unique. New ids are appended
        in one copy, or none: an empty table keeps `block` itself when it is
        of the kind the table holds (the caller gives it up).
        """
        if not ids:
            return
        if self._free or not self._slots.keys().isdisjoint(ids):
            rows, width = memoryview(block).cast("B"), 4 * self.dimension
            for index, item_id in enumerate(ids):
                self.put(item_id, float_row(rows, index, width), norms[index])
            return
        start = len(self._ids)
        self._rows.add_block(block, len(ids))
        self._norms.extend(norms)
        np = numpy_or_none()
        if np is not None:
            with np.errstate(over="ignore"):  # an extreme row's is never read
                inverse = np.reciprocal(np.frombuffer(norms, dtype=np.float64)).astype(np.float32)
            self._inverse_norms.frombytes(memoryview(inverse).cast("B"))
        else:
            self._inverse_norms.extend([1.0 / n for n in norms])
        self._ids.extend(ids)
        self._slots.update(zip(ids, range(start, start + len(ids)), strict=True))
        low, high = _SAFE_NORMS
        self._extreme.update(start + index for index, n in enumerate(norms) if not low <= n <= high)

    def discard(self, item_id: str) -> bool:
        """Remove `item_id`'s row; whether there was one."""
        slot = self._slots.pop(item_id, None)
        if slot is None:
            return False
        self._rows.clear(slot)
        self._norms[slot] = 0.0
        self._inverse_norms[slot] = 0.0
        self._ids[slot] = None
        self._extreme.discard(slot)
        self._free.append(slot)
        return True

    def vector(self, item_id: str) -> list[float]:
        """The row stored under `item_id`.

        Raises:
            KeyError: No row has this id.
        """
        return list(self._rows.row(self._slots[item_id]))

    def top_k(
        self, query: array[float], k: int, among: Collection[str] | None = None
    ) -> list[tuple[str, float]]:
        """The `k` best `(id, score)` pairs for `query` (32-bit, non-zero), best first.

        `among`, when given, limits the search to those ids (unknown ones are
        ignored). Equal scores are ordered by id.
        """
        if among is None:
            slots: list[int] | None = None
            count = len(self._slots)
        else:
            slots = [slot for slot in map(self._slots.get, among) if slot is not None]
            count = len(slots)
        query_norm = norm(query)
        if count == 0 or query_norm == 0.0:
            return []
        np = numpy_or_none()
        chosen: Iterable[int]
        if np is not None and count * self.dimension >= _NUMPY_FROM:
            chosen = self._candidates(np, query, query_norm, k, slots)
        else:
            chosen = range(len(self._ids)) if slots is None else slots
        return self._exact(chosen, query, query_norm, k)

    def _exact(
        self, slots: Iterable[int], query: array[float], query_norm: float, k: int
    ) -> list[tuple[str, float]]:
        row, ids, norms = self._rows.row, self._ids, self._norms
        values = query.tolist()  # read once, not once a row
        scored = []
        for slot in slots:
            item_id = ids[slot]
            if item_id is None:
                continue
            scored.append((-cosine(row(slot), norms[slot], values, query_norm), item_id))
        best = heapq.nsmallest(k, scored)
        return [(item_id, -negative) for negative, item_id in best]

    def _candidates(
        self,
        np: Any,
        query: array[float],
        query_norm: float,
        k: int,
        slots: list[int] | None,
    ) -> list[int]:
        """The slots that may be in the exact top `k`, from a single-precision pass.

        `slots`, when given, are the only ones to rank (live rows, each once).
        """
        # (The views below keep the arrays from growing until this returns: no
        # await happens in between.)
        size, extreme = self.dimension, self._extreme
        matrix = self._rows.matrix(np)
        unit = (np.frombuffer(query, dtype=np.float32) / np.float32(query_norm)).astype(np.float32)
        scale = np.frombuffer(self._inverse_norms, dtype=np.float32)
        index = None if slots is None else np.sort(np.asarray(slots, dtype=np.intp))
        # Two ways to rank some of the rows, chosen by how many: gathering them
        # copies them (time and memory) before their product; from _GATHER_BELOW
        # of the rows on, the product over the whole matrix, with the others
        # masked out, is as fast or faster (measured: 100,000 rows of 64 and of
        # 256 numbers, 20,000 of 1,024; both within 10% of each other there).
        gather = index is not None and index.size < _GATHER_BELOW * len(self._ids)
        with np.errstate(all="ignore"):  # extreme rows may overflow; they are scored exactly
            if gather:
                estimates = matrix[index] @ unit
                estimates *= scale[index]
            else:
                estimates = matrix @ unit
                estimates *= scale
        # The rows scored exactly whatever their estimate (extreme norms), and
        # the positions of the estimates to ignore.
        exact: list[int]
        if index is None:
            exact = list(extreme)
            skipped = [*self._free, *extreme]
        elif gather:
            skipped = (
                [i for i, slot in enumerate(index.tolist()) if slot in extreme] if extreme else []
            )
            exact = index[skipped].tolist() if skipped else []
        else:
            kept = np.zeros(estimates.size, dtype=bool)
            kept[index] = True
            exact = [slot for slot in extreme if kept[slot]]
            kept[exact] = False
            estimates[~kept] = -np.inf
            skipped = []
        live = estimates.size  # every other estimate is finite: its row's norm is safe
        if index is not None and not gather:
            live = index.size - len(exact)
        if skipped:
            estimates[np.asarray(skipped, dtype=np.intp)] = -np.inf
            live = int(np.count_nonzero(estimates > -np.inf))
        if live <= k:
            picked = np.nonzero(estimates > -np.inf)[0]
        else:
            kth = np.partition(estimates, estimates.size - k)[estimates.size - k]
            # A single-precision dot product of a unit query with a row is within
            # (size + 2) * 2**-24 of the exact one (relative to the row's norm);
            # times the row's inverse norm, both rounded to 32 bits, it is within
            # (size + 4) * 2**-24 of the exact cosine: any row of the exact top k
            # (ties included) is within twice that of the k-th estimate. The
            # margin below is double that.
            margin = (size + 4) * 2.0**-22
            picked = np.flatnonzero(estimates >= float(kth) - margin)
        chosen: list[int] = (picked if index is None or not gather else index[picked]).tolist()
        chosen.extend(exact)
        return chosen
