"""Checks of what an agent is given: its name, its tools (indexed by key), saved fields."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pygents_ctx._suggest import closest
from pygents_ctx.errors import UnregisteredToolError
from pygents_ctx.tools import Tool, ToolRegistry

__all__ = ["check_name", "index_tools", "refused_tool", "require_tools", "saved_field"]


def index_tools(
    tools: Iterable[Tool[..., Any]], registry: ToolRegistry
) -> tuple[list[Tool[..., Any]], dict[str, Tool[..., Any]]]:
    """The root tools as a list, and them with their subtools by key.

    Raises:
        UnregisteredToolError: Something is not a `Tool` registered in `registry`
            (pygents' error for it).
        ValueError: A tool is not the instance `registry` holds.
    """
    roots = list(tools)
    for t in roots:
        name = (
            t.key
            if isinstance(t, Tool)
            else t
            if isinstance(t, str)
            else getattr(t, "__name__", None)
        )
        try:
            registered: Tool[..., Any] | None = registry.get(name or repr(t))
        except UnregisteredToolError:
            registered = None
        if not isinstance(t, Tool) or registered is None:
            raise _not_a_tool(t, name, registry)
        if registered is not t:
            raise ValueError(
                f"Tool {t.key!r} is registered but not the instance given to this agent: "
                f"ToolRegistry holds another tool under that name; pass the decorated tool itself"
            )
    return roots, {t.key: t for root in roots for t in root.walk()}


def _not_a_tool(given: object, name: str | None, registry: ToolRegistry) -> UnregisteredToolError:
    """The error for `given` among an agent's tools: what it is, and the tool it may mean.

    It keeps pygents' words (`tool 'x' not found`), which users match on.
    """
    meant = closest(name or "", [t.key for t in registry.all()])
    if isinstance(given, str):
        what, fix = (
            "names",
            "pass the tool itself" + (f" ({meant}, made by @tool)" if meant else ""),
        )
    else:
        what = f"a {type(given).__name__}"
        fix = (f"did you mean {meant}? " if meant else "") + (
            "decorate it with @tool and pass what that returns"
        )
    return UnregisteredToolError(
        f"tool {name or repr(given)!r} not found: Agent tools must be tools made by @tool "
        f"(and registered), not {what}; {fix}"
    )


def require_tools(
    index: dict[str, Tool[..., Any]], needed: Iterable[Tool[..., Any]], owner: str
) -> None:
    """Refuse tools that leave a pending turn without its tool (it could not run or load).

    `needed` are the pending turns' tools, each once or more.

    Raises:
        ValueError: A tool is not in `index`.
    """
    for tool in needed:
        if index.get(tool.key) is not tool:
            raise ValueError(
                f"{owner} has a pending turn for tool {tool.key!r} but not the tool; "
                f"include it in the tools"
            )


def check_name(name: object) -> None:
    """Refuse an agent name that is not a non-empty string.

    Raises:
        ValueError: It is not.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"Agent name must be a non-empty string, not {name!r}")


def saved_field(data: Mapping[str, Any], key: str, kind: type, default: Any, label: str) -> Any:
    """`data[key]` (else `default`) from a saved agent, checked to be a `kind` or None.

    Raises:
        ValueError: It is something else.
    """
    value = data.get(key, default)
    if value is not None and not isinstance(value, kind):
        raise ValueError(f"{label}: {key!r} must be a {kind.__name__}, not {value!r}")
    return value


def refused_tool(agent: str, held: Tool[..., Any] | None, tool: Tool[..., Any]) -> ValueError:
    """The error for a turn whose tool agent `agent` does not hold (`held`: what it holds
    under that key, an earlier definition of the tool, say)."""
    if held is None:
        return ValueError(
            f"Agent {agent!r} does not accept tool {tool.key!r}; "
            f"give it the tool (or its root tool) at construction"
        )
    return ValueError(
        f"Agent {agent!r} does not accept tool {tool.key!r}: it holds another tool under "
        f"that name (one defined before {tool.key!r} was defined again, as re-running a "
        f"notebook cell does); make the agent again, or assign agent.tools"
    )
