"""`ContextConfig`: the store, strategy and retention an agent keeps its conversation with."""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pygents_ctx._resources import injectable
from pygents_ctx.context.stores._common import new_session_id
from pygents_ctx.context.stores.base import ContextStore, HistoryRetention, keeps_checkpoints
from pygents_ctx.context.stores.memory import MemoryContextStore
from pygents_ctx.context.stores.recall import HistoryRecall
from pygents_ctx.context.strategies.base import ContextStrategy, Measure, WindowStep, check_strategy
from pygents_ctx.context.strategies.compose import Pipeline
from pygents_ctx.context.strategies.pinned import PinnedWindow
from pygents_ctx.context.strategies.stable import StableWindow
from pygents_ctx.context.tokens import count_message_tokens

if TYPE_CHECKING:
    from pygents_ctx.context.messages import Message

__all__ = ["ContextConfig", "PromptWindow"]


@dataclass(frozen=True, slots=True)
class PromptWindow:
    """What a model is shown next: the strategy's view of the history, and its size.

    Attributes:
        messages: The window, oldest first.
        tokens: Its token count, as the strategy counts (a `StableWindow`'s or
            a `PinnedWindow`'s own total, the counter of a budgeted strategy
            such as `FitTokens`, or of the stage that built a `Pipeline`'s or
            an `UntilFits`'s window when it knows the count), otherwise
            `count_tokens` with the default counter; from cached counts.
        stable_prefix: With a `StableWindow` or `PinnedWindow` strategy, how
            many leading messages this window shares with the one built before
            it (a `StableWindow`'s whole previous window, as it grows by
            appending) or with every window until the next re-pin (a
            `PinnedWindow`'s pinned part); with a `Pipeline` that starts with
            one, the part of that its later stages left as it was last time:
            where a model adapter places a prompt-cache breakpoint. None for
            other strategies, which promise neither.
    """

    messages: list[Message]
    tokens: int
    stable_prefix: int | None = None


