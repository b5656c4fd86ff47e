"""The global registries: ToolRegistry, AgentRegistry, HookRegistry."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pygents_ctx
from pygents_ctx import (
    Agent,
    AgentRegistry,
    ContextQueue,
    ContextQueueHook,
    Hook,
    HookRegistry,
    PygentsError,
    Tool,
    ToolRegistry,
    Turn,
    TurnHook,
    UnregisteredAgentError,
    UnregisteredHookError,
    UnregisteredToolError,
    UnserializableHookError,
    hook,
    tool,
)


def _tool_family() -> tuple[Tool[..., Any], Tool[..., Any], Tool[..., Any]]:
    """`search` with subtool `search.web`, and an unrelated `calc`, in that order."""

    @tool
    async def search(query: str) -> str:
        """Search for something."""
        return query

    @search.subtool
    async def web(query: str) -> str:
        """Search the web."""
        return query

    @tool
    async def calc(expr: str) -> str:
        """Evaluate an expression."""
        return expr

    return search, web, calc


def _counting_hook(name: str) -> tuple[Callable[..., Any], list[int]]:
    calls: list[int] = []

    async def fn(*args: Any) -> None:
        calls.append(1)

    fn.__name__ = name
    return fn, calls


# -- ToolRegistry ---------------------------------------------------------------------


def test_tool_registry_get_returns_the_decorated_tool() -> None:
    search, web, _ = _tool_family()

    assert ToolRegistry.get("search") is search
    assert ToolRegistry.get("search.web") is web


def test_tool_registry_all_lists_every_tool_including_subtools() -> None:
    search, web, calc = _tool_family()

    assert ToolRegistry.all() == [search, web, calc]


def test_tool_registry_definitions_are_root_doc_trees_sorted_by_name() -> None:
    _tool_family()

    assert ToolRegistry.definitions() == [
        {"name": "calc", "description": "Evaluate an expression.", "subtools": []},
        {
            "name": "search",
            "description": "Search for something.",
            "subtools": [{"name": "web", "description": "Search the web.", "subtools": []}],
        },
    ]


def test_tool_registry_unregister_removes_the_tool_and_its_subtools() -> None:
    _, _, calc = _tool_family()

    ToolRegistry.unregister("search")

    assert ToolRegistry.all() == [calc]
    with pytest.raises(UnregisteredToolError):
        ToolRegistry.get("search.web")

    @tool
    async def search() -> None:
        """The name is free again."""

    assert ToolRegistry.get("search") is search


def test_tool_registry_clear_removes_every_tool() -> None:
    _tool_family()

    ToolRegistry.clear()

    assert ToolRegistry.all() == []
    assert ToolRegistry.definitions() == []


# -- AgentRegistry ---------------------------------------------------------------------


def test_agent_registers_itself_under_its_name() -> None:
    agent = Agent("scout", "looks around", [])

    assert AgentRegistry.get("scout") is agent


def test_agent_with_a_taken_name_is_rejected_and_the_first_stays() -> None:
    first = Agent("scout", "looks around", [])

    with pytest.raises(ValueError, match="scout"):
        Agent("scout", "an impostor", [])

    assert AgentRegistry.get("scout") is first


def test_agent_registry_register_accepts_the_same_agent_again() -> None:
    agent = Agent("scout", "looks around", [])

    AgentRegistry.register(agent)

    assert AgentRegistry.get("scout") is agent


def test_agent_registry_register_rejects_a_different_agent_with_a_taken_name() -> None:
    old = Agent("scout", "looks around", [])
    AgentRegistry.unregister("scout")
    new = Agent("scout", "the replacement", [])

    with pytest.raises(ValueError, match="scout"):
        AgentRegistry.register(old)

    assert AgentRegistry.get("scout") is new


def test_agent_registry_unregister_frees_the_name() -> None:
    Agent("scout", "looks around", [])

    AgentRegistry.unregister("scout")

    with pytest.raises(UnregisteredAgentError):
        AgentRegistry.get("scout")
    again = Agent("scout", "again", [])
    assert AgentRegistry.get("scout") is again


def test_agent_registry_clear_removes_every_agent() -> None:
    Agent("scout", "looks around", [])
    Agent("runner", "runs", [])

    AgentRegistry.clear()

    for name in ("scout", "runner"):
        with pytest.raises(UnregisteredAgentError):
            AgentRegistry.get(name)


# -- HookRegistry ----------------------------------------------------------------------


async def test_hook_registry_register_makes_a_hook_findable_by_name_but_not_global() -> None:
    fn, calls = _counting_hook("on_cleared")
    made = Hook(fn, (ContextQueueHook.AFTER_CLEAR,))

    HookRegistry.register(made)
    await ContextQueue[str](limit=1).clear()

    assert HookRegistry.get("on_cleared") is made
    assert calls == []


def test_hook_registry_register_rejects_a_different_hook_under_a_taken_name() -> None:
    first_fn, _ = _counting_hook("on_cleared")
    other_fn, _ = _counting_hook("on_cleared")
    first = Hook(first_fn, (ContextQueueHook.AFTER_CLEAR,))
    HookRegistry.register(first)

    with pytest.raises(ValueError, match="on_cleared"):
        HookRegistry.register(Hook(other_fn, (ContextQueueHook.AFTER_CLEAR,)))

    assert HookRegistry.get("on_cleared") is first


async def test_hook_registry_unregister_removes_the_name_and_the_global_hook() -> None:
    fn, calls = _counting_hook("on_cleared")
    hook(ContextQueueHook.AFTER_CLEAR)(fn)

    HookRegistry.unregister("on_cleared")
    await ContextQueue[str](limit=1).clear()

    assert calls == []
    with pytest.raises(UnregisteredHookError):
        HookRegistry.get("on_cleared")


async def test_hook_registry_clear_forgets_names_and_global_hooks() -> None:
    fn, calls = _counting_hook("on_cleared")
    hook(ContextQueueHook.AFTER_CLEAR)(fn)

    HookRegistry.clear()
    await ContextQueue[str](limit=1).clear()

    assert calls == []
    with pytest.raises(UnregisteredHookError):
        HookRegistry.get("on_cleared")


async def test_hook_registry_clear_globals_detaches_global_hooks_but_keeps_names() -> None:
    fn, calls = _counting_hook("on_cleared")
    made = hook(ContextQueueHook.AFTER_CLEAR)(fn)
    queue = ContextQueue[str](limit=1)
    queue.hooks.append(made)

    HookRegistry.clear_globals()
    await ContextQueue[str](limit=1).clear()
    await queue.clear()

    assert calls == [1]  # only where it is attached as an instance hook
    assert HookRegistry.get("on_cleared") is made
    assert ContextQueue.from_dict(queue.to_dict()).hooks == [made]


def test_hook_registry_get_by_type_filters_hooks_by_kind_in_order() -> None:
    def make(name: str, *kinds: Any) -> Hook:
        fn, _ = _counting_hook(name)
        return Hook(fn, kinds)

    a = make("a", TurnHook.BEFORE_RUN)
    b = make("b", ContextQueueHook.AFTER_CLEAR)
    c = make("c", ContextQueueHook.ON_EVICT, TurnHook.BEFORE_RUN)
    d = make("d", TurnHook.BEFORE_RUN)

    assert HookRegistry.get_by_type(TurnHook.BEFORE_RUN, [d, a, b, c]) == [d, a, c]
    assert HookRegistry.get_by_type(TurnHook.ON_ERROR, [a, b, c, d]) == []


# -- unknown names -----------------------------------------------------------------------

LOOKUPS = [
    pytest.param(ToolRegistry.get, UnregisteredToolError, id="ToolRegistry.get"),
    pytest.param(ToolRegistry.unregister, UnregisteredToolError, id="ToolRegistry.unregister"),
    pytest.param(AgentRegistry.get, UnregisteredAgentError, id="AgentRegistry.get"),
    pytest.param(AgentRegistry.unregister, UnregisteredAgentError, id="AgentRegistry.unregister"),
    pytest.param(HookRegistry.get, UnregisteredHookError, id="HookRegistry.get"),
    pytest.param(HookRegistry.unregister, UnregisteredHookError, id="HookRegistry.unregister"),
]


@pytest.mark.parametrize(("lookup", "error"), LOOKUPS)
def test_unknown_name_raises_a_key_error_naming_it(
    lookup: Callable[[str], Any], error: type[Exception]
) -> None:
    with pytest.raises(error) as info:
        lookup("no_such_thing")

    exc = info.value
    assert isinstance(exc, KeyError)
    assert isinstance(exc, PygentsError)
    message = str(exc)
    assert "no_such_thing" in message
    assert message == exc.args[0]  # a sentence, not KeyError's repr of it
    assert not message.startswith(("'", '"'))
    assert "'no_such_thing' not found" in message  # the phrase pygents users match on


@pytest.mark.parametrize(
    ("make", "lookup", "error"),
    [
        (lambda: _tool_family(), lambda: ToolRegistry.get("serch"), UnregisteredToolError),
        (
            lambda: Agent("scout", "d", []),
            lambda: AgentRegistry.get("scuot"),
            UnregisteredAgentError,
        ),
        (
            lambda: HookRegistry.register(Hook(_counting_hook("audit")[0], TurnHook.BEFORE_RUN)),
            lambda: HookRegistry.get("audti"),
            UnregisteredHookError,
        ),
    ],
    ids=["tool", "agent", "hook"],
)
def test_an_unknown_name_suggests_the_registered_one_it_probably_meant(
    make: Callable[[], Any], lookup: Callable[[], Any], error: type[Exception]
) -> None:
    make()

    with pytest.raises(error, match=r"not found \(did you mean '(search|scout|audit)'\?\)"):
        lookup()


def test_no_suggestion_when_nothing_is_close() -> None:
    _tool_family()

    with pytest.raises(UnregisteredToolError) as info:
        ToolRegistry.get("zzz")
    assert "did you mean" not in str(info.value)


# -- defining again (notebook cells run twice) ------------------------------------------


async def test_a_global_hook_defined_again_replaces_the_old_one_everywhere(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fired: list[str] = []

    @hook(TurnHook.BEFORE_RUN)
    async def audit(turn: Any) -> None:
        fired.append("old")

    old = audit
    with caplog.at_level("DEBUG", logger="pygents_ctx"):

        @hook(TurnHook.BEFORE_RUN)
        async def audit(turn: Any) -> None:  # type: ignore[no-redef]
            fired.append("new")

    @tool
    async def ping() -> None:
        pass

    await Turn(ping).returning()

    assert fired == ["new"]  # the old definition no longer fires
    assert HookRegistry.get("audit") is audit is not old
    assert list(HookRegistry.globals_for(TurnHook.BEFORE_RUN)) == [audit]
    assert "hook 'audit' was defined again: the new definition replaces it" in caplog.text


def test_an_instance_hook_defined_again_takes_the_name_so_its_owner_saves() -> None:
    queue = ContextQueue[str](limit=1)

    @queue.on_evict
    async def note(*args: Any) -> None:
        pass

    fresh = ContextQueue[str](limit=1)

    @fresh.on_evict
    async def note(*args: Any) -> None:  # type: ignore[no-redef]  # noqa: F811
        pass

    assert HookRegistry.get("note") is note
    assert fresh.to_dict()["hooks"] == {"on_evict": ["note"]}


def test_a_hook_made_twice_by_a_factory_is_not_a_redefinition() -> None:
    def make() -> Callable[..., Any]:
        async def twin(turn: Any) -> None:
            pass

        return twin

    first = hook(TurnHook.BEFORE_RUN)(make())

    with pytest.raises(ValueError, match="'twin' already registered"):
        hook(TurnHook.BEFORE_RUN)(make())
    assert HookRegistry.get("twin") is first


def test_an_agent_made_again_with_replace_takes_the_name_from_the_idle_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    first = Agent("notes", "keeps notes", [])
    with caplog.at_level("DEBUG", logger="pygents_ctx"):
        again = Agent("notes", "keeps notes, edited", [], replace=True)  # a re-run cell

    assert AgentRegistry.get("notes") is again is not first
    assert "agent 'notes' was made again: the new agent replaces the idle one" in caplog.text
    with pytest.raises(ValueError, match=r"'notes' already registered.*pass replace=True"):
        Agent("notes", "keeps notes", [])  # without replace=True, as in pygents
    assert AgentRegistry.get("notes") is again


def test_loading_with_replace_takes_the_name_from_the_idle_agent() -> None:
    agent = Agent("notes", "keeps notes", [])
    saved = agent.to_json()

    with pytest.raises(ValueError, match="'notes' already registered"):
        Agent.from_json(saved)
    restored = Agent.from_json(saved, replace=True)

    assert AgentRegistry.get("notes") is restored is not agent


async def test_a_running_agent_is_not_replaced() -> None:
    @tool
    async def make_another() -> str:
        try:
            _again()
        except ValueError as exc:
            return str(exc)
        return "replaced"

    def _again() -> Agent:
        return Agent("busy", "d", [make_another], replace=True)

    first = _again()
    await first.put(Turn(make_another))
    [(_, outcome)] = [pair async for pair in first.run()]

    assert "'busy' already registered" in outcome
    assert AgentRegistry.get("busy") is first


class _Named(Agent):
    def __init__(self, name: str, *, replace: bool = False) -> None:
        super().__init__(name, "a subclass", [], replace=replace)


def test_a_subclass_replaces_as_agent_does() -> None:
    first = _Named("sub")
    with pytest.raises(ValueError, match="'sub' already registered"):
        _Named("sub")
    again = _Named("sub", replace=True)

    assert AgentRegistry.get("sub") is again is not first
    assert Agent.from_dict(first.to_dict(), replace=True).name == "sub"


def test_branches_and_loaded_agents_never_replace() -> None:
    parent = Agent("parent", "d", [])
    held = []  # a branch nobody references gives its name up: these are referenced
    for _ in range(1):
        held.append(parent.branch("child"))
    with pytest.raises(ValueError, match="'child' already registered"):
        parent.branch("child")

    saved = parent.to_dict()
    with pytest.raises(ValueError, match="'parent' already registered"):
        Agent.from_dict(saved)


async def test_an_agent_made_before_a_redefinition_says_why_it_refuses_the_new_tool() -> None:
    @tool
    async def remember(fact: str) -> str:
        return fact

    agent = Agent("notes", "keeps notes", [remember])

    @tool  # the tool's cell, run again; the agent's was not
    async def remember(fact: str) -> str:  # type: ignore[no-redef]
        return fact.upper()

    with pytest.raises(ValueError, match="holds another tool under that name") as info:
        await agent.put(Turn(remember, kwargs={"fact": "x"}))
    assert "make the agent again, or assign agent.tools" in str(info.value)


# -- a fresh interpreter ---------------------------------------------------------------------

_FIRST_BLOCK_IN_A_FRESH_INTERPRETER = """
import ast, asyncio, re, sys
from pathlib import Path

