"""How a turn is saved and loaded: `to_dict()` / `from_dict()` and the JSON paths.

A turn saves its tool by registry key and its hooks by name; loading looks both
up again. An agent saves and loads its whole queue through `_saved` and
`_from_saved`, turn by turn. `TurnSaving` is a base of
`pygents_ctx.turns.Turn`.
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Protocol, Self

from pygents_ctx._json import JsonSerializable, is_mapping, refuses_deep_nesting
from pygents_ctx.hooks import HookRegistry, TurnHook
from pygents_ctx.hooks._calls import tag_set
from pygents_ctx.hooks._dispatch import (
    TurnHookList,
    enter_hooks,
    hooks_from_dict,
    hooks_to_dict,
    leave_hooks,
)
from pygents_ctx.tools import ToolRegistry
from pygents_ctx.turns._state import (
    NO_SAVED_METADATA,
    Declared,
    TurnRun,
    TurnState,
    check_args,
    check_kwargs,
    check_timeout,
    read_metadata,
)

if TYPE_CHECKING:
    from pygents_ctx.tools import Tool

__all__ = ["Registries", "TurnSaving", "tools_of"]


class Registries(Protocol):
    """An `AgentRegistry`, as a turn's `registry=` takes it: its tools and hooks (turns
    sit below the agent, so they know it by this shape)."""

    @property
    def tools(self) -> ToolRegistry: ...

    @property
    def hooks(self) -> HookRegistry: ...


def tools_of(registry: ToolRegistry | Registries | None, owner: str) -> ToolRegistry | None:
    """The `ToolRegistry` a turn's `registry=` names: itself, or an `AgentRegistry`'s
    `tools`; None (the current one) for None.

    Raises:
        TypeError: `registry` is neither.
    """
    if registry is None or isinstance(registry, ToolRegistry):
        return registry
    tools = getattr(registry, "tools", None)
    if isinstance(tools, ToolRegistry) and isinstance(
        getattr(registry, "hooks", None), HookRegistry
    ):
        return tools
    raise TypeError(
        f"{owner} registry must be a ToolRegistry or an AgentRegistry, not {registry!r}"
    )


# The saved fields of a turn that hold what users gave it (see `TurnSaving._user_values`).
_USER_FIELDS = itemgetter("args", "kwargs", "output")
_NO_TAGS: frozenset[str] = frozenset()
# What most turns save, shared by the data to_json writes (read once, never changed).
_NO_SAVED_HOOKS: dict[str, list[str]] = {}
_NO_SAVED_TAGS: list[str] = []


class TurnSaving(TurnState, JsonSerializable):
    """Saving and loading a turn: what `Turn.to_dict()` and `Turn.from_dict()` do."""

    __slots__ = ()

    def _json_data(self) -> dict[str, Any]:
        return self._saved(fresh=False)

    @classmethod
    def _user_values(cls, data: dict[str, Any]) -> list[Any]:
        return cls._user_values_of([data])

    @staticmethod
    def _user_values_of(saved_turns: Iterable[dict[str, Any]]) -> list[Any]:
        """`_user_values` of many saved turns: their arguments and outputs."""
        return list(map(_USER_FIELDS, saved_turns))

    def _saved(self, fresh: bool) -> dict[str, Any]:
        """`to_dict()`; unless `fresh`, sharing this turn's own containers, not copies."""
        declared = self._declared
        if declared.dynamic_args or declared.dynamic_kwargs:
            args, kwargs = self._evaluated()
        else:
            args, kwargs = declared.args, declared.kwargs
        run = self._run
        if run is None:  # never run, loaded without times or output, metadata never read
            metadata = NO_SAVED_METADATA.copy() if fresh else NO_SAVED_METADATA
        else:
            metadata = self._metadata().to_dict()
        hooks, tags, key = self._hooks, declared.tags, declared.tool.key
        return {
            "tool_name": key,
            # to_json writes the tuple as a list: only to_dict's caller needs one of its own.
            "args": list(args) if fresh else args,
            "kwargs": dict(kwargs) if fresh else kwargs,
            "timeout": declared.timeout,
            "metadata": metadata,
            # A turn in flight runs again from the start when restored: its partial
            # output (routed items included) is not state worth saving.
            "output": None if run is None or run.running else run.output,
            "hooks": (
                hooks_to_dict(hooks, TurnHook, f"turn {key!r}")
                if hooks
                else {}
                if fresh
                else _NO_SAVED_HOOKS
            ),
            "tags": sorted(tags) if tags else [] if fresh else _NO_SAVED_TAGS,
        }

    @classmethod
    def _from_json_data(cls, data: Any) -> Self:
        return cls._from_saved(data, {}, parsed=True)

    @classmethod
    def _load(
        cls, data: object, parsed: bool, registry: ToolRegistry | Registries | None, owner: str
    ) -> Self:
        """`from_dict` and `from_json`: one turn, its names looked up where `registry` says
        (an `AgentRegistry`'s hooks are current while it loads)."""
        tools = tools_of(registry, owner)
        if registry is None or isinstance(registry, ToolRegistry):
            return cls._from_saved(data, {}, parsed, tools)
        entered = enter_hooks(registry.hooks)
        try:
            return cls._from_saved(data, {}, parsed, tools)
        finally:
            leave_hooks(entered)

    @classmethod
    @refuses_deep_nesting("Turn")
    def _from_saved(
        cls,
        data: object,
        tools: dict[str, Tool[..., Any]],
        parsed: bool,
        registry: ToolRegistry | None = None,
    ) -> Self:
        """`from_dict`, looking tool names up in `tools`, then in `registry` (None: the
        current one).

        Loading many turns (an agent's queue) with one `tools` resolves each name
        once; afterwards `tools` holds every tool the turns use. `parsed`: `data`
        is fresh from `from_json` (see `JsonSerializable._from_json_data`).
        """
        if not is_mapping(data) or "tool_name" not in data:
            raise ValueError(f"a saved turn must be a dict with a 'tool_name', not {data!r}")
        name = data["tool_name"]
        if not isinstance(name, str):
            raise ValueError(f"turn 'tool_name' must be a string, not {name!r}")
        tool = tools.get(name)
        if tool is None:
            tool = tools[name] = (ToolRegistry.current() if registry is None else registry).get(
                name
            )
        args, kwargs, tags = data.get("args"), data.get("kwargs"), data.get("tags")
        try:
            if parsed and type(args) is list and type(kwargs) is dict:
                # Fresh JSON holds no functions to call at run time and only string
                # keys, and nothing else holds the dict: the turn can keep it.
                args, dynamic_args, dynamic_kwargs = tuple(args), False, False
            else:
                args, dynamic_args = check_args(args)
                kwargs, dynamic_kwargs = check_kwargs(kwargs)
            timeout = data.get("timeout", 60)
            if type(timeout) is not int or timeout < 1:  # a positive int needs no other check
                timeout = check_timeout(timeout)
            tags = _NO_TAGS if tags == [] else tag_set(tags)
        except TypeError as exc:
            raise ValueError(f"saved turn for {name!r}: {exc}") from None
        run: TurnRun | None = None  # none for most: their metadata is the default
        metadata = data.get("metadata")
        if metadata and metadata != NO_SAVED_METADATA:
            start_time, end_time, stop_reason = read_metadata(metadata)
            run = TurnRun(False, stop_reason)
            run._load_times(
                None if start_time is None else start_time.timestamp(),
                None if end_time is None else end_time.timestamp(),
            )
        saved_hooks = data.get("hooks", _NO_SAVED_HOOKS)
        # Most turns have none (and no list until one is asked for): nothing to read.
        hooks = (
            None
            if saved_hooks == _NO_SAVED_HOOKS
            else hooks_from_dict(saved_hooks, TurnHookList, f"turn {name!r}")
        )
        # Values checked as __init__ would: calling it would check them again.
        turn = object.__new__(cls)
        turn._fill(Declared(tool, args, dynamic_args, kwargs, dynamic_kwargs, timeout, tags), hooks)
        turn._run = run
        turn.output = data.get("output")
        return turn
