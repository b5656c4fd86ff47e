"""`search_history`: a ready tool that lets the model search its own conversation.

What a strategy left out of the window, or a compaction archived, is still in
the agent's context store; this tool is how the model gets it back. Give it to
an agent that has a `context` (its store is what is searched) and run a
`ModelLoop` over that agent:

    agent = Agent("helper", "Answers", [search_history], context=ContextConfig(store))

The model calls `search_history(query, limit=5)` and reads the hits as JSON,
`{"search_history": [hit, ...]}`, best first: each with the message's `id`,
`position`, whether it is `archived`, its `role`, and its `text` (cut to
`HIT_TEXT_CHARACTERS`). A hit found inside an offloaded tool result (its
whole text, not the stub the message shows) also has `offloaded`: the handles
to read with `read_tool_result`. The model's own searching is left out of the hits:
messages made only of `search_history` calls, and their results.

With `ContextConfig(store, recall=SemanticRecall(vectors, embedder))` the
search is the recall's (full-text and semantic hits fused): the same tool,
the same arguments and result, better hits for a question in other words.
"""

from __future__ import annotations

from typing import Any, Final

from pygents_ctx._checks import whole_number
from pygents_ctx.context.config import ContextConfig
from pygents_ctx.context.messages import Message, ToolResultBlock, ToolUseBlock
from pygents_ctx.context.stores.base import HistoryRetention
from pygents_ctx.context.stores.search import MAX_SEARCH_LIMIT, offloaded_matches
from pygents_ctx.tools import Tool, ToolRegistry

__all__ = ["SEARCH_HISTORY_LIMIT", "search_history"]

SEARCH_HISTORY_LIMIT: Final = 20
"""The most hits one `search_history` call returns (a model's window is precious)."""

HIT_TEXT_CHARACTERS: Final = 2_000
"""How much of a hit's text the model reads; a longer one ends with `truncated: true`."""

_NAME: Final = "search_history"
# How the tool's results begin, as a model loop writes them (JSON): how they are told apart.
_RESULT_START: Final = '{"search_history":'


async def _search_history(
    query: str, limit: int = 5, context: ContextConfig | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Search this conversation's earlier messages, including those no longer in view.

    Older messages may have been summarized or left out of what you see; they
    are all still kept. Use this to recover an exact detail (a name, number,
    code, decision or tool result) from earlier in the conversation. Returns
    `{"search_history": [...]}`, the best matches first, each with `id`,
    `position`, `archived` (true: no longer in view verbatim), `role` and `text`.
    A match inside an offloaded tool result (too large to show, so `text` is
    its stub) also has `offloaded`: read the result with
    read_tool_result(handle=...).

    Args:
        query: The words to look for: the distinctive terms of what you need
            (names, numbers, key words), plain text, at most 1,000 characters.
        limit: How many matches to return, 1 to 20.
    """
    if context is None:
        raise ValueError(
            "search_history needs an agent with a context store: create the agent with "
            "context=ContextConfig(store), or pass context=ContextConfig(store)"
        )
    if context.retention is HistoryRetention.NONE:
        raise ValueError(
            "search_history has nothing to search: the agent keeps no history "
            "(HistoryRetention.NONE); give its ContextConfig another retention"
        )
    store = await context.ready()
    whole_number(
        limit,
        "search_history limit",
        least=1,
        most=SEARCH_HISTORY_LIMIT,
        fix="ask for fewer matches, or use more distinctive words",
    )
    # Room for the model's own searches, which are left out.
    wanted = min(limit * 2 + 10, MAX_SEARCH_LIMIT)
    if context.recall is None:
        hits = await store.search(query, limit=wanted)
    else:
        hits = await context.recall.search(store, query, limit=wanted)
    shown: list[dict[str, Any]] = []
    for hit in hits:
        if _own_search(hit.message):
            continue
        if len(shown) == limit:
            break
        entry = hit.to_dict()
        del entry["score"], entry["run_id"]
        handles = offloaded_matches(hit.message, query)
        if handles:
            entry["offloaded"] = handles
        if len(entry["text"]) > HIT_TEXT_CHARACTERS:
            entry["text"] = entry["text"][:HIT_TEXT_CHARACTERS]
            entry["truncated"] = True
        shown.append(entry)
    return {_NAME: shown}


def _own_search(message: Message) -> bool:
    """Whether `message` is only the model's searching: `search_history` calls, or their results."""
    return bool(message.content) and all(
        (type(block) is ToolUseBlock and block.name == _NAME)
        or (type(block) is ToolResultBlock and block.text.startswith(_RESULT_START))
        for block in message.content
    )


def names_offloaded(messages: list[Message]) -> bool:
    """Whether a `search_history` result among `messages` names an offloaded result's handle
    (a hit inside one): the model may read it with `read_tool_result`, even archived."""
    return any(
        block.text.startswith(_RESULT_START) and '"offloaded":' in block.text
        for message in messages
        if message.has_tool_results
        for block in message.content
        if type(block) is ToolResultBlock
    )


_search_history.__name__ = _search_history.__qualname__ = _NAME

search_history: Final = Tool(_search_history)
"""The `search_history(query, limit=5)` tool: search the agent's context store, archive included.

Its `context` parameter is annotated `ContextConfig`: an agent with a
`context` hands it over while it runs the tool, and its store is searched (a
`context=` argument wins).
Registered on first use, like the loop's own step tools.

Examples:
    >>> import asyncio
    >>> from pygents_ctx import Message
    >>> from pygents_ctx import ContextConfig, MemoryContextStore
    >>> context = ContextConfig(MemoryContextStore([Message("user", "The gate code is 4417.")]))
    >>> asyncio.run(search_history("gate code", context=context))["search_history"][0]["text"]
    'The gate code is 4417.'
"""


def _register(registry: ToolRegistry) -> None:
    registry.register(search_history)


# Not registered at import: `ToolRegistry.all()` and `definitions()` list the program's
# tools only. An agent given it (or a lookup by name) registers it.
ToolRegistry._provide([search_history.key], _register)
