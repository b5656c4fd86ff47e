"""What `ContextPool.select` asks of a selector: two small protocols.

The pool knows nothing of how relevance is computed. A `Selector` builds a
`SelectionIndex` over the pool's `(id, description)` pairs; the pool then
tells the index about every change (`put` for an added or replaced item,
`discard` for a removed or evicted one, `clear`) and asks it for the best
matches of a query. `pygents_ctx.memory` implements both (`BM25Selector`,
`SemanticSelector`) and registers the default the pool uses when it is given
none; this module never imports it, so the pool stays below the memory layer.

`put`, `discard`, `clear` and `branch` are synchronous and run inside the
pool's own methods, so they must be cheap: an index may note the change and
do the work in `search`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol, runtime_checkable

__all__ = ["SelectionIndex", "Selector"]


@runtime_checkable
class SelectionIndex(Protocol):
    """The live index a selector keeps for one pool (one per pool, never shared)."""

    def put(self, item_id: str, text: str) -> None:
        """The item `item_id` now has the description `text` (new or replaced)."""
        ...

    def discard(self, item_id: str) -> None:
        """The item `item_id` left the pool (removed or evicted); unknown ids are ignored."""
        ...

    def clear(self) -> None:
        """Every item left the pool."""
        ...

    def branch(self) -> SelectionIndex:
        """An independent copy for a branched pool: later changes to either side
        do not reach the other. It should be cheap (copy on write)."""
        ...

    async def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """At most `k` `(item_id, score)` pairs, best first; `k` is at least 1."""
        ...


@runtime_checkable
class Selector(Protocol):
    """How a `ContextPool` ranks its items against a query: a factory of indexes.

    A selector is configuration, shared by a pool and its branches; each pool
    builds its own index from it.
    """

    def build_index(self, entries: Iterable[tuple[str, str]]) -> SelectionIndex:
        """A new index holding `entries`, the pool's `(id, description)` pairs."""
        ...


_default_factory: Callable[[], Selector] | None = None


def _set_default_selector(factory: Callable[[], Selector]) -> None:
    """Make `factory()` the selector of pools given none (the memory layer calls this)."""
    global _default_factory
    _default_factory = factory


def _default_selector() -> Selector:
    """The selector a pool given none uses.

    Raises:
        RuntimeError: No default is registered (`pygents_ctx.memory` was not imported).
    """
    if _default_factory is None:
        raise RuntimeError(
            "this pool has no selector and none is registered as the default; "
            "import pygents_ctx (which registers BM25Selector) or pass "
            "ContextPool(selector=...)"
        )
    return _default_factory()
