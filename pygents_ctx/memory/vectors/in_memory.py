"""`InMemoryVectorStore`: collections in this process, searched exactly."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import orjson

from pygents_ctx.memory._table import VectorTable
from pygents_ctx.memory.embedders import Embedder
from pygents_ctx.memory.vectors._bulk import Columns
from pygents_ctx.memory.vectors._writes import Outcome, Write
from pygents_ctx.memory.vectors.base import (
    CollectionInfo,
    MetadataValue,
    SearchResult,
    VectorDocument,
    VectorStoreBase,
    dimension_changed,
    other_dimension,
    unknown_collection,
)

if TYPE_CHECKING:
    from array import array

__all__ = ["InMemoryVectorStore"]

_NUMBER: Final = "number"
_NO_METADATA: Final = b"{}"


def _key(value: MetadataValue) -> tuple[str, MetadataValue]:
    """A value as filters compare it: booleans apart from numbers, 1 equal to 1.0."""
    if value is None:
        return ("null", None)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return (_NUMBER, value)  # hash(1) == hash(1.0), and 1 == 1.0
    return ("str", value)


def _scalars(metadata: Mapping[str, Any]) -> list[tuple[str, tuple[str, MetadataValue]]]:
    """The (key, comparable value) pairs of the metadata's top-level scalar values."""
    return [
        (key, _key(value))
        for key, value in metadata.items()
        if not isinstance(value, list | tuple | Mapping)
    ]


class _Collection:
    """One collection: the vectors, the texts and metadata, and an index of metadata values.

    Only non-empty texts and metadata take an entry: documents loaded as bare
    vectors (`add_many` with ids alone) cost their row and their id.
    """

    __slots__ = ("dimension", "metadata", "table", "texts", "with_value")

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self.table = VectorTable(dimension)
        self.texts: dict[str, str] = {}
        self.metadata: dict[str, bytes] = {}  # JSON; a private copy of the caller's dict
        # (key, comparable value) -> ids: a filter reads only the ids it names.
        self.with_value: dict[tuple[str, tuple[str, MetadataValue]], set[str]] = {}

    def text(self, document_id: str) -> str:
        return self.texts.get(document_id, "")

    def metadata_of(self, document_id: str) -> dict[str, Any]:
        return orjson.loads(self.metadata.get(document_id, _NO_METADATA))  # type: ignore[no-any-return]

    def remove(self, document_id: str) -> bool:
        if not self.table.discard(document_id):
            return False
        self.texts.pop(document_id, None)
        encoded = self.metadata.pop(document_id, None)
        if encoded is not None:
            for pair in _scalars(orjson.loads(encoded)):
                holders = self.with_value[pair]
                holders.discard(document_id)
                if not holders:
                    del self.with_value[pair]
        return True

    def _describe(self, document_id: str, text: str, metadata: str) -> None:
        if text:
            self.texts[document_id] = text
        if metadata != "{}":
            self.metadata[document_id] = metadata.encode()
            for pair in _scalars(orjson.loads(metadata)):
                self.with_value.setdefault(pair, set()).add(document_id)

    def put_many(self, columns: Columns) -> None:
        for document_id in self.table.present(columns.ids):
            self.remove(document_id)
        self.table.put_many(columns.ids, columns.vectors, columns.norms)
        for document_id, text, metadata in zip(
            columns.ids, columns.texts, columns.metadata, strict=True
        ):
            if text or metadata != "{}":
                self._describe(document_id, text, metadata)

    def matching(self, conditions: dict[str, MetadataValue]) -> set[str] | None:
        """The ids whose metadata has every condition's key with an equal value; None when
        that is every document (the index names only stored ids)."""
        sets = sorted(
            (self.with_value.get((key, _key(value)), set()) for key, value in conditions.items()),
            key=len,
        )
        if len(sets[0]) == len(self.table):
            return None
        return sets[0].intersection(*sets[1:])