@injectable
class ContextConfig:
    """Where an agent keeps its conversation, how it is cut for the model, how long it lives.

    Give it to an agent as `Agent(..., context=ContextConfig(store, strategy))`.
    Each message a tool returns as `ContextItem(content=Message(...))` then goes
    to the agent's queue *and* to `store`, tagged with the run's id, and
    `await agent.prompt_window()` builds the window for the next model call.
    A tool or hook parameter annotated `ContextConfig` (or `ContextConfig |
    None = None`) receives the `context` of the agent running it (`await
    context.ready()` is its store); that is how `search_history` searches the
    right conversation.

    Args:
        store: The durable transcript.
        strategy: Builds the window from the stored history (default:
            `StableWindow()`: an append-only window of up to 24,000 tokens,
            which a provider serves from its prompt cache between compactions;
            a `ModelLoop` offers `search_history` for what it leaves out).
        retention: `PERMANENT` keeps messages across runs, `RUN` removes a
            run's messages when the run ends normally (a crashed run keeps
            them), `NONE` never writes to the store and keeps the messages in
            memory, on this `ContextConfig` (agents sharing one config share
            that conversation; it is not saved).
        checkpoints: Have a `ModelLoop` save the agent's
            checkpoint (`Agent.checkpoint()`: its turns, queue and pool) before
            each new prompt and each model call, so `Agent.rewind(to)` to
            those messages gives the agent its state back. Off by default:
            each checkpoint writes the whole state, which changes at every
            step (see the stores guide for what it costs).
        recall: What `search_history` searches the store with instead of
            `store.search`: `SemanticRecall(vectors, embedder)` (from
            `pygents_ctx.memory`) adds a search by meaning, fused with the
            full-text one. None (the default): the store's full-text search.

    Raises:
        TypeError: `store` is not a `ContextStore`, `strategy` is a class or
            has no `compact()`, `retention` is not a `HistoryRetention`, or
            `checkpoints` is not a bool, or `recall` has no async `search(store, query)`.
        ValueError: `retention` is `RUN` and `store` has no `clear_run()`, or
            `checkpoints` is True and `store` keeps no checkpoints.

    Examples:
        >>> config = ContextConfig.default()
        >>> type(config.store).__name__, config.retention.value
        ('MemoryContextStore', 'permanent')
    """

    __slots__ = (
        "_forked",
        "_last_window",
        "_pending",
        "_store",
        "_unsaved",
        "checkpoints",
        "recall",
        "retention",
        "strategy",
    )

    def __init__(
        self,
        store: ContextStore,
        strategy: ContextStrategy | None = None,
        *,
        retention: HistoryRetention = HistoryRetention.PERMANENT,
        checkpoints: bool = False,
        recall: HistoryRecall | None = None,
    ) -> None:
        if not isinstance(store, ContextStore):
            raise TypeError(f"ContextConfig store must be a ContextStore, not {store!r}")
        if strategy is not None:
            check_strategy(strategy, "ContextConfig strategy")
        if not isinstance(retention, HistoryRetention):
            raise TypeError(
                f"ContextConfig retention must be a HistoryRetention, not {retention!r}; "
                "e.g. HistoryRetention.RUN"
            )
        if retention is HistoryRetention.RUN and type(store).clear_run is ContextStore.clear_run:
            # Without it the run would fail at its very end, after its messages were stored.
            raise ValueError(
                f"ContextConfig retention RUN needs a store with clear_run(); "
                f"{type(store).__name__} does not override it: implement clear_run() "
                "or use HistoryRetention.PERMANENT"
            )
        if not isinstance(checkpoints, bool):
            raise TypeError(f"ContextConfig checkpoints must be True or False, not {checkpoints!r}")
        if checkpoints and not keeps_checkpoints(store):
            raise ValueError(
                f"ContextConfig checkpoints=True needs a store that keeps checkpoints; "
                f"{type(store).__name__} does not override save_checkpoint(): implement it, "
                "or use MemoryContextStore, SQLiteContextStore or PostgresContextStore"
            )
        if recall is not None and not isinstance(recall, HistoryRecall):
            raise TypeError(
                "ContextConfig recall must have an async search(store, query, limit=...), "
                f"e.g. SemanticRecall(vectors, embedder), not {recall!r}"
            )
        self.checkpoints = checkpoints
        self.recall = recall
        self._store = store
        self.strategy: ContextStrategy = StableWindow() if strategy is None else strategy
        self.retention = retention
        self._unsaved: list[Message] = []  # the NONE retention's conversation
        self._pending: _PendingFork | None = None
        self._forked = False
        self._last_window: _LastWindow | None = None

    @property
    def store(self) -> ContextStore:
        """The durable transcript.

        Raises:
            RuntimeError: This is a branch's context whose fork is not made yet
                (`await config.ready()` makes it).
        """
        if self._pending is not None:
            raise RuntimeError(
                f"this branch's transcript (session {self._pending.session_id!r}) is forked "
                "from its parent's when first used; await context.ready() (or enter "
                "`async with agent.branch() as sub:`) before reading context.store"
            )
        return self._store

    @property
    def forked(self) -> bool:
        """True for a branch's context (`branch()`) once its fork of the parent's transcript
        is made: its store then holds the branch's own conversation and usage."""
        return self._forked

    @property
    def session_id(self) -> str:
        """The session the conversation is kept in (a branch's is known before its fork)."""
        pending = self._pending
        return self._store.session_id if pending is None else pending.session_id

    def branch(self) -> ContextConfig:
        """The context of a branch: the same strategy and retention, over a fork of the transcript.

        The fork (`store.fork()`, into a new session) is made when the branch
        first uses it (`ready()`, which every method here awaits), so a branch
        that never talks costs nothing in the store. With `HistoryRetention.NONE`
        the branch gets a copy of the in-memory conversation instead.
        """
        strategy = _own_copy(self.strategy)
        # Until the fork is made, the child holds this store only to say what it is.
        child = ContextConfig(
            self._store,
            strategy,
            retention=self.retention,
            checkpoints=self.checkpoints,
            recall=self.recall,
        )
        if self.retention is HistoryRetention.NONE:
            child._unsaved = list(self._unsaved)
        else:
            child._pending = _PendingFork(self, new_session_id())
        return child

    async def unsaved_branch(self) -> ContextConfig:
        """A branch's context that never writes: a copy of the conversation, kept in memory.

        The same strategy, with `HistoryRetention.NONE` over a copy of this
        context's history: what the branch says is its own and goes when it
        does, and no session is made for it (`ModelLoop.as_tool(keep="none")`).
        """
        strategy = _own_copy(self.strategy)
        history = await self.history()
        child = ContextConfig(
            await self.ready(), strategy, retention=HistoryRetention.NONE, recall=self.recall
        )
        child._unsaved = history
        return child

    async def ready(self) -> ContextStore:
        """The store, once a branch's fork is made (at once for any other context)."""
        pending = self._pending
        if pending is None:
            return self._store
        async with pending.lock:
            if self._pending is pending:
                if pending.parent._pending is not None:  # a branch of a branch: its parent first
                    await pending.parent.ready()
                store = await pending.parent._store.fork(session_id=pending.session_id)
                self._store, self._pending, self._forked = store, None, True
        return self._store

    @classmethod
    def default(cls) -> ContextConfig:
        """A `MemoryContextStore` with a `StableWindow()`, kept permanently."""
        return cls(MemoryContextStore())

    def __repr__(self) -> str:
        return (
            f"ContextConfig({type(self._store).__name__}(session_id={self.session_id!r}), "
            f"{self.strategy!r}, retention={self.retention.name}"
            + (", checkpoints=True)" if self.checkpoints else ")")
        )

    def to_dict(self) -> dict[str, str]:
        """`{"session_id", "retention"}`: what an agent saves to find its conversation again."""
        return {"session_id": self.session_id, "retention": self.retention.value}

    @staticmethod
    def check_saved(saved: Mapping[str, Any], given: ContextConfig | None, owner: str) -> None:
        """Check that `given` is the context a saved agent needs: one for its session.

        Raises:
            TypeError: `given` is not a `ContextConfig`.
            ValueError: `given` is None, or its store holds another session.
        """
        session = saved.get("session_id")
        if given is not None and not isinstance(given, ContextConfig):
            raise TypeError(
                f"{owner}: context must be a ContextConfig, not {type(given).__name__}; "
                f"pass context=ContextConfig(store) with a store for session {session!r}"
            )
        if given is None:
            raise ValueError(
                f"{owner} kept its conversation in session {session!r}; pass "
                "context=ContextConfig(store) with a store for that session"
            )
        if given.session_id != session:
            raise ValueError(
                f"{owner} kept its conversation in session {session!r}, but the given "
                f"context's store is session {given.session_id!r}; open the store "
                f"with session_id={session!r}"
            )

    @staticmethod
    def new_run_id() -> str:
        """A fresh run id: the tag a run's messages are stored with."""
        return uuid.uuid4().hex

    async def record(self, message: Message, run_id: str) -> None:
        """Keep one message of the run `run_id`, as the retention says."""
        if self.retention is HistoryRetention.NONE:
            self._unsaved.append(message)
        else:
            await (await self.ready()).append(message, run_id=run_id)

    async def end_run(self, run_id: str) -> None:
        """Apply the retention at the normal end of a run."""
        if self.retention is HistoryRetention.RUN:
            await (await self.ready()).clear_run(run_id)

    async def history(self) -> list[Message]:
        """The conversation the window is built from."""
        if self.retention is HistoryRetention.NONE:
            return list(self._unsaved)
        return await (await self.ready()).get_history()

    async def prompt_window(self) -> PromptWindow:
        """The strategy's view of the history, with its token count."""
        return await self.window_of(await self.history())

    async def window_of(self, history: list[Message]) -> PromptWindow:
        """The strategy's view of `history` (as `history()` returned it), with its token count."""
        strategy = self.strategy
        if isinstance(strategy, PinnedWindow | StableWindow) or (
            isinstance(strategy, Pipeline) and strategy.builds_windows
        ):
            window = await strategy.build(history)
            return PromptWindow(window.messages, window.tokens, window.stable_prefix)
        since = getattr(strategy, "compact_since", None)
        measure = getattr(strategy, "measure", None)
        count = measure if isinstance(measure, Measure) else count_message_tokens
        if since is None:
            messages = await strategy.compact(history)
            return PromptWindow(messages, sum(map(count, messages)))
        # The incremental form: handed its last step back, it says how much of its
        # window is as it was, so only the rest is counted (a step costs the new
        # messages, not the window). Another caller of the same strategy makes it
        # say 0, and everything is counted again.
        last = self._last_window
        if last is None or last.strategy is not strategy:
            last = None
        step: WindowStep = await since(history, None if last is None else last.step, 0)
        messages = step.messages
        sums = [0] if last is None else last.sums
        del sums[step.unchanged + 1 :]
        if step.tokens is None:
            for message in messages[len(sums) - 1 :]:
                sums.append(sums[-1] + count(message))
            tokens = sums[-1]
        else:
            sums[1:] = []  # the strategy counted: nothing here to keep
            tokens = step.tokens
        self._last_window = _LastWindow(strategy, step, sums)
        if messages is not history:
            messages = list(messages)  # the strategy keeps and changes its own list
        return PromptWindow(messages, tokens)


@dataclass(slots=True, eq=False)
class _LastWindow:
    """What `window_of` keeps of its last incremental step, to count only what changed."""

    strategy: ContextStrategy
    step: WindowStep
    sums: list[int]
    """`sums[i]` is the tokens of the step's first `i` messages, as far as counted."""


def _own_copy(strategy: ContextStrategy) -> ContextStrategy:
    """`strategy` for a branch: a window builder of its own, since each follows one conversation."""
    if isinstance(strategy, PinnedWindow | StableWindow | Pipeline):
        return copy.copy(strategy)
    return strategy


class _PendingFork:
    """A branch's fork not made yet: of `parent`'s store, into session `session_id`."""

    __slots__ = ("lock", "parent", "session_id")

    def __init__(self, parent: ContextConfig, session_id: str) -> None:
        self.parent = parent
        self.session_id = session_id
        self.lock = asyncio.Lock()
