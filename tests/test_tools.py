"""Tools: decoration, calling, locks, hooks, metadata, subtools and context parameters."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Optional

import pytest

from pygents_ctx import (
    ContextPool,
    ContextQueue,
    Hook,
    PygentsError,
    Tool,
    ToolHook,
    ToolRegistry,
    UnregisteredToolError,
    hook,
    tool,
)

STEP = 0.01  # how long a tool body "works" in the concurrency tests
WAIT = 1.0  # upper bound for an event that must happen; a deadlock fails instead of hanging
CLOCK_SLACK = timedelta(milliseconds=1)  # float timestamps round to the microsecond


async def collect(values: AsyncIterator[Any]) -> list[Any]:
    return [v async for v in values]


async def wait_for(event: asyncio.Event) -> None:
    await asyncio.wait_for(event.wait(), WAIT)


# --- decoration ---------------------------------------------------------------------------


def test_bare_decorator_registers_a_tool_under_the_function_name() -> None:
    @tool
    async def fetch(url: str) -> str:
        return url

    assert isinstance(fetch, Tool)
    assert ToolRegistry.get("fetch") is fetch
    assert fetch.key == "fetch"


def test_decorator_with_options_registers_a_tool_with_those_options() -> None:
    @tool(lock=True, tags=["io"], api_key="k")
    async def fetch(url: str, api_key: str) -> str:
        return url

    assert ToolRegistry.get("fetch") is fetch
    assert fetch.lock is not None
    assert fetch.tags == frozenset({"io"})
    assert fetch.fixed_kwargs == {"api_key": "k"}


async def test_coroutine_tool_is_awaited_for_its_return_value() -> None:
    @tool
    async def add(a: int, b: int) -> int:
        return a + b

    assert add.is_generator is False
    assert await add(2, 3) == 5


async def test_async_generator_tool_is_iterated_for_its_values() -> None:
    @tool
    async def count(n: int) -> AsyncIterator[int]:
        for i in range(n):
            yield i

    assert count.is_generator is True
    assert await collect(count(3)) == [0, 1, 2]


def _plain_function(x: int) -> int:
    return x


def _sync_generator(x: int) -> Any:
    yield x


@pytest.mark.parametrize("fn", [_plain_function, _sync_generator], ids=["def", "sync-generator"])
@pytest.mark.parametrize("bare", [True, False], ids=["bare", "with-options"])
def test_sync_function_is_rejected_at_decoration_and_not_registered(
    fn: Callable[..., Any], bare: bool
) -> None:
    with pytest.raises(TypeError, match=fn.__name__):
        tool(fn) if bare else tool(lock=True)(fn)
    assert ToolRegistry.all() == []


def _fetch_tool_function() -> Callable[..., Any]:
    async def fetch() -> str:
        return "elsewhere"

    return fetch


def test_a_different_function_under_a_taken_name_raises_and_keeps_the_first_tool() -> None:
    @tool
    async def fetch() -> str:
        return "first"

    first = fetch

    with pytest.raises(ValueError, match="'fetch' already registered"):
        tool(_fetch_tool_function())  # another qualified name
    with pytest.raises(ValueError, match="'fetch' already registered"):
        tool(first.fn)  # the same function, in a second tool

    assert ToolRegistry.get("fetch") is first
    assert ToolRegistry.all() == [first]


def test_closures_of_the_same_code_are_different_tools() -> None:
    first = tool(_fetch_tool_function())

    with pytest.raises(ValueError, match="'fetch' already registered"):
        tool(_fetch_tool_function())  # a factory called twice: two functions, one name

    assert ToolRegistry.get("fetch") is first


def test_a_redefinition_replaces_the_tool_and_its_subtools(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # What re-running a notebook cell does: the same module and name, new code.
    @tool
    async def files() -> str:
        return "first"

    @files.subtool
    async def read() -> str:
        return "old read"

    @files.subtool
    async def stat() -> str:
        return "old stat"

    old = files
    with caplog.at_level(logging.DEBUG, logger="pygents_ctx"):

        @tool
        async def files() -> str:
            return "second"

        @files.subtool
        async def read() -> str:
            return "new read"

    assert ToolRegistry.get("files") is files is not old
    assert ToolRegistry.get("files.read") is read
    assert [t.key for t in ToolRegistry.all()] == ["files", "files.read"]  # no stale stat
    assert "tool 'files' was defined again: the new definition replaces it" in caplog.text


def test_fixed_kwarg_not_in_signature_raises_and_registers_nothing() -> None:
    with pytest.raises(TypeError, match="api_key"):

        @tool(api_key="k")
        async def fetch(url: str) -> str:
            return url

    assert ToolRegistry.all() == []


async def test_fixed_kwarg_is_accepted_by_a_tool_with_var_kwargs() -> None:
    @tool(api_key="k")
    async def fetch(url: str, **options: Any) -> dict[str, Any]:
        return {"url": url, **options}

    assert await fetch("u") == {"url": "u", "api_key": "k"}


@pytest.mark.parametrize("tags", ["io", ["io", 3]], ids=["string", "non-string-member"])
def test_invalid_tags_raise_type_error_and_register_nothing(tags: Any) -> None:
    with pytest.raises(TypeError, match="tags"):

        @tool(tags=tags)
        async def fetch() -> None:
            pass

    assert ToolRegistry.all() == []


@pytest.mark.parametrize(
    ("tags", "expected"),
    [(None, frozenset()), (["a", "b", "a"], frozenset({"a", "b"})), (("x",), frozenset({"x"}))],
)
def test_tags_are_stored_as_a_frozenset(tags: Any, expected: frozenset[str]) -> None:
    @tool(tags=tags)
    async def fetch() -> None:
        pass

    assert isinstance(fetch.tags, frozenset)
    assert fetch.tags == expected


# --- calling ------------------------------------------------------------------------------


async def test_fixed_kwargs_are_merged_under_call_kwargs() -> None:
    @tool(model="small", temperature=0.5)
    async def generate(prompt: str, model: str, temperature: float) -> tuple[str, str, float]:
        return prompt, model, temperature

    assert await generate("hi") == ("hi", "small", 0.5)
    assert await generate("hi", model="large") == ("hi", "large", 0.5)


async def test_positional_argument_wins_over_a_fixed_kwarg_of_the_same_parameter() -> None:
    @tool(b=2)
    async def pair(a: int, b: int) -> tuple[int, int]:
        return a, b

    assert await pair(1, 5) == (1, 5)
    assert await pair(1) == (1, 2)


async def test_call_kwarg_overriding_a_fixed_kwarg_logs_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @tool(model="small")
    async def generate(prompt: str, model: str) -> str:
        return model

    with caplog.at_level(logging.WARNING, logger="pygents_ctx"):
        await generate("hi")
        assert caplog.records == []
        await generate("hi", model="large")

    [record] = caplog.records
    assert record.name == "pygents_ctx"
    assert record.levelno == logging.WARNING
    assert "model" in record.getMessage()
    assert "generate" in record.getMessage()


class _Counter:
    def __init__(self) -> None:
        self.calls = 0

    def next(self) -> int:
        self.calls += 1
        return self.calls


def _as_function(counter: _Counter) -> Callable[[], int]:
    def next_value() -> int:
        return counter.next()

    return next_value


def _as_partial(counter: _Counter) -> Callable[[], int]:
    def advance(c: _Counter) -> int:
        return c.next()

    return functools.partial(advance, counter)


@pytest.mark.parametrize(
    "make_factory",
    [_as_function, lambda c: lambda: c.next(), lambda c: c.next, _as_partial],
    ids=["function", "lambda", "bound-method", "partial"],
)
async def test_zero_argument_callable_fixed_kwarg_is_evaluated_per_call(
    make_factory: Callable[[_Counter], Callable[[], int]],
) -> None:
    counter = _Counter()

    @tool(request_id=make_factory(counter))
    async def fetch(request_id: int) -> int:
        return request_id

    assert counter.calls == 0  # not evaluated at decoration
    assert [await fetch(), await fetch(), await fetch()] == [1, 2, 3]
    assert counter.calls == 3


class _CallableObject:
    def __call__(self) -> str:
        return "called"


def _needs_an_argument(x: int) -> int:
    return x


@pytest.mark.parametrize(
    "value",
    [dict, _CallableObject(), _needs_an_argument],
    ids=["class", "callable-instance", "function-with-required-arg"],
)
async def test_other_callables_as_fixed_kwargs_are_passed_as_is(value: Any) -> None:
    @tool(factory=value)
    async def build(factory: Any) -> Any:
        return factory

    assert await build() is value


async def test_unknown_kwargs_are_dropped_silently(caplog: pytest.LogCaptureFixture) -> None:
    @tool
    async def fetch(url: str) -> str:
        return url

    with caplog.at_level(logging.DEBUG, logger="pygents_ctx"):
        assert await fetch(url="u", verbose=True, retries=3) == "u"
    assert caplog.records == []


async def test_unknown_kwargs_reach_a_tool_with_var_kwargs() -> None:
    @tool
    async def fetch(url: str, **options: Any) -> dict[str, Any]:
        return options

    assert await fetch(url="u", verbose=True) == {"verbose": True}


async def test_unknown_kwargs_are_dropped_for_generator_tools_too() -> None:
    @tool
    async def repeat(word: str, times: int) -> AsyncIterator[str]:
        for _ in range(times):
            yield word

    assert await collect(repeat(word="hi", times=2, sep=",")) == ["hi", "hi"]


@pytest.mark.parametrize("generator", [False, True], ids=["coroutine", "generator"])
async def test_missing_required_argument_raises_type_error(generator: bool) -> None:
    if generator:

        @tool
        async def needs(a: int, b: int) -> AsyncIterator[int]:
            yield a + b

        with pytest.raises(TypeError, match="b"):
            await collect(needs(1))
    else:

        @tool
        async def needs_too(a: int, b: int) -> int:
            return a + b

        with pytest.raises(TypeError, match="b"):
            await needs_too(1)


async def test_positional_arguments_are_passed_through() -> None:
    @tool(suffix="!")
    async def join(a: str, b: str, suffix: str) -> str:
        return a + b + suffix

    assert await join("x", "y") == "xy!"
    assert await join("x", b="z", extra=1) == "xz!"


# --- lock ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("lock", "overlap"), [(True, False), (False, True)])
async def test_lock_serializes_concurrent_calls(lock: bool, overlap: bool) -> None:
    events: list[str] = []

    @tool(lock=lock)
    async def work(n: int) -> None:
        events.append(f"enter{n}")
        await asyncio.sleep(STEP)
        events.append(f"exit{n}")

    await asyncio.gather(work(1), work(2))

    serialized = ["enter1", "exit1", "enter2", "exit2"]
    assert (events != serialized) is overlap
    assert sorted(events) == sorted(serialized)


@pytest.mark.parametrize(("lock", "overlap"), [(True, False), (False, True)])
async def test_generator_lock_is_held_across_the_whole_iteration(lock: bool, overlap: bool) -> None:
    events: list[str] = []

    @tool(lock=lock)
    async def stream(n: int) -> AsyncIterator[int]:
        events.append(f"enter{n}")
        yield n
        yield n
        events.append(f"exit{n}")

    @stream.on_yield
    async def slow_on_yield(value: int) -> None:
        await asyncio.sleep(STEP / 2)
        events.append(f"yield{value}")

    async def consume(n: int) -> None:
        async for _ in stream(n):
            await asyncio.sleep(STEP)  # the consumer is slow between values

    await asyncio.gather(consume(1), consume(2))

    call_1_done = max(i for i, e in enumerate(events) if e in ("exit1", "yield1"))
    assert (events.index("enter2") < call_1_done) is overlap


@pytest.mark.parametrize("generator", [False, True], ids=["coroutine", "generator"])
async def test_before_invoke_runs_outside_the_lock(generator: bool) -> None:
    second_arrived = asyncio.Event()

    if generator:

        @tool(lock=True)
        async def locked(n: int) -> AsyncIterator[int]:
            if n == 1:
                await wait_for(second_arrived)  # call 1 holds the lock until call 2's hook ran
            yield n

        async def call(n: int) -> Any:
            return await collect(locked(n))
    else:

        @tool(lock=True)
        async def locked(n: int) -> int:
            if n == 1:
                await wait_for(second_arrived)
            return n

        async def call(n: int) -> Any:
            return await locked(n)

    @locked.before_invoke
    async def announce(n: int) -> None:
        if n == 2:
            second_arrived.set()

    first = asyncio.create_task(call(1))
    await asyncio.sleep(0)  # call 1 takes the lock
    await asyncio.gather(first, call(2))
    assert second_arrived.is_set()


@pytest.mark.parametrize("generator", [False, True], ids=["coroutine", "generator"])
@pytest.mark.parametrize("kind", [ToolHook.AFTER_INVOKE, ToolHook.ON_ERROR])
async def test_after_invoke_and_on_error_run_outside_the_lock(
    generator: bool, kind: ToolHook
) -> None:
    second_entered = asyncio.Event()
    fail = kind is ToolHook.ON_ERROR

    if generator:

        @tool(lock=True)
        async def locked(n: int) -> AsyncIterator[int]:
            if n == 2:
                second_entered.set()
            elif fail:
                raise RuntimeError("boom")
            yield n

        async def call(n: int) -> Any:
            return await collect(locked(n))
    else:

        @tool(lock=True)
        async def locked(n: int) -> int:
            if n == 2:
                second_entered.set()
            elif fail:
                raise RuntimeError("boom")
            return n

        async def call(n: int) -> Any:
            return await locked(n)

    async def wait_for_second(*args: Any, **kwargs: Any) -> None:
        await wait_for(second_entered)  # would deadlock if the lock were still held

    getattr(locked, kind.value)(wait_for_second)

    first = asyncio.create_task(call(1))
    await asyncio.sleep(0)
    results = await asyncio.gather(first, call(2), return_exceptions=True)
    assert second_entered.is_set()
    if fail:
        assert isinstance(results[0], RuntimeError)
    else:
        assert results[0] in (1, [1])


# --- tool hooks ---------------------------------------------------------------------------


def attach(target: Tool[..., Any], kind: ToolHook, fn: Any, scope: str) -> Hook:
    """Attach `fn` as an instance hook of `target`, or as a global hook of `kind`."""
    if scope == "global":
        return hook(kind)(fn)
    attacher: Any = getattr(target, kind.value)
    made: Hook = attacher(fn)
    return made


SCOPES = pytest.mark.parametrize("scope", ["instance", "global"])


async def test_instance_hook_decorators_work_bare_with_options_and_as_plain_calls() -> None:
    calls: list[tuple[str, Any]] = []

    @tool
    async def double(x: int) -> int:
        return 2 * x

    @double.before_invoke
    async def bare(x: int) -> None:
        calls.append(("bare", x))

    @double.before_invoke(lock=True, env="prod")
    async def with_options(x: int, env: str) -> None:
        calls.append(("with_options", (x, env)))

    async def plain(result: int) -> None:
        calls.append(("plain", result))

    made = double.after_invoke(plain)

    assert await double(4) == 8
    assert calls == [("bare", 4), ("with_options", (4, "prod")), ("plain", 8)]
    assert isinstance(bare, Hook)
    assert isinstance(made, Hook)
    assert with_options.lock is not None
    assert with_options.fixed_kwargs == {"env": "prod"}
    assert double.hooks == [bare, with_options, made]


@SCOPES
async def test_before_invoke_gets_the_same_arguments_as_the_tool(scope: str) -> None:
    seen: dict[str, Any] = {}

    @tool(env="prod")
    async def fetch(url: str, retries: int, env: str) -> None:
        seen["tool"] = ((url,), {"retries": retries, "env": env})

    async def before_fetch(*args: Any, **kwargs: Any) -> None:
        seen["hook"] = (args, kwargs)

    attach(fetch, ToolHook.BEFORE_INVOKE, before_fetch, scope)
    await fetch("u", retries=2, ignored=True)

    assert seen["hook"] == (("u",), {"retries": 2, "env": "prod"})
    assert seen["hook"] == seen["tool"]


@SCOPES
async def test_on_yield_fires_once_per_value_in_order(scope: str) -> None:
    yielded: list[int] = []

    @tool
    async def count(n: int) -> AsyncIterator[int]:
        for i in range(n):
            yield i

    async def on_value(value: int) -> None:
        yielded.append(value)

    attach(count, ToolHook.ON_YIELD, on_value, scope)
    received = []
    async for v in count(3):
        received.append(v)
        assert yielded == received  # the hook fired before the value reached the consumer
    assert yielded == [0, 1, 2]


@SCOPES
async def test_after_invoke_gets_the_return_value(scope: str) -> None:
    results: list[Any] = []

    @tool
    async def pair(a: int) -> tuple[int, int]:
        return a, a

    async def after_pair(result: Any) -> None:
        results.append(result)

    attach(pair, ToolHook.AFTER_INVOKE, after_pair, scope)
    assert await pair(3) == (3, 3)
    assert results == [(3, 3)]


@SCOPES
async def test_after_invoke_gets_the_list_of_yielded_values(scope: str) -> None:
    results: list[Any] = []

    @tool
    async def count(n: int) -> AsyncIterator[int]:
        for i in range(n):
            yield i

    async def after_count(values: list[int]) -> None:
        results.append(values)

    attach(count, ToolHook.AFTER_INVOKE, after_count, scope)
    await collect(count(3))
    assert results == [[0, 1, 2]]


@SCOPES
async def test_after_invoke_gets_the_partial_list_when_the_consumer_stops_early(
    scope: str,
) -> None:
    results: list[Any] = []
    finished = False

    @tool
    async def count(n: int) -> AsyncIterator[int]:
        nonlocal finished
        for i in range(n):
            yield i
        finished = True

    async def after_count(values: list[int]) -> None:
        results.append(values)

    attach(count, ToolHook.AFTER_INVOKE, after_count, scope)
    async with contextlib.aclosing(count(10)) as values:
        async for v in values:
            if v == 1:
                break
    assert results == [[0, 1]]
    assert not finished


@SCOPES
@pytest.mark.parametrize("generator", [False, True], ids=["coroutine", "generator"])
async def test_on_error_fires_instead_of_after_invoke_and_the_error_propagates(
    scope: str, generator: bool
) -> None:
    events: list[Any] = []
    error = RuntimeError("boom")

    if generator:

        @tool
        async def broken() -> AsyncIterator[int]:
            yield 1
            raise error

        run: Callable[[], Any] = lambda: collect(broken())  # noqa: E731
    else:

        @tool
        async def broken() -> int:
            raise error

        run = broken

    async def after_broken(result: Any) -> None:
        events.append(("after_invoke", result))

    async def on_broken_error(*, exc: BaseException) -> None:
        events.append(("on_error", exc))

    attach(broken, ToolHook.AFTER_INVOKE, after_broken, scope)
    attach(broken, ToolHook.ON_ERROR, on_broken_error, scope)

    with pytest.raises(RuntimeError) as caught:
        await run()
    assert caught.value is error
    assert events == [("on_error", error)]


async def test_on_error_receives_the_exception_as_the_exc_keyword() -> None:
    received: dict[str, Any] = {}

    @tool
    async def broken() -> None:
        raise ValueError("bad")

    @broken.on_error
    async def record(**kwargs: Any) -> None:
        received.update(kwargs)

    with pytest.raises(ValueError, match="bad"):
        await broken()
    assert list(received) == ["exc"]
    assert isinstance(received["exc"], ValueError)


async def test_instance_hooks_fire_only_for_their_own_tool() -> None:
    fired: list[str] = []

    @tool
    async def first() -> None:
        pass

    @tool
    async def second() -> None:
        pass

    @first.after_invoke
    async def only_first(result: Any) -> None:
        fired.append("first")

    await second()
    assert fired == []
    await first()
    assert fired == ["first"]


# --- metadata -----------------------------------------------------------------------------


def test_metadata_has_the_name_and_docstring() -> None:
    @tool
    async def fetch(url: str) -> str:
        """Fetch a page.

        Returns the body.
        """
        return url

    assert fetch.metadata.name == "fetch"
    assert fetch.metadata.description == "Fetch a page.\n\nReturns the body."


def test_metadata_times_are_none_before_the_first_run() -> None:
    @tool
    async def idle() -> None:
        pass

    assert idle.metadata.start_time is None
    assert idle.metadata.end_time is None
    assert idle.metadata.dict()["start_time"] is None
    assert idle.metadata.dict()["end_time"] is None


def _assert_utc(moment: datetime | None) -> datetime:
    assert isinstance(moment, datetime)
    assert moment.utcoffset() is not None
    assert moment.utcoffset() == UTC.utcoffset(None)
    return moment


@pytest.mark.parametrize("generator", [False, True], ids=["coroutine", "generator"])
@pytest.mark.parametrize("fail", [False, True], ids=["ok", "raising"])
async def test_metadata_times_are_set_on_every_run(generator: bool, fail: bool) -> None:
    during: list[tuple[datetime | None, datetime | None]] = []

    def record_and_maybe_fail() -> None:
        during.append((timed.metadata.start_time, timed.metadata.end_time))
        if fail:
            raise RuntimeError("boom")

    if generator:

        @tool
        async def timed() -> AsyncIterator[int]:
            record_and_maybe_fail()
            yield 1

        async def run() -> Any:
            return await collect(timed())
    else:

        @tool
        async def timed() -> int:
            record_and_maybe_fail()
            return 1

        async def run() -> Any:
            return await timed()

    ends: list[datetime] = []
    starts: list[datetime] = []
    for _ in range(2):
        before = datetime.now(UTC)
        with pytest.raises(RuntimeError) if fail else contextlib.nullcontext():
            await run()
        after = datetime.now(UTC)
        start = _assert_utc(timed.metadata.start_time)
        end = _assert_utc(timed.metadata.end_time)
        assert before - CLOCK_SLACK <= start <= end <= after + CLOCK_SLACK
        starts.append(start)
        ends.append(end)
        await asyncio.sleep(0.002)

    assert starts[1] > ends[0]  # the second run updated both times
    assert during[0] == (starts[0], None)  # end_time is None while running
    assert during[1] == (starts[1], None)


async def test_metadata_dict_gives_iso_strings() -> None:
    @tool
    async def add(a: int, b: int = 1) -> int:
        """Add."""
        return a + b

    await add(1)
    data = add.metadata.dict()
    assert data == {
        "name": "add",
        "description": "Add.",
        "input_schema": add.metadata.input_schema,
        "output_schema": add.metadata.output_schema,
        "start_time": add.metadata.start_time.isoformat(),  # type: ignore[union-attr]
        "end_time": add.metadata.end_time.isoformat(),  # type: ignore[union-attr]
    }
    assert datetime.fromisoformat(data["start_time"]) == add.metadata.start_time
    assert datetime.fromisoformat(data["end_time"]).tzinfo is not None


# --- subtools -----------------------------------------------------------------------------


@pytest.fixture
def tree() -> dict[str, Tool[..., Any]]:
    """A root tool `files` with subtools `read` and `write`, and `write.append` under it."""

    @tool
    async def files() -> None:
        """File operations."""

    @files.subtool
    async def read(path: str) -> str:
        """Read a file."""
        return f"read {path}"

    @files.subtool(lock=True, tags=["io"], mode="w")
    async def write(path: str, mode: str) -> str:
        """Write a file."""
        return f"{mode} {path}"

    @write.subtool
    async def append(path: str) -> str:
        return f"append {path}"

    return {"files": files, "read": read, "write": write, "append": append}


def test_subtools_register_under_scoped_keys(tree: dict[str, Tool[..., Any]]) -> None:
    assert ToolRegistry.get("files.read") is tree["read"]
    assert ToolRegistry.get("files.write") is tree["write"]
    assert ToolRegistry.get("files.write.append") is tree["append"]
    assert [t.key for t in tree["files"].walk()] == [
        "files",
        "files.read",
        "files.write",
        "files.write.append",
    ]
    with pytest.raises(UnregisteredToolError):
        ToolRegistry.get("read")


def test_subtools_keep_their_short_name_and_parent(tree: dict[str, Tool[..., Any]]) -> None:
    assert tree["append"].metadata.name == "append"
    assert tree["append"].parent is tree["write"]
    assert tree["write"].parent is tree["files"]
    assert tree["files"].parent is None
    assert tree["files"].subtools == [tree["read"], tree["write"]]


async def test_subtool_with_options_is_a_full_tool(tree: dict[str, Tool[..., Any]]) -> None:
    write = tree["write"]
    assert write.lock is not None
    assert write.tags == frozenset({"io"})
    assert await write("a.txt") == "w a.txt"
    assert await tree["append"]("b.txt") == "append b.txt"


def test_doc_tree_is_recursive(tree: dict[str, Tool[..., Any]]) -> None:
    assert tree["files"].doc_tree() == {
        "name": "files",
        "description": "File operations.",
        "subtools": [
            {"name": "read", "description": "Read a file.", "subtools": []},
            {
                "name": "write",
                "description": "Write a file.",
                "subtools": [{"name": "append", "description": None, "subtools": []}],
            },
        ],
    }


def test_definitions_lists_root_doc_trees_sorted_by_name(
    tree: dict[str, Tool[..., Any]],
) -> None:
    @tool
    async def zeta() -> None:
        """Last."""

    @tool
    async def alpha() -> None:
        """First."""

    assert ToolRegistry.definitions() == [
        alpha.doc_tree(),
        tree["files"].doc_tree(),
        zeta.doc_tree(),
    ]


def test_duplicate_subtool_name_under_the_same_parent_raises(
    tree: dict[str, Tool[..., Any]],
) -> None:
    files = tree["files"]
    first = tree["read"]

    with pytest.raises(ValueError, match=r"files\.read"):

        @files.subtool
        async def read() -> None:
            pass

    assert ToolRegistry.get("files.read") is first
    assert files.subtools == [first, tree["write"]]


def test_same_short_name_under_different_parents_or_at_root_is_allowed(
    tree: dict[str, Tool[..., Any]],
) -> None:
    @tool
    async def read() -> None:
        pass

    @tree["write"].subtool
    async def read() -> None:  # noqa: F811
        pass

    assert ToolRegistry.get("read") is not ToolRegistry.get("files.read")
    assert ToolRegistry.get("files.write.read").metadata.name == "read"


def test_unregister_removes_the_tool_and_its_subtools(tree: dict[str, Tool[..., Any]]) -> None:
    @tool
    async def files_backup() -> None:
        pass

    ToolRegistry.unregister("files")

    assert ToolRegistry.all() == [files_backup]
    for key in ("files", "files.read", "files.write", "files.write.append"):
        with pytest.raises(UnregisteredToolError):
            ToolRegistry.get(key)


def test_unregister_a_subtool_keeps_its_parent(tree: dict[str, Tool[..., Any]]) -> None:
    ToolRegistry.unregister("files.write")
    assert [t.key for t in ToolRegistry.all()] == ["files", "files.read"]


@pytest.mark.parametrize("operation", [ToolRegistry.get, ToolRegistry.unregister])
def test_unknown_tool_raises_unregistered_tool_error(operation: Callable[[str], Any]) -> None:
    with pytest.raises(UnregisteredToolError, match="missing") as caught:
        operation("missing")
    assert isinstance(caught.value, KeyError)
    assert isinstance(caught.value, PygentsError)


# --- context parameters -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "parameter"), [(ContextQueue, "queue"), (ContextPool, "pool")], ids=["queue", "pool"]
)
@pytest.mark.parametrize("generator", [False, True], ids=["coroutine", "generator"])
async def test_required_context_parameter_outside_an_agent_raises_type_error(
    kind: type, parameter: str, generator: bool
) -> None:
    if generator:

        @tool
        async def uses_context(
            x: int, queue: ContextQueue[Any], pool: ContextPool[Any]
        ) -> AsyncIterator[int]:
            yield x

        async def run(**kwargs: Any) -> Any:
            return await collect(uses_context(1, **kwargs))
    else:

        @tool
        async def uses_context(x: int, queue: ContextQueue[Any], pool: ContextPool[Any]) -> int:
            return x

        async def run(**kwargs: Any) -> Any:
            return await uses_context(1, **kwargs)

    # Provide the other parameter, so the error can only be about this one.
    other = {"queue": ContextQueue(3), "pool": ContextPool()}
    del other[parameter]
    with pytest.raises(TypeError, match=rf"{kind.__name__}.*'{parameter}'") as caught:
        await run(**other)
    assert "uses_context" in str(caught.value)


def _optional_with_default() -> Tool[..., Any]:
    @tool
    async def probe(x: int, q: ContextQueue[Any] | None = None) -> Any:
        return q

    return probe


def _optional_pool_without_default() -> Tool[..., Any]:
    @tool
    async def probe(x: int, q: Optional[ContextPool[Any]]) -> Any:  # noqa: UP045
        return q

    return probe


def _union_queue_without_default() -> Tool[..., Any]:
    @tool
    async def probe(x: int, q: ContextQueue[str] | None) -> Any:
        return q

    return probe


OPTIONAL_CONTEXT = pytest.mark.parametrize(
    "make_probe",
    [_optional_with_default, _optional_pool_without_default, _union_queue_without_default],
    ids=["queue-or-none-default-none", "optional-pool", "queue-or-none"],
)


@OPTIONAL_CONTEXT
async def test_optional_context_parameter_outside_an_agent_gets_none(
    make_probe: Callable[[], Tool[..., Any]],
) -> None:
    assert await make_probe()(1) is None


@OPTIONAL_CONTEXT
@pytest.mark.parametrize("positional", [True, False], ids=["positional", "keyword"])
async def test_explicit_context_argument_wins(
    make_probe: Callable[[], Tool[..., Any]], positional: bool
) -> None:
    probe = make_probe()
    given = ContextQueue(2)
    result = await (probe(1, given) if positional else probe(1, q=given))
    assert result is given


@pytest.mark.parametrize("positional", [True, False], ids=["positional", "keyword"])
async def test_explicit_argument_satisfies_a_required_context_parameter(positional: bool) -> None:
    @tool
    async def summarize(pool: ContextPool[Any], limit: int = 3) -> Any:
        return pool

    given = ContextPool()
    result = await (summarize(given) if positional else summarize(pool=given))
    assert result is given
