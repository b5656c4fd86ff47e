"""A chat backend: a `ModelLoop` per request, served over HTTP, the transcripts in a database.

    POST /sessions/{id}/messages   {"content": "..."}  -> the loop's events, as server-sent events
    GET  /sessions/{id}                                -> the transcript, as JSON
    GET  /health                                       -> {"status": "ok"}

Who may call it: with `SERVICE_TOKENS` set (`token=owner,token=owner`),
each request needs `Authorization: Bearer <token>`, and an owner sees only
their own sessions (`owner_of` is the one place that maps a request to its
owner: put your own authentication there). Without it the service is open to
anyone who reaches it, which suits a machine of your own only.

Each worker process opens its database connections when it starts (the
lifespan) and closes them when it stops: `PG_CONNECTIONS` (4) to PostgreSQL
when `DATABASE_URL` is set, else one to the SQLite file `PYGENTS_DB` (default
`service.db`). The model is any
Chat Completions server: `OPENAI_BASE_URL`, `OPENAI_API_KEY`, `MODEL`.

    uvicorn examples.service.app:app --workers 4

See examples/service/README.md for curl examples, and
guides/guides/serving.md for the why of each part.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from pygents_ctx import (
    Agent,
    AgentScope,
    ContextConfig,
    ContextStore,
    LoopFinished,
    ModelLoop,
    ModelRetry,
    OpenAIModel,
    PostgresContextStore,
    SessionBusyError,
    SQLiteContextStore,
    StepStarted,
    TextDelta,
    Tool,
    ToolCallFinished,
    ToolCallStarted,
    ToolRegistry,
    connect,
    connect_postgres,
    to_dict,
    to_openai,
    tool,
)

__all__ = ["Settings", "app", "create_app"]

INSTRUCTIONS = (
    "You are the support assistant of a small web shop. Look questions up with "
    "search_faq, order questions with order_status, then answer in one or two sentences."
)
MAX_SESSION_ID = 200
MAX_BODY = 100_000  # bytes of a message's JSON body
# What a disconnected client leaves running is awaited this long at shutdown.
SHUTDOWN_GRACE = 30.0

# -- the tools the model can call ----------------------------------------------------

FAQ = {
    "shipping": "Orders ship within 2 working days; delivery takes 3 to 5 days.",
    "returns": "Unused items can be returned within 30 days for a full refund.",
    "payment": "We take cards and bank transfers; invoices are sent by email.",
}


@tool
async def search_faq(question: str) -> str:
    """Search the shop's FAQ; returns the entries whose topic the question mentions."""
    hits = [f"{topic}: {text}" for topic, text in FAQ.items() if topic in question.lower()]
    return "\n".join(hits) or f"no FAQ entry matches {question!r}"


@tool
async def order_status(order_id: str) -> str:
    """The status of an order, by its id (e.g. "A-1001")."""
    if not order_id.upper().startswith("A-"):
        raise ValueError(f"order ids look like 'A-1001', not {order_id!r}")
    return f"order {order_id.upper()} shipped yesterday; it arrives within 3 days"


TOOLS: list[Tool[..., Any]] = [search_faq, order_status]

# -- settings -------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """Where the transcripts go and which model answers; `from_env()` reads the environment."""

    database_url: str | None = None  # PostgreSQL when set
    db_path: str = "service.db"  # else this SQLite file
    model: str = "gpt-4o-mini"
    base_url: str | None = None  # None: OpenAI
    api_key: str | None = None
    pg_connections: int = 4  # per worker process
    max_steps: int = 8
    tokens: Mapping[str, str] | None = None  # bearer token -> owner; None: open to anyone

    def __post_init__(self) -> None:
        if not isinstance(self.pg_connections, int) or self.pg_connections < 1:
            raise ValueError(
                f"PG_CONNECTIONS must be a whole number >= 1, not {self.pg_connections!r}"
            )

    @classmethod
    def from_env(cls) -> Settings:
        connections = os.environ.get("PG_CONNECTIONS") or "4"
        if not connections.isdigit():
            raise ValueError(f"PG_CONNECTIONS must be a whole number >= 1, not {connections!r}")
        tokens = None
        if os.environ.get("SERVICE_TOKENS"):
            pairs = [pair.partition("=") for pair in os.environ["SERVICE_TOKENS"].split(",")]
            if any(not token or not owner for token, _, owner in pairs):
                raise ValueError("SERVICE_TOKENS must be token=owner pairs, separated by commas")
            tokens = {token: owner for token, _, owner in pairs}
        return cls(
            database_url=os.environ.get("DATABASE_URL") or None,
            db_path=os.environ.get("PYGENTS_DB") or "service.db",
            model=os.environ.get("MODEL") or "gpt-4o-mini",
            base_url=os.environ.get("OPENAI_BASE_URL") or None,
            api_key=os.environ.get("OPENAI_API_KEY") or None,
            pg_connections=int(connections),
            tokens=tokens,
        )


