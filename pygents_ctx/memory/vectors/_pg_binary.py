"""Embeddings sent to PostgreSQL in binary: a pgvector `vector[]` parameter.

`PostgresVectorStore` writes documents with one `INSERT ... SELECT FROM
unnest(...)` per chunk of rows, the ids, texts and metadata as text arrays
and the embeddings as one `vector[]` in PostgreSQL's binary array form, so a
32-bit float goes over the wire as its four bytes (never as decimal text) and
one document costs what a thousand do, per document. Imported only by that
store's writes: it needs psycopg (the `postgres` extra).
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Iterator
from typing import Final

from psycopg.adapt import Dumper
from psycopg.pq import Format

from pygents_ctx.memory.vectors._bulk import Columns

__all__ = ["ROWS_PER_INSERT", "VectorArray", "VectorArrayDumper", "vector_arrays"]

ROWS_PER_INSERT: Final = 2_000  # rows per INSERT of a write (one transaction for all)


class VectorArray:
    """Rows' embeddings already in the binary form of a `vector[]` parameter."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


class VectorArrayDumper(Dumper):
    """Passes a `VectorArray`'s bytes as they are (the SQL casts the parameter to `vector[]`)."""

    format = Format.BINARY

    def dump(self, obj: VectorArray) -> bytes:
        return obj.data


def vector_arrays(columns: Columns, element_oid: int) -> Iterator[tuple[int, int, VectorArray]]:
    """The embeddings in chunks of `ROWS_PER_INSERT` rows: `(start, stop, array)`.

    The binary array form: one dimension, no NULLs, the element type's OID
    (`vector`'s, read by the store), the length and the lower bound 1; then
    each element as its length and pgvector's binary form of a vector (the
    dimension and a zero as 16-bit integers, then the 32-bit floats), all
    big-endian.
    """
    dimension, count = columns.dimension, len(columns.ids)
    big_endian = columns.float_array()
    if sys.byteorder == "little":
        big_endian.byteswap()
    floats = memoryview(big_endian).cast("B")
    width = 4 * dimension
    vector_head = struct.pack(">ihh", 4 + width, dimension, 0)
    for start in range(0, count, ROWS_PER_INSERT):
        stop = min(start + ROWS_PER_INSERT, count)
        parts: list[bytes | memoryview] = [
            struct.pack(">iiIii", 1, 0, element_oid, stop - start, 1)
        ]
        for index in range(start, stop):
            parts += (vector_head, floats[index * width : (index + 1) * width])
        yield start, stop, VectorArray(b"".join(parts))
