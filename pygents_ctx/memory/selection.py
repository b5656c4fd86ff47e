"""Selectors for `ContextPool.select`: lexical (`BM25Selector`) and semantic (`SemanticSelector`).

Both keep an index per pool that follows the pool's changes lazily: `put`,
`discard` and `clear` only note the change (the pool calls them inside its
own methods, so they must be cheap), and the next `search` applies what
changed since the last one. `branch()` is copy on write: the branch shares
the indexed data until either side next applies a change, and that side
copies it first.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final, Generic, Protocol, Self, TypeVar

from pygents_ctx._checks import number, whole_number
from pygents_ctx.context.selection import SelectionIndex, _set_default_selector
from pygents_ctx.memory._table import VectorTable, embed_checked
from pygents_ctx.memory.embedders import Embedder, HashingEmbedder

if TYPE_CHECKING:
    from array import array

__all__ = ["BM25Selector", "SemanticSelector"]

_WORD: Final = re.compile(r"\w+")


def _terms(text: str) -> list[str]:
    """The words BM25 indexes: casefolded runs of letters, digits and `_`, in order."""
    return _WORD.findall(text.casefold())


class _Core(Protocol):
    shares: int

    def __contains__(self, item_id: object) -> bool: ...
    def copy(self) -> Self: ...
    def empty(self) -> Self: ...


C = TypeVar("C", bound=_Core)


class _LazyIndex(Generic[C]):
    """Notes changes in `_pending` (id -> text, None when removed); `_core` holds the rest."""

    __slots__ = ("_core", "_pending")

    def __init__(self, core: C, pending: dict[str, str | None]) -> None:
        self._core = core
        self._pending = pending

    def put(self, item_id: str, text: str) -> None:
        self._pending[item_id] = text

    def discard(self, item_id: str) -> None:
        if item_id in self._core:
            self._pending[item_id] = None
        else:  # never indexed: forgetting the pending text is enough
            self._pending.pop(item_id, None)

    def clear(self) -> None:
        self._pending = {}
        self._core = self._core.empty()  # a fresh one: a branch may share the old

    def _branched(self, pending: dict[str, str | None]) -> Self:
        self._core.shares += 1
        return type(self)(self._core, pending)

    def _owned(self) -> C:
        """The core, copied first if a branch shares it."""
        core = self._core
        if core.shares:
            core.shares -= 1
            core = self._core = core.copy()
        return core


# ----------------------------------------------------------------------------- BM25


class _Postings:
    """The BM25 statistics: who holds which term how often, and each text's length."""

    __slots__ = ("lengths", "postings", "shares", "texts", "total")

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}
        self.lengths: dict[str, int] = {}
        self.postings: dict[str, dict[str, int]] = {}
        self.total = 0
        self.shares = 0

    def __contains__(self, item_id: object) -> bool:
        return item_id in self.texts

    def empty(self) -> _Postings:
        return _Postings()

    def copy(self) -> _Postings:
        other = _Postings()
        other.texts = dict(self.texts)
        other.lengths = dict(self.lengths)
        other.postings = {term: dict(holders) for term, holders in self.postings.items()}
        other.total = self.total
        return other

    def remove(self, item_id: str) -> None:
        text = self.texts.pop(item_id, None)
        if text is None:
            return
        self.total -= self.lengths.pop(item_id)
        postings = self.postings
        for term in set(_terms(text)):
            holders = postings[term]
            del holders[item_id]
            if not holders:
                del postings[term]

    def insert(self, item_id: str, text: str) -> None:
        words = _terms(text)
        self.texts[item_id] = text
        self.lengths[item_id] = len(words)
        self.total += len(words)
        counts: dict[str, int] = {}
        for word in words:
            counts[word] = counts.get(word, 0) + 1
        postings = self.postings
        for term, count in counts.items():
            holders = postings.get(term)
            if holders is None:
                postings[term] = {item_id: count}
            else:
                holders[item_id] = count


