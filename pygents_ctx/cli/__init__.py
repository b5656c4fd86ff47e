"""The `pygents-ctx` command line: look into the sessions of a SQLite context store.

    pygents-ctx [--db PATH] [--json] COMMAND ...

`sessions` lists the sessions (`--owner`: one owner's), `erase` removes an
owner's sessions or one session for good, `show` prints one session's messages, `window`
the window a strategy would build from it, `calibrate` fits the token estimate
to the provider's counts in the usage records, `export` writes a session to a JSON
file and `import` reads one back into a (new) session; `view` serves all of it
as local web pages (`pygents_ctx.cli.viewer`). Run it as
`pygents-ctx` or `python -m pygents_ctx`; `main(argv)` is the same in-process.

Exit codes: 0 success, 1 a runtime error (no database, no such session, a bad
import file), 2 a usage error (bad arguments, a bad `--strategy` spec).

This module parses the arguments; each group of commands is a module of this
package: `_sessions` (`sessions`, `erase`, `show`), `_window` (`window` and its
`--strategy` language), `_calibrate` (`calibrate`), `_transfer` (`export`,
`import` and the session file),
`_view` (`view`, over the `viewer` package),
`_mcp` (`mcp serve`: tools served to MCP clients),
over what they share: `_db` (opening the database) and `_render` (the output).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Final

from pygents_ctx import __version__
from pygents_ctx.cli import _calibrate, _mcp, _sessions, _transfer, _view, _window
from pygents_ctx.cli._db import DB_ENV, DEFAULT_DB, PROG, CliError
from pygents_ctx.cli._render import Output, output
from pygents_ctx.cli._window import (
    DEFAULT_SPEC,
    SpecError,
    StrategySpec,
    parse_strategy,
    read_number,
    spec_help,
)
from pygents_ctx.errors import PygentsError

__all__ = ["build_parser", "main"]

EXIT_OK: Final = 0
EXIT_ERROR: Final = 1
EXIT_USAGE: Final = 2
EXIT_INTERRUPTED: Final = 130

_EPILOG: Final = f"""\
The database is --db PATH, else ${DB_ENV}, else ./{DEFAULT_DB}. Commands that
only read never create it. A SESSION may be given by a unique prefix of its id.

exit codes: 0 ok, 1 runtime error (no database, unknown session, bad import
file), 2 usage error (bad arguments or --strategy spec), 130 interrupted.
"""

_WINDOW_EPILOG: Final = f"""\
SPEC is one or more stages separated by commas, applied left to right (a
Pipeline); a number may end in k for thousands (fit:8k is fit:8000):

{spec_help()}

examples: fit:8000   sliding:50   rounds:3   clear-results:3,fit:8000

Without --strategy the window is {DEFAULT_SPEC}: what an agent's ContextConfig
builds when it is given no strategy.

The budget the window is measured against is --budget, else the smallest of
the spec's fit, middle-out and stable numbers. A * after the role marks a message the
strategy edited; # is its index in the history (? when it cannot be told).
"""


_VIEW_EPILOG: Final = f"""\
The pages: the sessions (searchable, paged), a session's transcript, its
archive, the window a strategy builds at any step beside the history, the
spend per model call, and the memory stores in the same database. Nothing is
written: SQLite is opened read-only, PostgreSQL in read-only transactions.

--pricing MODEL=INPUT,OUTPUT[,CACHED_INPUT[,CACHE_WRITE]] gives a model's
prices in dollars per million tokens (MODEL may be a glob: 'gpt-4o*'); a
session's cost is shown when every model it called has a price.

example: {PROG} view --db agent.db --port 0 --pricing gpt-4o=2.5,10,1.25
         {PROG} view support-4711 --dsn postgresql://app@db/agents
