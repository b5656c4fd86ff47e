"""ModelLoop on a scripted model: steps as turns, tool results, limits, hooks, save and resume."""

from __future__ import annotations

import asyncio
import contextlib
from contextlib import aclosing
from typing import Any

import pytest

from pygents_ctx import (
    Agent,
    AgentRegistry,
    ContextConfig,
    ContextItem,
    LoopFinished,
    LoopLimits,
    LoopStop,
    MemoryContextStore,
    Message,
    ModelAPIError,
    ModelLoop,
    ModelReplied,
    ModelResponse,
    ModelRetry,
    ModelSettings,
    Pricing,
    RetryPolicy,
    SafeExecutionError,
    StepStarted,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolPolicy,
    ToolResultBlock,
    ToolUseBlock,
    Turn,
    Usage,
    tool,
)
from pygents_ctx.context.messages import to_dict
from pygents_ctx.testing import ScriptedModel, assistant, tool_call


def pairs_are_whole(history: list[Message]) -> bool:
    """Every tool call is answered by the next message, and every result answers a call."""
    for index, message in enumerate(history):
        calls = {call.id for call in message.tool_uses}
        if calls:
            following = history[index + 1] if index + 1 < len(history) else None
            answered = {r.tool_use_id for r in following.tool_results} if following else set()
            if not calls <= answered:
                return False
    return True


@pytest.fixture
def tools() -> dict[str, Any]:
    @tool
    async def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @tool
    async def lookup(key: str) -> str:
        """Look a key up."""
        raise LookupError(f"no entry {key!r}")

    @tool
    async def fetch(doc_id: str) -> ContextItem[str]:
        """Fetch a document."""
        return ContextItem(id=doc_id, description=f"doc {doc_id}", content=f"text of {doc_id}")

    @tool
    async def count(upto: int, step: int = 1):  # type: ignore[no-untyped-def]
        """Count up."""
        for number in range(0, upto, step):
            yield str(number)

    return {"add": add, "lookup": lookup, "fetch": fetch, "count": count}


def make_loop(tools: dict[str, Any], script: list[Any], **options: Any) -> ModelLoop:
    agent = Agent(
        options.pop("name", "helper"),
        "Helps",
        list(tools.values()),
        context=options.pop("context", None) or ContextConfig(MemoryContextStore()),
    )
    return ModelLoop(agent, options.pop("model", None) or ScriptedModel(script), **options)


async def history(loop: ModelLoop) -> list[Message]:
    assert loop.agent.context is not None
    return await loop.agent.context.history()


# -- the loop ----------------------------------------------------------------------------


async def test_a_question_a_tool_call_and_the_answer(tools: dict[str, Any]) -> None:
    call = tool_call("add", a=2, b=3)
    loop = make_loop(tools, [assistant("Adding.", call), "2 + 3 = 5"])

    finished = await loop.run("What is 2 + 3?")

    assert finished == LoopFinished(
        LoopStop.ANSWER, Message("assistant", "2 + 3 = 5"), 2, finished.usage
    )
    assert finished.text == "2 + 3 = 5"
    assert await history(loop) == [
        Message("user", "What is 2 + 3?"),
        assistant("Adding.", call),
        Message("user", [ToolResultBlock(call.id, "5")]),
        Message("assistant", "2 + 3 = 5"),
    ]
    model = loop.model
    assert isinstance(model, ScriptedModel)
    assert model.calls[0].tools == ("add", "lookup", "fetch", "count")  # not the loop's steps
    assert (loop.agent.queue, loop.agent.current_turn) == ([], None)


async def test_every_step_is_an_agent_turn_that_hooks_see(tools: dict[str, Any]) -> None:
    loop = make_loop(tools, [assistant(tool_call("add", a=1, b=1)), "2"])
    seen: list[str] = []

    @loop.agent.before_turn
    async def note(agent: Agent) -> None:
        seen.append(agent.current_turn.tool_name)  # type: ignore[union-attr]

    await loop.run("1 + 1?")

    assert seen == ["model_ask", "model_think", "model_act", "model_think"]