class _BM25Index(_LazyIndex[_Postings]):
    __slots__ = ("_b", "_k1")

    def __init__(self, core: _Postings, pending: dict[str, str | None]) -> None:
        super().__init__(core, pending)
        self._k1 = 1.2
        self._b = 0.75

    def branch(self) -> _BM25Index:
        child = self._branched(dict(self._pending))
        child._k1, child._b = self._k1, self._b
        return child

    def _apply(self) -> _Postings:
        pending = self._pending
        if not pending:
            return self._core
        core = self._owned()
        texts = core.texts
        for item_id, text in pending.items():
            if text is not None and texts.get(item_id) == text:
                continue  # replaced by an item with the same description
            core.remove(item_id)
            if text is not None:
                core.insert(item_id, text)
        pending.clear()
        return core

    async def search(self, query: str, k: int) -> list[tuple[str, float]]:
        core = self._apply()
        count = len(core.texts)
        if not count or not core.total:
            return []
        k1, b = self._k1, self._b
        average = core.total / count
        lengths, postings = core.lengths, core.postings
        # A term adds less than its weight, idf * (k1 + 1), to an item's score.
        weights = {
            term: math.log(1.0 + (count - len(postings[term]) + 0.5) / (len(postings[term]) + 0.5))
            * (k1 + 1.0)
            for term in dict.fromkeys(_terms(query))
            if term in postings
        }
        # Rare (heavy) terms first: they find the few items that can win. Once the
        # terms left cannot lift an unseen item to the k-th score so far (MaxScore),
        # they only add to the items already found, through dict lookups, instead
        # of walking their (long) postings.
        order = sorted(weights, key=lambda term: (-weights[term], term))
        scores: dict[str, float] = {}
        get = scores.get
        for position, term in enumerate(order):
            weight, holders = weights[term], postings[term]
            for item_id, tf in holders.items():
                norm = k1 * (1.0 - b + b * lengths[item_id] / average)
                scores[item_id] = get(item_id, 0.0) + weight * tf / (tf + norm)
            rest = order[position + 1 :]
            if rest and len(scores) >= k:
                ceiling = math.fsum(weights[t] for t in rest) * (1.0 + 1e-9)
                if ceiling < heapq.nlargest(k, scores.values())[-1]:
                    self._add_to_found(scores, rest, weights, postings, lengths, average)
                    break
        best = heapq.nsmallest(k, ((-score, item_id) for item_id, score in scores.items()))
        return [(item_id, -negative) for negative, item_id in best]

    def _add_to_found(
        self,
        scores: dict[str, float],
        terms: list[str],
        weights: dict[str, float],
        postings: dict[str, dict[str, int]],
        lengths: dict[str, int],
        average: float,
    ) -> None:
        """Add the scores of `terms` to the items in `scores` only."""
        k1, b = self._k1, self._b
        for term in terms:
            weight, holders = weights[term], postings[term]
            if len(holders) <= len(scores):
                pairs = [(i, tf) for i, tf in holders.items() if i in scores]
            else:
                pairs = [(i, holders[i]) for i in scores if i in holders]
            for item_id, tf in pairs:
                norm = k1 * (1.0 - b + b * lengths[item_id] / average)
                scores[item_id] += weight * tf / (tf + norm)