"""


# -- arguments ------------------------------------------------------------------


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {text!r}")
    return int(text)


def _tokens(text: str) -> int:
    number = read_number(text)
    if number is None or number < 1:
        raise argparse.ArgumentTypeError(
            f"must be a whole number of tokens of at least 1 (e.g. 8000 or 8k), not {text!r}"
        )
    return number


def _strategy(text: str) -> StrategySpec:
    try:
        return parse_strategy(text)
    except SpecError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _pricing(text: str) -> tuple[str, Any]:
    try:
        return _view.parse_pricing(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(
            f"must be a port from 0 to 65535 (0: a free one), not {text!r}"
        )
    return int(text)


def _session(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("must not be empty; `sessions` lists the ids")
    return text


def _owner(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("must not be empty; `sessions` shows the owners")
    return text


def _since(text: str) -> datetime:
    try:
        return _calibrate.parse_since(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _scale(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text!r}")
    return value


_CALIBRATE_EPILOG = f"""\
Each model call a ModelLoop makes leaves a usage record with the window's
estimated size and the provider's input_tokens. calibrate() fits
input_tokens = scale * estimate + overhead to them (the overhead: the tool
definitions and what else each call sends beside the window) and says how far
off the estimate was, and the fit is, in % of input_tokens.

Fit the records of one model (--model when there are several), estimated
with one counter: --counter-scale is the scale of the EstimatedTokenCounter
they were counted with (1.0: the default), and --since leaves out the records
made before the strategy counted with it. --no-overhead fits the scale alone.

example: {PROG} --db agent.db calibrate --model claude-sonnet-4-5
"""

_ERASE_EPILOG = """\
Everything of an erased session goes: messages, archive, usage, lease,
approval decisions, search index rows, and offloaded tool results no other
session names. Forks of it keep their history. Deleted content is overwritten
(secure_delete) and the WAL file emptied after. The options given all hold
for an erased session; --owner or --session is needed.
"""

Command = Callable[[argparse.Namespace, Output], None]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `pygents-ctx`, with one subparser per command."""
    # The options may also follow the command; SUPPRESS keeps the subparser from
    # overwriting a value given before it.
    db_option = argparse.ArgumentParser(add_help=False)
    db_option.add_argument("--db", default=argparse.SUPPRESS, metavar="PATH", help="the database")
    json_option = argparse.ArgumentParser(add_help=False)
    json_option.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON"
    )
    both = [db_option, json_option]
    layout = argparse.RawDescriptionHelpFormatter

    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Inspect the sessions of a pygents_ctx SQLite context store.",
        epilog=_EPILOG,
        formatter_class=layout,
    )
    parser.add_argument(
        "--db",
        default=os.environ.get(DB_ENV) or DEFAULT_DB,
        metavar="PATH",
        help=f"the SQLite database (default: ${DB_ENV}, else ./{DEFAULT_DB})",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, does: Command, parents: list[argparse.ArgumentParser], **kw: Any) -> Any:
        sub = commands.add_parser(name, parents=parents, formatter_class=layout, **kw)
        sub.set_defaults(run=does)
        return sub

    sessions = command("sessions", _sessions.sessions, both, help="list the sessions, newest first")
    sessions.add_argument("--limit", type=_positive, metavar="N", help="only the newest N")
    sessions.add_argument("--owner", type=_owner, metavar="OWNER", help="only this owner's")

    erase = command(
        "erase",
        _sessions.erase,
        both,
        help="remove an owner's sessions, or one session, for good",
        epilog=_ERASE_EPILOG,
    )
    erase.add_argument("--owner", type=_owner, metavar="OWNER", help="every session of this owner")
    erase.add_argument("--session", type=_session, metavar="ID", help="this session (its full id)")
    erase.add_argument(
        "--older-than-days",
        type=_positive,
        metavar="DAYS",
        help="only the sessions created more than DAYS days ago",
    )

    show = command("show", _sessions.show, both, help="print a session's messages")
    show.add_argument("session", type=_session, metavar="SESSION", help="a session id (or prefix)")
    show.add_argument("--archived", action="store_true", help="include the compacted-away archive")
    show.add_argument("--limit", type=_positive, metavar="N", help="only the newest N messages")

    window = command(
        "window",
        _window.window,
        both,
        help="print the window a strategy would build",
        epilog=_WINDOW_EPILOG,
    )
    window.add_argument(
        "session", type=_session, metavar="SESSION", help="a session id (or prefix)"
    )
    window.add_argument(
        "-s",
        "--strategy",
        type=_strategy,
        metavar="SPEC",
        help=f"e.g. fit:8000 (default: {DEFAULT_SPEC}, ContextConfig's own default)",
    )
    window.add_argument("--budget", type=_tokens, metavar="TOKENS", help="measure against this")

    fit = command(
        "calibrate",
        _calibrate.calibrate_command,
        both,
        help="fit the token estimate to the provider's counts in the usage records",
        epilog=_CALIBRATE_EPILOG,
    )
    fit.add_argument(
        "session",
        nargs="?",
        type=_session,
        metavar="SESSION",
        help="only this session's records (an id or prefix; default: every session's)",
    )
    fit.add_argument("--model", metavar="NAME", help="only this model's records")
    fit.add_argument(
        "--since", type=_since, metavar="DATE", help="only records made since (ISO 8601, UTC)"
    )
    fit.add_argument(
        "--counter-scale",
        type=_scale,
        default=1.0,
        metavar="S",
        help="the records were estimated with EstimatedTokenCounter(scale=S) (default 1.0)",
    )
    fit.add_argument(
        "--no-overhead", action="store_true", help="fit the scale alone, no per-call overhead"
    )

    export = command("export", _transfer.export, [db_option], help="write a session as JSON")
    export.add_argument(
        "session", type=_session, metavar="SESSION", help="a session id (or prefix)"
    )
    export.add_argument("-o", "--output", metavar="FILE", help="write here, not to stdout")

    load = command("import", _transfer.import_, both, help="create a session from an exported file")
    load.add_argument("file", metavar="FILE", help="a file `export` wrote, or - for stdin")
    load.add_argument("--session", type=_session, metavar="ID", help="the new session's id")

    viewer = command(
        "view",
        _view.view,
        [db_option],
        help="serve a read-only web viewer of the store",
        epilog=_VIEW_EPILOG,
    )
    viewer.add_argument(
        "session",
        nargs="?",
        type=_session,
        metavar="SESSION",
        help="print the address of this session's page (an id or a unique prefix)",
    )
    viewer.add_argument(
        "--dsn", metavar="URL", help="a PostgreSQL database instead (the postgres extra)"
    )
    viewer.add_argument(
        "--port",
        type=_port,
        default=_view.DEFAULT_PORT,
        metavar="N",
        help=f"the port (default {_view.DEFAULT_PORT}; 0 picks a free one)",
    )
    viewer.add_argument("--host", default="127.0.0.1", help="the address (default 127.0.0.1)")
    viewer.add_argument(
        "--pricing",
        type=_pricing,
        action="append",
        metavar="MODEL=IN,OUT",
        help="prices per million tokens, to show costs (repeat per model; a glob may match)",
    )
    viewer.add_argument(
        "-s", "--strategy", type=_strategy, metavar="SPEC", help="the window page's default"
    )
    viewer.add_argument(
        "--budget", type=_tokens, metavar="TOKENS", help="measure windows against this"
    )
    viewer.add_argument(
        "--agent",
        action="append",
        metavar="FILE",
        help="a saved agent's JSON (to_json()), to browse its context pool (repeatable)",
    )
    _mcp.add_commands(commands, layout)  # `mcp serve`
    return parser


