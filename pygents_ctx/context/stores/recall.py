"""`HistoryRecall`: a search of a session that takes the place of the store's own."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from pygents_ctx.context.stores.base import ContextStore
    from pygents_ctx.context.stores.search import HistoryHit

__all__ = ["HistoryRecall"]


@runtime_checkable
class HistoryRecall(Protocol):
    """A search of a session that `ContextConfig(recall=...)` puts in place of `store.search`.

    `search_history` asks it, with the agent's store, instead of the store's
    own full-text search: `pygents_ctx.memory.SemanticRecall` (lexical and
    semantic hits fused) is the built-in one.
    """

    async def search(self, store: ContextStore, query: str, *, limit: int = 5) -> list[HistoryHit]:
        """The messages of `store`'s session that best match `query`, best first."""
        ...