async def test_failures_come_back_to_the_model_as_error_results(tools: dict[str, Any]) -> None:
    calls = [
        tool_call("lookup", key="tide"),
        tool_call("teleport", to="moon"),
        ToolUseBlock("call_raw", "add", {"_raw_arguments": '{"a": 1,'}),
        tool_call("add", a="x", bb=2),  # a wrong type, b missing, bb unknown
        tool_call("lokup", key="tide"),  # a misspelled tool
    ]
    loop = make_loop(tools, [assistant(*calls), "Sorry."])

    await loop.run("Try everything.")

    results = (await history(loop))[2].tool_results
    assert all(result.is_error for result in results)
    texts = [result.content for result in results]
    assert texts[0] == "LookupError: no entry 'tide'"
    assert texts[1] == "there is no tool 'teleport'; the tools are: add, count, fetch, lookup"
    assert texts[2].startswith("the arguments are not a JSON object ('{\"a\": 1,')")
    assert texts[3] == (
        "ToolArgumentsError: tool 'add' was called with invalid arguments (3 problems); "
        "it did not run:\n"
        "  - a: expected integer; got string 'x'\n"
        "  - b: required, not given\n"
        "  - bb: not a parameter of this tool; did you mean 'b'?"
    )
    assert texts[4] == (
        "there is no tool 'lokup' (did you mean 'lookup'?); "
        "the tools are: add, count, fetch, lookup"
    )
    model = loop.model
    assert isinstance(model, ScriptedModel)
    assert model.calls[1].messages[-1].tool_results == results  # the model read them


async def test_agent_turn_hooks_see_each_tool_call(tools: dict[str, Any]) -> None:
    loop = make_loop(tools, [assistant(tool_call("lookup", key="k")), "no"])
    errors: list[str] = []

    @loop.agent.on_error
    async def record(turn: Turn, exc: Exception) -> None:
        errors.append(f"{turn.tool_name}: {exc}")

    await loop.run("look")

    assert errors == ["lookup: no entry 'k'"]


async def test_tool_values_are_routed_and_shown(tools: dict[str, Any]) -> None:
    loop = make_loop(
        tools, [assistant(tool_call("fetch", doc_id="d1"), tool_call("count", upto=3)), "done"]
    )

    await loop.run("fetch and count")

    results = (await history(loop))[2].tool_results
    assert [r.content for r in results] == ["text of d1", "0\n1\n2"]
    assert [item.id for item in loop.agent.context_pool] == ["d1"]  # routed into the pool


async def test_a_null_for_an_optional_parameter_lets_its_default_apply(
    tools: dict[str, Any],
) -> None:
    loop = make_loop(tools, [assistant(tool_call("count", upto=4, step=None)), "ok"])

    await loop.run("count")

    assert (await history(loop))[2].tool_results[0].content == "0\n1\n2\n3"


