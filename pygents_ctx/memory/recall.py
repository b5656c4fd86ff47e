"""`SemanticRecall`: a conversation's search by meaning, fused with its full-text search.

`ContextStore.search` finds the messages that share words with a query. A
question put in other words ("what is the door passcode?" for "the gate code
is 4417") needs a search by meaning: `SemanticRecall` keeps an embedding of
every message of a session in a `VectorStore` and fuses the two rankings.
Give it to the agent's context, and `search_history` uses it:

    recall = SemanticRecall(SQLiteVectorStore(conn), embedder)
    agent = Agent(..., context=ContextConfig(store, recall=recall))

How it works:

- **Lazily indexed.** Appending a message does nothing here: the turn pays
  nothing. A search first catches up (`catch_up`): it reads the messages
  written since the last one (`ContextStore.messages_after`), embeds them in
  batches of `batch_size` and stores their vectors; call `catch_up` yourself
  (after a turn, in a background task) to keep the first search quick.
- **One collection per session**, named `<collection>:<session id>`, each
  document the message's id (`HistoryHit.id`) and, as its text, a digest of
  the text it was embedded from (`search.indexed_text`), not the text: the
  message's words stay in the context store alone. How far a session is indexed (the newest id) is a
  document of `<collection>:indexed`, stored after each batch (and a
  session whose index ever deleted a vector, a document of
  `<collection>:indexed:pruned`). Indexing is
  idempotent by message id: documents are upserted, so a batch embedded again
  (after a crash between its write and its mark, or by two processes at once)
  is stored once.
- **A fork shares its source's vectors.** A fork keeps the ids of the
  messages it inherits (`ContextStore.shared_from` names its sources, and
  the newest id it shares of each), so its index reads the vectors its
  sources' indexes hold for them: its first catch-up embeds only what they
  do not hold (its own messages, and any its source had not indexed yet),
  and a search asks its own collection and its sources' alike. A vector of
  a source's message the fork does not hold (written after the fork point,
  or another branch's) is never a hit. Its mark names its sources: while a
  fork's index reads a session's vectors, the session's removed messages'
  vectors stay (the fork may still hold them), and if a source's vectors are
  forgotten (its session erased), the fork's next catch-up embeds what they
  held for it. On the database stores, what copies a fork's shared messages
  into rows of its own (a compaction, `clear`, `clear_run`, `restore` or a
  rewind below the fork point, on either side) ends the sharing: a fork
  first searched after that is indexed whole, and on SQLite, where the
  copies get new ids, an indexed fork embeds them again, once.
- **Fused.** `search` asks the store's full-text search and the vector store
  for `pool` hits each and merges them by reciprocal rank fusion (each list
  adds `1 / (fusion_k + rank)` to a message's score); the hits are the
  store's `HistoryHit`s (ids, positions, the archived flag) with that score.
  A vector hit is looked up where its message is now
  (`ContextStore.messages_with_ids`): a message removed since (a rewind, a
  cleared run) is left out and its vector deleted (unless a fork's index
  reads it), and one whose id now holds another text (SQLite may give a
  deleted row's id again) is embedded again and left out of this search;
  the vector search asks for more until it has `pool` hits or no more
  vectors. A vector hit with a cosine similarity of 0 or less (unrelated)
  is left out.
- **Failures.** If the embedder or the vector store fails, `search` returns
  the full-text hits alone, logs a warning on the `pygents_ctx` logger and
  keeps the error in `last_error`; nothing is lost (the index catches up at a
  later search). `catch_up` raises the error.
- **Erasing.** `erase` erases sessions from the store and their vectors;
  `forget(session_id)` drops one session's vectors. `store.erase` alone (or
  the command line's `pygents-ctx erase`) cannot reach the vector store: after
  one, `forget` each session it erased. A vector of a message a rewind or a
  cleared run removed is deleted when a search meets it, not at catch-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Final, TypeAlias

import orjson

from pygents_ctx._checks import storable_text, whole_number
from pygents_ctx.context.messages import Message
from pygents_ctx.context.stores.base import ContextStore
from pygents_ctx.context.stores.search import (
    MAX_SEARCH_LIMIT,
    HistoryHit,
    check_search,
    indexed_text,
    words,
)
from pygents_ctx.errors import CollectionNotFoundError
from pygents_ctx.memory.embedders import Embedder
from pygents_ctx.memory.vectors.base import VectorDocument, VectorStore

__all__ = ["SemanticRecall"]

logger = logging.getLogger("pygents_ctx")

_MARKS: Final = "indexed"
_PRUNED: Final = "indexed:pruned"  # the sessions whose index deleted a removed message's vector
_LENDS: Final = "lends:"  # a mark's key naming a session whose vectors its index reads
_ANY: Final = 2**63 - 1  # the newest id a session's own collection answers for

# A session a fork's index reads the vectors of, and the newest id the fork shares of it.
_Source: TypeAlias = tuple[str, int]


@dataclass(frozen=True)
class _Mark:
    """How far a session is indexed (the newest id), and the sources its index reads."""

    through: int
    sources: list[_Source]


class SemanticRecall:
    """Search a session by meaning and by words, fused: what `ContextConfig(recall=...)` takes.

    See the module docstring for how it indexes, fuses and fails.

    Args:
        vectors: Where the embeddings are kept (`InMemoryVectorStore`,
            `SQLiteVectorStore`, `PostgresVectorStore`); its own embedder, if
            any, is not used.
        embedder: Embeds the messages and the queries.
        collection: The prefix of the collections it makes.
        batch_size: The most messages embedded in one `embed` call, and
            read from the store in one page.
        pool: How many hits each of the two searches contributes before
            fusion (at least a search's `limit`, at most 100).
        fusion_k: Reciprocal rank fusion's constant (60, the usual one):
            larger evens out the weight of the first ranks.

    Raises:
        TypeError: An argument has the wrong type.
        ValueError: `collection` is empty, or a number is below 1.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import HashingEmbedder, InMemoryVectorStore, Message
        >>> from pygents_ctx import MemoryContextStore
        >>> recall = SemanticRecall(InMemoryVectorStore(), HashingEmbedder(64))
        >>> async def main():
        ...     store = MemoryContextStore([Message("user", "The gate code is 4417.")])
        ...     hits = await recall.search(store, "gate code")
        ...     return [(hit.id, hit.message.text) for hit in hits]
        >>> asyncio.run(main())
        [(1, 'The gate code is 4417.')]
    """

    def __init__(
        self,
        vectors: VectorStore,
        embedder: Embedder,
        *,
        collection: str = "pygents_recall",
        batch_size: int = 256,
        pool: int = 60,
        fusion_k: int = 60,
    ) -> None:
        if not isinstance(vectors, VectorStore):
            raise TypeError(
                f"SemanticRecall vectors must be a VectorStore (e.g. SQLiteVectorStore(conn)), "
                f"not {vectors!r}"
            )
        if not isinstance(embedder, Embedder):
            raise TypeError(
                f"SemanticRecall embedder must have an async embed(texts) method, not {embedder!r}"
            )
        storable_text(collection, "SemanticRecall collection", fix="e.g. 'pygents_recall'")
        for name, value in (("batch_size", batch_size), ("pool", pool), ("fusion_k", fusion_k)):
            whole_number(value, f"SemanticRecall {name}", least=1)
        self._vectors = vectors
        self._embedder = embedder
        self._prefix = collection
        self._batch_size = batch_size
        self._pool = pool
        self._fusion_k = fusion_k
        self._lock = asyncio.Lock()
        self.last_error: Exception | None = None
        """The error of the last search whose semantic half failed, or None."""

    def __repr__(self) -> str:
        return (
            f"SemanticRecall({type(self._vectors).__name__}, {self._embedder!r}, "
            f"collection={self._prefix!r})"
        )

    def collection_of(self, session_id: str) -> str:
        """The vector collection that holds `session_id`'s embeddings."""
        return f"{self._prefix}:{session_id}"

    # -- indexing --------------------------------------------------------------

    async def catch_up(self, store: ContextStore) -> int:
        """Embed the messages of `store`'s session written since the last catch-up.

        Reads them by id (`store.messages_after`), `batch_size` at a time,
        embeds each batch in one `embed` call and upserts it, then records
        the newest id: an interrupted catch-up resumes at its last whole
        batch. Messages without a word (`search.words`) are not embedded, and
        those the embedder gives a vector of zeros are not stored. A fork's
        first catch-up embeds none of the messages its sources' indexes hold
        (see the module docstring).

        Returns:
            How many messages were embedded.

        Raises:
            NotImplementedError: The store keeps no message ids.
            Exception: What the embedder or the vector store raised; what
                earlier batches stored stays, and the next call resumes.
        """
        done, _ = await self._caught_up(store)
        return done

    async def _caught_up(self, store: ContextStore) -> tuple[int, list[_Source]]:
        """`catch_up`: how many messages it embedded, and the sources the session's
        index reads besides its own collection."""
        async with self._lock:
            session = store.session_id
            mark = await self._mark_of(session)
            if mark is None:
                sources = await self._sources_of(store)
                indexed = await self._inherited_through(store, sources) if sources else 0
            else:
                sources = [s for s in mark.sources if await self._mark_of(s[0]) is not None]
                if len(sources) < len(mark.sources):
                    # A source's vectors were forgotten (its session erased): what it
                    # lent is embedded again, from where the others still hold it.
                    indexed = await self._inherited_through(store, sources)
                else:
                    indexed = await self._still_held(store, mark.through, sources)
            done = 0
            while True:
                hits = await store.messages_after(indexed, limit=self._batch_size)
                if not hits:
                    return done, sources
                done += await self._embed_hits(session, hits, sources)
                indexed = max(hit.id or 0 for hit in hits)
                await self._mark(session, indexed, sources)

    async def _sources_of(self, store: ContextStore) -> list[_Source]:
        """The indexed sessions a fork shares messages with (`store.shared_from`), and
        the sources their indexes read: each with the newest id the fork shares of it
        that its index holds."""
        newest: dict[str, int] = {}
        for source, shared in await store.shared_from():
            mark = await self._mark_of(source)
            if mark is None:
                continue  # never indexed: nothing to take
            for name, through in [(source, shared), *mark.sources]:
                indexed = mark if name == source else await self._mark_of(name)
                if indexed is not None:
                    through = min(through, shared, indexed.through)
                    newest[name] = max(through, newest.get(name, 0))
        return sorted((name, through) for name, through in newest.items() if through > 0)

    async def _inherited_through(self, store: ContextStore, sources: list[_Source]) -> int:
        """Where a fork's catch-up starts, its sources recorded in its mark first (from
        then on they keep the vectors of the messages they remove: `_nearest`).

        The newest id it shares whose message the index of a source that never
        deleted a vector holds (0: none): each index holds every message of its
        session up to its mark, so every message the fork shares up to there is held
        by one of them. Those above are embedded, unless a source holds them
        (`_embed_hits` asks).
        """
        await self._mark(store.session_id, 0, sources)
        whole = [source for source in sources if not await self._pruned(source[0])]
        below = max((through for _, through in whole), default=0)
        indexed = await self._newest_held(store, below, whole, own=False)
        await self._mark(store.session_id, indexed, sources)
        return indexed

    async def _still_held(self, store: ContextStore, indexed: int, sources: list[_Source]) -> int:
        """The newest id up to `indexed` whose message the session still holds as it was
        embedded: where a catch-up reads on from (0: from the start)."""
        return await self._newest_held(store, indexed, sources, own=True)

    async def _newest_held(
        self, store: ContextStore, below: int, sources: list[_Source], *, own: bool
    ) -> int:
        """The newest id up to `below` whose message the session holds as a vector of
        its own collection (with `own`) or of a source's (up to the id it shares) was
        made from; 0 when there is none.

        Usually `below` itself. A rewind, `clear` or `clear_run` may remove the newest
        messages, and SQLite gives the ids of a table's newest deleted rows to the next
        rows written: the ids below are probed downwards (64, then 4 times more at each
        step) until one holds the text its vector was made from.
        """
        where = [(self.collection_of(name), through) for name, through in sources]
        if own:
            where.insert(0, (self.collection_of(store.session_id), _ANY))
        high, span = below + 1, 1
        while high > 1 and where:
            low = max(high - span, 1)
            held = await store.messages_with_ids(range(low, high))
            for hit in sorted(held, key=_by_id, reverse=True):
                for name, through in where:
                    if (hit.id or 0) <= through and await self._holds(name, hit):
                        return hit.id or 0
            high, span = low, 64 if span == 1 else span * 4
        return 0

    async def _holds(self, name: str, hit: HistoryHit) -> bool:
        """Whether collection `name` has a vector made from `hit`'s message."""
        try:
            document = await self._vectors.get(name, str(hit.id))
        except CollectionNotFoundError:
            return False
        return document is not None and document.text == _digest(hit.message)

    async def _embed_hits(
        self, session: str, hits: Sequence[HistoryHit], sources: Sequence[_Source] = ()
    ) -> int:
        """Embed and store the messages of `hits` that have words and that no source's
        index holds (up to the newest id the session shares of it)."""
        documents = [(hit, indexed_text(hit.message)) for hit in hits]
        documents = [(hit, text) for hit, text in documents if words(text)]
        for name, through in sources:
            documents = [
                (hit, text)
                for hit, text in documents
                if (hit.id or 0) > through or not await self._holds(self.collection_of(name), hit)
            ]
        digests = {hit.id: _digest(hit.message) for hit, _ in documents}
        if not documents:
            return 0
        vectors = await self._embed([text for _, text in documents])
        # A vector of zeros has no direction: nothing is near it (the text's words still
        # find the message).
        kept = [
            VectorDocument(str(hit.id), digests[hit.id], embedding=tuple(vector))
            for (hit, text), vector in zip(documents, vectors, strict=True)
            if any(vector)
        ]
        if kept:
            name = self.collection_of(session)
            await self._vectors.create_collection(name, len(vectors[0]))
            await self._vectors.upsert(name, kept)
        return len(kept)

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        vectors = await self._embedder.embed(texts)
        if len(vectors) != len(texts) or not vectors:
            raise ValueError(
                f"the embedder returned {len(vectors)} vectors for {len(texts)} texts; "
                "embed(texts) must return one vector per text"
            )
        return vectors

    async def _mark_of(self, session: str) -> _Mark | None:
        try:
            mark = await self._vectors.get(self._marks(), session)
        except CollectionNotFoundError:
            return None
        if mark is None:
            return None
        sources = orjson.loads(mark.metadata.get("sources", "[]"))
        return _Mark(int(mark.metadata["through"]), [(str(a), int(b)) for a, b in sources])

    async def _mark(self, session: str, through: int, sources: list[_Source]) -> None:
        """Record how far `session` is indexed, and the sources its index reads: each
        named in a key of its own too, which `_lent` looks for."""
        metadata: dict[str, object] = {"through": through}
        if sources:
            metadata["sources"] = orjson.dumps(sources).decode()
            metadata.update({_LENDS + name: True for name, _ in sources})
        await self._vectors.create_collection(self._marks(), 1)
        await self._vectors.upsert(
            self._marks(), [VectorDocument(session, "", metadata, embedding=(1.0,))]
        )

    async def _lent(self, session: str) -> bool:
        """Whether the index of another session reads `session`'s vectors."""
        try:
            found = await self._vectors.search(
                self._marks(), (1.0,), k=1, filter={_LENDS + session: True}
            )
        except CollectionNotFoundError:
            return False
        return bool(found)

    async def _mark_pruned(self, session: str) -> None:
        """Record that `session`'s index deletes vectors (of messages it removed)."""
        await self._vectors.create_collection(self._pruned_marks(), 1)
        await self._vectors.upsert(
            self._pruned_marks(), [VectorDocument(session, "", embedding=(1.0,))]
        )

    async def _pruned(self, session: str) -> bool:
        """Whether `session`'s index ever deleted a vector of a message it removed."""
        try:
            return await self._vectors.get(self._pruned_marks(), session) is not None
        except CollectionNotFoundError:
            return False

    def _marks(self) -> str:
        return f"{self._prefix}:{_MARKS}"

    def _pruned_marks(self) -> str:
        return f"{self._prefix}:{_PRUNED}"

    # -- searching -------------------------------------------------------------

    async def search(self, store: ContextStore, query: str, *, limit: int = 5) -> list[HistoryHit]:
        """The messages of `store`'s session that best match `query`, by words or by meaning.

        The store's full-text hits and the semantic hits (after a
        `catch_up`), fused by reciprocal rank: a message both find comes
        first. Each hit is a `HistoryHit` as `store.search` gives it (id,
        position, archived), its `score` the fused one. If the semantic half
        fails, the full-text hits alone (see the module docstring).

        Args:
            store: The session to search.
            query: Plain text, at most `MAX_SEARCH_QUERY` characters.
            limit: The most hits, 1 to `MAX_SEARCH_LIMIT`.

        Raises:
            TypeError: The query is not a str or the limit not an int;
                nothing is read.
            ValueError: The query is empty or too long, or the limit out of
                range (as `ContextStore.search`); nothing is read.
            NotImplementedError: The store keeps no message ids.
        """
        query, limit = check_search(query, limit)
        pool = min(max(self._pool, limit), MAX_SEARCH_LIMIT)
        lexical = await store.search(query, limit=pool)
        try:
            semantic = await self.semantic_search(store, query, limit=pool)
        except NotImplementedError:
            raise
        except Exception as error:
            self.last_error = error
            logger.warning(
                "semantic recall failed for session %r (%s: %s); "
                "search_history answers with the full-text hits alone",
                store.session_id,
                type(error).__name__,
                error,
            )
            return lexical[:limit]
        self.last_error = None
        return self._fused([lexical, semantic], limit)

    async def semantic_search(
        self, store: ContextStore, query: str, *, limit: int = 5
    ) -> list[HistoryHit]:
        """The messages closest in meaning to `query`, after a `catch_up`; `score` is the
        cosine similarity.

        A fork's own collection and its sources' are searched alike; a hit
        is always a message the session holds, where it is in the session.

        Raises:
            TypeError: The query is not a str or the limit not an int.
            ValueError: The query is empty or too long, or the limit out of range.
            Exception: What the embedder or the vector store raised.
        """
        query, limit = check_search(query, limit)
        _, sources = await self._caught_up(store)
        vector = (await self._embed([query]))[0]
        found: dict[int | None, HistoryHit] = {}
        own = self.collection_of(store.session_id)
        for name, through in [(own, _ANY), *((self.collection_of(s), t) for s, t in sources)]:
            for hit in await self._nearest(store, name, through, vector, limit, own=name == own):
                found.setdefault(hit.id, hit)
        # As one collection ranks them: by similarity, then by id.
        return sorted(found.values(), key=lambda hit: (-hit.score, str(hit.id)))[:limit]

    async def _nearest(
        self,
        store: ContextStore,
        name: str,
        through: int,
        vector: list[float],
        limit: int,
        *,
        own: bool,
    ) -> list[HistoryHit]:
        """The `limit` messages of the session nearest `vector` among collection `name`'s
        vectors with an id up to `through`.

        A vector whose message the session does not hold (removed since, or another
        branch's) or holds with another text is passed over; the search asks for 4
        times more until `limit` are found or the collection has no more. In the
        session's own collection, the vectors of removed messages are deleted (unless
        a fork's index reads them) and a message whose id now holds another text is
        embedded again; a source's vector of a message the session holds with another
        text has the session's own embedded.
        """
        located: dict[int, HistoryHit | None] = {}
        k = limit
        while True:
            try:
                found = await self._vectors.search(name, vector, k=k)
            except CollectionNotFoundError:
                return []  # nothing indexed there yet: no message has a word
            # A vector with a cosine similarity of 0 or less is unrelated.
            wanted = [r for r in found if r.score > 0.0 and int(r.id) <= through]
            unknown = [int(r.id) for r in wanted if int(r.id) not in located]
            located.update(dict.fromkeys(unknown))
            located.update({hit.id or 0: hit for hit in await store.messages_with_ids(unknown)})
            hits = [
                replace(hit, score=r.score)
                for r in wanted
                if (hit := located[int(r.id)]) is not None and _digest(hit.message) == r.text
            ]
            if len(hits) >= limit or len(found) < k or found[-1].score <= 0.0:
                break  # enough, or no more vectors, or none more related
            k *= 4
        texts = {r.id: r.text for r in wanted}
        gone = [str(key) for key, hit in located.items() if hit is None]
        stale = [
            hit
            for key, hit in located.items()
            if hit is not None and _digest(hit.message) != texts.get(str(key))
        ]
        if own and gone:
            # Recorded before the fork's check (`_lent`), read after a fork's record
            # (`_inherited_through`): a fork then either keeps these vectors or does
            # not take them on trust.
            await self._mark_pruned(store.session_id)
            if not await self._lent(store.session_id):
                await self._vectors.delete(name, gone)
        if stale:
            await self._embed_hits(store.session_id, stale)
        return hits[:limit]

    def _fused(self, rankings: list[list[HistoryHit]], limit: int) -> list[HistoryHit]:
        scores: dict[int | None, float] = {}
        first: dict[int | None, HistoryHit] = {}
        for ranking in rankings:
            for rank, hit in enumerate(ranking, start=1):
                scores[hit.id] = scores.get(hit.id, 0.0) + 1.0 / (self._fusion_k + rank)
                first.setdefault(hit.id, hit)
        best = sorted(scores, key=lambda key: (-scores[key], -(key or 0)))[:limit]
        return [replace(first[key], score=scores[key]) for key in best]

    # -- forgetting ------------------------------------------------------------

    async def forget(self, session_id: str) -> None:
        """Drop `session_id`'s embeddings and its mark (nothing if it has none)."""
        with contextlib.suppress(CollectionNotFoundError):
            await self._vectors.delete_collection(self.collection_of(session_id))
        for marks in (self._marks(), self._pruned_marks()):
            with contextlib.suppress(CollectionNotFoundError):
                await self._vectors.delete(marks, [session_id])

    async def erase(
        self,
        store: ContextStore,
        *,
        owner: str | None = None,
        session: str | None = None,
        older_than: timedelta | None = None,
    ) -> int:
        """`store.erase(...)`, then `forget` every session it erased.

        The sessions erased are those `store.list_sessions(owner=owner)`
        listed before and no longer lists (and `session`, if given).

        Returns:
            How many sessions were erased.

        Raises:
            ValueError: As `store.erase`: neither `owner` nor `session` is
                given, or one is unusable; nothing is erased or forgotten.
            TypeError: An argument has the wrong type (as `store.erase`).
        """
        before = {info.session_id for info in await store.list_sessions(owner=owner)}
        erased = await store.erase(owner=owner, session=session, older_than=older_than)
        after = {info.session_id for info in await store.list_sessions(owner=owner)}
        gone = before - after
        if session is not None and erased:
            gone.add(session)
        for session_id in sorted(gone):
            await self.forget(session_id)
        return erased


def _by_id(hit: HistoryHit) -> int:
    return hit.id or 0


def _digest(message: Message) -> str:
    """What a message's vector document keeps of the text it was embedded from."""
    return hashlib.blake2b(indexed_text(message).encode(), digest_size=16).hexdigest()