page = Path(sys.argv[1]).read_text(encoding="utf-8")
first = re.search(r"^```python[ \\t]*\\n(.*?)^```[ \\t]*$", page, re.DOTALL | re.MULTILINE)
code = compile(
    first.group(1), "registries.md (block 1)", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
)


async def main():
    result = eval(code, {"__name__": "__main__"})
    if result is not None:
        await result


asyncio.run(main())
import pygents_ctx

print(sorted(t.key for t in pygents_ctx.ToolRegistry.all()))
"""


def _fresh_python(*args: str) -> str:
    """Run Python in a new process importing this checkout's package; its stdout."""
    root = Path(pygents_ctx.__file__).parents[1]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_registries_guides_first_block_runs_in_a_fresh_interpreter() -> None:
    # The guide tests clear the registries first; a user's script does not.
    page = Path(pygents_ctx.__file__).parents[1] / "guides" / "concepts" / "registries.md"

    out = _fresh_python("-c", _FIRST_BLOCK_IN_A_FRESH_INTERPRETER, str(page))

    assert out.splitlines()[-1] == "[]"  # the block unregistered its tools; nothing else is


def test_importing_the_package_registers_no_tool_and_step_tools_come_when_asked_for() -> None:
    out = _fresh_python(
        "-c",
        "import pygents_ctx as p\n"
        "print(len(p.ToolRegistry.all()), p.ToolRegistry.definitions())\n"
        "print(p.Turn('model_think').tool_name)\n"
        "print(sorted(t.key for t in p.ToolRegistry.all()))",
    )

    assert out.splitlines() == [
        "0 []",
        "model_think",
        "['model_act', 'model_ask', 'model_think']",
    ]


