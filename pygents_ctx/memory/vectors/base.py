"""`VectorStore`: documents with embeddings in named collections, searched by cosine similarity.

This module holds the protocol, the value types (`VectorDocument`,
`SearchResult`, `CollectionInfo`) and `VectorStoreBase`, which checks every
argument and computes missing embeddings before it hands a backend anything,
so every backend refuses the same bad input the same way and changes nothing
when it does.

The contract every backend keeps:

- A collection has a name and a fixed dimension; naming an unknown one raises
  `CollectionNotFoundError`.
- Embeddings are stored as 32-bit floats; `get` returns them so rounded.
- `search` ranks by cosine similarity (1 is the same direction), best first;
  equal scores are ordered by id. `filter` keeps the documents whose metadata
  has each given key with an equal value (JSON equality: `1 == 1.0`, but
  `True` is not `1`, and `None` matches only a key present with `null`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeAlias, runtime_checkable

from pygents_ctx._checks import each_once, instances, storable_text, strings, whole_number
from pygents_ctx._resources import injectable
from pygents_ctx.errors import CollectionNotFoundError
from pygents_ctx.memory._table import (
    check_vector,
    checked_values,
    embed_checked,
    single_precision_square,
)
from pygents_ctx.memory.embedders import Embedder
from pygents_ctx.memory.vectors._bulk import (
    Columns,
    check_columns,
    check_json,
    document_columns,
    metadata_json,
)
from pygents_ctx.memory.vectors._writes import Outcome, Write, WriteQueue

if TYPE_CHECKING:
    from array import array


__all__ = ["CollectionInfo", "SearchResult", "VectorDocument", "VectorStore"]

MetadataValue: TypeAlias = "str | int | float | bool | None"
MAX_DIMENSION: Final = 16_000  # pgvector's limit for its `vector` type


@dataclass(frozen=True)
class VectorDocument:
    """A text with an id, metadata and (optionally) its embedding.

    A document without an embedding gets one from the store's embedder when
    it is added; a store without an embedder refuses it.

    Args:
        id: Unique within its collection; a non-empty str.
        text: The text (what an embedder embeds, and what a search returns).
        metadata: JSON values under str keys; search filters match its
            top-level keys. Copied; treat it as read-only.
        embedding: The vector, or None. Stored as 32-bit floats.

    Raises:
        TypeError: A field has the wrong type.
        ValueError: `id` is empty, a str holds NUL or a lone surrogate, a
            number is not finite or an integer does not fit 64 bits, or the
            embedding is empty, all zeros, or holds NaN, an infinity or a
            value too large for a 32-bit float.

    Examples:
        >>> from pygents_ctx import VectorDocument
        >>> doc = VectorDocument("d1", "The Moon raises tides", {"source": "notes"}, [0.1, 0.9])
        >>> doc.metadata["source"], doc.embedding
        ('notes', (0.1, 0.9))
    """

    id: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    embedding: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        storable_text(self.id, "VectorDocument id")
        storable_text(self.text, f"the text of document {self.id!r}", empty=True)
        if not isinstance(self.metadata, Mapping):
            raise TypeError(
                f"VectorDocument metadata must be a dict, not {type(self.metadata).__name__}"
            )
        check_json(self.metadata, f"the metadata of document {self.id!r}")
        object.__setattr__(self, "metadata", dict(self.metadata))
        if self.embedding is not None:
            # Checked here, so a bad document cannot exist; it keeps the numbers as given.
            _, doubles = checked_values(self.embedding, f"the embedding of document {self.id!r}")
            object.__setattr__(self, "embedding", tuple(doubles.tolist()))


@dataclass(frozen=True)
class SearchResult:
    """One document found by `VectorStore.search`, with its cosine similarity to the query."""

    id: str
    text: str
    metadata: dict[str, Any]
    score: float


@dataclass(frozen=True)
class CollectionInfo:
    """A collection's name, dimension and number of documents."""

    name: str
    dimension: int
    count: int


