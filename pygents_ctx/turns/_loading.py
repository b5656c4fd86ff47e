"""Loading an agent's queue of turns all at once.

Most queued turns were saved before they ever ran, with plain arguments, no
hooks and no tags. A queue of only such turns is checked all at once, field by
field across the turns (each check one pass in C), and the turns are built
from the checked fields. A queue with any other turn, or with anything the
checks do not recognize, loads turn by turn through `Turn.from_dict`'s own path,
which raises the error that says what is wrong.
"""

from __future__ import annotations

from itertools import chain
from operator import itemgetter
from typing import Any

from pygents_ctx.hooks._calls import any_dynamic
from pygents_ctx.tools import Tool, ToolRegistry
from pygents_ctx.turns._turn import Turn, TurnMetadata

__all__ = ["load_turns"]

# Every field `Turn.to_dict()` writes, in one C call per saved turn.
_FIELDS = itemgetter(
    "tool_name", "args", "kwargs", "timeout", "metadata", "output", "hooks", "tags"
)
_NOT_RUN = TurnMetadata().to_dict()
_NO_TAGS: frozenset[str] = frozenset()


def _built(
    tools: list[Tool[..., Any]],
    args: list[tuple[Any, ...]],
    kwargs: list[dict[str, Any]],
    timeouts: tuple[int, ...],
    outputs: tuple[Any, ...],
) -> list[Turn]:
    """The turns of these checked fields, as `Turn.from_dict` would have made them."""
    turns = []
    for tool, turn_args, turn_kwargs, timeout, output in zip(
        tools, args, kwargs, timeouts, outputs, strict=True
    ):
        turn = _new_turn(Turn)
        dynamic_args = any(map(callable, turn_args)) and any_dynamic(turn_args)
        values = turn_kwargs.values()
        dynamic_kwargs = any(map(callable, values)) and any_dynamic(values)
        turn._fill(tool, turn_args, dynamic_args, turn_kwargs, dynamic_kwargs, timeout, _NO_TAGS)
        turn.output = output
        turns.append(turn)
    return turns


_new_turn = object.__new__


def load_turns(saved: list[Any], tools: dict[str, Tool[..., Any]], parsed: bool) -> list[Turn]:
    """`Turn.from_dict` of each saved turn, all at once when every one is plain (see the module).

    `tools` as for `Turn._from_saved`: names are looked up there first, and it
    ends up holding every tool the turns use. `parsed` as for `Turn._from_saved`.

    Raises:
        ValueError: A saved turn is malformed.
        UnregisteredToolError: A tool is not registered.
        UnregisteredHookError: A hook name is not registered.
    """
    plain = _plain_turns(saved, tools, parsed)
    if plain is not None:
        return plain
    return [Turn._from_saved(data, tools, parsed) for data in saved]


def _plain_turns(
    saved: list[Any], tools: dict[str, Tool[..., Any]], parsed: bool
) -> list[Turn] | None:
    """The turns, if each is a plain turn that never ran; else None."""
    if not saved or set(map(type, saved)) != {dict}:
        return None
    try:
        names, args, kwargs, timeouts, metadata, outputs, hooks, tags = zip(
            *map(_FIELDS, saved), strict=True
        )
    except KeyError:  # a field is missing: Turn.from_dict has its default
        return None
    count = len(saved)
    if (
        set(map(type, names)) != {str}
        or set(map(type, args)) != {list}
        or set(map(type, kwargs)) != {dict}
        or set(map(type, timeouts)) != {int}
        or min(timeouts) < 1
        or metadata.count(_NOT_RUN) != count
        or hooks.count({}) != count
        or tags.count([]) != count
    ):
        return None
    if not parsed:  # JSON holds only string keys: what else a dict may
        if not set(map(type, chain.from_iterable(kwargs))) <= {str}:
            return None
        kwargs = tuple(map(dict, kwargs))  # the caller keeps its dicts
    # The checks above pass: a missing tool is the only error left to report, as
    # Turn.from_dict would, for the first turn that names one.
    for name in dict.fromkeys(names):
        tools[name] = tools.get(name) or ToolRegistry.get(name)
    return _built(
        list(map(tools.__getitem__, names)),
        list(map(tuple, args)),
        list(kwargs),
        timeouts,
        outputs,
    )
