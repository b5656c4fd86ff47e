"""A model loop offered as a tool to another loop's model: a sub-agent.

Each call runs on a branch of the loop's agent (its own name and its own
conversation, so calls of one reply run at once without touching each other
or the agent), answers with the run's text (or its `output`, with an
`output_type`), and, unless told otherwise, merges the branch back: what it
added to the pool and queue.

Its model calls' usage is recorded once, where the calling loop records its
own (the caller's session, or, for a sub-agent's sub-agent, wherever that
sub-agent's calls go), each record linked to the call that ran it
(`parent_session`, `call_id`) and to the sub-agent's transcript
(`subagent_session`): a fork of the agent's transcript with `keep="transcript"`,
none with `keep="none"` (the branch then talks in memory only).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, cast

from pygents_ctx.agent import Agent
from pygents_ctx.context.config import ContextConfig
from pygents_ctx.context.stores import ContextStore
from pygents_ctx.context.usage import UsageRecord
from pygents_ctx.errors import SubagentError
from pygents_ctx.model._steps import RUNNING
from pygents_ctx.model._tool_calls import CURRENT_CALL
from pygents_ctx.model.events import LoopFinished, LoopStop
from pygents_ctx.tools import Tool

__all__ = [
    "KEEP",
    "Keep",
    "UsageSink",
    "check_subagent",
    "run_subagent",
    "subagent_as_tool",
    "subagent_tool",
]

Keep = Literal["transcript", "none"]
KEEP: Final[tuple[Keep, ...]] = ("transcript", "none")

_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True, slots=True)
class UsageSink:
    """Where a sub-agent's loop records its model calls, and the link each record carries."""

    store: ContextStore
    parent_session: str | None
    call_id: str
    subagent_session: str | None

    async def record(self, record: UsageRecord) -> None:
        linked = dataclasses.replace(
            record,
            parent_session=self.parent_session,
            call_id=self.call_id,
            subagent_session=self.subagent_session,
        )
        await self.store.record_usage(linked)


class _Loop(Protocol):
    agent: Agent
    output_type: type[Any] | None
    _usage_into: UsageSink | None

    @property
    def _context(self) -> ContextConfig: ...

    def _for(self, agent: Agent, usage_into: UsageSink | None) -> _Loop: ...

    async def run(self, prompt: str) -> LoopFinished: ...


def subagent_tool(
    loop: _Loop, name: str, description: str, *, merge: bool, keep: Keep
) -> Tool[..., Any]:
    """`loop` as a tool called `name`: each call a run on a branch of `loop.agent`.

    Raises:
        ValueError: `name` is not 1-64 letters, digits, `_` or `-`,
            `description` is empty, or `keep` is not one of `KEEP`.
        TypeError: `merge` is not a bool.
    """
    check_subagent("ModelLoop.as_tool", name, description, merge=merge, keep=keep)

    async def subagent(task: str) -> Any:
        return await run_subagent(loop, name, task, merge=merge, keep=keep)

    return subagent_as_tool(subagent, name, description)


def check_subagent(owner: str, name: str, description: str, *, merge: bool, keep: Keep) -> None:
    """Refuse a wrong argument of `owner` (`ModelLoop.as_tool`, ...), naming the fix.

    Raises:
        ValueError: `name` is not 1-64 letters, digits, `_` or `-`,
            `description` is empty, or `keep` is not one of `KEEP`.
        TypeError: `merge` is not a bool.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(
            f"{owner} name must be 1-64 letters, digits, '_' or '-' (a name the "
            f"model calls), not {name!r}"
        )
    if not isinstance(description, str) or not description.strip():
        raise ValueError(
            f"{owner}({name!r}) needs a description: it is how the calling model "
            "knows when to use this sub-agent"
        )
    if not isinstance(merge, bool):
        raise TypeError(f"{owner} merge must be a bool, not {merge!r}")
    if keep not in KEEP:
        raise ValueError(
            f"{owner} keep must be 'transcript' (keep each call's transcript, "
            f"linked from the call) or 'none' (keep nothing but its usage), not {keep!r}"
        )


def subagent_as_tool(
    subagent: Callable[[str], Awaitable[Any]], name: str, description: str
) -> Tool[..., Any]:
    """`subagent(task)` as the tool `name` the calling model reads `description` of."""
    subagent.__name__ = subagent.__qualname__ = name
    subagent.__doc__ = (
        f"{description.strip()}\n\n"
        "Args:\n"
        "    task: The whole task for the sub-agent, with everything it needs to know: "
        "it sees nothing else of this conversation.\n"
    )
    return Tool(subagent)


async def run_subagent(loop: _Loop, name: str, task: str, *, merge: bool, keep: Keep) -> Any:
    """Run `loop` on `task`, on a branch of its agent: the answer (text or output).

    Raises:
        SubagentError: The run refused, or ended without an answer.
    """
    branch = loop.agent.branch()
    if keep == "none" and branch.context is not None:
        branch.context = await loop._context.unsaved_branch()
    async with branch:  # a kept transcript is forked now: its session is known
        sink = await _sink(branch, keep)
        finished = await loop._for(branch, sink).run(task)
        if merge:  # the later of two calls adding one id wins, as in the pool
            await loop.agent.merge(branch, on_conflict="branch")
    if finished.reason is LoopStop.REFUSAL:
        raise SubagentError(f"the sub-agent {name!r} refused: {finished.refusal}")
    if finished.reason is not LoopStop.ANSWER:
        raise SubagentError(
            f"the sub-agent {name!r} stopped without an answer "
            f"({finished.reason.value}): ask it for less, or do it another way"
        )
    return finished.output if loop.output_type is not None else finished.text


async def _sink(branch: Agent, keep: Keep) -> UsageSink | None:
    """Where the sub-agent's usage goes: where its caller's goes, linked to the call.

    None outside a model loop's tool call (the tool called some other way): the
    sub-agent's loop then records in its own conversation's store, as any loop.
    """
    caller, call = RUNNING.get(), CURRENT_CALL.get()
    if caller is None or call is None:
        return None
    calling = cast("_Loop", caller)  # RUNNING holds the ModelLoop running this call
    kept = None
    if keep == "transcript" and branch.context is not None:
        kept = branch.context.session_id
    above = calling._usage_into
    if above is not None and above.subagent_session is None:
        # The caller's own transcript is not kept: credit the call that ran the caller.
        return UsageSink(above.store, above.parent_session, above.call_id, kept)
    store = above.store if above is not None else await calling._context.ready()
    return UsageSink(store, calling._context.session_id, call.id, kept)