# -- per worker: the connection, the model, the answers in flight -------------------------


@dataclass
class Worker:
    """What one worker process holds while it serves."""

    settings: Settings
    connections: list[Any]
    model: OpenAIModel
    answering: set[asyncio.Task[None]] = field(default_factory=set)
    _turn: int = 0

    def store(self, session_id: str) -> ContextStore:
        """A store on the next connection in turn (any serves any session)."""
        self._turn += 1
        connection = self.connections[self._turn % len(self.connections)]
        if self.settings.database_url:
            return PostgresContextStore(connection, session_id=session_id)
        return SQLiteContextStore(connection, session_id=session_id)


async def _connect(settings: Settings) -> list[Any]:
    """The worker's connections: PostgreSQL runs one call at a time on each, so several."""
    if not settings.database_url:
        return [await connect(settings.db_path)]
    connections: list[Any] = []
    try:
        for _ in range(settings.pg_connections):
            connections.append(await connect_postgres(settings.database_url))
    except BaseException:
        await asyncio.gather(*(c.close() for c in connections))
        raise
    return connections


@contextlib.asynccontextmanager
async def _lifespan(app: Starlette) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    connections = await _connect(settings)
    try:
        model = OpenAIModel(settings.model, base_url=settings.base_url, api_key=settings.api_key)
    except BaseException:
        await asyncio.gather(*(c.close() for c in connections))
        raise
    worker = app.state.worker = Worker(settings, connections, model)
    try:
        yield
    finally:
        # Answers whose client went away are still being stored: let them finish.
        if worker.answering:
            await asyncio.wait(worker.answering, timeout=SHUTDOWN_GRACE)
        await model.client.close()
        await asyncio.gather(*(c.close() for c in connections))


# -- the routes -------------------------------------------------------------------------


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def owner_of(request: Request) -> str | JSONResponse | None:
    """Who is asking: the owner of the request's bearer token, None on an open service, or 401.

    The one place authentication goes: replace it with your own (a session
    cookie, an API gateway's header) and every route keeps each owner's
    sessions apart.
    """
    tokens = request.app.state.settings.tokens
    if tokens is None:
        return None
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    owner = tokens.get(token) if scheme.lower() == "bearer" else None
    if owner is None:
        return _error(401, "send Authorization: Bearer <token> with a token of this service")
    return owner


def _session_id(request: Request) -> str | JSONResponse:
    """The store's id of the addressed session (the owner's own), or the 400 or 401."""
    session_id: str = request.path_params["session_id"]
    if len(session_id) > MAX_SESSION_ID or "\x00" in session_id:
        return _error(
            400, f"a session id has at most {MAX_SESSION_ID} characters, none of them NUL"
        )
    owner = owner_of(request)
    if isinstance(owner, JSONResponse):
        return owner
    # Each owner's sessions live apart: one owner's "s1" is not another's.
    return session_id if owner is None else f"{owner}/{session_id}"


async def _body(request: Request) -> bytes | None:
    """The request's body, or None once it grows past `MAX_BODY` (the rest is never read).

    Counted as it arrives, so a chunked body with no declared length is held
    to the limit as a declared one is.
    """
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY:
        return None  # refused before reading it
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


async def _content(request: Request) -> str | JSONResponse:
    """The message's text from the body `{"content": "..."}`, or the 400 saying what is wrong."""
    raw = await _body(request)
    if raw is None:
        return _error(413, f"the body has at most {MAX_BODY:,} bytes")
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return _error(400, f'the body must be JSON like {{"content": "Hi"}}: {exc}')
    if not isinstance(body, dict):
        return _error(400, f'the body must be a JSON object like {{"content": "Hi"}}, not {body!r}')
    unknown = sorted(set(body) - {"content"})
    if unknown:
        return _error(400, f'unknown field(s) {unknown}: the body has only "content"')
    content = body.get("content")
    if not isinstance(content, str) or not content.strip():
        return _error(
            400, f'"content" must be a non-empty string (the user\'s message), not {content!r}'
        )
    return content


