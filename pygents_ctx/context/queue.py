"""`ContextQueue`: a bounded, branchable window of `ContextItem`s."""

from __future__ import annotations

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
from pygents_ctx.context.messages import Message
from pygents_ctx.context.tokens import (
    DEFAULT_COUNTER,
    TokenCounter,
    count_content_tokens,
    counter_from_dict,
    counter_to_dict,
)
from pygents_ctx.hooks import ContextQueueHook, Hook
from pygents_ctx.hooks._calls import QUEUE, receives_context, tag_set
from pygents_ctx.hooks._dispatch import (
    HookSlot,
    QueueHookList,
    fire,
    hooks_from_dict,
    hooks_to_dict,
    listening,
)

__all__ = ["ContextQueue"]

T = TypeVar("T")


def _is_result_message(content: object) -> bool:
    return isinstance(content, Message) and content.has_tool_results


def _is_call_message(content: object) -> bool:
    return isinstance(content, Message) and content.has_tool_uses


def _not_an_item(value: object, where: str) -> TypeError:
    return TypeError(
        f"ContextQueue only accepts ContextItem instances, got {type(value).__name__!r} "
        f"({where}); wrap the value: ContextItem(content=...)"
    )


def _as_text(content: object) -> str:
    if isinstance(content, Message):
        return f"{content.role}: {content.text}"
    return str(content)


