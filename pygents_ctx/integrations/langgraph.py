"""LangGraph: a checkpointer in our SQLite and PostgreSQL databases, each message stored once.

LangGraph's own SQLite and PostgreSQL checkpointers store a thread's whole
message list again at every checkpoint, so a thread's storage grows with the
square of its length. `ContextStoreSaver` stores each message of a list of
messages once, the checkpoints pointing at runs of stored messages, so a turn
costs the bytes of its new messages whatever the thread's length; with
`keep=N` it also deletes checkpoints older than the newest `N` as it goes.
It passes LangGraph's conformance suite (`langgraph-checkpoint-conformance`)
on both databases, and shares the database (and its connection) with the
context stores and the viewer.

Needs `langgraph` (the `langgraph` extra: `pip install -e '.[langgraph]'` from a checkout),
imported when `ContextStoreSaver` is first used, never on import of this module.

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

__all__ = ["ContextStoreSaver", "require_langgraph"]


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
    # ContextStoreSaver subclasses LangGraph's BaseCheckpointSaver, so it is defined
    # (and langgraph imported) when it is first asked for.
    if name == "ContextStoreSaver":
        require_langgraph()
        from pygents_ctx.integrations._langgraph_saver import ContextStoreSaver

        return ContextStoreSaver
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
