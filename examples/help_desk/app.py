"""A help-desk backend: three typed tools (a refund needs approval), a research sub-agent over a
vector store, a typed verdict about a conversation, OpenTelemetry spans; sessions in pygents_ctx.db.
POST /chat/{session} {"message"}; POST /approve/{session} {"approve", "reject"}; GET /verdict/..
"""

import contextlib
import dataclasses
import os
from collections.abc import AsyncIterator

from opentelemetry.sdk.trace import TracerProvider
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from pygents_ctx import Assistant, LoopFinished, LoopLimits, OpenAIModel, tool
from pygents_ctx.integrations.tracing import instrument
from pygents_ctx.memory import HashingEmbedder, InMemoryVectorStore, VectorDocument

instrument(tracer_provider := TracerProvider())  # add an exporter (OTLP, console) to see spans
model = OpenAIModel(os.environ.get("MODEL", "gpt-4.1-mini"))
docs = InMemoryVectorStore(embedder=HashingEmbedder(dimension=256))
FAQ = ["Parcels take 3 to 5 working days.", "Returns are free within 30 days."]


@tool
async def order_status(order_id: str) -> str:
    """The status of an order, by its id (e.g. "A-1")."""
    return {"A-1": "shipped", "A-2": "being packed"}.get(order_id.upper(), f"no order {order_id}")


@tool
async def shipping_quote(weight_kg: float) -> str:
    """What shipping a parcel of `weight_kg` kilograms costs."""
    return f"{4.5 + 1.2 * weight_kg:.2f} EUR"


@tool(needs_approval=True)
async def refund(order_id: str, amount: float) -> str:
    """Refund `amount` euros of an order; a person approves it first."""
    return f"refunded {amount:.2f} EUR of order {order_id}"


@tool
async def search_docs(query: str) -> str:
    """Search the help-desk documentation."""
    return "\n".join(hit.text for hit in await docs.search("faq", query, k=2))


@dataclasses.dataclass
class Verdict:
    satisfied: bool
    summary: str


researcher = Assistant("researcher", model=model, tools=[search_docs])
support = Assistant(
    "support",
    model=model,
    instructions="You are a web shop's help desk. Answer in two sentences at most.",
    tools=[order_status, shipping_quote, refund, researcher.as_tool("research", "Ask the docs")],
    limits=LoopLimits(max_steps=8),
)


def reply(done: LoopFinished) -> JSONResponse:
    pending = [call.id for call in done.pending]
    return JSONResponse({"text": done.text, "reason": done.reason.value, "pending": pending})


def where(request: Request) -> dict[str, str | None]:  # the session, its owner (the tenant)
    return {"session": request.path_params["session"], "owner": request.headers.get("x-tenant")}


async def chat(request: Request) -> JSONResponse:
    return reply(await support.run((await request.json())["message"], **where(request)))


async def approve(request: Request) -> JSONResponse:  # {"approve": [ids], "reject": [ids]}
    body = await request.json()  # its two lists only: never a client's "store" or "model"
    decided = {name: body.get(name, []) for name in ("approve", "reject")}
    return reply(await support.resume(**decided, **where(request)))


async def verdict(request: Request) -> JSONResponse:
    found = await support.ask(Verdict, "Was the customer satisfied? Summarise.", **where(request))
    return JSONResponse(dataclasses.asdict(found))


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    await docs.create_collection("faq", dimension=256)
    await docs.upsert("faq", [VectorDocument(f"faq-{i}", text) for i, text in enumerate(FAQ)])
    yield


routes = [Route("/chat/{session}", chat, methods=["POST"]), Route("/verdict/{session}", verdict)]
routes.append(Route("/approve/{session}", approve, methods=["POST"]))
app = Starlette(routes=routes, lifespan=lifespan)