async def post_message(request: Request) -> Response:
    session_id = _session_id(request)
    if isinstance(session_id, JSONResponse):
        return session_id
    content = await _content(request)
    if isinstance(content, JSONResponse):
        return content
    worker: Worker = request.app.state.worker
    events: asyncio.Queue[bytes | None] = asyncio.Queue()
    started = asyncio.get_running_loop().create_future()
    # The answer runs in a task of its own: a client that goes away does not cut it off
    # half-stored; it finishes, and GET /sessions/{id} shows it.
    task = asyncio.create_task(_answer(worker, session_id, content, events, started))
    worker.answering.add(task)
    task.add_done_callback(worker.answering.discard)
    try:
        await started  # the loop holds the session's lease, or another answer does
    except SessionBusyError:
        return _error(
            409,
            f"session {request.path_params['session_id']!r} is busy: another message of it "
            "is being answered; "
            "send this one when that answer is done",
        )
    return StreamingResponse(
        _relay(events), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
    )


async def _relay(events: asyncio.Queue[bytes | None]) -> AsyncIterator[bytes]:
    while (event := await events.get()) is not None:
        yield event


def new_agent(store: ContextStore) -> Agent:
    """This request's agent: made in the request's `AgentScope`, so every request has its own."""
    return Agent("support", "Answers the shop's customers", TOOLS, context=ContextConfig(store))


async def _answer(
    worker: Worker,
    session_id: str,
    content: str,
    events: asyncio.Queue[bytes | None],
    started: asyncio.Future[None],
) -> None:
    """Run the loop for one message; `started` says whether it got the session's lease.

    `ModelLoop` takes the session's lease in the store before its first event
    (`SessionBusyError` at once if another run, in any worker, holds it), so
    the first event, or the busy error, decides between the stream and a 409.
    """
    try:
        async with AgentScope():  # the agent's name is this request's alone
            loop = ModelLoop(
                new_agent(worker.store(session_id)),
                worker.model,
                instructions=INSTRUCTIONS,
                max_steps=worker.settings.max_steps,
            )
            async with contextlib.aclosing(loop.stream(content)) as stream:
                async for event in stream:
                    if not started.done():
                        started.set_result(None)
                    shaped = sse_event(event)
                    if shaped is not None:
                        events.put_nowait(shaped)
    except SessionBusyError as exc:
        if not started.done():
            started.set_exception(exc)
    except Exception as exc:  # the client hears of it; the stream ends cleanly
        events.put_nowait(_sse("error", {"error": type(exc).__name__, "message": str(exc)}))
    finally:
        if not started.done():
            started.set_result(None)
        events.put_nowait(None)


def _sse(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def sse_event(event: object) -> bytes | None:
    """A loop event as a server-sent event; None for those a client does not need."""
    if isinstance(event, TextDelta):
        return _sse("text", {"text": event.text})
    if isinstance(event, StepStarted):
        return _sse("step", {"step": event.step, "window_tokens": event.window.tokens})
    if isinstance(event, ToolCallStarted):
        call = event.call
        return _sse("tool_call", {"id": call.id, "name": call.name, "input": call.input})
    if isinstance(event, ToolCallFinished):
        result = event.result
        return _sse(
            "tool_result",
            {
                "id": event.call.id,
                "name": event.call.name,
                "content": result.text,
                "is_error": result.is_error,
            },
        )
    if isinstance(event, ModelRetry):
        return _sse("retry", {"attempt": event.attempt, "delay": event.delay})
    if isinstance(event, LoopFinished):
        usage = event.usage
        return _sse(
            "done",
            {
                "reason": event.reason.value,
                "text": event.text,
                "steps": event.steps,
                "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
            },
        )
    return None  # the deltas of tool calls, the stored reply: the events above carry them


async def get_session(request: Request) -> Response:
    session_id = _session_id(request)
    if isinstance(session_id, JSONResponse):
        return session_id
    wire = request.query_params.get("format", "pygents")
    if wire not in ("pygents", "openai"):
        return _error(400, f"format must be 'pygents' or 'openai', not {wire!r}")
    worker: Worker = request.app.state.worker
    history = await worker.store(session_id).get_history()
    if not history:
        asked = request.path_params["session_id"]
        return _error(
            404, f"no session {asked!r}: POST a message to /sessions/{asked}/messages to start it"
        )
    messages = to_openai(history) if wire == "openai" else [to_dict(m) for m in history]
    return JSONResponse({"session_id": request.path_params["session_id"], "messages": messages})


async def health(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


def create_app(settings: Settings | None = None) -> Starlette:
    """The app; `settings` default to the environment's (`Settings.from_env()`)."""
    for tool_ in TOOLS:  # a no-op unless a test cleared the registry since the import
        ToolRegistry.register(tool_)
    app = Starlette(
        routes=[
            Route("/sessions/{session_id}/messages", post_message, methods=["POST"]),
            Route("/sessions/{session_id}", get_session, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
        ],
        lifespan=_lifespan,
    )
    app.state.settings = Settings.from_env() if settings is None else settings
    return app


app = create_app()