# -- registry objects ---------------------------------------------------------------


def test_a_registry_of_its_own_holds_what_is_made_while_it_is_current(
    registry: AgentRegistry,
) -> None:
    plugin = AgentRegistry()
    with plugin.use():

        @tool
        async def lookup(q: str) -> str:
            return q

        helper = Agent("helper", "d", [lookup])
        assert AgentRegistry.current() is plugin
        assert ToolRegistry.current() is plugin.tools
        assert HookRegistry.current() is plugin.hooks

    assert AgentRegistry.current() is registry  # the block ended: the test's own again
    assert plugin.get("helper") is helper
    assert helper.registry is plugin
    assert plugin.tools.get("lookup") is lookup
    with pytest.raises(UnregisteredToolError):
        ToolRegistry.get("lookup")
    with pytest.raises(UnregisteredAgentError):
        AgentRegistry.get("helper")


def test_two_registries_hold_the_same_names_without_colliding() -> None:
    first, second = AgentRegistry(), AgentRegistry()
    made = []
    for registry in (first, second):
        with registry.use():

            @tool
            async def search(q: str) -> str:
                return q

            made.append((search, Agent("searcher", "d", [search])))

    assert first.tools.get("search") is made[0][0] is not made[1][0]
    assert second.get("searcher") is made[1][1]
    assert first.get("searcher").tools == [made[0][0]]


