"""Loading an agent's queue of turns all at once.

Most queued turns were saved before they ever ran, with plain arguments, no
hooks and no tags. A queue of only such turns is checked all at once, field by
field across the turns (each check one pass in C), and kept as the checked
fields: the agent builds the turns the first time it needs them (`SavedTurns`,
held by its `PendingTurns`). A queue with any other turn, or with anything the
checks do not recognize, loads turn by turn through `Turn.from_dict`'s own path,
which raises the error that says what is wrong.
"""

from __future__ import annotations

from itertools import chain
from operator import itemgetter
from typing import Any

from pygents_ctx._calls import any_dynamic
from pygents_ctx.tools import Tool, ToolRegistry
from pygents_ctx.turns import Turn, TurnMetadata

__all__ = ["SavedTurns", "load_turns"]

# Every field `Turn.to_dict()` writes, in one C call per saved turn.
_FIELDS = itemgetter(
    "tool_name", "args", "kwargs", "timeout", "metadata", "output", "hooks", "tags"
)
_NOT_RUN = TurnMetadata().to_dict()
_NO_TAGS: frozenset[str] = frozenset()


class SavedTurns:
    """Saved turns that never ran, checked, to be built when first needed.

    Args:
        tools: Each turn's tool.
        args: Each turn's positional arguments (tuples of its own).
        kwargs: Each turn's keyword arguments (dicts of its own).
        timeouts: Each turn's timeout.
        outputs: Each turn's saved output.
    """

    __slots__ = ("_args", "_kwargs", "_outputs", "_timeouts", "_tools")

    def __init__(
        self,
        tools: list[Tool[..., Any]],
        args: list[tuple[Any, ...]],
        kwargs: list[dict[str, Any]],
        timeouts: tuple[int, ...],
        outputs: tuple[Any, ...],
    ) -> None:
        self._tools, self._args, self._kwargs = tools, args, kwargs
        self._timeouts, self._outputs = timeouts, outputs

    def tools(self) -> set[Tool[..., Any]]:
        """The tools the turns run."""
        return set(self._tools)

    def build(self) -> list[Turn]:
        """The turns, as `Turn.from_dict` would have made them (their values are checked)."""
        turns = []
        for tool, args, kwargs, timeout, output in zip(
            self._tools, self._args, self._kwargs, self._timeouts, self._outputs, strict=True
        ):
            turn = _new_turn(Turn)
            dynamic_args = any(map(callable, args)) and any_dynamic(args)
            values = kwargs.values()
            dynamic_kwargs = any(map(callable, values)) and any_dynamic(values)
            turn._fill(tool, args, dynamic_args, kwargs, dynamic_kwargs, timeout, _NO_TAGS)
            turn.output = output
            turns.append(turn)
        return turns


_new_turn = object.__new__


def load_turns(
    saved: list[Any], tools: dict[str, Tool[..., Any]], parsed: bool
) -> SavedTurns | list[Turn]:
    """`Turn.from_dict` of each saved turn, deferred when every one is plain (see the module).

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
) -> SavedTurns | None:
    """The turns as `SavedTurns`, if each is a plain turn that never ran; else None.

    Which arguments are dynamic is found when the turns are built: the copies
    kept here cannot change meanwhile.
    """
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
    return SavedTurns(
        list(map(tools.__getitem__, names)),
        list(map(tuple, args)),
        list(kwargs),
        timeouts,
        outputs,
    )
