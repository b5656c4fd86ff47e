"""A model loop offered as a tool to another loop's model: a sub-agent.

Each call runs on a branch of the loop's agent (its own name, its own fork of
the transcript, so calls of one reply run at once without touching each
other or the agent), answers with the run's text (or its `output`, with an
`output_type`), and, unless told otherwise, merges the branch back: what it
added to the pool and queue, and its usage records, so the spend shows on
the agent.
"""

from __future__ import annotations

import re
from typing import Any, Final, Protocol

from pygents_ctx.agent import Agent
from pygents_ctx.errors import SubagentError
from pygents_ctx.model.events import LoopFinished, LoopStop
from pygents_ctx.tools import Tool

__all__ = ["subagent_tool"]

_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")


class _Loop(Protocol):
    agent: Agent
    output_type: type[Any] | None

    def _for(self, agent: Agent) -> _Loop: ...

    async def run(self, prompt: str) -> LoopFinished: ...


def subagent_tool(loop: _Loop, name: str, description: str, *, merge: bool) -> Tool[..., Any]:
    """`loop` as a tool called `name`: each call a run on a branch of `loop.agent`.

    Raises:
        ValueError: `name` is not 1-64 letters, digits, `_` or `-`, or
            `description` is empty.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(
            f"ModelLoop.as_tool name must be 1-64 letters, digits, '_' or '-' (a name the "
            f"model calls), not {name!r}"
        )
    if not isinstance(description, str) or not description.strip():
        raise ValueError(
            f"ModelLoop.as_tool({name!r}) needs a description: it is how the calling model "
            "knows when to use this sub-agent"
        )
    if not isinstance(merge, bool):
        raise TypeError(f"ModelLoop.as_tool merge must be a bool, not {merge!r}")

    async def subagent(task: str) -> Any:
        async with loop.agent.branch() as branch:
            finished = await loop._for(branch).run(task)
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

    subagent.__name__ = subagent.__qualname__ = name
    subagent.__doc__ = (
        f"{description.strip()}\n\n"
        "Args:\n"
        "    task: The whole task for the sub-agent, with everything it needs to know: "
        "it sees nothing else of this conversation.\n"
    )
    return Tool(subagent)
