"""The deliberate differences from pygents 0.7.0, each documented on the migration page.

Each entry names the section of guides/guides/migrating-from-pygents.md that
explains it (by its heading) and the pygents public names it concerns.
`test_differences.py` shows each one holds; `test_coverage.py` checks that every
pygents public name has a differential test or an entry here, and that every
heading named here is on the page.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Difference:
    heading: str  # the section on the migration page
    names: tuple[str, ...] = ()  # pygents public names it concerns


DIFFERENCES: dict[str, Difference] = {
    "one-tool-class": Difference(
        "One `Tool` class for coroutines and generators", ("AsyncGenTool", "BaseTool")
    ),
    "tool-hooks-list": Difference("`tool.hooks` holds hooks", ("Tool.hooks",)),
    "hook-kinds": Difference("Hook kinds are not strings", ("hook",)),
    "hook-constructor": Difference("Making a `Hook` directly", ("Hook",)),
    "hook-tags": Difference("`hook.tags` is always a set", ("Hook.tags",)),
    "hook-lists": Difference(
        "A `hooks` list holds hooks", ("ContextQueue.hooks", "Turn.hooks", "Tool.hooks")
    ),
    "hook-registry": Difference(
        "`HookRegistry` dispatch helpers",
        (
            "HookRegistry.fire",
            "HookRegistry.get_global_by_type",
            "HookRegistry.register_global",
        ),
    ),
    "hooks-checked": Difference(
        "A hook that cannot take its event's arguments is refused when decorated",
        ("ContextQueue.after_append", "Agent.on_turn_value"),
    ),
    "event-arguments": Difference(
        "`after_invoke` gets the result positionally", ("Tool.after_invoke",)
    ),
    "generator-turns-stream": Difference(
        "Generator turns stream their values", ("Turn.yielding", "Turn.output")
    ),
    "turn-parameters": Difference("The order of `Turn`'s parameters", ("Turn",)),
    "aware-times": Difference(
        "Times are timezone-aware UTC",
        ("ToolMetadata.start_time", "ToolMetadata.end_time", "Turn.metadata"),
    ),
    "schemas": Difference(
        "Schemas describe what the caller passes",
        ("ToolMetadata.input_schema", "ToolMetadata.output_schema"),
    ),
    "validation": Difference("Bad input is refused"),
    "argument-checks": Difference(
        "Tool calls check their arguments", ("Turn.returning", "Tool.fn", "tool")
    ),
    "schema-additions": Difference(
        "Tool definitions describe each parameter",
        ("ToolMetadata.description", "ToolMetadata.input_schema"),
    ),
    "redefinition": Difference(
        "Defining a tool or hook again replaces it; an agent, with `replace=True`",
        ("ToolRegistry.register", "HookRegistry.register", "AgentRegistry.register"),
    ),
    "idle-agents": Difference("Renaming an agent moves it in the registry", ("Agent.name",)),
    "current-turn": Difference(
        "The current turn is saved from `before_turn` on", ("Agent.to_dict",)
    ),
    "branch-copies-turns": Difference("`branch()` copies the queued turns", ("Agent.branch",)),
    "branch-released": Difference(
        "A branch nobody references gives its name up", ("Agent.branch",)
    ),
    "queue-subclass-branch": Difference(
        "A queue subclass branches as itself", ("ContextQueue.branch",)
    ),
    "items-setter": Difference("Assigning `queue.items`", ("ContextQueue.items",)),
    "history": Difference("`queue.history()`", ("ContextQueue.history",)),
    "pool-membership": Difference("`id in pool`", ("ContextPool",)),
    "saved-data": Difference(
        "Saved data",
        ("ContextQueue.from_dict", "ContextPool.from_dict", "ContextQueue.to_dict"),
    ),
    "locks": Difference("Locks", ("Tool.lock", "Hook.lock")),
    "logger": Difference("The logger is `pygents_ctx`", ("tool",)),
    "modules": Difference("Module names", ("turn", "utils")),
    "smaller": Difference("Smaller differences", ("Tool.add_subtool", "HookRegistry.wrap")),
}
