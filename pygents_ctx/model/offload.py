"""`ToolResultOffload`: tool results too large for the window go to a blob store, a stub stays.

A result whose text is over `max_tokens` is written whole to a blob store
under a handle named by its content (`"tool-results/<sha256 of the text>"`:
the same text is one blob, and a step run again after a crash writes nothing
new), and the history keeps a `ToolResultBlock` whose content is the stub
text (head, where the rest is, tail) and whose `offloaded` field is the
`OffloadedResult` (which also keeps the distinct words of the whole text, up
to `INDEXED_CHARACTERS` characters, so `ContextStore.search` and the
`search_history` tool find what only the blob holds). The model reads the
rest with the `read_tool_result` tool, which `ModelLoop` offers whenever the
window it is shown holds a stub (or a `search_history` hit naming one);
offsets and lengths count characters of the whole text, and a handle must be
one a stub of the session's history or archive names.

Where the blobs go, unless a store is given: beside the conversation. A
`SQLiteContextStore` or `PostgresContextStore` puts them in its own database
(a `SQLiteBlobStore` / `PostgresBlobStore` on the same connection; through
an `AutoCompactStore`, its inner store's), so a session resumed or opened in
another process, exported, or viewed finds them; a `MemoryContextStore`
(whose conversation dies with the process too), or a store of your own, puts
them in an `InMemoryBlobStore` this offload holds, shared by the loop's
branches.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final

import orjson

from pygents_ctx._checks import whole_number
from pygents_ctx.context.messages import (
    READ_TOOL_RESULT,
    ImageBlock,
    Message,
    OffloadedResult,
    TextBlock,
    ToolResultBlock,
)
from pygents_ctx.context.stores.base import ContextStore
from pygents_ctx.context.stores.compaction import AutoCompactStore
from pygents_ctx.context.stores.postgres import PostgresContextStore
from pygents_ctx.context.stores.search import offloaded_words
from pygents_ctx.context.stores.sqlite import SQLiteContextStore
from pygents_ctx.context.tokens import DEFAULT_COUNTER, TokenCounter
from pygents_ctx.errors import BlobNotFoundError, ToolResultNotFoundError
from pygents_ctx.memory.blobs.base import BlobStore
from pygents_ctx.memory.blobs.in_memory import InMemoryBlobStore
from pygents_ctx.memory.blobs.postgres import PostgresBlobStore
from pygents_ctx.memory.blobs.sqlite import SQLiteBlobStore
from pygents_ctx.tools import Tool

__all__ = ["ToolResultOffload"]

HANDLE_PREFIX: Final = "tool-results/"
# The smallest budget a stub is sure to fit in: the note alone is about 50 tokens.
_MIN_TOKENS: Final = 256
# Lone surrogates (which a tool's str may hold) survive the trip through the blob's bytes.
_ENCODING: Final = "utf-8"
_ERRORS: Final = "surrogatepass"


def offloaded_handles(history: Iterable[Message]) -> set[str]:
    """The handles of every offloaded tool result in `history`."""
    return {
        block.offloaded.handle
        for message in history
        if message.has_tool_results
        for block in message.content
        if isinstance(block, ToolResultBlock) and block.offloaded is not None
    }


def _media_type(text: str) -> str:
    if text[:1] in ("{", "["):
        try:
            orjson.loads(text)
        except orjson.JSONDecodeError:
            return "text/plain"
        return "application/json"
    return "text/plain"


class ToolResultOffload:
    """Moves tool results over a token budget to a blob store; the history keeps a stub.

    Given to `ModelLoop(offload=...)`; the loop has one by default
    (`ToolResultOffload()`), and `offload=None` turns offloading off. A result
    whose text counts more than `max_tokens` (by `counter`) is stored whole in
    the blob store, and its `ToolResultBlock` in the history keeps the first
    `head_chars` and last `tail_chars` characters around a note naming its
    handle and the call that reads the rest (`OffloadedResult.stub_text()`).
    The stub counts at most `max_tokens`: head and tail are shortened until
    it does. Images in a result stay, after the stub. Results of
    `read_tool_result` itself are never offloaded (each is at most
    `page_chars`).

    Args:
        blobs: Where the whole results go; None: beside the conversation (the
            context store's own database, or memory for a `MemoryContextStore`;
            see the module's docs).
        max_tokens: The most tokens a result keeps in the history.
        head_chars: The characters of the start shown in the stub.
        tail_chars: The characters of the end shown in the stub.
        page_chars: The most characters one `read_tool_result` call returns
            (and its default `length`).
        counter: Counts a result's tokens (default: the library's estimate).

    Raises:
        TypeError: `blobs` is not a `BlobStore`, a count is not an int, or
            `counter` is not callable.
        ValueError: `max_tokens` is below 256, `head_chars` or `tail_chars`
            is negative, or `page_chars` is below 1.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import InMemoryBlobStore, MemoryContextStore, ToolResultBlock
        >>> offload = ToolResultOffload(
        ...     InMemoryBlobStore(), max_tokens=256, head_chars=10, tail_chars=10
        ... )
        >>> async def main():
        ...     store = MemoryContextStore()
        ...     block = await offload.apply(ToolResultBlock("c1", "0123456789" * 500), store)
        ...     rest = await offload.read(block.offloaded.handle, store, offset=10, length=5)
        ...     return block.offloaded.chars, block.offloaded.head, rest
        >>> asyncio.run(main())
        (5000, '0123456789', '01234')
    """

    __slots__ = (
        "_beside",
        "_memory",
        "blobs",
        "counter",
        "head_chars",
        "max_tokens",
        "page_chars",
        "tail_chars",
    )

    def __init__(
        self,
        blobs: BlobStore | None = None,
        *,
        max_tokens: int = 8000,
        head_chars: int = 2000,
        tail_chars: int = 1000,
        page_chars: int = 16000,
        counter: TokenCounter = DEFAULT_COUNTER,
    ) -> None:
        if blobs is not None and not isinstance(blobs, BlobStore):
            raise TypeError(
                f"ToolResultOffload blobs must be a BlobStore (e.g. SQLiteBlobStore(conn)) "
                f"or None for one beside the conversation, not {blobs!r}"
            )
        if not callable(counter):
            raise TypeError(
                f"ToolResultOffload counter must be a callable str -> int, not {counter!r}"
            )
        self.blobs = blobs
        self.max_tokens = whole_number(
            max_tokens, "ToolResultOffload max_tokens", least=_MIN_TOKENS
        )
        self.head_chars = whole_number(head_chars, "ToolResultOffload head_chars", least=0)
        self.tail_chars = whole_number(tail_chars, "ToolResultOffload tail_chars", least=0)
        self.page_chars = whole_number(page_chars, "ToolResultOffload page_chars", least=1)
        self.counter = counter
        self._memory: InMemoryBlobStore | None = None
        self._beside: tuple[object, BlobStore] | None = None

    def __repr__(self) -> str:
        where = "beside the conversation" if self.blobs is None else repr(self.blobs)
        return (
            f"ToolResultOffload({where}, max_tokens={self.max_tokens}, "
            f"head_chars={self.head_chars}, tail_chars={self.tail_chars}, "
            f"page_chars={self.page_chars})"
        )

    def blob_store(self, store: ContextStore) -> BlobStore:
        """The blob store the results of `store`'s conversation go to (see the module's docs)."""
        if self.blobs is not None:
            return self.blobs
        while isinstance(store, AutoCompactStore):  # the database is the wrapped store's
            store = store.inner
        if isinstance(store, SQLiteContextStore | PostgresContextStore):
            beside = self._beside
            if beside is None or beside[0] is not store.connection:
                blobs: BlobStore = (
                    SQLiteBlobStore(store.connection)
                    if isinstance(store, SQLiteContextStore)
                    else PostgresBlobStore(store.connection)
                )
                beside = self._beside = (store.connection, blobs)
            return beside[1]
        if self._memory is None:
            self._memory = InMemoryBlobStore()
        return self._memory

    async def apply(self, block: ToolResultBlock, store: ContextStore) -> ToolResultBlock:
        """`block`, or its stub with the whole text stored, if its text is over `max_tokens`.

        A block already offloaded is returned as it is.

        Args:
            block: A tool result.
            store: The context store of the conversation it belongs to (it
                says where the blob goes when no `blobs` were given).
        """
        if block.offloaded is not None:
            return block
        text = block.text
        tokens = self.counter(text)
        if tokens <= self.max_tokens:
            return block
        data = text.encode(_ENCODING, _ERRORS)
        handle = HANDLE_PREFIX + hashlib.sha256(data).hexdigest()
        media_type = _media_type(text)
        blobs = self.blob_store(store)
        try:
            await blobs.info(handle)  # the same text, stored before: named by its content
        except BlobNotFoundError:
            await blobs.put(handle, data, content_type=f"{media_type}; charset=utf-8")
        stub = self._stub(text, handle, tokens, media_type)
        images = [part for part in block.content if isinstance(part, ImageBlock)]
        content: str | list[TextBlock | ImageBlock] = (
            [TextBlock(stub.stub_text()), *images] if images else stub.stub_text()
        )
        return ToolResultBlock(
            block.tool_use_id,
            content,
            block.is_error,
            cache_control=block.cache_control,
            offloaded=stub,
        )

    def _stub(self, text: str, handle: str, tokens: int, media_type: str) -> OffloadedResult:
        """The stub of `text`: head and tail as long as given, shortened until it fits, and
        the words of `text` a search looks in (`offloaded_words`; the model never reads them)."""
        head, tail = self.head_chars, self.tail_chars
        kept = offloaded_words(text)
        while True:
            head = min(head, len(text))
            tail = min(tail, len(text) - head)
            stub = OffloadedResult(
                handle,
                chars=len(text),
                tokens=tokens,
                head=text[:head],
                tail=text[len(text) - tail :],
                media_type=media_type,
                words=kept,
            )
            if (head == 0 and tail == 0) or self.counter(stub.stub_text()) <= self.max_tokens:
                return stub
            head, tail = head // 2, tail // 2

    async def read(
        self,
        handle: str,
        store: ContextStore,
        *,
        offset: int = 0,
        length: int | None = None,
    ) -> str:
        """The characters `offset` to `offset + length` of the result stored under `handle`.

        This reads the blob store alone; `ModelLoop.read_tool_result()` also
        checks that the handle belongs to the loop's session.

        Args:
            handle: The stub's `OffloadedResult.handle`.
            store: The context store of the conversation (which blob store to read).
            offset: The first character, counted in the whole text.
            length: How many characters (None: to the end).

        Raises:
            ToolResultNotFoundError: No result is stored under `handle`.
            TypeError: `offset` or `length` is not an int.
            ValueError: `offset` is negative or past the end, or `length` is below 1.
        """
        text = await self._text(handle, store, offset, length)
        return text[offset:] if length is None else text[offset : offset + length]

    async def read_page(self, handle: str, store: ContextStore, *, offset: int, length: int) -> str:
        """What the `read_tool_result` tool shows the model: a page, and where the next starts.

        `length` is held to `page_chars`; the page ends with a note of the
        characters shown and, when more remain, the call that reads on.

        Raises:
            ToolResultNotFoundError, TypeError, ValueError: As for `read()`.
        """
        text = await self._text(handle, store, offset, length)
        end = min(len(text), offset + min(length, self.page_chars))
        if end == len(text):
            note = f"[chars {offset:,} to {end:,} of {len(text):,}: the end of the result]"
        else:
            note = (
                f"[chars {offset:,} to {end:,} of {len(text):,}; read on with "
                f'{READ_TOOL_RESULT}(handle="{handle}", offset={end})]'
            )
        return f"{text[offset:end]}\n{note}"

    async def _text(
        self, handle: object, store: ContextStore, offset: object, length: object
    ) -> str:
        """The whole text under `handle`, once `offset` and `length` are checked against it."""
        if not isinstance(handle, str) or not handle.startswith(HANDLE_PREFIX):
            raise ToolResultNotFoundError(
                f"{handle!r} is not the handle of an offloaded tool result; "
                f"use the handle a stub names (it starts with {HANDLE_PREFIX!r})"
            )
        start = whole_number(offset, "read_tool_result offset", least=0)
        if length is not None:
            whole_number(length, "read_tool_result length", least=1)
        try:
            blob = await self.blob_store(store).get(handle)
        except BlobNotFoundError:
            raise ToolResultNotFoundError(
                f"no offloaded tool result {handle!r} in the blob store; was it written "
                "to another store (ToolResultOffload(blobs=...)) or deleted?"
            ) from None
        text = blob.data.decode(_ENCODING, _ERRORS)
        if start > len(text) or (start == len(text) and text):
            raise ValueError(
                f"read_tool_result offset {start} is past the end of the tool result "
                f"{handle!r}, which is {len(text):,} chars long; give an offset below {len(text)}"
            )
        return text


def read_tool(read: Callable[[str, int, int], Awaitable[str]], page_chars: int) -> Tool[..., Any]:
    """The `read_tool_result` tool a model loop offers: a call is `read(handle, offset, length)`."""

    async def read_tool_result(handle: str, offset: int = 0, length: int = page_chars) -> str:
        return await read(handle, offset, length)

    read_tool_result.__doc__ = (
        "Read part of a tool result that was too large for the conversation.\n\n"
        "Its stub shows the start and the end of the result and names its handle; "
        "offsets count characters of the whole result.\n\n"
        "Args:\n"
        "    handle: The handle the stub names.\n"
        "    offset: The first character to read (the stub says where the hidden part starts).\n"
        f"    length: How many characters to read, at most {page_chars}.\n"
    )
    return Tool(read_tool_result)