@injectable
@runtime_checkable
class VectorStore(Protocol):
    """Documents with embeddings in named collections, searched by cosine similarity.

    Implemented by `InMemoryVectorStore`, `SQLiteVectorStore` and
    `PostgresVectorStore`; each passes the same contract tests. A tool
    reaches the store of the agent that runs it by annotating a parameter
    `VectorStore`, when the agent was given `resources={VectorStore: store}`.
    """

    async def create_collection(self, name: str, dimension: int) -> None:
        """Create a collection of `dimension`-long vectors (nothing if it exists alike)."""
        ...

    async def delete_collection(self, name: str) -> None:
        """Delete a collection and its documents."""
        ...

    async def list_collections(self) -> list[CollectionInfo]:
        """Every collection, by name."""
        ...

    async def add(self, collection: str, documents: Iterable[VectorDocument]) -> list[str]:
        """Insert the documents whose ids are absent; return those ids, in order."""
        ...

    async def upsert(self, collection: str, documents: Iterable[VectorDocument]) -> None:
        """Insert the documents, replacing those with the same id."""
        ...

    async def delete(self, collection: str, ids: Iterable[str]) -> int:
        """Delete the documents with these ids; return how many there were."""
        ...

    async def get(self, collection: str, document_id: str) -> VectorDocument | None:
        """The document with this id (its embedding as stored), or None."""
        ...

    async def count(self, collection: str) -> int:
        """The number of documents in the collection."""
        ...

    async def search(
        self,
        collection: str,
        query: str | Sequence[float],
        *,
        k: int = 5,
        filter: Mapping[str, MetadataValue] | None = None,
    ) -> list[SearchResult]:
        """The `k` documents most similar to `query` (a vector, or a text to embed)."""
        ...


def check_name(name: object) -> str:
    """Return `name` if it is a usable collection name.

    Raises:
        TypeError: It is not a str.
        ValueError: It is empty or holds a NUL or a lone surrogate.
    """
    return storable_text(name, "a collection name")


def _check_filter(filter: object) -> dict[str, MetadataValue]:
    if filter is None:
        return {}
    if not isinstance(filter, Mapping):
        raise TypeError(f"search filter must be a dict of metadata values, not {filter!r}")
    checked: dict[str, MetadataValue] = {}
    for key, value in filter.items():
        if not isinstance(key, str):
            raise TypeError(f"search filter keys must be str, not {key!r}")
        if isinstance(value, list | tuple | Mapping):
            raise TypeError(
                f"search filter value for {key!r} must be a str, number, bool or None, "
                f"not {type(value).__name__}: filters match top-level values by equality"
            )
        check_json(value, f"the search filter value for {key!r}")
        checked[storable_text(key, "a search filter key", empty=True)] = value
    return checked


