"""`ContextQueue`: a bounded, branchable window of `ContextItem`s."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from pygents_ctx._calls import tag_set
from pygents_ctx._dispatch import HookSlot, fire_on, hooks_from_dict, hooks_to_dict, listening
from pygents_ctx._json import JsonSerializable
from pygents_ctx.context._shared import (
    INHERIT,
    Inherit,
    check_limit,
    read_saved,
    saved_user_values,
)
from pygents_ctx.context.items import ContextItem
from pygents_ctx.context.messages import Message
from pygents_ctx.context.tokens import (
    DEFAULT_COUNTER,
    TokenCounter,
    count_content_tokens,
    counter_from_dict,
    counter_to_dict,
)
from pygents_ctx.hooks import ContextQueueHook, Hook
from pygents_ctx.registry import HookRegistry

__all__ = ["ContextQueue"]

T = TypeVar("T")

_BEFORE_APPEND = HookRegistry.globals_for(ContextQueueHook.BEFORE_APPEND)
_AFTER_APPEND = HookRegistry.globals_for(ContextQueueHook.AFTER_APPEND)
_BEFORE_CLEAR = HookRegistry.globals_for(ContextQueueHook.BEFORE_CLEAR)
_AFTER_CLEAR = HookRegistry.globals_for(ContextQueueHook.AFTER_CLEAR)
_ON_EVICT = HookRegistry.globals_for(ContextQueueHook.ON_EVICT)


def _is_result_message(content: object) -> bool:
    return isinstance(content, Message) and content.has_tool_results


def _is_call_message(content: object) -> bool:
    return isinstance(content, Message) and content.has_tool_uses


def _check_max_tokens(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"ContextQueue max_tokens must be an int or None, not {value!r}")
    if value < 1:
        raise ValueError(f"ContextQueue max_tokens must be at least 1, not {value}")
    return value


class ContextQueue(JsonSerializable, Generic[T]):
    """A bounded window of `ContextItem`s; the oldest are evicted first.

    Bounded by a number of items and, optionally, by tokens: with `max_tokens`,
    after each append the oldest items are evicted until the total fits. The
    newest item always stays, even alone over budget (and when it is a tool
    result, so does the message that made the call). `queue.tokens` is a
    running total: each item is counted once, when it is appended.

    Eviction is pair-safe for `Message` items: it never leaves a tool result at
    the head without the assistant message that called it.

    Args:
        limit: The most items held (at least 1).
        max_tokens: The most tokens held, or None for no token budget.
        counter: How to count an item's content (default: `HeuristicTokenCounter()`).
            A `Message` is counted with `count_message_tokens`, a string as
            text, anything else through its JSON.
        tags: Tags that global hooks can filter on.

    Hooks (instance decorators or `queue.hooks`): `before_append(queue,
    incoming, current)`, `after_append(queue, appended, current)`,
    `before_clear(queue, items)`, `after_clear(queue)`, `on_evict(queue, item)`.

    Raises:
        TypeError: `limit` or `max_tokens` is not an int, or `counter` is not callable.
        ValueError: `limit` or `max_tokens` is less than 1.

    Examples:
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

    def __init__(
        self,
        limit: int,
        *,
        max_tokens: int | None = None,
        counter: TokenCounter | None = None,
        tags: Iterable[str] | None = None,
    ) -> None:
        self._limit = check_limit(limit, "ContextQueue")
        self._max_tokens = _check_max_tokens(max_tokens)
        if counter is not None and not callable(counter):
            raise TypeError(f"ContextQueue counter must be a callable str -> int, not {counter!r}")
        self._counter = counter
        self.tags = tag_set(tags)
        self.hooks: list[Hook] = []
        # maxlen makes the unobserved append one C call that evicts by itself.
        self._items: deque[ContextItem[T]] = deque(maxlen=self._limit)
        # Token accounting runs only when asked for: each item's count, beside it.
        self._counting = max_tokens is not None or counter is not None
        self._counts: deque[int] = deque()
        self._tokens = 0

    @property
    def limit(self) -> int:
        """The most items the queue holds."""
        return self._limit

    @property
    def max_tokens(self) -> int | None:
        """The token budget, or None."""
        return self._max_tokens

    @property
    def counter(self) -> TokenCounter:
        """The token counter in use."""
        return DEFAULT_COUNTER if self._counter is None else self._counter

    @property
    def tokens(self) -> int:
        """The tokens the items hold.

        A running total when the queue has `max_tokens` or a `counter`; otherwise
        summed on demand from the items' cached counts.
        """
        if self._counting:
            return self._tokens
        return sum(count_content_tokens(item.content) for item in self._items)

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
        if self._max_tokens is None:
            return f"<ContextQueue {len(self._items)}/{self._limit}>"
        tokens = f"{self._tokens}/{self._max_tokens} tokens"
        return f"<ContextQueue {len(self._items)}/{self._limit}, {tokens}>"

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
        hooks, window = self.hooks, self._items
        if not (self._counting or hooks or _BEFORE_APPEND or _AFTER_APPEND or _ON_EVICT):
            # Unobserved and uncounted: one C call that evicts by itself.
            window.extend(items)
            if len(window) > 1:
                head: object = window[0].content
                if type(head) is Message and head.has_tool_results:
                    self._drop_orphans([])
            return
        counts = [self._count(item) for item in items] if self._counting else None
        if not (hooks or _BEFORE_APPEND or _AFTER_APPEND or _ON_EVICT):
            self._insert(items, counts)
            return
        tags = self.tags
        if listening(ContextQueueHook.BEFORE_APPEND, hooks, _BEFORE_APPEND):
            await fire_on(_BEFORE_APPEND, hooks, tags, self, list(items), list(window))
        # Evict and insert without awaiting in between, so concurrent appends
        # cannot interleave and every eviction is reported.
        evicted = self._insert(items, counts)
        if evicted and listening(ContextQueueHook.ON_EVICT, hooks, _ON_EVICT):
            for item in evicted:
                await fire_on(_ON_EVICT, hooks, tags, self, item)
        if listening(ContextQueueHook.AFTER_APPEND, hooks, _AFTER_APPEND):
            await fire_on(_AFTER_APPEND, hooks, tags, self, list(items), list(window))

    def _count(self, item: ContextItem[T]) -> int:
        return count_content_tokens(item.content, self.counter)

    def _insert(
        self, items: tuple[ContextItem[T], ...], counts: list[int] | None
    ) -> list[ContextItem[T]]:
        """Add `items`, evict what no longer fits, and return the evicted items."""
        window = self._items
        if counts is None:
            held = len(window)
            overflow = held + len(items) - self._limit
            # Only the first `overflow` of the old items plus new ones go: O(overflow).
            evicted = [window[i] for i in range(min(overflow, held))]
            if overflow > held:
                evicted += items[: overflow - held]
            window.extend(items)
        else:
            evicted = []
            for item, count in zip(items, counts, strict=True):
                if len(window) == self._limit:
                    evicted.append(self._pop_oldest())
                window.append(item)
                self._counts.append(count)
                self._tokens += count
            if self._max_tokens is not None and self._tokens > self._max_tokens:
                keep = self._protected_tail()
                while self._tokens > self._max_tokens and len(window) > keep:
                    evicted.append(self._pop_oldest())
        self._drop_orphans(evicted)
        return evicted

    def _drop_orphans(self, evicted: list[ContextItem[T]]) -> None:
        """A tool result at the head has lost its call (calls come first): it goes
        as soon as something newer arrives."""
        window = self._items
        while len(window) > 1 and _is_result_message(window[0].content):
            evicted.append(self._pop_oldest())

    def _pop_oldest(self) -> ContextItem[T]:
        if self._counting:
            self._tokens -= self._counts.popleft()
        return self._items.popleft()

    def _protected_tail(self) -> int:
        """How many newest items budget eviction keeps: the newest, with its call if a result."""
        window = self._items
        if not _is_result_message(window[-1].content):
            return 1
        index = len(window) - 1
        while index > 0 and _is_result_message(window[index - 1].content):
            index -= 1
        if index > 0 and _is_call_message(window[index - 1].content):
            return len(window) - index + 1
        return 1  # the call is gone already: nothing to keep it with

    async def clear(self) -> None:
        """Remove every item."""
        hooks = self.hooks
        if listening(ContextQueueHook.BEFORE_CLEAR, hooks, _BEFORE_CLEAR):
            await fire_on(_BEFORE_CLEAR, hooks, self.tags, self, list(self._items))
        self._items.clear()
        self._counts.clear()
        self._tokens = 0
        if hooks or _AFTER_CLEAR:
            await fire_on(_AFTER_CLEAR, hooks, self.tags, self)

    def branch(
        self, limit: int | None = None, *, hooks: list[Hook] | Inherit = INHERIT
    ) -> ContextQueue[T]:
        """An independent copy: later changes to either side do not reach the other.

        Args:
            limit: The child's limit (default: this queue's); a smaller one
                keeps the newest items that fit.
            hooks: The child's hooks (default: a copy of this queue's list).

        The child keeps `max_tokens` and `counter`. No hooks fire while copying.
        """
        child: ContextQueue[T] = ContextQueue(
            self._limit if limit is None else limit,
            max_tokens=self._max_tokens,
            counter=self._counter,
            tags=self.tags,
        )
        child._load(self._items, self._counts if self._counting else None)
        child.hooks = list(self.hooks if isinstance(hooks, Inherit) else hooks)
        return child

    def _load(self, items: Iterable[ContextItem[T]], counts: Iterable[int] | None) -> None:
        """Fill an empty queue with the newest items that fit `limit`, without hooks."""
        source = list(items)
        kept = source[-self._limit :]
        self._items.extend(kept)
        if self._counting:
            if counts is None:
                self._counts.extend(self._count(item) for item in kept)
            else:
                self._counts.extend(list(counts)[-len(kept) :] if kept else ())
            self._tokens = sum(self._counts)
        if len(kept) < len(source):  # the limit cut the copy: no orphaned result at its head
            while len(self._items) > 1 and _is_result_message(self._items[0].content):
                self._pop_oldest()

    def to_dict(self) -> dict[str, Any]:
        """`{"limit", "items", "hooks", "tags"}`, plus `max_tokens` and `counter` when set.

        Raises:
            UnserializableHookError: A hook cannot be saved by name.
            TypeError: The counter is a custom callable, which cannot be saved.
        """
        saved: dict[str, Any] = {
            "limit": self._limit,
            "items": [item.to_dict() for item in self._items],
            "hooks": hooks_to_dict(self.hooks, ContextQueueHook, "ContextQueue"),
            "tags": sorted(self.tags),
        }
        if self._max_tokens is not None:
            saved["max_tokens"] = self._max_tokens
        if self._counter is not None:
            saved["counter"] = counter_to_dict(self._counter)
        return saved

    @classmethod
    def _user_values(cls, data: dict[str, Any]) -> list[Any]:
        return saved_user_values(data)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ContextQueue[Any]:
        """Rebuild a queue saved by `to_dict()`, without firing hooks or evicting.

        Raises:
            ValueError: The data is malformed, or holds more items than its limit.
            UnregisteredHookError: A hook name is not registered.
        """
        return cls._from_saved(data, parsed=False)

    @classmethod
    def _from_json_data(cls, data: Any) -> ContextQueue[Any]:
        return cls._from_saved(data, parsed=True)

    @classmethod
    def _from_saved(cls, data: Any, parsed: bool) -> ContextQueue[Any]:
        """`from_dict`; `parsed` as for `read_saved`."""
        saved = read_saved(data, "ContextQueue", limit_required=True, parsed=parsed)
        counter = counter_from_dict(data["counter"]) if "counter" in data else None
        try:
            queue: ContextQueue[Any] = cls(
                saved.limit, max_tokens=data.get("max_tokens"), counter=counter, tags=saved.tags
            )
        except TypeError as exc:
            raise ValueError(f"saved {exc}") from None
        if len(saved.items) > queue.limit:
            raise ValueError(
                f"saved ContextQueue holds {len(saved.items)} items but its limit is "
                f"{queue.limit}; raise 'limit' or drop the oldest items"
            )
        queue.hooks = hooks_from_dict(saved.hooks, ContextQueueHook, "ContextQueue")
        queue._items.extend(saved.items)  # as saved: no eviction on load
        if queue._counting:
            queue._counts.extend(queue._count(item) for item in saved.items)
            queue._tokens = sum(queue._counts)
        return queue