async def test_the_registry_keywords_look_names_up_where_they_are_told() -> None:
    plugin = AgentRegistry()
    with plugin.use():

        @tool
        async def shout(text: str) -> str:
            return text.upper()

    agent = Agent("loud", "d", [shout], registry=plugin)
    assert plugin.get("loud") is agent
    assert agent.registry is plugin
    with pytest.raises(UnregisteredAgentError):
        AgentRegistry.get("loud")  # the current registry (the test's) has no such agent
    await agent.put(Turn("shout", kwargs={"text": "hi"}, registry=plugin.tools))
    assert [value async for _, value in agent.run()] == ["HI"]
    with pytest.raises(UnregisteredToolError, match="'shout' not found"):
        Turn("shout")  # looked up in the current registry

    saved = agent.to_json()
    elsewhere = AgentRegistry(tools=plugin.tools)
    restored = Agent.from_json(saved, registry=elsewhere)
    assert elsewhere.get("loud") is restored
    assert restored.tools == [shout]
    with pytest.raises(UnregisteredToolError, match="'shout' not found"):
        Agent.from_json(saved)  # the current registry has no tool 'shout'
    with pytest.raises(UnregisteredToolError, match="'shout' not found"):
        Agent("loud", "d", [shout])  # nor may an agent of the current registry use it


