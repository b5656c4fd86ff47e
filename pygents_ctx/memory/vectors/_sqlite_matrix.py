"""The vectors of a SQLite collection kept in this process, in step with the table.

`SQLiteVectorStore` searches a collection's float32 matrix (a `VectorTable`,
scored by numpy) instead of reading every row in SQL. The matrix is read
from the table once, at the collection's first search, and labelled with
the collection's generation: a number every write to the collection bumps,
in the write's own transaction, from a random start (so a collection
dropped and made again does not look the same). Then:

- this store's writes change the matrix after they commit, and move its
  label on, when the label was the generation the write started from;
- a search reads the generation first, in the same read transaction as
  everything else it reads: if another connection or process (or another
  store on this connection) wrote meanwhile, the label differs and the
  matrix is read again.

Everything here runs on the connection's worker thread, one call at a time.
"""

from __future__ import annotations

import secrets
import sqlite3
import sys
from array import array
from collections.abc import Callable
from typing import Any, Final

from pygents_ctx.memory._table import VectorTable, numpy_or_none

__all__ = ["Matrices", "bump", "first_generation"]

_LITTLE_ENDIAN: Final = sys.byteorder == "little"


def first_generation() -> int:
    """A random starting generation for a new collection."""
    return secrets.randbits(62)


def bump(db: sqlite3.Connection, name: str) -> int | None:
    """Move the collection's generation on (inside the caller's transaction); the new one."""
    row = db.execute(
        "UPDATE pygents_vector_collections SET generation = generation + 1 "
        "WHERE name = ? RETURNING generation",
        (name,),
    ).fetchone()
    return None if row is None else int(row[0])


class Matrices:
    """Each searched collection's `VectorTable` with the generation it holds."""

    __slots__ = ("_tables",)

    def __init__(self) -> None:
        self._tables: dict[str, tuple[int, VectorTable]] = {}

    def table(
        self, db: sqlite3.Connection, name: str, dimension: int, generation: int
    ) -> VectorTable:
        """The collection's table at `generation`, read again if it holds another one.

        Call it inside a read transaction that also read `generation`.
        """
        held = self._tables.get(name)
        if held is not None and held[0] == generation and held[1].dimension == dimension:
            return held[1]
        self._tables.pop(name, None)  # the old one can go before the new one is read
        table = _read(db, name, dimension)
        self._tables[name] = (generation, table)
        return table

    def changed(
        self, name: str, generation: int | None, change: Callable[[VectorTable], None]
    ) -> None:
        """After a committed write that moved the generation to `generation`: apply `change`.

        When the table held the generation before this write, `change` brings
        it up to date; otherwise (someone else wrote in between, or the
        collection is gone) it is dropped, to be read again when searched.
        """
        held = self._tables.get(name)
        if held is None:
            return
        if generation is None or held[0] != generation - 1:
            del self._tables[name]
            return
        change(held[1])
        self._tables[name] = (generation, held[1])

    def forget(self, name: str) -> None:
        """Drop the collection's table."""
        self._tables.pop(name, None)


def _read(db: sqlite3.Connection, name: str, dimension: int) -> VectorTable:
    """The collection's rows as one exact-size block, filled blob by blob.

    The block is of the kind `VectorTable` keeps (a numpy array when numpy is
    installed), so the table takes it as it is.
    """
    table = VectorTable(dimension)
    (count,) = db.execute(
        "SELECT count(*) FROM pygents_vectors WHERE collection = ?", (name,)
    ).fetchone()
    if not count:
        return table
    width = 4 * dimension
    np = numpy_or_none()
    block: Any = (
        array("f", bytes(width)) * count
        if np is None
        else np.empty((count, dimension), dtype=np.float32)
    )
    into = memoryview(block).cast("B")
    ids: list[str] = []
    norms: array[float] = array("d")
    cursor = db.execute(
        "SELECT id, embedding, norm FROM pygents_vectors WHERE collection = ?", (name,)
    )
    offset = 0
    for item_id, blob, row_norm in cursor:
        into[offset : offset + width] = blob
        offset += width
        ids.append(item_id)
        norms.append(row_norm)
    into.release()
    if not _LITTLE_ENDIAN:
        if np is None:
            block.byteswap()
        else:
            block.byteswap(inplace=True)
    table.put_many(ids, block, norms)
    return table
