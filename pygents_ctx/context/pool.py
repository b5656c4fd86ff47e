"""`ContextPool`: a keyed, bounded store of described `ContextItem`s."""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Generic, Self, TypeVar

from pygents_ctx._checks import whole_number
from pygents_ctx._json import JsonSerializable, refuses_deep_nesting
from pygents_ctx.context._shared import (
    INHERIT,
    Inherit,
    check_limit,
    read_saved,
    saved_user_values,
)
from pygents_ctx.context.items import ContextItem
from pygents_ctx.context.selection import SelectionIndex, Selector, _default_selector
from pygents_ctx.hooks import ContextPoolHook, Hook
from pygents_ctx.hooks._calls import POOL, receives_context, tag_set
from pygents_ctx.hooks._dispatch import (
    HookSlot,
    PoolHookList,
    fire,
    hooks_from_dict,
    hooks_to_dict,
    listening,
)

__all__ = ["ContextPool"]

T = TypeVar("T")


class ContextPool(JsonSerializable, Generic[T]):
    """Described items keyed by `id`; when full, the oldest insertion is evicted.

    Args:
        limit: The most items held, or `None` for no limit.
        tags: Tags that global hooks can filter on.
        selector: How `select()` ranks items against a query (default: the
            registered default, `BM25Selector()` from `pygents_ctx.memory`).

    Adding an item whose id is present replaces it in place (no eviction).
    Hooks: `before_add(pool, item)` (after any eviction), `after_add(pool,
    item)`, `before_remove(pool, item)`, `after_remove(pool, item)`,
    `before_clear(pool, snapshot)`, `after_clear(pool)`, `on_evict(pool, item)`.

    Raises:
        ValueError: `limit` is less than 1.
        TypeError: `selector` is not a `Selector`.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import ContextItem, ContextPool
        >>> pool: ContextPool[str] = ContextPool(limit=50)
        >>> asyncio.run(pool.add(ContextItem(content="...", description="Q3 report", id="q3")))
        >>> print(pool.catalogue())
        - [q3] Q3 report
    """

    before_add = HookSlot(ContextPoolHook.BEFORE_ADD)
    after_add = HookSlot(ContextPoolHook.AFTER_ADD)
    before_remove = HookSlot(ContextPoolHook.BEFORE_REMOVE)
    after_remove = HookSlot(ContextPoolHook.AFTER_REMOVE)
    before_clear = HookSlot(ContextPoolHook.BEFORE_CLEAR)
    after_clear = HookSlot(ContextPoolHook.AFTER_CLEAR)
    on_evict = HookSlot(ContextPoolHook.ON_EVICT)

    def __init__(
        self,
        limit: int | None = None,
        tags: Iterable[str] | None = None,
        *,
        selector: Selector | None = None,
    ) -> None:
        self._limit = None if limit is None else check_limit(limit, "ContextPool")
        self.tags = tag_set(tags)
        self._hooks: list[Hook] = PoolHookList()
        # OrderedDict pops its oldest entry in O(1); a dict's first key is found by
        # scanning past deleted slots, which a full, evicting pool accumulates.
        self._items: OrderedDict[str, ContextItem[T]] = OrderedDict()
        self._selector = None if selector is None else _check_selector(selector)
        # Built by the first select(), then told of every change; None until then,
        # so a pool nobody selects from pays nothing for it.
        self._index: SelectionIndex | None = None
        # Copy-on-write: a branch shares `_items` with its parent, both marked shared,
        # and whichever writes first copies it (`_own`). Every write into it owns it
        # first; anything that starts afresh replaces it through `_store` (as `clear`).
        self._shared = False

    @property
    def limit(self) -> int | None:
        """The most items the pool holds, or `None`."""
        return self._limit

    @property
    def selector(self) -> Selector:
        """How `select()` ranks items; setting it rebuilds the index at the next `select()`.

        Raises:
            TypeError: (when set) The value is not a `Selector`.
        """
        return _default_selector() if self._selector is None else self._selector

    @selector.setter
    def selector(self, selector: Selector) -> None:
        self._selector = _check_selector(selector)
        self._index = None

    @property
    def items(self) -> list[ContextItem[T]]:
        """A copy of the items, oldest insertion first."""
        return list(self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[ContextItem[T]]:
        return iter(list(self._items.values()))

    def __bool__(self) -> bool:
        return bool(self._items)

    def __contains__(self, key: object) -> bool:
        # An id, or a stored item itself (pygents compares items): both are natural.
        if isinstance(key, ContextItem):
            held = self._items.get(key.id) if isinstance(key.id, str) else None
            return held is not None and (held is key or held == key)
        return key in self._items

    def __repr__(self) -> str:
        return f"{type(self).__name__}(limit={self._limit}, len={len(self._items)})"

    def get(self, item_id: str) -> ContextItem[T]:
        """The item with this id.

        Raises:
            KeyError: No item has this id.
        """
        try:
            return self._items[item_id]
        except KeyError:
            # The key as the argument, as `dict` (and pygents) give it; ours as a note.
            missing = KeyError(item_id)
            missing.add_note(f"no item with id {item_id!r} in the pool")
            raise missing from None

    def catalogue(self) -> str:
        """One `- [id] description` line per item, oldest first."""
        return "\n".join(f"- [{i.id}] {i.description}" for i in self._items.values())

    async def add(self, item: ContextItem[T]) -> None:
        """Store `item` under its id, evicting the oldest item if the pool is full.

        Raises:
            TypeError: `item` is not a `ContextItem`.
            ValueError: The item has no `id` or no `description`.
        """
        if not isinstance(item, ContextItem):
            raise TypeError(f"ContextPool.add takes a ContextItem, not {type(item).__name__}")
        item_id = item.id
        if item_id is None or item.description is None:
            field = "id" if item_id is None else "description"
            raise ValueError(
                f"ContextPool requires a ContextItem with both 'id' and 'description' set; this "
                f"one has no {field}: set ContextItem({field}=...) (items without an id belong "
                f"in a ContextQueue)"
            )
        hooks = self._hooks
        tags = self.tags
        # on_evict sees each item while it is still in the pool ("about to be evicted",
        # as in pygents), which then lets it go, before before_add.
        for evicted in self._to_evict(item_id):
            await fire(ContextPoolHook.ON_EVICT, hooks, tags, self, evicted)
            self._let_go(evicted)
        await fire(ContextPoolHook.BEFORE_ADD, hooks, tags, self, item)
        # Make room and insert in one synchronous step, so the limit always holds.
        # Concurrent adds may have filled the pool while the hooks ran: an item
        # evicted for that reason is announced after it left (the hooks cannot be
        # awaited between making room and inserting).
        late = self._make_room(item_id)
        self._items[item_id] = item
        if self._index is not None:
            self._index.put(item_id, item.description)
        for evicted in late:
            await fire(ContextPoolHook.ON_EVICT, hooks, tags, self, evicted)
        await fire(ContextPoolHook.AFTER_ADD, hooks, tags, self, item)

    def _to_evict(self, item_id: str) -> list[ContextItem[T]]:
        """The oldest items that must go for `item_id` to fit, oldest first (still held)."""
        items, limit = self._items, self._limit
        if limit is None or item_id in items or len(items) < limit:
            return []
        return list(itertools.islice(items.values(), len(items) - limit + 1))

    def _let_go(self, item: ContextItem[T]) -> None:
        """Drop `item` if the pool still holds it (a hook may have removed it)."""
        item_id = item.id
        if item_id is None or self._items.get(item_id) is not item:
            return
        if self._shared:
            self._own()
        del self._items[item_id]
        if self._index is not None:
            self._index.discard(item_id)

    def _make_room(self, item_id: str) -> list[ContextItem[T]]:
        """Evict the oldest items until `item_id` fits; return them, oldest first.

        The pool is then its own, for the write that follows without an await.
        """
        if self._shared:
            self._own()
        items, limit, index = self._items, self._limit, self._index
        evicted: list[ContextItem[T]] = []
        while limit is not None and len(items) >= limit and item_id not in items:
            old_id, old = items.popitem(last=False)
            if index is not None:
                index.discard(old_id)
            evicted.append(old)
        return evicted

    def _store(self, items: OrderedDict[str, ContextItem[T]]) -> None:
        """Hold `items` instead (keyed by id, oldest first).

        Whatever replaces the items goes through here: a new dict, never an emptied
        or refilled one, which a branch may share.
        """
        self._items, self._shared = items, False

    def _restore_items(self, items: list[ContextItem[T]]) -> None:
        """Hold `items` (each with an id) instead, as `from_dict` loads them: no hook fires.

        What an agent's rewind to a checkpoint does to its pool. The selector's
        index is built again at the next `select()`.
        """
        self._store(OrderedDict((str(item.id), item) for item in items))
        self._index = None

    def _frozen_items(self) -> Mapping[str, ContextItem[T]]:
        """The items by id as they are now, in a mapping nothing will change.

        Costs nothing for any size: the pool's next write copies first, as after a branch.
        """
        self._shared = True
        return self._items

    def _own(self) -> None:
        """Stop sharing the items with a branch: copy them."""
        self._items = OrderedDict(self._items)
        self._shared = False

    async def remove(self, item_id: str) -> None:
        """Delete the item with this id.

        Raises:
            KeyError: No item has this id.
        """
        item = self.get(item_id)
        hooks, tags = self._hooks, self.tags
        await fire(ContextPoolHook.BEFORE_REMOVE, hooks, tags, self, item)
        if self._shared:
            self._own()
        if self._items.pop(item_id, None) is not None and self._index is not None:
            self._index.discard(item_id)
        await fire(ContextPoolHook.AFTER_REMOVE, hooks, tags, self, item)

    async def clear(self) -> None:
        """Remove every item."""
        hooks, tags = self._hooks, self.tags
        if listening(ContextPoolHook.BEFORE_CLEAR, hooks, tags):  # the snapshot for it
            await fire(ContextPoolHook.BEFORE_CLEAR, hooks, tags, self, dict(self._items))
        self._store(OrderedDict())
        if self._index is not None:
            self._index.clear()
        await fire(ContextPoolHook.AFTER_CLEAR, hooks, tags, self)

    @property
    def hooks(self) -> list[Hook]:
        """Its own hooks, in firing order (a list assigned is checked as `append` checks)."""
        return self._hooks

    @hooks.setter
    def hooks(self, hooks: Iterable[object]) -> None:
        self._hooks = PoolHookList.of(hooks)

    async def select(self, query: str, k: int = 5) -> list[ContextItem[T]]:
        """The at most `k` items whose descriptions best match `query`, best first.

        The pool's `selector` ranks them: by default `BM25Selector` (lexical,
        an item must share a word with the query); `SemanticSelector` ranks by
        embedding similarity. The first call builds the selector's index from
        the items; later calls see every add, replacement, removal, eviction
        and clear since. An item removed while the selection ran is left out.

        Raises:
            TypeError: `query` is not a str, or `k` is not an int.
            ValueError: `k` is less than 1.

        Examples:
            >>> import asyncio
            >>> from pygents_ctx import ContextItem, ContextPool
            >>> pool: ContextPool[str] = ContextPool()
            >>> async def main():
            ...     await pool.add(ContextItem(content="...", description="Q3 revenue", id="q3"))
            ...     await pool.add(ContextItem(content="...", description="Hiring plan", id="hr"))
            ...     return [item.id for item in await pool.select("revenue in Q3", k=1)]
            >>> asyncio.run(main())
            ['q3']
        """
        if not isinstance(query, str):
            raise TypeError(f"ContextPool.select query must be a str, not {type(query).__name__}")
        whole_number(k, "ContextPool.select k", least=1)
        index = self._index
        if index is None:
            entries = [(item_id, str(item.description)) for item_id, item in self._items.items()]
            index = self._index = self.selector.build_index(entries)
        hits = await index.search(query, k)
        items = self._items
        return [items[item_id] for item_id, _ in hits if item_id in items]

    def branch(
        self, limit: int | Inherit | None = INHERIT, hooks: list[Hook] | Inherit | None = INHERIT
    ) -> Self:
        """An independent copy: later changes to either side do not reach the other.

        Args:
            limit: The child's limit (default: this pool's; `None` for none); a
                smaller one keeps the newest items that fit.
            hooks: The child's hooks (default: a copy of this pool's list; None
                or `[]`: none).

        The child is of this pool's class (made with `limit` and `tags`). No
        hooks fire while copying. The two share their items until either side
        first changes them (then that side copies them once), so a branch costs
        the same for any size. The child shares the selector and starts from a
        copy-on-write branch of the selection index, if one was built.
        """
        limit = self._limit if isinstance(limit, Inherit) else limit
        child = type(self)(limit, self.tags)
        cut = 0 if child._limit is None else len(self._items) - child._limit
        if cut > 0:  # the newest that fit, in a dict of the child's own
            kept = list(self._items.items())
            child._items.update(kept[cut:])
        else:
            child._items = self._items
            self._shared = child._shared = True
        child.hooks = self._hooks if isinstance(hooks, Inherit) else hooks or []  # copied
        child._selector = self._selector
        if self._index is not None:
            child._index = self._index.branch()
            if cut > 0:
                for item_id, _ in kept[:cut]:
                    child._index.discard(item_id)
        return child

    def to_dict(self) -> dict[str, Any]:
        """`{"limit", "items", "hooks", "tags"}`.

        The selector is not saved: a restored pool uses the default selector
        until one is set, and builds its index at its first `select()`.

        Raises:
            UnserializableHookError: A hook cannot be saved by name.
        """
        return {
            "limit": self._limit,
            "items": [item.to_dict() for item in self._items.values()],
            "hooks": hooks_to_dict(self._hooks, ContextPoolHook, "ContextPool"),
            "tags": sorted(self.tags),
        }

    @classmethod
    def _user_values(cls, data: dict[str, Any]) -> list[Any]:
        return saved_user_values(data)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ContextPool[Any]:
        """Rebuild a pool saved by `to_dict()`, without firing hooks or evicting.

        Raises:
            ValueError: The data is malformed, an item lacks an id or description,
                ids repeat, or there are more items than the limit.
            UnregisteredHookError: A hook name is not registered.
        """
        return cls._from_saved(data)

    @classmethod
    @refuses_deep_nesting("ContextPool")
    def _from_saved(cls, data: Any) -> ContextPool[Any]:
        """`from_dict`, for any `data` (a malformed one raises `ValueError`)."""
        saved = read_saved(data, "ContextPool", limit_required=False)
        pool: ContextPool[Any] = cls(saved.limit, tags=saved.tags)
        items: OrderedDict[str, ContextItem[Any]] = OrderedDict()
        for item in saved.items:
            if item.id is None:  # pygents' phrase for an item without an id
                raise ValueError(
                    f"ContextPool requires a ContextItem with 'id' set; saved item {item!r} "
                    f"has none (it needs a 'description' as well)"
                )
            if item.description is None:
                raise ValueError(
                    f"ContextPool requires a ContextItem with both 'id' and 'description' "
                    f"set; saved item {item!r} has no 'description'"
                )
            if item.id in items:
                raise ValueError(f"saved ContextPool has the id {item.id!r} twice")
            items[item.id] = item
        if pool._limit is not None and len(items) > pool._limit:
            raise ValueError(
                f"saved ContextPool holds {len(items)} items but its limit is {pool._limit}"
            )
        pool._hooks = hooks_from_dict(saved.hooks, PoolHookList, "ContextPool")
        if items:
            pool._store(items)
        return pool


def _check_selector(selector: object) -> Selector:
    if isinstance(selector, type) or not isinstance(selector, Selector):
        raise TypeError(
            "ContextPool selector must be a Selector (an object with a build_index(entries) "
            f"method, such as BM25Selector()), not {selector!r}"
        )
    return selector


# A tool or hook parameter annotated `ContextPool` receives the running agent's pool.
receives_context(ContextPool, POOL)