class InMemoryVectorStore(VectorStoreBase):
    """Collections kept in this process: exact cosine search, nothing persisted.

    Every vector is compared in a search (with numpy installed it holds the
    vectors in one float32 array and does the bulk of the arithmetic, and
    the result is the same without it). Filters
    read an index of the metadata's top-level values, so a selective filter
    narrows the search before any vector is scored.

    Args:
        embedder: Embeds documents without an embedding, and text queries.
        batch_size: The most texts sent to `embedder.embed` in one call.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import HashingEmbedder, InMemoryVectorStore, VectorDocument
        >>> async def main():
        ...     store = InMemoryVectorStore(embedder=HashingEmbedder(64))
        ...     await store.create_collection("notes", 64)
        ...     await store.add("notes", [VectorDocument("a", "tides follow the Moon"),
        ...                               VectorDocument("b", "the Sun is a star")])
        ...     return [hit.id for hit in await store.search("notes", "Moon tides", k=1)]
        >>> asyncio.run(main())
        ['a']
    """

    def __init__(self, *, embedder: Embedder | None = None, batch_size: int = 128) -> None:
        super().__init__(embedder=embedder, batch_size=batch_size)
        self._collections_by_name: dict[str, _Collection] = {}

    def __repr__(self) -> str:
        return f"<InMemoryVectorStore {len(self._collections_by_name)} collections>"

    def _collection(self, name: str) -> _Collection:
        try:
            return self._collections_by_name[name]
        except KeyError:
            raise unknown_collection(name) from None

    async def _create(self, name: str, dimension: int) -> None:
        existing = self._collections_by_name.get(name)
        if existing is None:
            self._collections_by_name[name] = _Collection(dimension)
        elif existing.dimension != dimension:
            raise other_dimension(name, dimension, existing.dimension)

    async def _drop(self, name: str) -> None:
        self._collection(name)
        del self._collections_by_name[name]

    async def _collections(self) -> list[CollectionInfo]:
        return [
            CollectionInfo(name, c.dimension, len(c.table))
            for name, c in sorted(self._collections_by_name.items())
        ]

    async def _dimension(self, name: str) -> int:
        return self._collection(name).dimension

    async def _count(self, name: str) -> int:
        return len(self._collection(name).table)

    async def _present(self, name: str, ids: list[str]) -> set[str]:
        return self._collection(name).table.present(ids)

    def _refuse(self, columns: Columns) -> None:
        return None  # it stores any checked vector

    async def _commit(self, batch: list[Write]) -> list[Outcome]:
        # Written one by one, never waiting: a write is always committed alone, by its
        # caller (see `WriteQueue.write`), whole at once.
        outcomes: list[Outcome] = []
        for name, dimension, columns, replace in batch:
            collection = self._collections_by_name.get(name)
            if collection is None or collection.dimension != dimension:
                now = None if collection is None else collection.dimension
                outcomes.append(dimension_changed(name, dimension, now))
                continue
            present = collection.table.present(columns.ids)
            if present and not replace:  # left as they are
                columns = columns.take([i for i, d in enumerate(columns.ids) if d not in present])
            collection.put_many(columns)
            outcomes.append(list(columns.ids))
        return outcomes

    async def _delete(self, name: str, ids: list[str]) -> int:
        collection = self._collection(name)
        return sum(collection.remove(document_id) for document_id in ids)

    async def _get(self, name: str, document_id: str) -> VectorDocument | None:
        collection = self._collection(name)
        if document_id not in collection.table:
            return None
        embedding = tuple(collection.table.vector(document_id))
        return VectorDocument(
            document_id,
            collection.text(document_id),
            collection.metadata_of(document_id),
            embedding,
        )

    async def _search(
        self, name: str, vector: array[float], k: int, conditions: dict[str, MetadataValue]
    ) -> list[SearchResult]:
        collection = self._collection(name)
        among = collection.matching(conditions) if conditions else None
        hits = collection.table.top_k(vector, k, among)
        return [
            SearchResult(i, collection.text(i), collection.metadata_of(i), score)
            for i, score in hits
        ]
