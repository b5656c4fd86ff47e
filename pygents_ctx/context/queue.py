"""`ContextQueue`: a bounded, branchable window of `ContextItem`s."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from pygents_ctx._calls import tag_set
from pygents_ctx._dispatch import HookSlot, fire, hooks_from_dict, hooks_to_dict, listening
from pygents_ctx._json import JsonSerializable
from pygents_ctx.context._shared import INHERIT, Inherit, check_limit, read_saved
from pygents_ctx.context.items import ContextItem
from pygents_ctx.hooks import ContextQueueHook, Hook
from pygents_ctx.registry import HookRegistry

__all__ = ["ContextQueue"]

T = TypeVar("T")

_BEFORE_APPEND = HookRegistry.globals_for(ContextQueueHook.BEFORE_APPEND)
_AFTER_APPEND = HookRegistry.globals_for(ContextQueueHook.AFTER_APPEND)
_BEFORE_CLEAR = HookRegistry.globals_for(ContextQueueHook.BEFORE_CLEAR)
_AFTER_CLEAR = HookRegistry.globals_for(ContextQueueHook.AFTER_CLEAR)
_ON_EVICT = HookRegistry.globals_for(ContextQueueHook.ON_EVICT)


class ContextQueue(JsonSerializable, Generic[T]):
    """A bounded window of `ContextItem`s; the oldest are evicted first.

    Args:
        limit: The most items held (at least 1).
        tags: Tags that global hooks can filter on.

    Hooks (instance decorators or `queue.hooks`): `before_append(queue,
    incoming, current)`, `after_append(queue, appended, current)`,
    `before_clear(queue, items)`, `after_clear(queue)`, `on_evict(queue, item)`.

    Raises:
        ValueError: `limit` is less than 1.

    Example:
        >>> import asyncio
        >>> from pygents_ctx import ContextItem, ContextQueue
        >>> queue: ContextQueue[str] = ContextQueue(limit=2)
        >>> for text in ("a", "b", "c"):
        ...     asyncio.run(queue.append(ContextItem(content=text)))
        >>> print(*(item.content for item in queue))
        b c
    """

    before_append = HookSlot(ContextQueueHook.BEFORE_APPEND)
    after_append = HookSlot(ContextQueueHook.AFTER_APPEND)
    before_clear = HookSlot(ContextQueueHook.BEFORE_CLEAR)
    after_clear = HookSlot(ContextQueueHook.AFTER_CLEAR)
    on_evict = HookSlot(ContextQueueHook.ON_EVICT)

    def __init__(self, limit: int, *, tags: Iterable[str] | None = None) -> None:
        self._limit = check_limit(limit, "ContextQueue")
        self.tags = tag_set(tags)
        self.hooks: list[Hook] = []
        # maxlen makes the unobserved append one C call that evicts by itself.
        self._items: deque[ContextItem[T]] = deque(maxlen=self._limit)

    @property
    def limit(self) -> int:
        """The most items the queue holds."""
        return self._limit

    @property
    def items(self) -> list[ContextItem[T]]:
        """A copy of the items, oldest first."""
        return list(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[ContextItem[T]]:
        return iter(list(self._items))

    def __bool__(self) -> bool:
        return bool(self._items)

    def __repr__(self) -> str:
        return f"<ContextQueue {len(self._items)}/{self._limit}>"

    async def append(self, *items: ContextItem[T]) -> None:
        """Add items at the newest end, evicting the oldest beyond `limit`.

        Raises:
            TypeError: An argument is not a `ContextItem` (nothing is added).
        """
        for item in items:
            if not isinstance(item, ContextItem):
                raise TypeError(
                    f"ContextQueue.append takes ContextItem objects, not {type(item).__name__}; "
                    f"wrap the value: ContextItem(content=...)"
                )
        hooks = self.hooks
        if not (hooks or _BEFORE_APPEND or _AFTER_APPEND or _ON_EVICT):
            self._items.extend(items)
            return
        tags, window = self.tags, self._items
        if listening(ContextQueueHook.BEFORE_APPEND, hooks, _BEFORE_APPEND):
            await fire(ContextQueueHook.BEFORE_APPEND, hooks, tags, self, list(items), list(window))
        # Evict and insert without awaiting in between, so concurrent appends
        # cannot interleave and every eviction is reported.
        evicted: list[ContextItem[T]] = []
        for item in items:
            if len(window) == self._limit:
                evicted.append(window.popleft())
            window.append(item)
        if evicted and listening(ContextQueueHook.ON_EVICT, hooks, _ON_EVICT):
            for item in evicted:
                await fire(ContextQueueHook.ON_EVICT, hooks, tags, self, item)
        if listening(ContextQueueHook.AFTER_APPEND, hooks, _AFTER_APPEND):
            await fire(ContextQueueHook.AFTER_APPEND, hooks, tags, self, list(items), list(window))

    async def clear(self) -> None:
        """Remove every item."""
        hooks = self.hooks
        if listening(ContextQueueHook.BEFORE_CLEAR, hooks, _BEFORE_CLEAR):
            await fire(ContextQueueHook.BEFORE_CLEAR, hooks, self.tags, self, list(self._items))
        self._items.clear()
        if hooks or _AFTER_CLEAR:
            await fire(ContextQueueHook.AFTER_CLEAR, hooks, self.tags, self)

    def branch(
        self, limit: int | None = None, *, hooks: list[Hook] | Inherit = INHERIT
    ) -> ContextQueue[T]:
        """An independent copy: later changes to either side do not reach the other.

        Args:
            limit: The child's limit (default: this queue's); a smaller one
                keeps the newest items that fit.
            hooks: The child's hooks (default: a copy of this queue's list).

        No hooks fire while copying.
        """
        child: ContextQueue[T] = ContextQueue(
            self._limit if limit is None else limit, tags=self.tags
        )
        child._items.extend(self._items)
        child.hooks = list(self.hooks if isinstance(hooks, Inherit) else hooks)
        return child

    def to_dict(self) -> dict[str, Any]:
        """`{"limit", "items", "hooks", "tags"}`.

        Raises:
            UnserializableHookError: A hook cannot be saved by name.
        """
        return {
            "limit": self._limit,
            "items": [item.to_dict() for item in self._items],
            "hooks": hooks_to_dict(self.hooks, ContextQueueHook, "ContextQueue"),
            "tags": sorted(self.tags),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ContextQueue[Any]:
        """Rebuild a queue saved by `to_dict()`, without firing hooks or evicting.

        Raises:
            ValueError: The data is malformed, or holds more items than its limit.
            UnregisteredHookError: A hook name is not registered.
        """
        saved = read_saved(data, "ContextQueue", limit_required=True)
        queue: ContextQueue[Any] = cls(saved.limit, tags=saved.tags)
        if len(saved.items) > queue.limit:
            raise ValueError(
                f"saved ContextQueue holds {len(saved.items)} items but its limit is "
                f"{queue.limit}; raise 'limit' or drop the oldest items"
            )
        queue._items.extend(saved.items)
        queue.hooks = hooks_from_dict(saved.hooks, ContextQueueHook, "ContextQueue")
        return queue
