"""Loaders against malformed documents: only their documented errors, nothing run or imported.

Every loader that reads saved data (`Agent.from_dict` / `from_json`,
`ContextQueue.from_dict`, `ContextPool.from_dict`, the command line's
`import`) gets thousands of documents made by mutating a valid one: values
replaced by other JSON, keys dropped or added, names swapped for names of
things that must never be looked up (`os.system`, `builtins.eval`), deep
nesting, broken bytes. Each load either succeeds or raises an error its
docstring lists. Saved documents name tools and hooks: the registered ones
here are sentinels that record any call, and none may happen; no module may
be imported while a loader runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import io
import json
import math
import random
import sqlite3
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    Agent,
    AgentRegistry,
    ContextItem,
    ContextPool,
    ContextQueue,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Turn,
    UnregisteredHookError,
    UnregisteredToolError,
    tool,
)
from pygents_ctx.cli import main
from pygents_ctx.cli._transfer import SessionFile
from pygents_ctx.context.stores import StoredCheckpoint, StoredMessage

# Many processes (or thousands of examples) per test: on a busy machine, sharing its
# cores with the other test workers, one can take minutes; the guard is against hangs.
pytestmark = pytest.mark.timeout(300)

# The names a document may use to try to reach something it must not.
NAMES = [
    "sentinel_tool", "sentinel_agent_hook", "sentinel_queue_hook", "sentinel_pool_hook",
    "os.system", "builtins.eval", "__import__", "subprocess:run", "pygents_ctx.testing",
    "json", "importlib.import_module", "", "\x00", "sentinel_tool.sub",
]  # fmt: skip
KEYS = [
    "name", "description", "tool_names", "queue", "current_turn", "hooks", "turn_hooks",
    "context_pool", "is_paused", "context_queue", "tags", "context", "limit", "items",
    "max_tokens", "counter", "id", "content", "content_type", "role", "type", "text",
    "tool_name", "args", "kwargs", "timeout", "metadata", "output", "version", "session_id",
    "messages", "archived", "run_ids", "archived_run_ids", "input_tokens", "output_tokens",
    "encoding", "chars_per_token", "__class__", "__reduce__", "module",
    "is_error", "is_eror", "cache_control", "signature", "role", "content", "type",
]  # fmt: skip
# One seed per document: the mutations come from `random.Random(seed)`, which is
# much faster than drawing each choice from hypothesis (a failure reports the seed).
SEEDS = st.integers(min_value=0, max_value=2**64 - 1)


def fuzz(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# -- documents ------------------------------------------------------------------------------


def scalar(rng: random.Random) -> Any:
    kind = rng.randrange(9)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.choice([0, 1, -1, 3, 2**31, 2**63, -(2**63) - 1, 2**70, 10**30])
    if kind == 3:
        return rng.choice([0.0, -0.5, 1.5, 1e308, math.nan, math.inf, -math.inf])
    if kind == 4:
        return rng.choice(NAMES)
    if kind == 5:
        return rng.choice(KEYS)
    if kind == 6:
        return rng.choice(["user", "assistant", "system", "text", "image", "tool_use", "message"])
    return "".join(rng.choice("ab\x00é☃\ud7ff\n{}\"'") for _ in range(rng.randrange(6)))


def value(rng: random.Random, depth: int = 0) -> Any:
    """A random JSON value (NaN and huge ints included: Python's json writes them)."""
    kind = rng.randrange(10) if depth < 3 else 0
    if kind < 6:
        return scalar(rng)
    if kind < 8:
        return [value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if kind < 9:
        return {rng.choice(KEYS): value(rng, depth + 1) for _ in range(rng.randrange(4))}
    nested: Any = rng.choice([[], {}, "x"])
    for _ in range(rng.choice([50, 900, 1200])):  # deep: near and past recursion limits
        nested = [nested] if rng.random() < 0.5 else {"content": nested}
    return nested


def slots(document: Any) -> list[tuple[Any, Any]]:
    """Every (container, key) in `document`: where a mutation can land."""
    found: list[tuple[Any, Any]] = []
    stack = [document]
    while stack:
        node = stack.pop()
        pairs = node.items() if isinstance(node, dict) else enumerate(node)
        for key, item in pairs:
            found.append((node, key))
            if isinstance(item, dict | list) and len(found) < 400:
                stack.append(item)
    return found


def mutate(rng: random.Random, base: dict[str, Any]) -> Any:
    """A copy of `base` with one to three mutations."""
    document: Any = copy.deepcopy(base)
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        places = slots(document) if isinstance(document, dict | list) else []
        if not places or rng.random() < 0.02:
            return value(rng)
        container, key = rng.choice(places)
        kind = rng.randrange(8)
        if kind <= 2:
            container[key] = value(rng)
        elif kind == 3:
            del container[key]
        elif kind == 4 and isinstance(container, dict):
            container[rng.choice(KEYS)] = value(rng)
        elif kind == 4:
            container.insert(key, container[key])  # shared: later mutations may hit both
        elif kind == 5:
            container[key] = rng.choice(NAMES)
        elif kind == 6:
            container[key] = [container[key]] if rng.random() < 0.5 else {"content": container[key]}
        elif not isinstance(container[key], dict | list):
            container[key] = str(container[key])
    return document


def as_bytes(rng: random.Random, document: Any) -> bytes:
    """The document as JSON, now and then broken: cut short, a byte changed, not UTF-8."""
    try:
        data = json.dumps(document).encode()  # NaN becomes NaN, which JSON readers refuse
    except (ValueError, RecursionError):
        data = b"[" * 3000
    kind = rng.randrange(10)
    if kind == 0 and data:
        return data[: rng.randrange(len(data))]
    if kind == 1 and data:
        at = rng.randrange(len(data))
        return data[:at] + bytes([rng.randrange(256)]) + data[at + 1 :]
    if kind == 2:
        return data + rng.choice([b"\xff\xfe", b"}", b" trailing", b"\x00"])
    return data


# Fields a session file may leave out or write as their default, which export leaves out.
OMITTED_WHEN = {"name": None, "metadata": None, "cache_control": None, "signature": None}


def without_defaults(message: Any) -> Any:
    """A saved message as export writes it: optional fields at their default left out."""
    if isinstance(message, list):
        return [without_defaults(item) for item in message]
    if not isinstance(message, dict):
        return message
    kept = {
        key: without_defaults(item) if key == "content" else item
        for key, item in message.items()
        if not (key in OMITTED_WHEN and item is OMITTED_WHEN[key])
    }
    if kept.get("type") == "tool_result":
        kept.setdefault("is_error", False)
    return kept


def as_exported(document: dict[str, Any]) -> dict[str, Any]:
    """What exporting an imported file must give: the file, with the defaults filled in."""
    messages, archived = document["messages"], document.get("archived", [])
    return {
        "version": 5,
        "session_id": ANY,  # imported under --session
        "input_tokens": document.get("input_tokens", 0),
        "output_tokens": document.get("output_tokens", 0),
        "archived": without_defaults(archived),
        "archived_run_ids": document.get("archived_run_ids", [None] * len(archived)),
        "messages": without_defaults(messages),
        "run_ids": document.get("run_ids", [None] * len(messages)),
        "usage": document.get("usage", []),
        "blobs": document.get("blobs", []),
        "checkpoint_states": document.get("checkpoint_states", []),
        "checkpoints": document.get("checkpoints", []),
    }


# -- the sentinels and the valid documents ------------------------------------------------------

CALLS: list[str] = []


def record(name: str) -> Callable[..., Any]:
    async def sentinel(*args: Any, **kwargs: Any) -> None:
        CALLS.append(name)

    sentinel.__name__ = sentinel.__qualname__ = name
    return sentinel


async def _documents() -> dict[str, dict[str, Any]]:
    @tool
    async def sentinel_tool(x: int = 0) -> int:
        CALLS.append("sentinel_tool")
        return x

    queue = ContextQueue[Any](limit=4, max_tokens=1_000, tags=["t"])
    queue.on_evict(record("sentinel_queue_hook"))
    await queue.append(ContextItem(content=Message("user", "hi"), id="a"))
    await queue.append(ContextItem(content={"k": [1, 2]}, description="d"))
    pool = ContextPool[Any](limit=3)
    pool.on_evict(record("sentinel_pool_hook"))
    await pool.add(ContextItem(content="x", id="i1", description="desc"))
    agent = Agent("fuzzed", "d", [sentinel_tool], context_queue=queue, context_pool=pool)
    agent.before_turn(record("sentinel_agent_hook"))
    await agent.put(Turn(sentinel_tool, kwargs={"x": 3}))
    documents = {"agent": agent.to_dict(), "queue": queue.to_dict(), "pool": pool.to_dict()}
    AgentRegistry.clear()
    cache = {"type": "ephemeral"}
    call = Message(
        "assistant",
        [ThinkingBlock("t", "sig"), ToolUseBlock("c1", "sentinel_tool", {"x": 1})],
        metadata={"provider": "p"},
    )
    result = ToolResultBlock("c1", [TextBlock("no", cache_control=cache)], is_error=True)
    named = Message("user", [TextBlock("hi", cache_control=cache)], name="alice")
    session = SessionFile(
        "s",
        [StoredMessage(named, "r1"), call, Message("user", [result])],
        [Message("user", "old")],
        5,
        6,
        checkpoints=[
            StoredCheckpoint("helper", 1, "2026-01-15T10:30:00.123456+00:00", b'{"a": 1}'),
            StoredCheckpoint("helper", 3, "2026-01-15T10:31:00.000001+00:00", b'{"a": 1}'),
            StoredCheckpoint("other", 3, "2026-01-15T10:31:00.000002+00:00", b"\x00\xff"),
        ],
    )
    return {**documents, "session": session.to_dict()}


@pytest.fixture
def documents() -> Iterator[dict[str, dict[str, Any]]]:
    """Valid documents of each kind, with the sentinels registered (the registries are
    emptied around each test)."""
    CALLS.clear()
    documents = asyncio.run(_documents())
    yield documents
    assert CALLS == [], "a tool or hook named by a document was called"


@contextlib.contextmanager
def nothing_imported() -> Iterator[None]:
    before = len(sys.modules)
    yield
    if len(sys.modules) != before:
        raise AssertionError(f"a load imported modules; {len(sys.modules) - before} new")


def load(loader: Callable[[Any], object], document: Any, *errors: type[Exception]) -> None:
    """Run `loader(document)`: it succeeds, or raises one of `errors`."""
    with nothing_imported():
        try:
            loader(document)
        except errors:
            pass
        finally:
            AgentRegistry.clear()  # a loaded agent takes its name: free it for the next


def warm_up(documents: dict[str, dict[str, Any]]) -> None:
    """Load each valid document once, so the modules a load needs are imported already."""
    Agent.from_dict(documents["agent"])
    AgentRegistry.clear()
    Agent.from_json(json.dumps(documents["agent"]))
    AgentRegistry.clear()
    ContextQueue.from_dict(documents["queue"])
    ContextPool.from_dict(documents["pool"])
    for broken in ({}, {"limit": "x"}, [], {"name": 1}):
        for loader in (Agent.from_dict, ContextQueue.from_dict, ContextPool.from_dict):
            with contextlib.suppress(ValueError):
                loader(broken)  # type: ignore[arg-type]


def test_data_nested_past_the_recursion_limit_is_malformed(
    documents: dict[str, dict[str, Any]],
) -> None:
    deep: Any = "x"
    for _ in range(100_000):  # past every Python's limit (3.13 counts C frames apart)
        deep = [deep]
    queue = {**documents["queue"], "items": [{"content": deep}], "max_tokens": 10}

    with pytest.raises(ValueError, match="ContextQueue is nested too deeply to read"):
        ContextQueue.from_dict(queue)
    # An agent refuses it sooner: past the depth its to_json() can write.
    with pytest.raises(ValueError, match="nested more than 254 levels deep"):
        Agent.from_dict({**documents["agent"], "context_queue": queue})
    with pytest.raises(ValueError, match="nested too deeply"):
        ContextPool.from_dict({"items": [{"id": deep, "description": "d", "content": 1}]})


# -- the loaders ---------------------------------------------------------------------------------

AGENT_ERRORS = (ValueError, UnregisteredToolError, UnregisteredHookError)
CONTEXT_ERRORS = (ValueError, UnregisteredHookError)


def test_agent_from_dict(documents: dict[str, dict[str, Any]]) -> None:
    warm_up(documents)

    @fuzz(3_000)
    @given(seed=SEEDS)
    def check(seed: int) -> None:
        rng = random.Random(seed)
        load(Agent.from_dict, mutate(rng, documents["agent"]), *AGENT_ERRORS)

    check()


def test_agent_from_json(documents: dict[str, dict[str, Any]]) -> None:
    warm_up(documents)

    @fuzz(1_500)
    @given(seed=SEEDS, as_text=st.booleans())
    def check(seed: int, as_text: bool) -> None:
        rng = random.Random(seed)
        data = as_bytes(rng, mutate(rng, documents["agent"]))
        text = data.decode(errors="replace") if as_text else data
        load(Agent.from_json, text, *AGENT_ERRORS)

    check()


def test_context_queue_from_dict(documents: dict[str, dict[str, Any]]) -> None:
    warm_up(documents)

    @fuzz(2_000)
    @given(seed=SEEDS)
    def check(seed: int) -> None:
        rng = random.Random(seed)
        load(ContextQueue.from_dict, mutate(rng, documents["queue"]), *CONTEXT_ERRORS)

    check()


def test_context_pool_from_dict(documents: dict[str, dict[str, Any]]) -> None:
    warm_up(documents)

    @fuzz(2_000)
    @given(seed=SEEDS)
    def check(seed: int) -> None:
        rng = random.Random(seed)
        load(ContextPool.from_dict, mutate(rng, documents["pool"]), *CONTEXT_ERRORS)

    check()


def test_cli_import(documents: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    db, file = tmp_path / "fuzz.db", tmp_path / "in.json"
    count = 0

    def run(data: bytes) -> tuple[int, str]:
        nonlocal count
        count += 1
        file.write_bytes(data)
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = main(["--db", str(db), "import", str(file), "--session", f"s{count}"])
        return code, err.getvalue()

    assert run(json.dumps(documents["session"]).encode()) == (0, "")  # warm: imports, the db

    def stored(session: str) -> tuple[int, int]:
        conn = sqlite3.connect(db)
        try:
            return conn.execute(
                "SELECT (SELECT count(*) FROM pygents_messages WHERE session_id = ?), "
                "(SELECT count(*) FROM pygents_archive WHERE session_id = ?)",
                (session, session),
            ).fetchone()
        finally:
            conn.close()

    def exported(session: str) -> dict[str, Any]:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["--db", str(db), "export", session]) == 0
        document: dict[str, Any] = orjson.loads(out.getvalue())
        return document

    # Each example is a whole `pygents-ctx import` into SQLite (~25 ms): fewer than the
    # in-process loaders get, so the suite stays within CI's time.
    @fuzz(600)
    @given(seed=SEEDS)
    def check(seed: int) -> None:
        rng = random.Random(seed)
        data = as_bytes(rng, mutate(rng, documents["session"]))
        with nothing_imported():
            code, err = run(data)
        if code == 0:
            assert err == ""
            assert exported(f"s{count}") == as_exported(orjson.loads(data))
            return
        assert code == 1, err
        assert err.startswith("pygents-ctx: error: "), err
        assert err.count("\n") == 1, err
        assert stored(f"s{count}") == (0, 0)  # nothing of a refused file was written

    check()
