"""Bulk adds: many documents given as columns, their vectors one 2-D array.

`VectorStoreBase.add_many` checks ids, texts, metadata and the vectors here,
before anything is written, and hands a backend one `Columns`: the vectors
as a single block of 32-bit floats (row after row) and their norms, with no
object per document. With numpy the vectors are checked and converted in a
few whole-array passes into a new 2-D float32 numpy array (which the
in-memory store keeps as it is); without it, row by row with `check_vector`
into an `array('f')`, to the same result and the same errors.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from pygents_ctx._checks import LARGEST, SMALLEST, each_once, storable_text
from pygents_ctx.memory._table import (
    block_norms,
    check_vector,
    float_row,
    numpy_or_none,
    stored_norm,
)

__all__ = [
    "Columns",
    "check_columns",
    "check_json",
    "document_columns",
    "metadata_json",
]

_EMPTY_METADATA: Final = "{}"


def check_json(value: object, where: str) -> None:
    """Raise unless `value` is JSON every backend keeps exactly."""
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, int):
        if not SMALLEST <= value <= LARGEST:
            raise ValueError(f"{where} is {value}, outside the 64-bit integer range")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} is {value}; JSON numbers must be finite")
    elif isinstance(value, str):
        storable_text(value, where, empty=True)
    elif isinstance(value, list | tuple):
        for index, inner in enumerate(value):
            check_json(inner, f"{where}[{index}]")
    elif isinstance(value, Mapping):
        for key, inner in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where} has the key {key!r}; metadata keys must be str")
            check_json(inner, f"{where}[{storable_text(key, f'a key of {where}', empty=True)!r}]")
    else:
        raise TypeError(
            f"{where} is a {type(value).__name__}; metadata holds only JSON values "
            "(str, int, float, bool, None, lists and dicts of them)"
        )


def metadata_json(metadata: Mapping[str, Any]) -> str:
    """The metadata as JSON text (checked by `VectorDocument`, so it always encodes)."""
    return orjson.dumps(metadata).decode()


@dataclass(frozen=True, slots=True)
class Columns:
    """Checked documents in columns: `vectors` holds `len(ids)` rows of `dimension` floats.

    `vectors` is an `array('f')` (row after row), or a 2-D float32 numpy array
    when numpy checked them; `vector_bytes` and `float_array` read either.
    """

    ids: list[str]
    texts: list[str]
    metadata: list[str]
    vectors: Any
    norms: array[float]
    dimension: int

    def vector_bytes(self) -> memoryview:
        """The rows' 32-bit floats as bytes, in this machine's byte order."""
        if not self.ids:
            return memoryview(b"")
        return memoryview(self.vectors).cast("B")

    def float_array(self) -> array[float]:
        """A copy of the rows as one `array('f')`."""
        copy: array[float] = array("f")
        copy.frombytes(self.vector_bytes())
        return copy

    def vector(self, index: int) -> array[float]:
        """Row `index` of the vectors."""
        return float_row(self.vector_bytes(), index, 4 * self.dimension)

    def take(self, keep: Sequence[int]) -> Columns:
        """Only the rows at the indexes `keep` (ascending)."""
        if len(keep) == len(self.ids):
            return self
        data, width = self.vector_bytes(), 4 * self.dimension
        vectors: array[float] = array("f")
        for index in keep:
            vectors.frombytes(data[index * width : (index + 1) * width])
        return Columns(
            [self.ids[i] for i in keep],
            [self.texts[i] for i in keep],
            [self.metadata[i] for i in keep],
            vectors,
            array("d", [self.norms[i] for i in keep]),
            self.dimension,
        )


def check_columns(
    ids: object, vectors: object, texts: object, metadata: object, dimension: int
) -> Columns:
    """The columns of an `add_many` call, after checking every one.

    Raises:
        TypeError: A column is not a list (or the vectors not a 2-D array or
            list of lists), or holds a value of the wrong type.
        ValueError: As `VectorDocument` and `check_vector` refuse values; an
            id is repeated; or the columns differ in length.
    """
    checked_ids = _check_ids(ids)
    count = len(checked_ids)
    checked_texts = [""] * count if texts is None else _check_texts(texts, checked_ids)
    checked_metadata = (
        [_EMPTY_METADATA] * count if metadata is None else _check_metadata(metadata, checked_ids)
    )
    block, norms = _check_vectors(vectors, checked_ids, dimension)
    return Columns(checked_ids, checked_texts, checked_metadata, block, norms, dimension)


def document_columns(
    ids: list[str],
    texts: list[str],
    metadata: list[str],
    vectors: Sequence[Sequence[float]],
    dimension: int,
) -> Columns:
    """The columns of documents already checked, one vector of `dimension` numbers each.

    The vectors (a `VectorDocument`'s embedding, or an embedder's checked
    vector) become one block of 32-bit floats with their norms, as
    `check_columns` makes it.
    """
    block, norms = _check_vectors(vectors, ids, dimension)
    return Columns(ids, texts, metadata, block, norms, dimension)


def _column(values: object, name: str, count: int | None) -> list[Any]:
    if isinstance(values, str | bytes | Mapping) or not isinstance(values, Sequence):
        raise TypeError(f"add_many {name} must be a list, not {type(values).__name__}")
    column = list(values)
    if count is not None and len(column) != count:
        raise ValueError(
            f"add_many got {count} ids but {len(column)} {name}; give one per id, in order"
        )
    return column


def _check_ids(ids: object) -> list[str]:
    column = _column(ids, "ids", None)
    # The usual case, checked in C: all str, none empty, none twice, and their text
    # storable all at once. Else each id in turn, to name the one at fault.
    if set(map(type, column)) <= {str}:
        unique = set(column)
        if len(unique) == len(column) and "" not in unique:
            try:
                storable_text("".join(column), "add_many ids", empty=True)
            except ValueError:
                pass
            else:
                return column
    for index, item in enumerate(column):
        storable_text(item, f"add_many ids[{index}]", fix="a document id")
    return each_once(column, lambda item: item, "add_many ids", "ids must be unique")


def _check_texts(texts: object, ids: list[str]) -> list[str]:
    column = _column(texts, "texts", len(ids))
    for item_id, text in zip(ids, column, strict=True):
        storable_text(text, f"the text of document {item_id!r}", empty=True)
    return column


def _check_metadata(metadata: object, ids: list[str]) -> list[str]:
    column = _column(metadata, "metadata", len(ids))
    encoded = []
    for item_id, value in zip(ids, column, strict=True):
        if not isinstance(value, Mapping):
            raise TypeError(
                f"the metadata of document {item_id!r} must be a dict, not {type(value).__name__}"
            )
        if not value:
            encoded.append(_EMPTY_METADATA)
            continue
        check_json(value, f"the metadata of document {item_id!r}")
        encoded.append(metadata_json(value))
    return encoded


def _what(item_id: str) -> str:
    return f"the vector of document {item_id!r}"


def _check_vectors(vectors: object, ids: list[str], dimension: int) -> tuple[Any, array[float]]:
    np = numpy_or_none()
    if np is not None:
        checked = _numpy_block(np, vectors, ids, dimension)
        if checked is not None:
            return checked
    # Without numpy, or input numpy cannot read as numbers (it then gives the exact error).
    rows = _column(vectors, "vectors", len(ids))
    block: array[float] = array("f")
    norms: array[float] = array("d")
    for item_id, row in zip(ids, rows, strict=True):
        vector = check_vector(row, _what(item_id), dimension)
        block.extend(vector)
        norms.append(stored_norm(vector))
    return block, norms


def _numpy_block(
    np: Any, vectors: object, ids: list[str], dimension: int
) -> tuple[Any, array[float]] | None:
    """The vectors and norms, checked in whole-array passes; None to check row by row."""
    if isinstance(vectors, str | bytes | Mapping):
        return None
    try:
        matrix = (
            vectors if isinstance(vectors, np.ndarray) else np.asarray(vectors, dtype=np.float64)
        )
    except (TypeError, ValueError, OverflowError):
        return None
    if matrix.dtype.kind not in "biuf":
        return None
    count = len(ids)
    if count == 0 and matrix.size == 0:
        return array("f"), array("d")
    if matrix.ndim != 2:
        if matrix.ndim == 1 and count == 1:
            return None  # one flat vector for one id: the row-by-row check says what to do
        raise ValueError(
            f"add_many vectors must be 2-D, one row per id (got the shape {matrix.shape}); "
            "for one document, pass [vector]"
        )
    if matrix.shape[0] != count:
        raise ValueError(
            f"add_many got {count} ids but {matrix.shape[0]} vectors; give one per id, in order"
        )
    if count and matrix.shape[1] != dimension:
        raise ValueError(
            f"add_many vectors have {matrix.shape[1]} numbers each, "
            f"but the dimension is {dimension}"
        )
    # A new array (never the caller's, which they may change later) at its
    # exact size, filled by numpy in one pass, converting the dtype on the way.
    block = np.empty((count, dimension), dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        # Too large for 32 bits becomes an infinity here, and is found below.
        np.copyto(block, matrix, casting="unsafe")
    # Squares of 32-bit values cannot overflow a double: a non-finite norm
    # means a NaN or an infinity, a zero norm a row of zeros.
    norms = block_norms(np, block)
    bad = np.flatnonzero(~np.isfinite(norms) | (norms == 0.0))
    if bad.size:
        first = int(bad[0])
        check_vector(matrix[first].tolist(), _what(ids[first]), dimension)
        raise AssertionError("unreachable: check_vector refuses this row")  # pragma: no cover
    norm_column: array[float] = array("d")
    norm_column.frombytes(memoryview(norms).cast("B"))
    return block, norm_column