class VectorStoreBase(ABC):
    """What every `VectorStore` backend shares: argument checks and embedding.

    The public methods check everything (and embed what has no embedding)
    before calling the backend's `_`-methods, which only store and search.

    Args:
        embedder: Embeds documents without an embedding and text queries;
            without one, those are refused with a `ValueError`.
        batch_size: The most texts sent to `embedder.embed` in one call.

    Raises:
        TypeError: `embedder` is not an `Embedder`, or `batch_size` not an int.
        ValueError: `batch_size` is less than 1.
    """

    def __init__(self, *, embedder: Embedder | None = None, batch_size: int = 128) -> None:
        if embedder is not None and not isinstance(embedder, Embedder):
            raise TypeError(
                f"{type(self).__name__} embedder must have an async embed(texts) method, "
                f"not {embedder!r}"
            )
        whole_number(batch_size, f"{type(self).__name__} batch_size", least=1)
        self._embedder = embedder
        self._batch_size = batch_size
        # What writes check their documents against before they join a batch: each
        # collection's dimension as last read or made here. The batch's transaction
        # checks it again, so one changed by another writer is never written to.
        self._dimensions: dict[str, int] = {}
        self._writes = WriteQueue(self._commit)

    @property
    def embedder(self) -> Embedder | None:
        """What embeds documents without an embedding, and text queries."""
        return self._embedder

    # -- collections ---------------------------------------------------------

    async def create_collection(self, name: str, dimension: int) -> None:
        """Create a collection of `dimension`-long vectors; nothing if it exists with it.

        Raises:
            TypeError: `name` is not a str, or `dimension` not an int.
            ValueError: `name` is empty, `dimension` is outside 1 to 16,000, or
                the collection exists with another dimension.
        """
        checked = check_name(name)
        await self._create(
            checked,
            whole_number(dimension, "a collection's dimension", least=1, most=MAX_DIMENSION),
        )
        self._dimensions[checked] = dimension

    async def delete_collection(self, name: str) -> None:
        """Delete a collection and every document in it.

        Raises:
            CollectionNotFoundError: There is no such collection.
        """
        checked = check_name(name)
        self._dimensions.pop(checked, None)
        await self._drop(checked)

    async def list_collections(self) -> list[CollectionInfo]:
        """Every collection with its dimension and document count, by name."""
        return await self._collections()

    async def count(self, collection: str) -> int:
        """The number of documents in `collection`.

        Raises:
            CollectionNotFoundError: There is no such collection.
        """
        return await self._count(check_name(collection))

    # -- documents -----------------------------------------------------------

    async def add(self, collection: str, documents: Iterable[VectorDocument]) -> list[str]:
        """Insert the documents whose ids are not in `collection` yet; return their ids.

        The others are left as they are (and are not embedded). Everything is
        checked, and missing embeddings computed, before anything is written;
        the write is one transaction.

        Raises:
            CollectionNotFoundError: There is no such collection.
            TypeError: Something in `documents` is not a `VectorDocument`.
            ValueError: Two documents share an id, an embedding has the wrong
                dimension, or a document has no embedding and the store no
                embedder (or the embedder's vector is unusable).
        """
        name = check_name(collection)
        batch = _check_documents(documents)

        async def prepare(dimension: int) -> Columns:
            present = await self._present(name, [d.id for d in batch]) if batch else set()
            return await self._columns(name, dimension, [d for d in batch if d.id not in present])

        dimension, columns = await self._prepared(name, prepare)
        return await self._write(name, dimension, columns, replace=False) if columns.ids else []

    async def add_many(
        self,
        collection: str,
        ids: Sequence[str],
        vectors: Any,
        *,
        texts: Sequence[str] | None = None,
        metadata: Sequence[Mapping[str, Any]] | None = None,
        replace: bool = False,
    ) -> list[str]:
        """Add many documents at once, given as columns: the fast way to load vectors.

        The vectors go in as one block of 32-bit floats, with no object per
        document: a 2-D numpy array (any real dtype; float32 is copied once)
        or a list of lists. With numpy installed the checks run on the whole
        array; without it, row by row, to the same result. Everything is
        checked before anything is written, and the write is one transaction.

        Args:
            collection: Where to add.
            ids: One unique, non-empty id per row of `vectors`.
            vectors: `len(ids)` rows of the collection's dimension.
            texts: One text per id (default: every text empty).
            metadata: One dict of JSON values per id (default: empty).
            replace: Replace documents whose id is stored (as `upsert`);
                by default they are left as they are (as `add`).

        Returns:
            The ids written, in order: without `replace`, those not stored before.

        Raises:
            CollectionNotFoundError: There is no such collection.
            TypeError: A column is not a list, or holds the wrong type.
            ValueError: The columns differ in length, an id repeats or is
                empty, a vector has the wrong dimension, is all zeros, or
                holds NaN, an infinity or a value too large for 32 bits.

        Examples:
            >>> import asyncio
            >>> from pygents_ctx import InMemoryVectorStore
            >>> async def main():
            ...     store = InMemoryVectorStore()
            ...     await store.create_collection("points", 2)
            ...     await store.add_many("points", ["n", "e"], [[0, 1], [1, 0]],
            ...                          texts=["north", "east"])
            ...     return [hit.text for hit in await store.search("points", [0.2, 1], k=1)]
            >>> asyncio.run(main())
            ['north']
        """
        name = check_name(collection)
        if not isinstance(replace, bool):
            raise TypeError(f"add_many replace must be True or False, not {replace!r}")

        async def prepare(dimension: int) -> Columns:
            return check_columns(ids, vectors, texts, metadata, dimension)

        dimension, columns = await self._prepared(name, prepare)
        if not columns.ids:
            return []
        return await self._write(name, dimension, columns, replace=replace)

    async def upsert(self, collection: str, documents: Iterable[VectorDocument]) -> None:
        """Insert the documents, replacing any with the same id, in one transaction.

        Concurrent calls (`asyncio.gather` of upserts, or many tasks upserting)
        are committed together, one transaction a batch; each call returns
        once its documents are committed.

        Raises:
            CollectionNotFoundError: There is no such collection.
            TypeError: Something in `documents` is not a `VectorDocument`.
            ValueError: As for `add`; nothing is written.
        """
        name = check_name(collection)
        batch = _check_documents(documents)

        async def prepare(dimension: int) -> Columns:
            return await self._columns(name, dimension, batch)

        dimension, columns = await self._prepared(name, prepare)
        if columns.ids:
            await self._write(name, dimension, columns, replace=True)

    async def delete(self, collection: str, ids: Iterable[str]) -> int:
        """Delete the documents with these ids (unknown ids are ignored); return how many.

        Raises:
            CollectionNotFoundError: There is no such collection.
            TypeError: `ids` is a str, or holds something else.
            ValueError: An id holds a NUL or a lone surrogate (no document has it).
        """
        name = check_name(collection)
        listed = strings(ids, "ids", fix="pass a list of document ids")
        for index, document_id in enumerate(listed):
            storable_text(document_id, f"ids[{index}]", empty=True)
        wanted = list(dict.fromkeys(listed))
        return await self._delete(name, wanted)

    async def get(self, collection: str, document_id: str) -> VectorDocument | None:
        """The document with this id, its embedding rounded to 32-bit floats, or None.

        Raises:
            CollectionNotFoundError: There is no such collection.
            TypeError: `document_id` is not a str.
            ValueError: It holds a NUL or a lone surrogate (no document has it).
        """
        name = check_name(collection)
        return await self._get(name, storable_text(document_id, "document_id", empty=True))

    async def search(
        self,
        collection: str,
        query: str | Sequence[float],
        *,
        k: int = 5,
        filter: Mapping[str, MetadataValue] | None = None,
    ) -> list[SearchResult]:
        """The at most `k` documents most similar to `query`, best first.

        Args:
            collection: Where to search.
            query: A vector of the collection's dimension, or a text that the
                store's embedder turns into one.
            k: The most results (at least 1).
            filter: Metadata every result must have: each key present with an
                equal value (str, number, bool or None).

        Raises:
            CollectionNotFoundError: There is no such collection.
            TypeError: `query`, `k` or `filter` has the wrong type.
            ValueError: `k` is less than 1; the vector has the wrong
                dimension, is all zeros or holds NaN or an infinity; or the
                query is a text and the store has no embedder.
        """
        name = check_name(collection)
        wanted = whole_number(k, "search k", least=1)
        conditions = _check_filter(filter)
        dimension = await self._read_dimension(name)
        if isinstance(query, str):
            vector = (await self._embed(name, dimension, [query], "a text query"))[0]
        else:
            vector = check_vector(query, "the query vector", dimension)
        return await self._search(name, vector, wanted, conditions)

    async def _read_dimension(self, name: str) -> int:
        """The collection's dimension, read from the backend (and remembered for writes)."""
        dimension = await self._dimension(name)
        self._dimensions[name] = dimension
        return dimension

    async def _prepared(
        self, name: str, prepare: Callable[[int], Awaitable[Columns]]
    ) -> tuple[int, Columns]:
        """The dimension of collection `name` and `prepare(dimension)`: a write's checked columns.

        The dimension is the one remembered, when there is one (no round trip to
        the database); if the documents do not fit it, it is read again, and
        they are checked again if another writer changed it meanwhile.
        """
        known = self._dimensions.get(name)
        dimension = await self._read_dimension(name) if known is None else known
        try:
            return dimension, await prepare(dimension)
        except ValueError:
            if known is None or await self._read_dimension(name) == known:
                raise
        dimension = self._dimensions[name]
        return dimension, await prepare(dimension)

    async def _write(
        self, name: str, dimension: int, columns: Columns, *, replace: bool
    ) -> list[str]:
        """Store checked columns: the one write path of `add`, `upsert` and `add_many`.

        The write waits for the store's writer, which commits it with the
        writes made meanwhile (see `_writes`); the ids written, in order
        (without `replace`, ids already stored are left as they are).
        """
        self._refuse(columns)
        write = Write(name, dimension, columns, replace)
        try:
            return await self._writes.write(write)
        except (CollectionNotFoundError, ValueError):
            self._dimensions.pop(name, None)  # read it again next time
            raise

    async def _columns(self, name: str, dimension: int, batch: list[VectorDocument]) -> Columns:
        """The documents as the columns `_write` stores, embedding those without an embedding.

        A `VectorDocument` checked its embedding when it was made: here only its
        length is, before the embedder is asked for the missing ones.
        """
        missing: list[VectorDocument] = []
        for document in batch:
            if document.embedding is None:
                missing.append(document)
            elif len(document.embedding) != dimension:
                raise ValueError(
                    f"the embedding of document {document.id!r} has "
                    f"{len(document.embedding)} numbers, but the dimension is {dimension}"
                )
        embedded: dict[str, array[float]] = {}
        if missing:
            first = missing[0].id
            what = (
                f"document {first!r}"
                if len(missing) == 1
                else f"{len(missing)} documents (the first: {first!r})"
            )
            vectors = await self._embed(name, dimension, [d.text for d in missing], what)
            embedded = {d.id: v for d, v in zip(missing, vectors, strict=True)}
        return document_columns(
            [d.id for d in batch],
            [d.text for d in batch],
            [metadata_json(d.metadata) for d in batch],
            [embedded[d.id] if d.embedding is None else d.embedding for d in batch],
            dimension,
        )

    async def _embed(
        self, name: str, dimension: int, texts: list[str], what: str
    ) -> list[array[float]]:
        if self._embedder is None:
            raise ValueError(
                f"{what} has no embedding and {type(self).__name__} has no embedder: pass "
                "VectorDocument(embedding=...) or a vector query, or give the store an embedder "
                f"(e.g. {type(self).__name__}(..., embedder=HashingEmbedder({dimension})))"
            )
        return await embed_checked(
            self._embedder, texts, batch_size=self._batch_size, dimension=dimension
        )

    # -- what a backend implements ------------------------------------------

    @abstractmethod
    async def _create(self, name: str, dimension: int) -> None: ...

    @abstractmethod
    async def _drop(self, name: str) -> None: ...

    @abstractmethod
    async def _collections(self) -> list[CollectionInfo]: ...

    @abstractmethod
    async def _dimension(self, name: str) -> int:
        """The collection's dimension; raises `CollectionNotFoundError`."""

    @abstractmethod
    async def _count(self, name: str) -> int: ...

    @abstractmethod
    async def _present(self, name: str, ids: list[str]) -> set[str]:
        """Which of `ids` are stored."""

    @abstractmethod
    def _refuse(self, columns: Columns) -> None:
        """Raise if the backend cannot store `columns` (before the write joins a batch)."""

    @abstractmethod
    async def _commit(self, batch: list[Write]) -> list[Outcome]:
        """Store a batch of writes in one transaction, in order; each write's outcome.

        A write whose collection is gone, or has another dimension than the
        write's, is left out, its outcome the error (`dimension_changed`); the
        others' outcomes are the ids written, in order (without `replace`, ids
        already stored are left as they are and not returned). If it raises,
        nothing of the batch is stored.
        """

    @abstractmethod
    async def _delete(self, name: str, ids: list[str]) -> int: ...

    @abstractmethod
    async def _get(self, name: str, document_id: str) -> VectorDocument | None: ...

    @abstractmethod
    async def _search(
        self, name: str, vector: array[float], k: int, conditions: dict[str, MetadataValue]
    ) -> list[SearchResult]: ...