class BM25Selector:
    """Lexical selection: Okapi BM25 over the items' descriptions, from an inverted index.

    A description is split into words: casefolded runs of letters, digits and
    `_` (`"Q3 Revenue, re-forecast"` gives `q3`, `revenue`, `re`, `forecast`). An item's score
    for a query is the sum, over the query's distinct terms that it holds, of
    `idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average_length))`
    with `idf = ln(1 + (N - n + 0.5) / (n + 0.5))` (N items, n holding the
    term), so it is always positive. Only items sharing a term with the query
    are selected; equal scores are ordered by id.

    A search reads only the postings of the query's terms. The index follows
    the pool incrementally (each search first indexes what was added,
    replaced or removed since the last), and a branched pool's index is
    copied only when one side changes.

    Args:
        k1: Term-frequency saturation (at least 0; 1.2 is usual).
        b: Length normalization, from 0 (none) to 1 (full).

    Raises:
        TypeError: An argument is not a number.
        ValueError: `k1` is negative, or `b` is outside [0, 1].

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import BM25Selector, ContextItem, ContextPool
        >>> pool: ContextPool[str] = ContextPool(selector=BM25Selector())
        >>> async def main():
        ...     await pool.add(ContextItem("...", description="Moon and tides", id="a"))
        ...     await pool.add(ContextItem("...", description="Sun spots", id="b"))
        ...     return [item.id for item in await pool.select("what moves the tides?")]
        >>> asyncio.run(main())
        ['a']
    """

    __slots__ = ("_b", "_k1")

    def __init__(self, *, k1: float = 1.2, b: float = 0.75) -> None:
        number(k1, "BM25Selector k1")
        if not 0 <= number(b, "BM25Selector b") <= 1:
            raise ValueError(f"BM25Selector b must be between 0 and 1, not {b}")
        self._k1, self._b = float(k1), float(b)

    @property
    def k1(self) -> float:
        """Term-frequency saturation."""
        return self._k1

    @property
    def b(self) -> float:
        """Length normalization, 0 to 1."""
        return self._b

    def __repr__(self) -> str:
        return f"BM25Selector(k1={self._k1}, b={self._b})"

    def build_index(self, entries: Iterable[tuple[str, str]]) -> SelectionIndex:
        """A new BM25 index of `entries` (`(id, description)` pairs), indexed at first search."""
        index = _BM25Index(_Postings(), dict(entries))
        index._k1, index._b = self._k1, self._b
        return index


# ----------------------------------------------------------------------------- semantic


class _Embedded:
    """The embedded descriptions: each id's text, and its vector when it is not zero."""

    __slots__ = ("shares", "table", "texts")

    def __init__(self, table: VectorTable | None = None) -> None:
        self.texts: dict[str, str] = {}
        self.table = table
        self.shares = 0

    def __contains__(self, item_id: object) -> bool:
        return item_id in self.texts

    def empty(self) -> _Embedded:
        return _Embedded()

    def copy(self) -> _Embedded:
        other = _Embedded(None if self.table is None else self.table.copy())
        other.texts = dict(self.texts)
        return other

    def remove(self, item_id: str) -> None:
        del self.texts[item_id]  # only ids in the core are ever removed
        if self.table is not None:
            self.table.discard(item_id)

    def insert(self, item_id: str, text: str, vector: array[float]) -> None:
        self.texts[item_id] = text
        if self.table is None:
            self.table = VectorTable(len(vector))
        if any(vector):
            self.table.put(item_id, vector)
        else:  # no direction: never selected
            self.table.discard(item_id)