# -- entry point ----------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run `pygents-ctx` with `argv` (default: the process's arguments); return the exit code.

    Errors go to stderr as `pygents-ctx: error: ...`: exit code 1 for a runtime
    error (no database, unknown session, bad import file), 2 for bad arguments.

    Examples:
        >>> import asyncio, pathlib, tempfile
        >>> from pygents_ctx import Message
        >>> from pygents_ctx.context.stores import SQLiteContextStore, connect
        >>> async def save(path):
        ...     async with connect(path) as conn:
        ...         store = SQLiteContextStore(conn, session_id="demo")
        ...         await store.append_many([Message("user", "Hi"), Message("assistant", "Hello!")])
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     db = str(pathlib.Path(tmp) / "ctx.db")
        ...     asyncio.run(save(db))
        ...     main(["--db", db, "show", "demo"])
        #  role       tokens  content
        0  user            5  Hi
        1  assistant       6  Hello!
        2 messages, 11 tokens
        0
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error argparse reported
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    out = output(args.json)
    try:
        args.run(args, out)
        out.stream.flush()
    except BrokenPipeError:
        _silence_stdout()  # the reader left (`| head`): no traceback at exit
        return EXIT_ERROR
    except (CliError, PygentsError, sqlite3.Error, OSError, ValueError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return EXIT_OK


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor behind stdout
        pass