async def test_parallel_calls_run_at_once_within_the_bound() -> None:
    running, peak = 0, 0
    release = asyncio.Event()

    @tool
    async def slow(n: int) -> int:
        """Wait, then answer."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(release.wait(), 0.05)
        running -= 1
        return n

    calls = [tool_call("slow", n=n) for n in range(5)]
    loop = make_loop(
        {"slow": slow}, [assistant(*calls), "done"], tool_policy=ToolPolicy(parallel=2)
    )

    events = [event async for event in loop.stream("go")]

    assert peak == 2
    finished = [e.call.id for e in events if isinstance(e, ToolCallFinished)]
    assert sorted(finished) == sorted(c.id for c in calls)
    results = (await history(loop))[2].tool_results
    assert [r.tool_use_id for r in results] == [c.id for c in calls]  # in the calls' order
    assert [r.content for r in results] == ["0", "1", "2", "3", "4"]


async def test_a_tool_call_past_its_timeout_is_an_error_result() -> None:
    @tool
    async def stuck() -> str:
        """Never answers."""
        await asyncio.sleep(10)
        return "late"

    loop = make_loop(
        {"stuck": stuck},
        [assistant(tool_call("stuck")), "gave up"],
        tool_policy=ToolPolicy(timeout=0.05),
    )

    await loop.run("go")

    [result] = (await history(loop))[2].tool_results
    assert result.is_error
    assert isinstance(result.content, str)
    assert result.content.startswith("TurnTimeoutError")


async def test_the_stream_reports_each_thing_in_order(tools: dict[str, Any]) -> None:
    call = tool_call("add", a=1, b=2)
    loop = make_loop(tools, [assistant("Let me add.", call), "It is 3."])

    events = [event async for event in loop.stream("1 + 2?")]

    kinds = [type(event).__name__ for event in events]
    assert kinds == [
        "StepStarted", "TextDelta", "TextDelta", "TextDelta", "ToolCallDelta", "ModelReplied",
        "ToolCallStarted", "ToolCallFinished",
        "StepStarted", "TextDelta", "TextDelta", "TextDelta", "ModelReplied",
        "LoopFinished",
    ]  # fmt: skip
    assert "".join(e.text for e in events[1:4] if isinstance(e, TextDelta)) == "Let me add."
    assert isinstance(events[4], ToolCallDelta)
    assert (events[4].id, events[4].arguments) == (call.id, '{"a":1,"b":2}')
    assert isinstance(events[7], ToolCallFinished)
    assert events[7].result == ToolResultBlock(call.id, "3")
    assert isinstance(events[0], StepStarted)
    assert events[0].window.messages == [Message("user", "1 + 2?")]
    assert isinstance(events[-1], LoopFinished)
    assert events[-1].text == "It is 3."


async def test_usage_is_recorded_per_call_with_our_estimate(tools: dict[str, Any]) -> None:
    reply = ModelResponse(
        assistant(tool_call("add", a=1, b=1)), Usage(40, 8, cached_tokens=30), "m1"
    )
    loop = make_loop(tools, [reply, ModelResponse(Message("assistant", "2"), Usage(60, 2), "m1")])

    events = [event async for event in loop.stream("1 + 1?")]

    assert loop.agent.context is not None
    records = await loop.agent.context.store.get_usage()
    replied = [e for e in events if isinstance(e, ModelReplied)]
    assert [r.usage for r in records] == [Usage(40, 8, cached_tokens=30), Usage(60, 2)]
    assert [r.estimated_input_tokens for r in records] == [
        e.estimated_input_tokens for e in replied
    ]
    assert [r.model for r in records] == ["m1", "m1"]
    assert len({r.run_id for r in records}) == 1
    assert records[0].run_id is not None
    assert await loop.agent.context.store.get_context_tokens() == (100, 10)
    assert isinstance(events[-1], LoopFinished)
    assert events[-1].usage == Usage(100, 10, cached_tokens=30)


async def test_instructions_lead_every_window_and_are_not_stored(tools: dict[str, Any]) -> None:
    loop = make_loop(tools, ["Hi."], instructions="Answer in one word.")

    await loop.run("Hello?")

    model = loop.model
    assert isinstance(model, ScriptedModel)
    assert model.calls[0].messages == (
        Message("system", "Answer in one word."),
        Message("user", "Hello?"),
    )
    assert [m.role for m in await history(loop)] == ["user", "assistant"]


async def test_settings_reach_the_model(tools: dict[str, Any]) -> None:
    loop = make_loop(tools, ["ok"], settings=ModelSettings(temperature=0.0))

    await loop.run("go")

    model = loop.model
    assert isinstance(model, ScriptedModel)
    assert model.calls[0].settings == ModelSettings(temperature=0.0)


async def test_a_second_question_continues_the_conversation(tools: dict[str, Any]) -> None:
    loop = make_loop(tools, ["one", "two"])

    await loop.run("first")
    finished = await loop.run(Message("user", "second"))

    assert finished.text == "two"
    model = loop.model
    assert isinstance(model, ScriptedModel)
    assert [m.text for m in model.calls[1].messages] == ["first", "one", "second"]


# -- limits -------------------------------------------------------------------------------


def looping(name: str = "add") -> Any:
    return lambda window: assistant(tool_call(name, a=1, b=1))


async def test_max_steps_ends_the_run_with_every_call_answered(tools: dict[str, Any]) -> None:
    loop = make_loop(tools, [looping()] * 10, limits=LoopLimits(max_steps=3))

    finished = await loop.run("loop forever")

    assert (finished.reason, finished.steps, finished.message) == (LoopStop.MAX_STEPS, 3, None)
    assert finished.text == ""
    stored = await history(loop)
    assert len(stored) == 7
    assert pairs_are_whole(stored)


async def test_the_limits_count_per_run(tools: dict[str, Any]) -> None:
    loop = make_loop(tools, [looping()] * 4 + ["done"], limits=LoopLimits(max_steps=3))

    first = await loop.run("go")
    second = await loop.run()  # continues: the last results are waiting for the model

    assert (first.reason, second.reason, second.steps) == (LoopStop.MAX_STEPS, LoopStop.ANSWER, 2)


async def test_a_token_budget_stops_before_the_call_that_would_pass_it(
    tools: dict[str, Any],
) -> None:
    replies = [ModelResponse(assistant(tool_call("add", a=1, b=1)), Usage(1_000, 500))] * 5
    loop = make_loop(tools, replies, limits=LoopLimits(max_tokens=3_010))

    finished = await loop.run("go")

    # 3,000 spent in two calls: the third call's window (over 10 tokens) would pass 3,010.
    assert (finished.reason, finished.steps) == (LoopStop.TOKEN_BUDGET, 2)
    assert finished.usage == Usage(2_000, 1_000)


async def test_a_cost_budget_uses_the_prices(tools: dict[str, Any]) -> None:
    replies = [ModelResponse(assistant(tool_call("add", a=1, b=1)), Usage(1_000_000, 0))] * 5
    prices = Pricing(input=1.0, output=4.0)
    loop = make_loop(tools, replies, limits=LoopLimits(max_cost=2.0, pricing=prices))

    finished = await loop.run("go")

    assert (finished.reason, finished.steps) == (LoopStop.COST_BUDGET, 2)


# -- retries --------------------------------------------------------------------------------


async def test_transient_failures_are_retried_and_reported(tools: dict[str, Any]) -> None:
    busy = ModelAPIError("busy", status_code=503, transient=True, retry_after=0.01)
    loop = make_loop(tools, [busy, busy, "at last"], retry=RetryPolicy(max_attempts=3))

    events = [event async for event in loop.stream("go")]

    retries = [e for e in events if isinstance(e, ModelRetry)]
    assert [(r.attempt, r.delay) for r in retries] == [(1, 0.01), (2, 0.01)]
    assert isinstance(events[-1], LoopFinished)
    assert (events[-1].text, events[-1].steps) == ("at last", 1)


async def test_a_failure_that_is_not_transient_is_raised_and_nothing_is_stored(
    tools: dict[str, Any],
) -> None:
    loop = make_loop(tools, [ModelAPIError("bad request", status_code=400), "never"])

    with pytest.raises(ModelAPIError, match="bad request"):
        await loop.run("go")

    assert await history(loop) == [Message("user", "go")]
    finished = await loop.run()
    assert (finished.text, finished.steps) == ("never", 1)


async def test_retries_stop_after_max_attempts(tools: dict[str, Any]) -> None:
    busy = ModelAPIError("busy", transient=True)
    policy = RetryPolicy(max_attempts=2, initial_delay=0.001)
    loop = make_loop(tools, [busy, busy, "unused"], retry=policy)

    with pytest.raises(ModelAPIError, match="busy"):
        await loop.run("go")

    model = loop.model
    assert isinstance(model, ScriptedModel)
    assert len(model.calls) == 2


# -- stopping early, saving, resuming -----------------------------------------------------------


async def test_a_run_cancelled_during_the_model_call_resumes_cleanly(tools: dict[str, Any]) -> None:
    started = asyncio.Event()

    async def slow_answer(window: list[Message]) -> str:
        started.set()
        await asyncio.sleep(10)
        return "never"

    loop = make_loop(tools, [slow_answer, "the answer"])
    task = asyncio.create_task(loop.run("question"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert await history(loop) == [Message("user", "question")]
    assert loop.agent.current_turn is not None  # the interrupted step runs first next time
    finished = await loop.run()
    assert finished.text == "the answer"


async def test_a_run_cancelled_while_tools_run_answers_every_call(tools: dict[str, Any]) -> None:
    gate = asyncio.Event()
    entered = asyncio.Event()

    @tool
    async def quick() -> str:
        """Answers at once."""
        return "quick result"

    @tool
    async def blocked() -> str:
        """Waits for the gate."""
        entered.set()
        await gate.wait()
        return "blocked result"

    fast, slow = tool_call("quick"), tool_call("blocked")
    loop = make_loop(
        {"quick": quick, "blocked": blocked}, [assistant(fast, slow), "I will try again later."]
    )
    task = asyncio.create_task(loop.run("do both"))
    await entered.wait()
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    stored = await history(loop)
    assert pairs_are_whole(stored)
    results = {r.tool_use_id: r for r in stored[-1].tool_results}
    assert results[fast.id] == ToolResultBlock(fast.id, "quick result")
    assert results[slow.id].is_error
    assert str(results[slow.id].content).startswith("cancelled")

    finished = await loop.run()  # the interrupted step finds its calls answered: no rerun
    assert finished.text == "I will try again later."
    assert len(await history(loop)) == 4
    assert pairs_are_whole(await history(loop))


async def test_stopping_the_stream_after_a_reply_answers_its_calls(tools: dict[str, Any]) -> None:
    call = tool_call("add", a=1, b=1)
    loop = make_loop(tools, [assistant(call), "two"])

    async with aclosing(loop.stream("1 + 1?")) as events:
        async for event in events:
            if isinstance(event, ModelReplied):
                break

    stored = await history(loop)
    assert pairs_are_whole(stored)
    assert stored[-1].tool_results[0].is_error
    assert (await loop.run()).text == "two"


async def test_a_new_prompt_answers_calls_left_waiting(tools: dict[str, Any]) -> None:
    call = tool_call("add", a=1, b=1)
    store = MemoryContextStore([Message("user", "old"), assistant(call)])
    loop = make_loop(tools, ["new answer"], context=ContextConfig(store))
    loop.agent._turns.clear()  # as after a crash that lost the pending step

    finished = await loop.run("something else")

    stored = await history(loop)
    assert finished.text == "new answer"
    assert pairs_are_whole(stored)
    assert str(stored[2].tool_results[0].content).startswith("not run")


async def test_saved_mid_loop_and_resumed_in_a_new_agent(tools: dict[str, Any]) -> None:
    store = MemoryContextStore(session_id="s1")
    first_call, second_call = tool_call("add", a=1, b=2), tool_call("add", a=3, b=4)
    script = [assistant(first_call), assistant(second_call), "3 and 7"]
    loop = make_loop(tools, script, context=ContextConfig(store), name="saver")

    paused = asyncio.Event()

    @loop.agent.after_turn
    async def pause_after_the_second_think(agent: Agent, turn: Turn) -> None:
        if turn.tool_name == "model_think" and len(await store.get_history()) == 4:
            agent.pause()
            paused.set()

    task = asyncio.create_task(loop.run("add twice"))
    await paused.wait()
    saved = loop.agent.to_json()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    AgentRegistry.unregister("saver")

    restored = Agent.from_json(saved, context=ContextConfig(store))
    assert [turn.tool_name for turn in restored.queue] == ["model_act"]
    restored.hooks.clear()
    restored.resume()
    model = loop.model
    assert isinstance(model, ScriptedModel)
    finished = await ModelLoop(restored, model).run()

    assert finished.text == "3 and 7"
    stored = await store.get_history()
    assert [r.content for m in stored for r in m.tool_results] == ["3", "7"]
    assert pairs_are_whole(stored)


async def test_a_step_saved_by_an_older_build_with_whole_calls_still_runs(
    tools: dict[str, Any],
) -> None:
    store = MemoryContextStore(session_id="s1")
    call = tool_call("add", a=2, b=5)
    await store.append_many([Message("user", "add"), assistant(call)])
    loop = make_loop(tools, ["7"], context=ContextConfig(store), name="older")
    # An earlier build saved the step with whole calls (dicts) instead of their ids.
    await loop.agent.put(Turn("model_act", kwargs={"calls": [to_dict(call)]}))

    finished = await loop.run()

    assert finished.text == "7"
    assert [r.content for m in await store.get_history() for r in m.tool_results] == ["7"]


async def test_a_branch_continues_on_its_own_store(tools: dict[str, Any]) -> None:
    store = MemoryContextStore()
    loop = make_loop(tools, ["first"], context=ContextConfig(store))
    await loop.run("shared question")

    child = loop.agent.branch("child")
    child.context = ContextConfig(await store.fork())
    branch_loop = ModelLoop(child, ScriptedModel(["branch answer"]))
    await branch_loop.run("only in the branch")

    assert len(await store.get_history()) == 2
    assert child.context is not None
    assert [m.text for m in await child.context.history()][-1] == "branch answer"


# -- refusals ---------------------------------------------------------------------------------


async def test_bad_construction_is_refused(tools: dict[str, Any]) -> None:
    bare = Agent("bare", "No store", list(tools.values()))
    agent = Agent("kept", "Store", list(tools.values()), context=ContextConfig.default())
    model = ScriptedModel([])

    with pytest.raises(ValueError, match="context=ContextConfig"):
        ModelLoop(bare, model)
    with pytest.raises(TypeError, match="complete"):
        ModelLoop(agent, object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tools"):
        ModelLoop(agent, model, tools=["add"])  # type: ignore[list-item]
    assert len(agent.tools) == len(tools)  # nothing was added by a refused loop


async def test_bad_prompts_and_overlapping_runs_are_refused_and_a_paused_run_waits(
    tools: dict[str, Any],
) -> None:
    loop = make_loop(tools, ["ok", "again"])

    with pytest.raises(ValueError, match="user text or a user Message"):
        await loop.run(Message("assistant", "me"))
    with pytest.raises(ValueError, match="no conversation to continue"):
        await loop.run()
    loop.agent.pause()  # a paused agent's run waits for resume(), as Agent.run() does
    waiting = asyncio.create_task(loop.run("go"))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    loop.agent.resume()
    assert (await waiting).text == "ok"

    refusals: list[str] = []

    @loop.agent.before_turn
    async def overlap(agent: Agent) -> None:
        try:
            await loop.run("overlap")
        except SafeExecutionError as exc:
            refusals.append(str(exc))

    assert (await loop.run("again")).text == "again"
    assert len(refusals) == 2  # one per step of the run: model_ask, then model_think
    assert all("already running" in refusal for refusal in refusals)


async def test_a_step_outside_its_loop_says_how_to_run_it(tools: dict[str, Any]) -> None:
    loop = make_loop(tools, ["ok"])
    await loop.agent.put(Turn("model_think"))

    with pytest.raises(RuntimeError, match=r"outside ModelLoop\.run"):
        async for _ in loop.agent.run():
            pass


async def test_a_model_must_reply_with_an_assistant_message(tools: dict[str, Any]) -> None:
    class Wrong(ScriptedModel):
        async def complete(self, *args: Any, **kwargs: Any) -> Any:
            return "text"

    loop = make_loop(tools, [], model=Wrong([]))

    with pytest.raises(TypeError, match="ModelResponse"):
        await loop.run("go")


# -- the store decides what is left ---------------------------------------------------------


async def test_continuing_runs_calls_the_store_holds_without_results(
    tools: dict[str, Any],
) -> None:
    call = tool_call("add", a=4, b=4)
    store = MemoryContextStore([Message("user", "4 + 4?"), assistant(call)])
    loop = make_loop(tools, ["8"], context=ContextConfig(store))

    finished = await loop.run()

    assert finished.text == "8"
    assert (await store.get_history())[2].tool_results == (ToolResultBlock(call.id, "8"),)
    model = loop.model
    assert isinstance(model, ScriptedModel)
    assert len(model.calls) == 1  # the calls ran first; the model was asked once, after


async def test_continuing_an_answered_conversation_returns_its_answer(
    tools: dict[str, Any],
) -> None:
    store = MemoryContextStore([Message("user", "hi"), Message("assistant", "hello")])
    loop = make_loop(tools, [], context=ContextConfig(store))

    finished = await loop.run()

    assert (finished.reason, finished.text, finished.steps) == (LoopStop.ANSWER, "hello", 0)


async def test_one_by_one_cancelled_keeps_what_finished_and_routes_it(
    tools: dict[str, Any],
) -> None:
    entered = asyncio.Event()

    @tool
    async def hang() -> str:
        """Never returns."""
        entered.set()
        await asyncio.sleep(10)
        return "never"

    fetched, hung = tool_call("fetch", doc_id="d9"), tool_call("hang")
    loop = make_loop(
        {**tools, "hang": hang},
        [assistant(fetched, hung), "later"],
        tool_policy=ToolPolicy(parallel=1),
    )
    task = asyncio.create_task(loop.run("go"))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    results = (await history(loop))[-1].tool_results
    assert results[0] == ToolResultBlock(fetched.id, "text of d9")
    assert results[1].is_error
    assert [item.id for item in loop.agent.context_pool] == ["d9"]  # its item was routed


# -- what a tool returns, as the model reads it ----------------------------------------------


async def test_results_take_the_shape_of_what_the_tool_returned() -> None:
    from pygents_ctx import ImageBlock, TextBlock

    image = ImageBlock("image/png", b"\x89PNG")

    @tool
    async def shapes(kind: str) -> Any:
        """Return something of each kind."""
        return {
            "block": TextBlock("a block"),
            "blocks": [TextBlock("see:"), image],
            "message": Message("user", [TextBlock("from a message")]),
            "data": {"n": 1, "tags": ["a"]},
            "odd": object.__new__(type("Odd", (), {"__repr__": lambda self: "<odd>"})),
        }[kind]

    @tool
    async def mixed():  # type: ignore[no-untyped-def]
        """Yield values of several kinds."""
        yield "text"
        yield 2

    kinds = ["block", "blocks", "message", "data", "odd"]
    calls = [tool_call("shapes", kind=kind) for kind in kinds] + [tool_call("mixed")]
    loop = make_loop({"shapes": shapes, "mixed": mixed}, [assistant(*calls), "ok"])

    await loop.run("shapes")

    contents = [r.content for r in (await history(loop))[2].tool_results]
    assert contents[0] == (TextBlock("a block"),)
    assert contents[1] == (TextBlock("see:"), image)
    assert contents[2] == (TextBlock("from a message"),)
    assert contents[3] == '{"n":1,"tags":["a"]}'
    assert contents[4] == '"<odd>"'
    assert contents[5] == '["text",2]'


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"instructions": 5}, TypeError, "instructions"),
        ({"settings": {"temperature": 0}}, TypeError, "settings"),
        ({"retry": 3}, TypeError, "retry"),
        ({"limits": {"max_steps": 5}}, TypeError, r"limits must be a LoopLimits \(e\.g\."),
        ({"tool_policy": 2}, TypeError, r"tool_policy must be a ToolPolicy \(e\.g\."),
        ({"lease": True}, TypeError, r"lease must be a LeasePolicy .*or None"),
    ],
)
def test_each_bad_option_is_named(
    tools: dict[str, Any], options: dict[str, Any], error: type[Exception], match: str
) -> None:
    agent = Agent("options", "", list(tools.values()), context=ContextConfig.default())

    with pytest.raises(error, match=match):
        ModelLoop(agent, ScriptedModel([]), **options)
    assert len(agent.tools) == len(tools)  # a refused loop added nothing
    with pytest.raises(TypeError, match="needs an Agent"):
        ModelLoop("agent", ScriptedModel([]))  # type: ignore[arg-type]


async def test_a_saved_agent_loads_after_the_registries_are_cleared(
    tools: dict[str, Any],
) -> None:
    from pygents_ctx import ToolRegistry

    store = MemoryContextStore(session_id="s")
    loop = make_loop(tools, [], context=ContextConfig(store), name="keeper")
    await loop.agent.put(Turn("model_think"))
    saved = loop.agent.to_json()
    ToolRegistry.clear()
    AgentRegistry.clear()
    for item in tools.values():
        ToolRegistry.register(item)

    ModelLoop.register_tools()
    restored = Agent.from_json(saved, context=ContextConfig(store))

    assert [turn.tool_name for turn in restored.queue] == ["model_think"]
    assert repr(ModelLoop(restored, ScriptedModel([]))).startswith("<ModelLoop keeper")
