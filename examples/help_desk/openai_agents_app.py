"""The help desk of app.py on the OpenAI Agents SDK (openai-agents 0.24), for comparison.

Same routes and tools. What the SDK does not have here: a vector store (a keyword search
instead), OpenTelemetry spans (its own tracing exports to OpenAI), session owners (the
tenant prefixes the session id), approvals kept with the session (a dict in this process).
"""

import dataclasses
import os
from contextlib import closing

from agents import Agent, Runner, RunState, SQLiteSession, function_tool, set_default_openai_api
from agents.result import RunResult
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

set_default_openai_api("chat_completions")  # OPENAI_BASE_URL, OPENAI_API_KEY
MODEL = os.environ.get("MODEL", "gpt-4.1-mini")
DB = os.environ.get("HELP_DESK_DB", "help_desk.db")
FAQ = ["Parcels take 3 to 5 working days.", "Returns are free within 30 days."]
waiting: dict[str, str] = {}  # session -> the run state that waits for approval


@function_tool
def order_status(order_id: str) -> str:
    """The status of an order, by its id (e.g. "A-1")."""
    return {"A-1": "shipped", "A-2": "being packed"}.get(order_id.upper(), f"no order {order_id}")


@function_tool
def shipping_quote(weight_kg: float) -> str:
    """What shipping a parcel of `weight_kg` kilograms costs."""
    return f"{4.5 + 1.2 * weight_kg:.2f} EUR"


@function_tool(needs_approval=True)
def refund(order_id: str, amount: float) -> str:
    """Refund `amount` euros of an order; a person approves it first."""
    return f"refunded {amount:.2f} EUR of order {order_id}"


@function_tool
def search_docs(query: str) -> str:
    """Search the help-desk documentation."""
    words = set(query.lower().split())
    return "\n".join(sorted(FAQ, key=lambda text: -len(words & set(text.lower().split())))[:2])


@dataclasses.dataclass
class Verdict:
    satisfied: bool
    summary: str


researcher = Agent(name="researcher", model=MODEL, tools=[search_docs])
support = Agent(
    name="support",
    model=MODEL,
    instructions="You are a web shop's help desk. Answer in two sentences at most.",
    tools=[order_status, shipping_quote, refund, researcher.as_tool("research", "Ask the docs")],
)
judge = Agent(name="judge", model=MODEL, output_type=Verdict)


def session_of(request: Request) -> str:  # the tenant's own namespace of sessions
    return f"{request.headers.get('x-tenant')}/{request.path_params['session']}"


def reply(session_id: str, result: RunResult) -> JSONResponse:
    pending = [item.raw_item.call_id for item in result.interruptions]
    if pending:
        waiting[session_id] = result.to_state().to_string()
    reason = "approval" if pending else "answer"
    return JSONResponse({"text": result.final_output, "reason": reason, "pending": pending})


async def chat(request: Request) -> JSONResponse:
    session_id, message = session_of(request), (await request.json())["message"]
    with closing(SQLiteSession(session_id, DB)) as session:  # it holds a sqlite3 connection
        return reply(session_id, await Runner.run(support, message, session=session, max_turns=8))


async def approve(request: Request) -> JSONResponse:  # {"approve": [ids], "reject": [ids]}
    session_id, body = session_of(request), await request.json()
    state = await RunState.from_string(support, waiting.pop(session_id))
    for item in state.get_interruptions():
        call_id = item.raw_item.call_id
        if call_id in body.get("approve", []):
            state.approve(item)
        elif call_id in body.get("reject", []):
            state.reject(item)
    with closing(SQLiteSession(session_id, DB)) as session:
        return reply(session_id, await Runner.run(support, state, session=session, max_turns=8))


async def verdict(request: Request) -> JSONResponse:
    with closing(SQLiteSession(session_of(request), DB)) as session:
        items = await session.get_items()  # a copy: the session stays
    question = {"role": "user", "content": "Was the customer satisfied? Summarise."}
    result = await Runner.run(judge, [*items, question])
    return JSONResponse(dataclasses.asdict(result.final_output))


routes = [Route("/chat/{session}", chat, methods=["POST"]), Route("/verdict/{session}", verdict)]
routes.append(Route("/approve/{session}", approve, methods=["POST"]))
app = Starlette(routes=routes)
