"""LangGraph: a checkpointer and a long-term memory store in our SQLite and PostgreSQL databases.

LangGraph's own SQLite and PostgreSQL checkpointers store a thread's whole
message list again at every checkpoint, so a thread's storage grows with the
square of its length. `ContextStoreSaver` stores each message of a list of
messages once, the checkpoints pointing at runs of stored messages, so a turn
costs the bytes of its new messages whatever the thread's length; with
`keep=N` it also deletes checkpoints older than the newest `N` as it goes.
It passes LangGraph's conformance suite (`langgraph-checkpoint-conformance`)
on both databases, and shares the database (and its connection) with the
context stores and the viewer.

`ContextStoreMemory` is LangGraph's long-term memory (a `BaseStore`, what
`InMemoryStore` is) in the same databases, or in this process: items under
namespaces, searched by filter or, with an `index`, by meaning, its vectors
in our vector stores.

Needs `langgraph` (the `langgraph` extra: `pip install -e '.[langgraph]'` from a
checkout), imported when `ContextStoreSaver` or `ContextStoreMemory` is first used,
never on import of this module.

Example:
    ```py
    from langgraph.graph import START, MessagesState, StateGraph
    from pygents_ctx.context.stores import connect
    from pygents_ctx.integrations.langgraph import ContextStoreSaver

    async with connect("chat.db") as conn:
        graph = builder.compile(checkpointer=ContextStoreSaver(conn, keep=20))
        config = {"configurable": {"thread_id": "user-42"}}
        await graph.ainvoke({"messages": [("user", "Hi")]}, config)
    ```
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pygents_ctx.integrations._langgraph_saver import ContextStoreSaver
    from pygents_ctx.integrations._langgraph_store import ContextStoreMemory

__all__ = ["ContextStoreMemory", "ContextStoreSaver", "require_langgraph"]


def require_langgraph() -> Any:
    """The `langgraph.checkpoint.base` module, or an ImportError naming the extra to install."""
    try:
        import langgraph.checkpoint.base as base
    except ImportError as exc:
        raise ImportError(
            "the LangGraph checkpointer needs langgraph: pip install langgraph "
            "(the langgraph extra)"
        ) from exc
    return base


def __getattr__(name: str) -> Any:
    # ContextStoreSaver and ContextStoreMemory subclass LangGraph's BaseCheckpointSaver
    # and BaseStore, so each is defined (and langgraph imported) when first asked for.
    if name == "ContextStoreSaver":
        require_langgraph()
        from pygents_ctx.integrations._langgraph_saver import ContextStoreSaver

        return ContextStoreSaver
    if name == "ContextStoreMemory":
        require_langgraph()
        from pygents_ctx.integrations._langgraph_store import ContextStoreMemory

        return ContextStoreMemory
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
