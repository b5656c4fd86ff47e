"""What OpenTelemetry tracing costs a `ModelLoop` step: absent, installed but off, and on.

The step is `bench.model`'s (one scripted model call whose reply calls a no-op
tool, and that call), timed against the same floor (the bare model call).
Three rows: tracing absent (`opentelemetry` not even imported), installed but
off (imported, `instrument()` not called: the loop tests one empty list), and
on (`instrument()` with the SDK's `TracerProvider` and an exporter that drops
every span, so the row is the cost of making three spans a step: run, chat,
tool call). Without the `opentelemetry-sdk` package only the first row runs.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from bench.harness import Result, compare
from bench.model import _Loops, _noop_tool, _script, _window
from pygents_ctx.testing import ScriptedModel


def _dropping_exporter() -> Any:
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class Dropping(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    return Dropping()


async def tracing(steps: int) -> list[Result]:
    """The loop per step with tracing absent, installed but off, and on (spans dropped)."""
    window = _window()
    noop = _noop_tool()
    bare = ScriptedModel(_script(steps) * 40)

    async def floor(ops: int) -> None:
        for _ in range(ops):
            await bare.complete(window, [noop])

    async def row(name: str) -> Result:
        loops = _Loops(False, noop)
        return await compare(name, loops.run, floor, steps, None, prepare=loops.prepare)

    rows = []
    if "opentelemetry" not in sys.modules:
        rows.append(await row("model loop per step, tracing absent"))
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    except ImportError:
        return rows
    from pygents_ctx.integrations.tracing import instrument, uninstrument

    rows.append(await row("model loop per step, tracing installed, off"))
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_dropping_exporter()))
    instrument(provider)
    try:
        rows.append(await row("model loop per step, traced (spans dropped)"))
    finally:
        uninstrument()
        provider.shutdown()
    return rows