async def test_an_agents_instance_hooks_are_named_in_its_registry_and_load_there() -> None:
    """An agent of a registry that is not current: its decorators name their hooks in
    its registry, saving checks them there, and loading it into that registry finds them."""
    plugin = AgentRegistry()
    with plugin.use():

        @tool
        async def ping() -> str:
            return "pong"

    agent = Agent("pinger", "d", [ping], registry=plugin)
    seen: list[str] = []

    @agent.after_turn
    async def note_turn(agent: Agent, turn: Turn) -> None:
        seen.append(turn.tool.key)

    @agent.before_run
    async def note_run(turn: Turn) -> None:
        seen.append("run")

    assert plugin.hooks.get("note_turn") is note_turn
    with pytest.raises(UnregisteredHookError):
        HookRegistry.get("note_turn")  # not named in the current registry
    saved = agent.to_json()
    plugin.unregister("pinger")
    restored = Agent.from_json(saved, registry=plugin)
    await restored.put(Turn("ping", registry=plugin))
    assert [value async for _, value in restored.run()] == ["pong"]
    assert seen == ["run", "ping"]

    # A hook named elsewhere cannot be found where the agent loads: saving says so.
    @hook(TurnHook.AFTER_RUN)
    async def named_here(turn: Turn, output: Any) -> None:
        pass

    restored.turn_hooks.append(named_here)
    with pytest.raises(UnserializableHookError, match="named_here"):
        restored.to_json()