def _check_max_tokens(value: object) -> int | None:
    if value is None:
        return None
    return whole_number(
        value, "ContextQueue max_tokens", least=1, fix="pass None for no token bound"
    )


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
        tags: Tags that global hooks can filter on.
        max_tokens: The most tokens held, or None for no token budget.
        counter: How to count an item's content (default: `EstimatedTokenCounter()`).
            A `Message` is counted with `count_message_tokens`, a string as
            text, anything else through its JSON.

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
        tags: Iterable[str] | None = None,
        *,
        max_tokens: int | None = None,
        counter: TokenCounter | None = None,
    ) -> None:
        self._limit = check_limit(limit, "ContextQueue")
        self._max_tokens = _check_max_tokens(max_tokens)
        if counter is not None and not callable(counter):
            raise TypeError(f"ContextQueue counter must be a callable str -> int, not {counter!r}")
        self._counter = counter
        self.tags = tag_set(tags)
        self._hooks: list[Hook] = QueueHookList()
        # The items held are `_slots[_head:]`. A list rather than a deque because
        # hooks get snapshots, and slicing a list copies it about three times faster
        # than list(deque). Evicting moves `_head` on; the evicted prefix is deleted
        # once it outgrows the items held, so each item costs O(1) amortized.
        self._slots: list[ContextItem[T]] = []
        self._head = 0
        # Token accounting runs only when asked for: each item's count, at its index.
        self._counting = max_tokens is not None or counter is not None
        self._counts: list[int] = []
        self._tokens = 0
        # Copy-on-write: a branch shares `_slots` and `_counts` with its parent, both
        # marked shared, and whichever writes first copies them (`_own`). Every write
        # into the two lists goes through `_insert`, which owns them first; anything
        # else that changes them replaces them through `_store` (as `clear` does).
        self._shared = False

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
        return sum(count_content_tokens(item.content) for item in self.items)

    @property
    def items(self) -> list[ContextItem[T]]:
        """A copy of the items, oldest first.

        Assigning a list replaces the contents, keeping the newest that fit
        (`limit`, `max_tokens`). No hook can run in an assignment (hooks are
        async), so while any would fire it raises `RuntimeError`: use
        `await queue.replace(items)` then, which fires them.

        Raises:
            TypeError: (on assignment) An element is not a `ContextItem`; nothing changed.
            RuntimeError: (on assignment) Hooks watch this queue's clear or append.
        """
        return self._slots[self._head :]

    @items.setter
    def items(self, items: Iterable[ContextItem[T]]) -> None:
        new = self._checked(items, "items")
        watching = [k.value for k in ContextQueueHook if listening(k, self._hooks, self.tags)]
        if watching:
            raise RuntimeError(
                f"ContextQueue.items cannot be assigned while hooks watch this queue "
                f"({', '.join(watching)}): a property cannot await them; use "
                f"'await queue.replace(items)', which fires them as clear() and append() do"
            )
        counts = [self._count(item) for item in new] if self._counting else None
        self._store([], [])
        if new:
            self._insert(new, counts)

    async def replace(self, items: Iterable[ContextItem[T]]) -> None:
        """Replace the contents with `items`: `clear()`, then `append(*items)`, hooks and all.

        Every item is checked (and counted, with a token budget) first, so bad
        input changes nothing.

        Raises:
            TypeError: An element is not a `ContextItem`.
        """
        new = self._checked(items, "replace")
        if self._counting:
            for item in new:
                self._count(item)  # a counter that fails, fails before anything changes
        await self.clear()
        if new:
            await self.append(*new)

    @staticmethod
    def _checked(items: Iterable[ContextItem[T]], where: str) -> tuple[ContextItem[T], ...]:
        new = tuple(items)
        for item in new:
            if not isinstance(item, ContextItem):
                raise _not_an_item(item, where)
        return new

    def history(self, last: int | None = None) -> str:
        """The contents as text, one item per line, oldest first.

        Each item's `str(content)`; a `Message` as `"role: text"`.

        Args:
            last: Only the newest `last` items (None: all of them).

        Raises:
            TypeError: `last` is not an int or None.
            ValueError: `last` is negative.
        """
        items = self._slots[self._head :]
        if last is not None:
            count = whole_number(last, "history last", fix="pass None for every item")
            items = items[len(items) - count :] if count < len(items) else items
        return "\n".join(_as_text(item.content) for item in items)

    def __len__(self) -> int:
        return len(self._slots) - self._head

    def __iter__(self) -> Iterator[ContextItem[T]]:
        return iter(self.items)

    def __bool__(self) -> bool:
        return len(self._slots) > self._head

    def __repr__(self) -> str:
        shown = f"{type(self).__name__}(limit={self._limit}, len={len(self)}"
        if self._max_tokens is None:
            return shown + ")"
        return shown + f", tokens={self._tokens}, max_tokens={self._max_tokens})"

    async def append(self, *items: ContextItem[T]) -> None:
        """Add items at the newest end, evicting the oldest beyond `limit`.

        Raises:
            TypeError: An argument is not a `ContextItem` (nothing is added).
        """
        for item in items:
            if not isinstance(item, ContextItem):
                raise _not_an_item(item, "append")
        # Counted before anything changes: a counter that raises leaves the queue as it was.
        counts = [self._count(item) for item in items] if self._counting else None
        hooks, tags = self._hooks, self.tags
        # The hooks get snapshots (the items given, the window): made only for a listener.
        if listening(ContextQueueHook.BEFORE_APPEND, hooks, tags):
            await fire(ContextQueueHook.BEFORE_APPEND, hooks, tags, self, list(items), self.items)
        # Evict and insert without awaiting in between, so concurrent appends
        # cannot interleave and every eviction is reported.
        start = self._insert(items, counts)
        for item in self._slots[start : self._head]:
            await fire(ContextQueueHook.ON_EVICT, hooks, tags, self, item)
        if listening(ContextQueueHook.AFTER_APPEND, hooks, tags):
            await fire(ContextQueueHook.AFTER_APPEND, hooks, tags, list(items), self.items)

    def _count(self, item: ContextItem[T]) -> int:
        return count_content_tokens(item.content, self.counter)

    def _insert(self, items: tuple[ContextItem[T], ...], counts: list[int] | None) -> int:
        """Add `items`, then evict, oldest first, what no longer fits.

        Returns where the evicted items start: they stay readable as
        `_slots[start:_head]` until the next insert.
        """
        if self._shared:
            self._own()
        slots, start = self._slots, self._head
        if start > len(slots) - start:
            # More evicted slots than held ones: delete them at once (O(1) amortized per item).
            del slots[:start]
            del self._counts[:start]
            start = 0
        slots += items
        head = len(slots) - self._limit  # the oldest item that fits
        if head < start:
            head = start
        self._head = head
        if counts is not None:
            self._counts += counts
            self._tokens += sum(counts) - sum(self._counts[start:head])
            if self._max_tokens is not None and self._tokens > self._max_tokens:
                self._evict(self._over_budget(self._max_tokens))
                head = self._head
        # The orphan test inline, not through _is_result_message: it runs on every append.
        if len(slots) - head > 1:
            oldest = slots[head].content
            if isinstance(oldest, Message) and oldest.has_tool_results:
                self._drop_orphans()
        return start

    def _store(self, slots: list[ContextItem[T]], counts: list[int]) -> None:
        """Hold `slots` (with their token `counts`, or none when not counting) instead.

        Whatever replaces the items goes through here: new lists, never emptied or
        refilled ones, which a branch may share.
        """
        self._slots, self._head, self._counts, self._tokens = slots, 0, counts, sum(counts)
        self._shared = False

    def _restore_items(self, items: list[ContextItem[T]]) -> None:
        """Hold `items` instead, as `from_dict` loads them: no hook fires, nothing is evicted.

        What an agent's rewind to a checkpoint does to its queue.

        Raises:
            Exception: Whatever the queue's token counter raises; nothing changed.
        """
        counter = self.counter
        counts = (
            [count_content_tokens(item.content, counter) for item in items]
            if self._counting
            else []
        )
        self._store(list(items), counts)

    def _frozen_items(self) -> tuple[list[ContextItem[T]], int]:
        """The items as they are now, as `list[start:]` of a list nothing will change.

        Costs nothing for any size: the queue's next write copies first, as after a branch.
        """
        self._shared = True
        return self._slots, self._head

    def _own(self) -> None:
        """Stop sharing the lists with a branch: copy the items held (and their counts)."""
        head = self._head
        self._slots = self._slots[head:]
        self._counts = self._counts[head:]
        self._head = 0
        self._shared = False

    def _evict(self, count: int) -> None:
        """Move the `count` oldest items out of the window."""
        head = self._head
        if self._counting:
            self._tokens -= sum(self._counts[head : head + count])
        self._head = head + count

    def _over_budget(self, max_tokens: int) -> int:
        """How many of the oldest items must go for the total to fit `max_tokens`.

        The protected tail (the newest item, with its call if it is a result) stays.
        """
        counts, index = self._counts, self._head
        evictable_end = len(counts) - self._protected_tail()
        excess = self._tokens - max_tokens
        while excess > 0 and index < evictable_end:
            excess -= counts[index]
            index += 1
        return index - self._head

    def _drop_orphans(self) -> None:
        """A tool result at the head has lost its call (calls come first): it goes
        as soon as something newer arrives."""
        slots = self._slots
        while len(slots) - self._head > 1 and _is_result_message(slots[self._head].content):
            self._evict(1)

    def _protected_tail(self) -> int:
        """How many newest items budget eviction keeps: the newest, with its call if a result."""
        slots, head = self._slots, self._head
        if not _is_result_message(slots[-1].content):
            return 1
        index = len(slots) - 1
        while index > head and _is_result_message(slots[index - 1].content):
            index -= 1
        if index > head and _is_call_message(slots[index - 1].content):
            return len(slots) - index + 1
        return 1  # the call is gone already: nothing to keep it with

    async def clear(self) -> None:
        """Remove every item."""
        hooks, tags = self._hooks, self.tags
        if listening(ContextQueueHook.BEFORE_CLEAR, hooks, tags):
            await fire(ContextQueueHook.BEFORE_CLEAR, hooks, tags, self, self.items)
        self._store([], [])
        await fire(ContextQueueHook.AFTER_CLEAR, hooks, tags, self)

    @property
    def hooks(self) -> list[Hook]:
        """Its own hooks, in firing order (a list assigned is checked as `append` checks)."""
        return self._hooks

    @hooks.setter
    def hooks(self, hooks: Iterable[object]) -> None:
        self._hooks = QueueHookList.of(hooks)

    def branch(
        self, limit: int | None = None, hooks: list[Hook] | Inherit | None = INHERIT
    ) -> Self:
        """An independent copy: later changes to either side do not reach the other.

        Args:
            limit: The child's limit (default: this queue's); a smaller one
                keeps the newest items that fit.
            hooks: The child's hooks (default: a copy of this queue's list;
                None or `[]`: none).

        The child is of this queue's class (made with `limit` and `tags`, and
        `max_tokens` / `counter` when set) and keeps `max_tokens` and
        `counter`. No hooks fire while copying. The two share their items until
        either side first changes them (then that side copies them once), so a
        branch costs the same for any size.
        """
        options: dict[str, Any] = {}
        if self._max_tokens is not None:
            options["max_tokens"] = self._max_tokens
        if self._counter is not None:
            options["counter"] = self._counter
        child = type(self)(self._limit if limit is None else limit, self.tags, **options)
        child._slots, child._counts, child._tokens = self._slots, self._counts, self._tokens
        child._head = self._head
        self._shared = child._shared = True
        cut = len(child) - child._limit
        if cut > 0:  # the newest that fit, and no orphaned result at the head
            child._evict(cut)
            child._drop_orphans()
        child.hooks = self._hooks if isinstance(hooks, Inherit) else hooks or []  # copied
        return child

    def to_dict(self) -> dict[str, Any]:
        """`{"limit", "items", "hooks", "tags"}`, plus `max_tokens` and `counter` when set.

        Raises:
            UnserializableHookError: A hook cannot be saved by name.
            TypeError: The counter is a custom callable, which cannot be saved.
        """
        saved: dict[str, Any] = {
            "limit": self._limit,
            "items": [item.to_dict() for item in self._slots[self._head :]],
            "hooks": hooks_to_dict(self._hooks, ContextQueueHook, "ContextQueue"),
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
        return cls._from_saved(data)

    @classmethod
    @refuses_deep_nesting("ContextQueue")
    def _from_saved(cls, data: Any) -> ContextQueue[Any]:
        """`from_dict`, for any `data` (a malformed one raises `ValueError`)."""
        saved = read_saved(data, "ContextQueue", limit_required=True)
        counter = counter_from_dict(data["counter"]) if "counter" in data else None
        try:
            queue: ContextQueue[Any] = cls(
                saved.limit, max_tokens=data.get("max_tokens"), counter=counter, tags=saved.tags
            )
        except TypeError as exc:
            raise ValueError(f"saved {exc}") from None
        items = saved.items
        if len(items) > queue.limit:
            raise ValueError(
                f"saved ContextQueue holds {len(items)} items but its limit is "
                f"{queue.limit}; raise 'limit' or drop the oldest items"
            )
        queue._hooks = hooks_from_dict(saved.hooks, QueueHookList, "ContextQueue")
        counter = queue.counter
        counts = (
            [count_content_tokens(item.content, counter) for item in items]
            if queue._counting
            else []
        )
        # As saved: no eviction on load.
        if items:
            queue._store(items, counts)
        return queue


# A tool or hook parameter annotated `ContextQueue` receives the running agent's queue.
receives_context(ContextQueue, QUEUE)