class _SemanticIndex(_LazyIndex[_Embedded]):
    __slots__ = ("_batch_size", "_embedder", "_lock")

    def __init__(
        self,
        core: _Embedded,
        pending: dict[str, str | None],
        embedder: Embedder,
        batch_size: int,
    ) -> None:
        super().__init__(core, pending)
        self._embedder = embedder
        self._batch_size = batch_size
        self._lock: asyncio.Lock | None = None

    def branch(self) -> _SemanticIndex:
        self._core.shares += 1
        return _SemanticIndex(self._core, dict(self._pending), self._embedder, self._batch_size)

    async def search(self, query: str, k: int) -> list[tuple[str, float]]:
        if self._lock is None:
            self._lock = asyncio.Lock()
        # One search embeds the pending descriptions at a time; a concurrent one
        # waits for it rather than embedding them again.
        async with self._lock:
            query_vector = await self._embed_pending_and(query)
        table = self._core.table
        if table is None or not any(query_vector):
            return []
        return table.top_k(query_vector, k)

    async def _embed_pending_and(self, query: str) -> array[float]:
        """Apply the pending changes, embedding new descriptions with the query in one go."""
        pending = self._pending
        if any(text is None for text in pending.values()):
            core = self._owned()
            for item_id in [i for i, text in pending.items() if text is None]:
                core.remove(item_id)
                del pending[item_id]
        texts = self._core.texts
        for item_id in [i for i, text in pending.items() if texts.get(i) == text]:
            del pending[item_id]  # the same description as already embedded
        work = [(item_id, text) for item_id, text in pending.items() if text is not None]
        table = self._core.table
        vectors = await embed_checked(
            self._embedder,
            [text for _, text in work] + [query],
            batch_size=self._batch_size,
            dimension=None if table is None else table.dimension,
            allow_zero=True,
        )
        # The pool may have changed while the embedder ran: install only the
        # descriptions still pending as they were (a clear() or a newer put wins).
        pending = self._pending
        if work:
            core = self._owned()
            for (item_id, text), vector in zip(work, vectors, strict=False):
                if pending.get(item_id) == text:
                    core.insert(item_id, text, vector)
                    del pending[item_id]
        return vectors[-1]


class SemanticSelector:
    """Semantic selection: cosine similarity of embeddings of the query and the descriptions.

    Descriptions are embedded in batches at the first `select()` after they
    were added (or changed), together with the query, so adding to the pool
    stays cheap and an embedding service sees few, large requests. The `k`
    items with the highest cosine similarity are selected, whatever their
    score; an item whose description embeds to all zeros (no words, for
    `HashingEmbedder`) is never selected, and such a query selects nothing.
    Equal scores are ordered by id.

    Scoring is exact: every vector is compared. With numpy installed it does
    the bulk of the arithmetic; without it, plain Python does (see the
    memory guide for figures).

    Args:
        embedder: Turns descriptions and queries into vectors (default:
            `HashingEmbedder()`).
        batch_size: The most texts sent to `embedder.embed` in one call.

    Raises:
        TypeError: `embedder` is not an `Embedder`, or `batch_size` not an int.
        ValueError: `batch_size` is less than 1.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import ContextItem, ContextPool, SemanticSelector
        >>> pool: ContextPool[str] = ContextPool(selector=SemanticSelector())
        >>> async def main():
        ...     await pool.add(ContextItem("...", description="quarterly reports", id="a"))
        ...     await pool.add(ContextItem("...", description="team offsite", id="b"))
        ...     return [item.id for item in await pool.select("report", k=1)]
        >>> asyncio.run(main())
        ['a']
    """

    __slots__ = ("_batch_size", "_embedder")

    def __init__(self, embedder: Embedder | None = None, *, batch_size: int = 256) -> None:
        if embedder is not None and not isinstance(embedder, Embedder):
            raise TypeError(
                "SemanticSelector embedder must have an async embed(texts) method, "
                f"not {embedder!r}"
            )
        whole_number(batch_size, "SemanticSelector batch_size", least=1)
        self._embedder: Embedder = HashingEmbedder() if embedder is None else embedder
        self._batch_size = batch_size

    @property
    def embedder(self) -> Embedder:
        """What turns texts into vectors."""
        return self._embedder

    @property
    def batch_size(self) -> int:
        """The most texts sent to the embedder in one call."""
        return self._batch_size

    def __repr__(self) -> str:
        return f"SemanticSelector({self._embedder!r}, batch_size={self._batch_size})"

    def build_index(self, entries: Iterable[tuple[str, str]]) -> SelectionIndex:
        """A new index of `entries` (`(id, description)` pairs), embedded at first search."""
        return _SemanticIndex(_Embedded(), dict(entries), self._embedder, self._batch_size)


_set_default_selector(BM25Selector)