def test_a_registry_keyword_of_the_wrong_type_is_refused_before_anything_changes() -> None:
    with pytest.raises(TypeError, match="Agent registry must be an AgentRegistry"):
        Agent("a", "d", [], registry=ToolRegistry())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Agent registry must be an AgentRegistry"):
        Agent.from_dict({"name": "a", "description": "d", "tool_names": []}, registry=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="AgentRegistry tools must be a ToolRegistry"):
        AgentRegistry(tools=AgentRegistry())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="AgentRegistry hooks must be a HookRegistry"):
        AgentRegistry(hooks=ToolRegistry())  # type: ignore[arg-type]
    with pytest.raises(UnregisteredAgentError):
        AgentRegistry.get("a")


async def test_a_scope_in_a_registry_falls_back_to_that_registry_only() -> None:
    from pygents_ctx import AgentScope

    plugin = AgentRegistry()
    at_root = Agent("root", "d", [], registry=plugin)
    Agent("outside", "d", [])  # in the current (the test's) registry
    async with AgentScope(registry=plugin):
        scoped = Agent("scoped", "d", [])
        assert AgentRegistry.get("root") is at_root
        assert scoped.registry is plugin
        with pytest.raises(UnregisteredAgentError):
            AgentRegistry.get("outside")
    with pytest.raises(UnregisteredAgentError):
        plugin.get("scoped")  # the scope forgot it


async def test_tasks_started_while_a_registry_is_current_use_it() -> None:
    plugin = AgentRegistry()

    async def make() -> Agent:
        return Agent("worker", "d", [])

    with plugin.use():
        task = asyncio.create_task(make())
    assert (await task).registry is plugin
    assert plugin.get("worker") is await task


def test_a_model_loop_registers_its_steps_in_its_agents_registry() -> None:
    from pygents_ctx import ContextConfig, ModelLoop
    from pygents_ctx.testing import ScriptedModel

    plugin = AgentRegistry()
    agent = Agent("chat", "d", [], context=ContextConfig.default(), registry=plugin)
    ModelLoop(agent, ScriptedModel([]))

    assert {"model_ask", "model_think", "model_act"} <= {t.key for t in plugin.tools.all()}
    assert not {t.key for t in ToolRegistry.all()} & {"model_ask", "model_think", "model_act"}


async def test_a_global_hook_fires_where_its_registry_is_current() -> None:
    own = AgentRegistry()
    fired: list[str] = []
    with own.use():

        @hook(TurnHook.BEFORE_RUN)
        async def watch(turn: Any) -> None:
            fired.append(turn.tool_name)

    @tool
    async def ping() -> None:
        pass

    await Turn(ping).returning()  # the test's registry is current: not `own`'s hook
    assert fired == []
    with own.use():
        await Turn(ping).returning()
        await ContextQueue[str](limit=1).clear()  # not a turn event: nothing
    assert fired == ["ping"]
    assert list(own.hooks.globals_for(TurnHook.BEFORE_RUN)) == [watch]
    assert list(HookRegistry.globals_for(TurnHook.BEFORE_RUN)) == []  # the current one's
    with pytest.raises(UnregisteredHookError):
        HookRegistry.get("watch")  # named in `own`, not here

    own.hooks.clear()
    with own.use():
        await Turn(ping).returning()
    assert fired == ["ping"]  # cleared with its name
    assert list(own.hooks.globals_for(TurnHook.BEFORE_RUN)) == []


