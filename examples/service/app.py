"""A chat backend: a `ModelLoop` per request, served over HTTP, the transcripts in a database.

    POST /sessions/{id}/messages   {"content": "..."}  -> the loop's events, as server-sent events
    GET  /sessions/{id}                                -> the transcript, as JSON
    GET  /sessions/{id}/approvals                      -> the tool calls waiting for a decision
    POST /sessions/{id}/approvals/{call_id}  {"approve": true}
                                   or {"approve": false, "reason": "..."}
                                                       -> decides, then the run's events
    GET  /health                                       -> {"status": "ok"}

A refund (the `refund` tool) needs a person's approval: the run stops with
an `approval` event and `done` (reason `approval`); the decision comes in its
own request, maybe in another worker, and continues the run. The waiting
calls and the decisions live in the store with the session, nothing else.

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
from typing import Any, NamedTuple

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from pygents_ctx import (
    Agent,
    AgentScope,
    ApprovalError,
    ContextConfig,
    ContextStore,
    LoopFinished,
    LoopLimits,
    ModelLoop,
    ModelRetry,
    OpenAIModel,
    PostgresContextStore,
    SessionBusyError,
    SQLiteContextStore,
    StepStarted,
    TextDelta,
    Tool,
    ToolApprovalRequired,
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
    "search_faq, order questions with order_status, refund orders with refund (a person "
    "approves each refund), then answer in one or two sentences."
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


@tool(needs_approval=True)
async def refund(order_id: str) -> str:
    """Refund an order in full, by its id (e.g. "A-1001"); a person approves it first."""
    return f"order {order_id} refunded; the money is back within 5 days"


TOOLS: list[Tool[..., Any]] = [search_faq, order_status, refund]

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

    def store(self, session: Addressed) -> ContextStore:
        """A store of `session` on the next connection in turn (any serves any session)."""
        self._turn += 1
        connection = self.connections[self._turn % len(self.connections)]
        if self.settings.database_url:
            return PostgresContextStore(connection, session_id=session.id, owner=session.owner)
        return SQLiteContextStore(connection, session_id=session.id, owner=session.owner)


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


class Addressed(NamedTuple):
    """The session a request addresses: its id in the store, and its owner (None: open)."""

    id: str
    owner: str | None


def _session(request: Request) -> Addressed | JSONResponse:
    """The addressed session (the owner's own), or the 400 or 401."""
    session_id: str = request.path_params["session_id"]
    if len(session_id) > MAX_SESSION_ID or "\x00" in session_id:
        return _error(
            400, f"a session id has at most {MAX_SESSION_ID} characters, none of them NUL"
        )
    owner = owner_of(request)
    if isinstance(owner, JSONResponse):
        return owner
    # Each owner's sessions live apart: one owner's "s1" is not another's. The store
    # keeps the owner too, so `list_sessions(owner=...)` and `erase(owner=...)` find them.
    return Addressed(session_id if owner is None else f"{owner}/{session_id}", owner)


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


async def _json_object(
    request: Request, shape: str, fields: set[str], has: str
) -> dict[str, Any] | JSONResponse:
    """The body as a JSON object of `fields` only, or the 413/400 saying what is wrong
    (`shape` an example body, `has` the fields in words)."""
    raw = await _body(request)
    if raw is None:
        return _error(413, f"the body has at most {MAX_BODY:,} bytes")
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return _error(400, f"the body must be JSON like {shape}: {exc}")
    if not isinstance(body, dict):
        return _error(400, f"the body must be a JSON object like {shape}, not {body!r}")
    unknown = sorted(set(body) - fields)
    if unknown:
        return _error(400, f"unknown field(s) {unknown}: the body has {has}")
    return body


async def _content(request: Request) -> str | JSONResponse:
    """The message's text from the body `{"content": "..."}`, or the 400 saying what is wrong."""
    body = await _json_object(request, '{"content": "Hi"}', {"content"}, 'only "content"')
    if isinstance(body, JSONResponse):
        return body
    content = body.get("content")
    if not isinstance(content, str) or not content.strip():
        return _error(
            400, f'"content" must be a non-empty string (the user\'s message), not {content!r}'
        )
    return content


async def post_message(request: Request) -> Response:
    session = _session(request)
    if isinstance(session, JSONResponse):
        return session
    content = await _content(request)
    if isinstance(content, JSONResponse):
        return content
    return await _stream(request, session, content, None)


async def _stream(
    request: Request, session: Addressed, content: str | None, decision: Decision | None
) -> Response:
    """The run's events as they come, or the 409 when it cannot start."""
    worker: Worker = request.app.state.worker
    events: asyncio.Queue[bytes | None] = asyncio.Queue()
    started = asyncio.get_running_loop().create_future()
    # The answer runs in a task of its own: a client that goes away does not cut it off
    # half-stored; it finishes, and GET /sessions/{id} shows it.
    work = _answer(worker, session, content, decision, events, started)
    task = asyncio.create_task(work)
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
    except ApprovalError as exc:  # nothing was changed
        return JSONResponse({"error": str(exc), "pending": list(exc.pending)}, status_code=409)
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
    session: Addressed,
    content: str | None,
    decision: Decision | None,
    events: asyncio.Queue[bytes | None],
    started: asyncio.Future[None],
) -> None:
    """Run the loop for one message, or a decision; `started` says whether it could start.

    `ModelLoop` takes the session's lease in the store before its first event
    (`SessionBusyError` at once if another run, in any worker, holds it), so
    the first event, or the busy error, decides between the stream and a 409.
    A decision is made first (`ApprovalError`, a 409, if the call does not
    wait), then the loop runs on without a prompt.
    """
    try:
        async with AgentScope():  # the agent's name is this request's alone
            loop = ModelLoop(
                new_agent(worker.store(session)),
                worker.model,
                instructions=INSTRUCTIONS,
                limits=LoopLimits(max_steps=worker.settings.max_steps),
            )
            if decision is not None:
                if decision.approve:
                    await loop.approve(decision.call_id)
                else:
                    await loop.reject(decision.call_id, decision.reason)
            async with contextlib.aclosing(loop.stream(content)) as stream:
                async for event in stream:
                    if not started.done():
                        started.set_result(None)
                    shaped = sse_event(event)
                    if shaped is not None:
                        events.put_nowait(shaped)
    except (SessionBusyError, ApprovalError) as exc:
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
    if isinstance(event, ToolApprovalRequired):
        call = event.call
        return _sse("approval", {"id": call.id, "name": call.name, "input": call.input})
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
                "pending": [call.id for call in event.pending],
                "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
            },
        )
    return None  # the deltas of tool calls, the stored reply: the events above carry them


