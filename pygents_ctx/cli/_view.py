"""The `view` command: serve the read-only web viewer (`pygents_ctx.cli.viewer`) until Ctrl-C.

The database is checked before the server starts, so a missing file, another
program's SQLite file or an unreachable PostgreSQL server is the command
line's one-line error and exit code 1, not a page.
"""

from __future__ import annotations

import argparse
import sys
from typing import Final
from urllib.parse import quote

from pygents_ctx.cli._db import PROG, CliError
from pygents_ctx.cli._render import Output
from pygents_ctx.cli._window import DEFAULT_SPEC, parse_strategy
from pygents_ctx.cli.viewer import Prices, Viewer, ViewerServer, open_source
from pygents_ctx.cli.viewer._agents import check_agents
from pygents_ctx.cli.viewer._queries import find_session
from pygents_ctx.model.base import Pricing

__all__ = ["DEFAULT_PORT", "parse_pricing", "view"]

DEFAULT_PORT: Final = 8765
_PRICING_FORM: Final = "MODEL=INPUT,OUTPUT[,CACHED_INPUT[,CACHE_WRITE]]"


def parse_pricing(text: str) -> tuple[str, Pricing]:
    """`--pricing` as `(model or glob, Pricing)`: `"gpt-4o*=2.5,10,1.25"`, prices per million.

    Raises:
        ValueError: It is not `MODEL=INPUT,OUTPUT[,CACHED_INPUT[,CACHE_WRITE]]` with
            prices that are numbers of at least 0.

    Examples:
        >>> parse_pricing("claude-*=3,15,0.3")
        ('claude-*', Pricing(input=3.0, output=15.0, cached_input=0.3, cache_write=None))
    """
    model, sep, prices = text.partition("=")
    numbers = [part.strip() for part in prices.split(",")]
    if not sep or not model.strip() or not 2 <= len(numbers) <= 4:
        raise ValueError(
            f"must be {_PRICING_FORM} (US dollars per million tokens, e.g. gpt-4o=2.5,10), "
            f"not {text!r}"
        )
    try:
        values = [float(number) for number in numbers]
    except ValueError:
        raise ValueError(f"the prices in {text!r} must be numbers, as in {_PRICING_FORM}") from None
    return model.strip(), Pricing(*values)


def view(args: argparse.Namespace, out: Output) -> None:
    """`view`: check the database (and SESSION), print the address, serve until interrupted."""
    agents = tuple(args.agent or ())
    check_agents(agents)
    source = open_source(args.db, args.dsn)
    viewer = Viewer(
        source,
        Prices(dict(args.pricing or [])),
        args.strategy or parse_strategy(DEFAULT_SPEC),
        args.budget,
        agents,
    )
    start = ""
    if args.session is not None:
        try:
            with source.reading() as reading:
                start = "session/" + quote(
                    find_session(reading, args.session, source.name), safe=""
                )
        except CliError:
            source.close()
            raise
    try:
        server = ViewerServer(viewer, args.host, args.port)
    except OSError as exc:
        source.close()
        raise CliError(
            f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}; "
            "choose another --port (0 picks a free one)"
        ) from None
    with server:
        out.lines(
            [f"{PROG} view: {source.name} (read-only) at {server.url}{start}", "Ctrl-C stops it."]
        )
        out.stream.flush()
        try:
            server.serve_forever()
        finally:
            print(f"{PROG} view: stopped", file=sys.stderr)