def _check_documents(documents: object) -> list[VectorDocument]:
    batch = instances(documents, VectorDocument, "documents")
    return each_once(batch, attrgetter("id"), "documents", "ids must be unique")


def unknown_collection(name: str) -> CollectionNotFoundError:
    """The error for a collection that does not exist."""
    return CollectionNotFoundError(
        f"no vector collection named {name!r}; create it with "
        f"`await store.create_collection({name!r}, dimension)`"
    )


def refuse_single_precision_overflow(columns: Columns, backend: str) -> None:
    """Refuse rows whose length a single-precision backend cannot compute.

    pgvector and sqlite-vec sum squares in 32-bit floats: a vector shorter than
    about 1e-19 or longer than about 1.8e19 would score NaN. Checked before any
    write, so a refused batch changes nothing.

    Raises:
        ValueError: A row's embedding is that short or that long.
    """
    for item_id, row_norm in zip(columns.ids, columns.norms, strict=True):
        if not single_precision_square(row_norm * row_norm):
            raise single_precision_refusal(item_id, backend)


def single_precision_refusal(document_id: str, backend: str) -> ValueError:
    """The error for an embedding whose length `backend` cannot compute in 32-bit floats."""
    return ValueError(
        f"the embedding of document {document_id!r} is too short or too long "
        f"for {backend}, which computes lengths in 32-bit floats (keep it between "
        "1e-19 and 1e19; cosine similarity ignores length, so scale it)"
    )


def dimension_changed(name: str, dimension: int, now: int | None) -> Exception:
    """The error for a collection dropped, or re-created otherwise, during a write."""
    if now is None:
        return unknown_collection(name)
    return ValueError(
        f"collection {name!r} was re-created with dimension {now} (not {dimension}) "
        "while the documents were prepared; nothing was written"
    )


def other_dimension(name: str, dimension: int, existing: int) -> ValueError:
    """The error for creating a collection that exists with another dimension."""
    return ValueError(
        f"collection {name!r} exists with dimension {existing}, not {dimension}; "
        "delete it first, or use another name"
    )