async def get_session(request: Request) -> Response:
    session = _session(request)
    if isinstance(session, JSONResponse):
        return session
    wire = request.query_params.get("format", "pygents")
    if wire not in ("pygents", "openai"):
        return _error(400, f"format must be 'pygents' or 'openai', not {wire!r}")
    worker: Worker = request.app.state.worker
    history = await worker.store(session).get_history()
    if not history:
        asked = request.path_params["session_id"]
        return _error(
            404, f"no session {asked!r}: POST a message to /sessions/{asked}/messages to start it"
        )
    messages = to_openai(history) if wire == "openai" else [to_dict(m) for m in history]
    return JSONResponse({"session_id": request.path_params["session_id"], "messages": messages})


@dataclass(frozen=True)
class Decision:
    """A person's decision on one waiting tool call, from `POST .../approvals/{call_id}`."""

    call_id: str
    approve: bool
    reason: str | None = None


_DECISION_SHAPE = '{"approve": true} or {"approve": false, "reason": "..."}'


async def _decision(request: Request) -> Decision | JSONResponse:
    """The decision of the request's body, or the 400 (413) saying what is wrong."""
    call_id: str = request.path_params["call_id"]
    if len(call_id) > MAX_SESSION_ID or "\x00" in call_id:
        return _error(400, f"a call id has at most {MAX_SESSION_ID} characters, none of them NUL")
    fields = {"approve", "reason"}
    body = await _json_object(request, _DECISION_SHAPE, fields, '"approve" and "reason"')
    if isinstance(body, JSONResponse):
        return body
    approve, reason = body.get("approve"), body.get("reason")
    if not isinstance(approve, bool):
        return _error(400, f'"approve" must be true or false, not {approve!r}: {_DECISION_SHAPE}')
    if reason is not None and (approve or not isinstance(reason, str) or "\x00" in reason):
        return _error(
            400,
            f'"reason" goes with "approve": false only, as a string without NUL, not {reason!r}',
        )
    return Decision(call_id, approve, reason)


async def _session_exists(worker: Worker, session: Addressed, request: Request) -> Response | None:
    """None, or the 404 of a session with no messages."""
    if await worker.store(session).count():
        return None
    asked = request.path_params["session_id"]
    return _error(
        404, f"no session {asked!r}: POST a message to /sessions/{asked}/messages to start it"
    )


async def get_approvals(request: Request) -> Response:
    session = _session(request)
    if isinstance(session, JSONResponse):
        return session
    worker: Worker = request.app.state.worker
    missing = await _session_exists(worker, session, request)
    if missing is not None:
        return missing
    async with AgentScope():
        loop = ModelLoop(new_agent(worker.store(session)), worker.model)
        pending = await loop.pending_approvals()
    calls = [{"id": call.id, "name": call.name, "input": call.input} for call in pending]
    return JSONResponse({"session_id": request.path_params["session_id"], "pending": calls})


async def post_approval(request: Request) -> Response:
    session = _session(request)
    if isinstance(session, JSONResponse):
        return session
    decision = await _decision(request)
    if isinstance(decision, JSONResponse):
        return decision
    missing = await _session_exists(request.app.state.worker, session, request)
    if missing is not None:
        return missing
    return await _stream(request, session, None, decision)


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
            Route("/sessions/{session_id}/approvals", get_approvals, methods=["GET"]),
            Route("/sessions/{session_id}/approvals/{call_id}", post_approval, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
        ],
        lifespan=_lifespan,
    )
    app.state.settings = Settings.from_env() if settings is None else settings
    return app


app = create_app()