def _recorder(kind: Any, seen: list[str]) -> Hook:
    """A global hook of `kind`, in the current registry, noting the event's name in `seen`."""

    async def record(*args: Any, **kwargs: Any) -> None:
        seen.append(kind.value)

    record.__name__ = f"record_{type(kind).__name__}_{kind.name}".lower()
    return hook(kind)(record)


async def test_an_agent_fires_its_registrys_global_hooks_wherever_it_runs(
    registry: AgentRegistry,
) -> None:
    from pygents_ctx import AgentHook, ContextItem, ToolHook

    plugin, seen, here = AgentRegistry(), [], []
    with plugin.use():
        for kind in (
            AgentHook.BEFORE_PUT,
            AgentHook.ON_PAUSE,
            AgentHook.ON_RESUME,
            AgentHook.BEFORE_TURN,
            AgentHook.AFTER_TURN,
            TurnHook.BEFORE_RUN,
            ToolHook.BEFORE_INVOKE,
            ToolHook.ON_YIELD,
            ContextQueueHook.AFTER_APPEND,
        ):
            _recorder(kind, seen)

        @tool
        async def note(text: str) -> ContextItem[str]:
            return ContextItem(text)

        @tool
        async def count(n: int) -> Any:
            for i in range(n):
                yield i

        agent = Agent("worker", "d", [note, count])
    # The test's registry is current from here on: its global hooks are not the agent's.
    _recorder(TurnHook.BEFORE_RUN, here)
    _recorder(AgentHook.BEFORE_PUT, here)

    await agent.put(Turn(note, kwargs={"text": "hi"}))
    await agent.put(Turn(count, args=[2]))
    agent.pause()
    asyncio.get_running_loop().call_later(0.01, agent.resume)
    values = []
    async for _, value in agent.run():
        values.append(value)
        assert HookRegistry.current() is registry.hooks  # the caller's code: the caller's
    assert values == [0, 1]
    assert seen == [
        *["before_put"] * 2,
        "on_pause",
        "on_resume",
        *["before_turn", "before_run", "before_invoke", "after_append", "after_turn"],
        *["before_turn", "before_run", "before_invoke", "on_yield", "on_yield", "after_turn"],
    ]
    assert here == []
    assert HookRegistry.current() is registry.hooks

    await Turn(note, kwargs={"text": "again"}).returning()  # outside the agent: the current's
    assert here == ["before_run"]
    assert seen[-1] == "after_turn"


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 2), max_size=8))
def test_a_turn_fires_the_global_hooks_of_the_registry_current_where_it_runs(
    made_in: list[int],
) -> None:
    registries = [AgentRegistry() for _ in range(3)]
    fired: list[str] = []
    expected: list[list[str]] = [[], [], []]
    for number, which in enumerate(made_in):
        with registries[which].use():
            _recorder_named(f"hook_{number}", fired)
        expected[which].append(f"hook_{number}")

    elsewhere = AgentRegistry()
    with elsewhere.use():

        @tool
        async def ping() -> None:
            pass

    for which, registry in enumerate(registries):
        del fired[:]
        with registry.use():
            asyncio.run(Turn(ping).returning())
        assert fired == expected[which]
    del fired[:]
    with elsewhere.use():
        asyncio.run(Turn(ping).returning())  # the tool's own registry: none of them
    assert fired == []


def _recorder_named(name: str, fired: list[str]) -> Hook:
    """A global `before_run` hook called `name`, in the current registry."""

    async def record(turn: Any) -> None:
        fired.append(name)

    record.__name__ = name
    return hook(TurnHook.BEFORE_RUN)(record)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.sampled_from("abcd")), max_size=12))
def test_names_go_to_the_registry_current_when_they_are_made(
    steps: list[tuple[int, str]],
) -> None:
    registries = [AgentRegistry() for _ in range(3)]
    expected: list[set[str]] = [set(), set(), set()]
    for which, name in steps:
        if name in expected[which]:
            continue
        with registries[which].use():
            Agent(name, "d", [])
        expected[which].add(name)
    for registry, names in zip(registries, expected, strict=True):
        for name in "abcd":
            if name in names:
                assert registry.get(name).registry is registry
            else:
                with pytest.raises(UnregisteredAgentError):
                    registry.get(name)
