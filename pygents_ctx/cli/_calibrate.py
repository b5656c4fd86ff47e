"""`calibrate`: fit the token estimate to what the provider reported, from a database's records.

It reads the usage records of one session (or of every session), keeps those
of `--model` made since `--since`, and prints `calibrate()`'s fit: the scale,
the per-call overhead, the error before and after, and the line of Python that
uses it.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
from datetime import UTC, datetime

from pygents_ctx.cli._db import PROG, CliError, check_database, find_session
from pygents_ctx.cli._render import Output, plural
from pygents_ctx.context.stores import SQLiteContextStore, connect
from pygents_ctx.context.tokens import EstimatedTokenCounter, TokenCalibration, calibrate
from pygents_ctx.context.usage import UsageRecord

__all__ = ["calibrate_command", "parse_since"]


def parse_since(text: str) -> datetime:
    """An ISO 8601 date or time (UTC unless it says otherwise).

    Raises:
        ValueError: `text` is not one.
    """
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"must be an ISO 8601 date or time such as 2026-12-01 or 2026-12-01T09:30, not {text!r}"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


async def _records(path: str, session: str | None) -> list[UsageRecord]:
    async with connect(path) as conn:
        if session is not None:
            info = await find_session(conn, session, path)
            return await SQLiteContextStore(conn, session_id=info.session_id).get_usage()
        records: list[UsageRecord] = []
        # A sub-agent's calls are recorded once, in its caller's session: none twice.
        for info in await SQLiteContextStore(conn).list_sessions():
            records += await SQLiteContextStore(conn, session_id=info.session_id).get_usage()
        return records


def _scaled(calibration: TokenCalibration, counter: EstimatedTokenCounter) -> float:
    """The scale of the calibrated counter: `counter`'s, times the fit's."""
    scaled = calibration.counter(counter)
    assert isinstance(scaled, EstimatedTokenCounter)  # an EstimatedTokenCounter's stays one
    return scaled.scale


def calibrate_command(args: argparse.Namespace, out: Output) -> None:
    """`calibrate`: the fit of the estimate to the provider's counts, and how to use it."""
    check_database(args.db)
    records = asyncio.run(_records(args.db, args.session))
    where = args.db if args.session is None else f"session {args.session!r} of {args.db}"
    if args.since is not None:
        records = [
            record for record in records if datetime.fromisoformat(record.created_at) >= args.since
        ]
    try:
        calibration = calibrate(records, model=args.model, overhead=not args.no_overhead)
    except ValueError as exc:
        raise CliError(
            f"{exc} (on the command line: --model NAME, --no-overhead, --since DATE; "
            f"{plural(len(records), 'record')} read from {where})"
        ) from None
    scale = _scaled(calibration, EstimatedTokenCounter(args.counter_scale))
    python = (
        f"FitTokens(MAX_TOKENS, reserve_tokens={calibration.reserve_tokens}, "
        f"counter=EstimatedTokenCounter(scale={scale:.4f}))"
    )
    again = "" if args.model is None else f" --model {shlex.quote(args.model)}"
    if out.as_json:
        out.json(
            {
                "model": calibration.model,
                "records": calibration.records,
                "scale": calibration.scale,
                "overhead": calibration.overhead,
                "counter_scale": scale,
                "reserve_tokens": calibration.reserve_tokens,
                "mean_error_before": calibration.mean_error_before,
                "max_error_before": calibration.max_error_before,
                "mean_error_after": calibration.mean_error_after,
                "max_error_after": calibration.max_error_after,
                "python": python,
            }
        )
        return
    out.lines(
        [
            f"{plural(calibration.records, 'model call')} of "
            f"{calibration.model or '(no model name)'} in {where}",
            f"scale {calibration.scale:.4f}, overhead {calibration.overhead:.0f} tokens a call",
            f"the estimate's error: mean {calibration.mean_error_before:.1f}%, "
            f"largest {calibration.max_error_before:.1f}%",
            f"once calibrated:      mean {calibration.mean_error_after:.1f}%, "
            f"largest {calibration.max_error_after:.1f}%",
            "",
            "In Python (FitTokens, or any strategy with counter= and reserve_tokens=):",
            f"    {python}",
            "",
            "Once the strategy counts so, calibrate again on the records made since:",
            f"    {PROG} calibrate{again} --since DATE --counter-scale {scale:.4f}",
        ]
    )
